"""A rebuild, from the server API's record to the daemon's redeploy: what
:meth:`computed.instances.rpcapi.ServerAPI.rebuild` records and casts (or refuses, with nothing
recorded), and :func:`computed.instances.lifecycle.rebuild` on the in-memory driver: the new
image and config drive reach the node, the server ends in the power state it had, a failure is
an ERROR with the reason and the node kept, and a resumed rebuild finishes. A real (sqlite)
database."""

from __future__ import annotations

import dataclasses

import pytest

from computed.baremetal.driver import POWER_OFF, POWER_ON
from computed.db import instances as db_instances
from computed.db import models
from computed.db.instances import InstanceConflict
from computed.instances import lifecycle, scheduler
from computed.instances.rpcapi import ComputeAPI, NeedsUpgrade, NoHost, ServerAPI
from tests.unit.instance.fakes import FakeDriver, FakePlacement, Guard, NotOurs

RC = 'CUSTOM_GOLD'
NODE = '11111111-1111-1111-1111-111111111111'
OLD, NEW = 'http://images.example/old.qcow2', 'http://images.example/new.qcow2'


class Casts:
    """The compute RPC API at ``version``: records what it is asked to cast."""

    def __init__(self, version='1.2'):
        self.version = version
        self.sent = []

    def can_send(self, method):
        return ComputeAPI(None, version=lambda: self.version).can_send(method)

    def rebuild_instance(self, host, uuid, member_epoch=None, preserve_ephemeral=False):
        self.sent.append((host, uuid, member_epoch, preserve_ephemeral))


@pytest.fixture
def world(engine):
    driver, placement = FakeDriver(NODE), FakePlacement()
    placement.add(NODE, RC)
    return lifecycle.Owner(engine, driver, placement, host='c1', member_epoch=7)


def active(owner, **details):
    row = scheduler.schedule(owner.placement, owner.engine, RC, image=OLD, name='old',
                             owner_of=lambda node: (owner.host, owner.member_epoch))
    db_instances.set_instance_details(owner.engine, row.uuid, config_drive=True, **details)
    return lifecycle.build(owner, row.uuid)


def server_api(owner, casts):
    return ServerAPI(owner.engine, owner.placement, casts,
                     lambda node: (owner.host, owner.member_epoch))


def test_the_server_api_records_the_rebuild_whole_then_casts(world):
    row = active(world)
    casts = Casts()
    recorded = server_api(world, casts).rebuild(
        row.uuid, NEW, preserve_ephemeral=True,
        details={'name': 'new', 'metadata': {'a': 'b'}, 'key_name': 'k', 'key_type': 'ssh',
                 'key_data': 'ssh-ed25519 AAAA k', 'user_data': 'I2Nsb3VkLWNvbmZpZwo='})
    assert (recorded.state, recorded.image, recorded.name, recorded.metadata,
            recorded.key_name, recorded.user_data) == (
        models.REBUILDING, NEW, 'new', {'a': 'b'}, 'k', 'I2Nsb3VkLWNvbmZpZwo=')
    assert casts.sent == [('c1', row.uuid, 7, True)]


@pytest.mark.parametrize('version', ['1.0', '1.1'])
def test_below_1_2_nothing_is_recorded_nor_cast(world, version):
    row = active(world)
    casts = Casts(version)
    with pytest.raises(NeedsUpgrade) as exc:
        server_api(world, casts).rebuild(row.uuid, NEW)
    assert 'rebuild_instance needs instance RPC version 1.2' in str(exc.value)
    assert version in str(exc.value)
    assert db_instances.get_instance(world.engine, row.uuid) == row and casts.sent == []


def test_the_real_client_refuses_to_cast_it_below_1_2(world):
    """Whatever calls it, ComputeAPI never sends rebuild_instance to a daemon that would
    refuse it (no transport is even touched)."""
    with pytest.raises(NeedsUpgrade):
        ComputeAPI(None, version=lambda: '1.1').rebuild_instance('c1', 'u', 7)
    assert ComputeAPI(None, version=lambda: '1.2').can_send('rebuild_instance') is None
    assert ComputeAPI(None, version=lambda: '1.1').can_send('rebuild_instance') == '1.1'
    assert ComputeAPI(None, version=lambda: '1.0').can_send('reboot_instance') is None


def test_the_server_api_refuses_a_task_in_progress_and_a_server_without_a_node(world):
    row = active(world)
    casts = Casts()
    db_instances.set_instance_state(world.engine, row.uuid, models.REBOOTING)
    with pytest.raises(InstanceConflict):
        server_api(world, casts).rebuild(row.uuid, NEW)
    db_instances.set_instance_state(world.engine, row.uuid, models.ERROR, 'no host',
                                    release_node=True)
    with pytest.raises(NoHost):
        server_api(world, casts).rebuild(row.uuid, NEW)
    assert db_instances.get_instance(world.engine, row.uuid).image == OLD and casts.sent == []


def test_a_state_changed_since_the_caller_read_it_is_a_conflict(world):
    row = active(world)
    db_instances.set_instance_state(world.engine, row.uuid, models.STOPPED)
    with pytest.raises(InstanceConflict):  # the caller judged ACTIVE
        server_api(world, Casts()).rebuild(row.uuid, NEW, expect_state=models.ACTIVE)
    assert db_instances.get_instance(world.engine, row.uuid).state == models.STOPPED


def record(owner, row, state=models.REBUILDING, **details):
    return db_instances.record_rebuild(owner.engine, row.uuid, state, NEW, details,
                              expect_state=row.state, expect_host=owner.host,
                              expect_member_epoch=owner.member_epoch)


def test_rebuild_redeploys_the_node_with_the_new_image_and_config_drive(world):
    row = record(world, active(world), name='new', key_name='k', key_type='ssh',
                 key_data='ssh-ed25519 AAAA k')
    row = lifecycle.rebuild(world, row.uuid, preserve_ephemeral=False)
    assert (row.state, row.fault, row.node_uuid) == (models.ACTIVE, None, NODE)
    node = world.driver.nodes[NODE]
    assert (node['instance_uuid'], node['provision_state'], node['power_state']) == \
        (row.uuid, 'active', POWER_ON)
    info = node['instance_info']
    assert (info['image_source'], info['preserve_ephemeral']) == (NEW, False)
    assert info['configdrive']['meta_data']['name'] == 'new'
    assert info['configdrive']['meta_data']['public_keys'] == {'k': 'ssh-ed25519 AAAA k'}
    assert world.placement.allocations == {row.uuid: NODE}  # the same node, still allocated


def test_a_stopped_server_is_powered_off_again_after_its_rebuild(world):
    row = active(world)
    row = lifecycle.stop(world, row.uuid)
    row = lifecycle.rebuild(world, record(world, row, models.REBUILDING_OFF).uuid, True)
    assert row.state == models.STOPPED
    assert world.driver.nodes[NODE]['power_state'] == POWER_OFF
    assert [c[0] for c in world.driver.calls[-2:]] == ['rebuild', 'power']


def test_a_failed_rebuild_is_an_error_with_the_reason_and_the_node_kept(world):
    row = record(world, active(world))
    world.driver.fail_deploy[NODE] = 'image checksum mismatch'
    row = lifecycle.rebuild(world, row.uuid, False)
    assert (row.state, row.fault, row.node_uuid) == \
        (models.ERROR, 'rebuild failed: image checksum mismatch', NODE)
    assert world.placement.allocations == {row.uuid: NODE}
    # It may be rebuilt again (Ironic rebuilds from "deploy failed") and then works.
    del world.driver.fail_deploy[NODE]
    row = lifecycle.rebuild(world, record(world, row).uuid, False)
    assert (row.state, row.fault) == (models.ACTIVE, None)


def test_a_failed_power_off_after_the_rebuild_lands_on_the_real_power(world):
    row = lifecycle.stop(world, active(world).uuid)
    row = record(world, row, models.REBUILDING_OFF)
    world.driver.fail_power[NODE] = 'BMC unreachable'
    row = lifecycle.rebuild(world, row.uuid, False)
    assert (row.state, row.image) == (models.ACTIVE, NEW)  # rebuilt, left powered on
    assert row.fault == 'power off after the rebuild failed: BMC unreachable'


def test_a_daemon_never_starts_a_rebuild_nobody_recorded(world):
    row = active(world)
    calls = len(world.driver.calls)
    with pytest.raises(InstanceConflict):
        lifecycle.rebuild(world, row.uuid, False)
    other = lifecycle.Owner(world.engine, world.driver, world.placement, 'c1', 8)
    with pytest.raises(InstanceConflict):  # another life of this host
        lifecycle.rebuild(other, record(world, row).uuid, False)
    assert len(world.driver.calls) == calls


def test_a_resumed_rebuild_finishes_and_keeps_the_ephemeral_partition(world):
    row = record(world, active(world))  # the cast was lost, or its daemon died
    assert [r.state for r in lifecycle.resume_all(world)] == [models.ACTIVE]
    assert world.driver.calls[-1] == ('rebuild', NODE, row.uuid, NEW,
                                      lifecycle.RESUMED_PRESERVE_EPHEMERAL)
    assert lifecycle.RESUMED_PRESERVE_EPHEMERAL is True
    stopped = record(world, lifecycle.stop(world, row.uuid), models.REBUILDING_OFF)
    assert lifecycle.resume(world, stopped.uuid).state == models.STOPPED


def test_a_rebuild_whose_guard_refuses_writes_nothing_and_stays_recorded(world):
    row = record(world, active(world))
    calls = len(world.driver.calls)
    with pytest.raises(NotOurs):
        lifecycle.rebuild(dataclasses.replace(world, guard=Guard(allowed=0)), row.uuid, False)
    assert len(world.driver.calls) == calls
    assert world.driver.nodes[NODE]['instance_info']['image_source'] == OLD
    assert db_instances.get_instance(world.engine, row.uuid).state == models.REBUILDING
