"""computed.instances.lifecycle: every transition, its fencing, and resume from each
transitional state."""

import dataclasses
import uuid

import pytest

from computed.baremetal.driver import POWER_OFF, POWER_ON, REBOOT, DeployFailed
from computed.db import instances as db_instances
from computed.db import models
from computed.db.instances import InstanceConflict, InstanceNotFound
from computed.instances import lifecycle, scheduler
from tests.unit.instance.fakes import FakeDriver, FakePlacement, Guard, NotOurs

RC = 'CUSTOM_GOLD'
NODE = '11111111-1111-1111-1111-111111111111'


@pytest.fixture
def world(engine):
    driver, placement = FakeDriver(NODE), FakePlacement()
    placement.add(NODE, RC)
    owner = lifecycle.Owner(engine, driver, placement, host='c1', member_epoch=7)
    return owner


def scheduled(owner, image='http://img'):
    return scheduler.schedule(owner.placement, owner.engine, RC, image=image,
                              owner_of=lambda node: (owner.host, owner.member_epoch))


def active(owner):
    return lifecycle.build(owner, scheduled(owner).uuid)


def test_build_deploys_and_marks_active(world):
    row = scheduled(world)
    assert (row.state, row.node_uuid, row.host, row.member_epoch) == ('BUILDING', NODE, 'c1', 7)
    row = lifecycle.build(world, row.uuid)
    assert row.state == models.ACTIVE and row.fault is None
    node = world.driver.nodes[NODE]
    assert node['provision_state'] == 'active' and node['instance_uuid'] == row.uuid
    assert node['instance_info'] == {'image_source': 'http://img'}
    assert world.placement.allocations == {row.uuid: NODE}


def test_failed_build_unwinds_to_error_with_the_fault_and_frees_the_node(world):
    world.driver.fail_deploy[NODE] = 'Failed to prepare to deploy: boom'
    row = lifecycle.build(world, scheduled(world).uuid)
    assert row.state == models.ERROR
    assert row.fault == f'attempt 1 on node {NODE}: Failed to prepare to deploy: boom'
    assert row.node_uuid is None  # released: the next instance can have the node
    assert world.placement.allocations == {}
    node = world.driver.nodes[NODE]
    assert (node['provision_state'], node['instance_uuid'], node['instance_info']) == (
        'available', None, {})
    del world.driver.fail_deploy[NODE]
    assert active(world).state == models.ACTIVE


def test_failed_build_whose_node_cannot_be_cleared_keeps_the_node_for_delete(world):
    world.driver.fail_deploy[NODE] = 'boom'
    world.driver.fail_undeploy[NODE] = 'Ironic down'
    row = lifecycle.build(world, scheduled(world).uuid)
    assert row.state == models.ERROR and row.node_uuid == NODE
    assert 'boom' in row.fault and 'Ironic down' in row.fault
    del world.driver.fail_undeploy[NODE]
    row = lifecycle.delete(world, row.uuid)
    assert row.state == models.DELETED
    assert world.driver.nodes[NODE]['provision_state'] == 'available'


def test_build_by_another_daemon_or_epoch_is_refused_and_touches_nothing(world):
    row = scheduled(world)
    for host, epoch in (('c2', 7), ('c1', 8)):
        other = lifecycle.Owner(world.engine, world.driver, world.placement, host, epoch)
        with pytest.raises(InstanceConflict):
            lifecycle.build(other, row.uuid)
    assert world.driver.calls == []
    assert db_instances.get_instance(world.engine, row.uuid).state == models.BUILDING


def test_build_of_unknown_or_active_instance_is_refused(world):
    with pytest.raises(InstanceNotFound):
        lifecycle.build(world, str(uuid.uuid4()))
    row = active(world)
    with pytest.raises(InstanceConflict):
        lifecycle.build(world, row.uuid)


def test_a_rehomed_instance_is_left_to_its_new_owner(world):
    row = active(world)
    assert db_instances.rehome_instance(world.engine, row.uuid, 'c1', 7, 'c2', 9)
    for action in (lifecycle.reboot, lifecycle.stop, lifecycle.delete, lifecycle.resume):
        with pytest.raises(InstanceConflict):
            action(world, row.uuid)
    assert db_instances.get_instance(world.engine, row.uuid).state == models.ACTIVE
    new = lifecycle.Owner(world.engine, world.driver, world.placement, 'c2', 9)
    assert lifecycle.reboot(new, row.uuid).state == models.ACTIVE


def test_delete_undeploys_removes_allocation_and_is_idempotent(world):
    row = active(world)
    row = lifecycle.delete(world, row.uuid)
    assert row.state == models.DELETED and row.deleted_at is not None
    assert world.placement.allocations == {}
    assert world.driver.nodes[NODE]['provision_state'] == 'available'
    calls = len(world.driver.calls)
    assert lifecycle.delete(world, row.uuid).state == models.DELETED
    assert len(world.driver.calls) == calls


def test_delete_while_building_unwinds(world):
    row = lifecycle.delete(world, scheduled(world).uuid)
    assert row.state == models.DELETED
    assert world.placement.allocations == {}
    # the build cast arriving late finds the instance gone and does nothing
    with pytest.raises(InstanceConflict):
        lifecycle.build(world, row.uuid)
    assert not any(call[0] == 'deploy' for call in world.driver.calls)


def test_failed_undeploy_leaves_error_with_node_and_allocation_for_a_retry(world):
    row = active(world)
    world.driver.fail_undeploy[NODE] = 'clean failed: disk on fire'
    row = lifecycle.delete(world, row.uuid)
    assert row.state == models.ERROR and row.node_uuid == NODE
    assert 'disk on fire' in row.fault
    assert world.placement.allocations == {row.uuid: NODE}
    del world.driver.fail_undeploy[NODE]
    assert lifecycle.delete(world, row.uuid).state == models.DELETED
    assert world.placement.allocations == {}


def test_stop_start_reboot(world):
    row = active(world)
    assert lifecycle.stop(world, row.uuid).state == models.STOPPED
    assert world.driver.nodes[NODE]['power_state'] == POWER_OFF
    assert lifecycle.stop(world, row.uuid).state == models.STOPPED  # no-op
    assert lifecycle.start(world, row.uuid).state == models.ACTIVE
    assert lifecycle.start(world, row.uuid).state == models.ACTIVE  # no-op
    assert world.driver.nodes[NODE]['power_state'] == POWER_ON
    assert lifecycle.reboot(world, row.uuid).state == models.ACTIVE
    lifecycle.stop(world, row.uuid)
    assert lifecycle.reboot(world, row.uuid).state == models.ACTIVE  # a stopped one powers on
    powers = [c[2] for c in world.driver.calls if c[0] == 'power']
    assert powers == ['power off', 'power on', 'rebooting', 'power off', 'rebooting']


def test_power_actions_refused_while_building(world):
    row = scheduled(world)
    for action in (lifecycle.reboot, lifecycle.stop):
        with pytest.raises(InstanceConflict):
            action(world, row.uuid)
    with pytest.raises(InstanceConflict):
        lifecycle.start(world, row.uuid)


def test_failed_power_action_lands_on_the_real_power_state_with_the_fault(world):
    row = active(world)
    world.driver.fail_power[NODE] = 'BMC unreachable'
    row = lifecycle.stop(world, row.uuid)
    assert row.state == models.ACTIVE  # the node is still powered on
    assert row.fault == 'power off failed: BMC unreachable'
    del world.driver.fail_power[NODE]
    row = lifecycle.stop(world, row.uuid)
    assert row.state == models.STOPPED and row.fault is None


def _force(owner, row, state):
    return db_instances.set_instance_state(owner.engine, row.uuid, state)


def test_resume_building_whose_node_is_already_active_just_marks_active(world):
    row = scheduled(world)
    world.driver.deploy(NODE, row.uuid, 'http://img', timeout=1)  # daemon died after this
    world.driver.calls.clear()
    assert lifecycle.resume(world, row.uuid).state == models.ACTIVE
    assert world.driver.calls == []  # no second deploy


def test_resume_building_whose_node_is_free_deploys_again(world):
    row = scheduled(world)
    assert lifecycle.resume(world, row.uuid).state == models.ACTIVE
    assert ('deploy', NODE, row.uuid) in world.driver.calls


def test_resume_building_whose_deploy_failed_unwinds(world):
    row = scheduled(world)
    world.driver.fail_deploy[NODE] = 'deploy step failed'
    with pytest.raises(DeployFailed):
        world.driver.deploy(NODE, row.uuid, None, timeout=1)
    row = lifecycle.resume(world, row.uuid)
    assert (row.state, row.fault) == (models.ERROR, f'attempt 1 on node {NODE}: deploy step failed')
    assert world.placement.allocations == {}
    assert world.driver.nodes[NODE]['instance_uuid'] is None


def test_resume_building_whose_node_was_taken_fails_without_touching_the_node(world):
    row = scheduled(world)
    world.driver.nodes[NODE].update(instance_uuid='someone-else', provision_state='active')
    row = lifecycle.resume(world, row.uuid)
    assert row.state == models.ERROR and 'someone-else' in row.fault
    assert world.driver.nodes[NODE]['instance_uuid'] == 'someone-else'


@pytest.mark.parametrize('state, power, final', [
    (models.DELETING, None, models.DELETED),
    (models.REBOOTING, POWER_ON, models.ACTIVE),
    (models.STARTING, POWER_ON, models.ACTIVE),
    (models.STOPPING, POWER_OFF, models.STOPPED),
])
def test_resume_finishes_each_transitional_state(world, state, power, final):
    row = _force(world, active(world), state)
    assert lifecycle.resume(world, row.uuid).state == final
    if power:
        assert world.driver.nodes[NODE]['power_state'] == power
    else:
        assert world.placement.allocations == {}


def test_resume_of_a_reboot_reboots_rather_than_only_powering_on(world):
    # The cast may have been lost, or the daemon died before Ironic was asked: a power-on of a
    # node that is already on would end the request ACTIVE without the reboot asked for.
    row = _force(world, active(world), models.REBOOTING)
    world.driver.calls.clear()
    assert lifecycle.resume(world, row.uuid).state == models.ACTIVE
    assert world.driver.calls == [('power', NODE, REBOOT)]


def test_resume_leaves_stable_states_alone_and_resume_all_takes_only_its_own(world):
    row = active(world)
    assert lifecycle.resume(world, row.uuid) == db_instances.get_instance(world.engine, row.uuid)
    _force(world, row, models.REBOOTING)
    assert [r.state for r in lifecycle.resume_all(world)] == [models.ACTIVE]
    other = lifecycle.Owner(world.engine, world.driver, world.placement, 'c1', 8)
    _force(world, row, models.REBOOTING)
    assert lifecycle.resume_all(other) == []  # an older epoch's instance is not this epoch's


# -- guarded writes: a daemon that lost the node stops writing to it ---------------------------

def test_a_failed_build_whose_node_was_lost_meanwhile_does_not_wipe_it(world):
    # The deploy failed on this daemon's side (its view); meanwhile the node went to a peer,
    # which deployed the instance again. Unwinding here would undeploy the peer's deployment.
    world.driver.fail_deploy[NODE] = 'timed out'
    guard = Guard(allowed=1)  # the deploy's write; lost after it
    row = scheduled(world)
    with pytest.raises(NotOurs):
        lifecycle.build(dataclasses.replace(world, guard=guard), row.uuid)
    assert [c[0] for c in world.driver.calls] == ['deploy']  # no clear, no undeploy
    assert world.driver.nodes[NODE]['instance_uuid'] == row.uuid
    # BUILDING for the next owner
    assert db_instances.get_instance(world.engine, row.uuid).state == models.BUILDING
    assert world.placement.allocations == {row.uuid: NODE}


@pytest.mark.parametrize('operation', ['delete', 'stop', 'reboot'])
def test_an_operation_whose_guard_refuses_writes_nothing_to_ironic(world, operation):
    row = active(world)
    calls = len(world.driver.calls)
    with pytest.raises(NotOurs):
        getattr(lifecycle, operation)(dataclasses.replace(world, guard=Guard(allowed=0)),
                                      row.uuid)
    assert len(world.driver.calls) == calls
    assert world.driver.nodes[NODE]['provision_state'] == 'active'
    assert world.placement.allocations == {row.uuid: NODE}
    # left in its transitional state, which the owner of the node resumes
    assert db_instances.get_instance(world.engine, row.uuid).state in models.TRANSITIONAL_STATES
