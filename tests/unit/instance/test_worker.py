"""computed.instances.worker: the member epoch a cast carries, guarded operations, and the
resume that makes a lost cast harmless. A stand-in fleet (always holding the claim) and the
in-memory driver and Placement; a real (sqlite) database."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from computed.db import instances as db_instances
from computed.db import models
from computed.fleet.claims import Claim, NotOurs
from computed.instances import lifecycle, scheduler
from computed.instances.rpcapi import ServerAPI
from computed.instances.worker import InstanceWorker
from tests.unit.instance.fakes import FakeDriver, FakePlacement

RC = 'CUSTOM_GOLD'
NODE = '11111111-1111-1111-1111-111111111111'
EPOCH = 7


class Fleet:
    """Holds every claim; ``lost`` makes every guard refuse (the claim went meanwhile)."""

    def __init__(self):
        self.lost = False
        self.acts = []

    def claim_for(self, node):
        return Claim(node, 1, 1)

    def wake(self):
        pass

    def act(self, node, action, do, **details):
        self.acts.append((node, action))
        do(self.claim_for(node))
        return True

    def guard(self, claim):
        fleet = self

        class Guard:
            def check(self):
                if fleet.lost:
                    raise NotOurs(claim.node, claim.epoch, 'the claim is no longer held')
        return Guard()


class Dropped:
    """A bus that loses every cast (acked, never delivered)."""

    def __getattr__(self, name):
        return lambda host, instance_uuid, member_epoch: None


@pytest.fixture
def world(engine):
    driver, placement = FakeDriver(NODE), FakePlacement()
    placement.add(NODE, RC)
    owner = lifecycle.Owner(engine, driver, placement, host='c1', member_epoch=EPOCH)
    fleet = Fleet()
    worker = InstanceWorker(fleet, owner, workers=2, claim_wait=1)
    yield owner, fleet, worker
    worker.stop()


def active(owner):
    row = scheduler.schedule(owner.placement, owner.engine, RC,
                             owner_of=lambda node: (owner.host, owner.member_epoch))
    return lifecycle.build(owner, row.uuid)


def wait_state(owner, uuid, states, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        row = db_instances.get_instance(owner.engine, uuid)
        if row.state in states or time.monotonic() > deadline:
            return row
        time.sleep(0.01)


def test_a_cast_for_another_member_epoch_is_refused_in_one_line(world, caplog):
    owner, fleet, worker = world
    row = active(owner)
    caplog.set_level(logging.WARNING)
    worker.stop_instance({}, instance_uuid=row.uuid, member_epoch=EPOCH - 1)
    assert fleet.acts == []
    refusals = [r for r in caplog.records if 'refusing' in r.getMessage()]
    assert len(refusals) == 1 and row.uuid in refusals[0].getMessage()
    assert f'member epoch {EPOCH - 1}' in refusals[0].getMessage()
    assert refusals[0].exc_info is None
    assert db_instances.get_instance(owner.engine, row.uuid).state == models.ACTIVE


@pytest.mark.parametrize('epoch', ['7', 7.0, True, [7], {'e': 7}])
def test_a_member_epoch_that_is_not_an_integer_is_dropped(world, caplog, epoch):
    owner, fleet, worker = world
    row = active(owner)
    assert worker.submit('stop_instance', row.uuid, epoch) is False
    assert fleet.acts == []
    assert [r.levelno for r in caplog.records if 'not an integer' in r.getMessage()] == [
        logging.ERROR]


@pytest.mark.parametrize('epoch', [EPOCH, None])  # None: a 1.0 sender, which sends none
def test_a_cast_for_the_current_member_epoch_or_none_runs(world, epoch):
    owner, fleet, worker = world
    row = active(owner)
    worker.stop_instance({}, instance_uuid=row.uuid, member_epoch=epoch)
    assert wait_state(owner, row.uuid, {models.STOPPED}).state == models.STOPPED


def test_a_rebuild_cast_runs_with_its_preserve_ephemeral(world):
    owner, fleet, worker = world
    row = active(owner)
    db_instances.record_rebuild(owner.engine, row.uuid, models.REBUILDING,
                                'http://images.example/n', {}, expect_state=models.ACTIVE,
                                expect_host='c1', expect_member_epoch=EPOCH)
    worker.rebuild_instance({}, instance_uuid=row.uuid, member_epoch=EPOCH,
                            preserve_ephemeral=True)
    assert wait_state(owner, row.uuid, {models.ACTIVE}).state == models.ACTIVE
    assert owner.driver.calls[-1] == ('rebuild', NODE, row.uuid, 'http://images.example/n',
                                      True)
    assert fleet.acts[-1] == (NODE, 'rebuild')


@pytest.mark.parametrize('value', ['yes', 1, None, [True]])
def test_a_rebuild_whose_preserve_ephemeral_is_not_a_boolean_is_dropped(world, caplog, value):
    owner, fleet, worker = world
    row = active(owner)
    worker.rebuild_instance({}, instance_uuid=row.uuid, member_epoch=EPOCH,
                            preserve_ephemeral=value)
    assert fleet.acts == [] and worker.busy() == set()
    lines = [r for r in caplog.records if 'preserve_ephemeral' in r.getMessage()]
    assert [r.levelno for r in lines] == [logging.ERROR] and lines[0].exc_info is None


def test_an_operation_that_loses_its_claim_stops_writing_and_says_so(world, caplog):
    owner, fleet, worker = world
    row = active(owner)
    fleet.lost = True
    calls = len(owner.driver.calls)
    caplog.set_level(logging.WARNING)
    worker.delete_instance({}, instance_uuid=row.uuid, member_epoch=EPOCH)
    deadline = time.monotonic() + 10
    while not any('stopped' in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    stopped = [r for r in caplog.records if 'stopped' in r.getMessage()]
    assert len(stopped) == 1 and stopped[0].exc_info is None
    assert 'no longer held' in stopped[0].getMessage()
    assert len(owner.driver.calls) == calls  # nothing written to Ironic
    assert db_instances.get_instance(owner.engine, row.uuid).state == models.DELETING  # resumable


@pytest.mark.parametrize('action, final', [('stop', models.STOPPED), ('reboot', models.ACTIVE),
                                           ('delete', models.DELETED)])
def test_a_lost_cast_is_carried_out_by_the_next_resume(world, action, final):
    owner, fleet, worker = world
    row = active(owner)
    servers = ServerAPI(owner.engine, owner.placement, Dropped(),
                        lambda node: (owner.host, owner.member_epoch))
    assert servers.action(action, row.uuid).state in models.TRANSITIONAL_STATES
    worker.resume_all()  # what the daemon does every [fleet] resume_interval
    assert wait_state(owner, row.uuid, {final}).state == final


def test_a_lost_cast_whose_node_is_gone_ends_in_a_visible_error(world):
    owner, fleet, worker = world
    row = active(owner)
    servers = ServerAPI(owner.engine, owner.placement, Dropped(),
                        lambda node: (owner.host, owner.member_epoch))
    servers.action('stop', row.uuid)
    owner.driver.fail_power[NODE] = 'BMC unreachable'
    owner.driver.nodes[NODE]['power_state'] = None
    worker.resume_all()
    row = wait_state(owner, row.uuid, {models.ERROR})
    assert row.state == models.ERROR and 'BMC unreachable' in row.fault


def test_resume_leaves_alone_what_is_queued_or_running_here(world):
    owner, fleet, worker = world
    row = active(owner)
    db_instances.set_instance_state(owner.engine, row.uuid, models.STOPPING)
    release = threading.Event()
    started = threading.Event()
    blocked = owner.driver.set_power

    def slow_power(node_uuid, target, *, timeout, guard=None):
        started.set()
        release.wait(10)
        return blocked(node_uuid, target, timeout=timeout, guard=guard)
    owner.driver.set_power = slow_power
    worker.stop_instance({}, instance_uuid=row.uuid, member_epoch=EPOCH)
    assert started.wait(10)
    assert worker.busy() == {row.uuid}
    acts = len(fleet.acts)
    worker.resume_all()
    time.sleep(0.2)  # give a (wrong) resume the chance to be queued
    assert len(fleet.acts) == acts and worker.busy() == {row.uuid}
    release.set()
    assert wait_state(owner, row.uuid, {models.STOPPED}).state == models.STOPPED


def test_a_huge_bad_field_makes_a_short_line(world, caplog):
    owner, fleet, worker = world
    assert worker.submit('stop_instance', 'x' * 10**6) is False
    assert worker.submit('stop_instance', '11111111-2222-3333-4444-555555555555',
                         'x' * 10**6) is False
    lines = [r.getMessage() for r in caplog.records if 'dropping' in r.getMessage()]
    assert len(lines) == 2 and all(len(line) < 300 for line in lines)


def test_a_delete_recorded_during_a_build_ends_deleted_with_no_traceback(world, caplog):
    owner, fleet, worker = world
    row = scheduler.schedule(owner.placement, owner.engine, RC,
                             owner_of=lambda node: (owner.host, owner.member_epoch))
    release, started = threading.Event(), threading.Event()
    deploy = owner.driver.deploy

    def slow_deploy(*args, **kwargs):
        started.set()
        release.wait(10)
        return deploy(*args, **kwargs)
    owner.driver.deploy = slow_deploy
    worker.build_instance({}, instance_uuid=row.uuid, member_epoch=EPOCH)
    assert started.wait(10)
    servers = ServerAPI(owner.engine, owner.placement, worker_bus(worker),
                        lambda node: (owner.host, owner.member_epoch))
    assert servers.action('delete', row.uuid).state == models.DELETING
    release.set()
    assert wait_state(owner, row.uuid, {models.DELETED}).state == models.DELETED
    assert owner.driver.nodes[NODE]['instance_uuid'] is None
    assert not [r for r in caplog.records if r.exc_info]
    assert [r.getMessage() for r in caplog.records if 'stopped' in r.getMessage()] == [
        f'build_instance of instance {row.uuid} stopped: instance {row.uuid}: expected state '
        f'BUILDING, host c1, member epoch {EPOCH}, found state DELETING, host c1, member epoch '
        f'{EPOCH}']


def worker_bus(worker):
    """A bus that delivers every cast to ``worker`` at once."""
    class Bus:
        def __getattr__(self, name):
            return lambda host, instance_uuid, member_epoch: getattr(worker, name)(
                {}, instance_uuid=instance_uuid, member_epoch=member_epoch)
    return Bus()


# --- casts for nodes this daemon does not hold ------------------------------------------------

class PartialFleet(Fleet):
    """Holds the claims on ``held`` only."""

    def __init__(self, held):
        super().__init__()
        self.held = set(held)

    def claim_for(self, node):
        return Claim(node, 1, 1) if node in self.held else None


def test_casts_for_nodes_not_held_do_not_hold_up_the_others(engine, caplog):
    # Issue 23 item 7: two casts for nodes the daemon does not hold occupied both workers for
    # claim_wait; a cast for a node it holds then waited behind them.
    free = ['22222222-2222-2222-2222-22222222222' + str(i) for i in range(2)]
    driver, placement = FakeDriver(NODE, *free), FakePlacement()
    owner = lifecycle.Owner(engine, driver, placement, host='c1', member_epoch=EPOCH)
    fleet = PartialFleet({NODE})
    worker = InstanceWorker(fleet, owner, workers=2, claim_wait=3)
    try:
        waiting = [db_instances.create_instance(engine, f'3333333{i}-3333-3333-3333-333333333333',
                                                RC, node_uuid=node, host='c1', member_epoch=EPOCH,
                                                state=models.STOPPING).uuid
                   for i, node in enumerate(free)]
        placement.add(NODE, RC)
        row = active(owner)
        caplog.set_level(logging.WARNING)
        for uuid in waiting:
            worker.stop_instance({}, instance_uuid=uuid, member_epoch=EPOCH)
        time.sleep(0.1)
        started = time.monotonic()
        worker.stop_instance({}, instance_uuid=row.uuid, member_epoch=EPOCH)
        assert wait_state(owner, row.uuid, {models.STOPPED}, timeout=2).state == models.STOPPED
        assert time.monotonic() - started < 1.5
        # A parked operation runs once its claim is held.
        fleet.held.add(free[0])
        assert wait_state(owner, waiting[0], {models.STOPPED}, timeout=2).state == \
            models.STOPPED
        # The other gives up at claim_wait, in one line, and is no longer busy.
        deadline = time.monotonic() + 5
        while waiting[1] in worker.busy():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        gave_up = [r for r in caplog.records if 'does not hold node' in r.getMessage()]
        assert len(gave_up) == 1 and waiting[1] in gave_up[0].getMessage()
        assert db_instances.get_instance(engine, waiting[1]).state == models.STOPPING  # resumable
    finally:
        worker.stop()


def test_an_instance_of_another_host_is_refused_at_once(engine, caplog):
    driver, placement = FakeDriver(NODE), FakePlacement()
    owner = lifecycle.Owner(engine, driver, placement, host='c1', member_epoch=EPOCH)
    fleet = PartialFleet(set())
    worker = InstanceWorker(fleet, owner, workers=1, claim_wait=30)
    try:
        other = db_instances.create_instance(engine, '44444444-4444-4444-4444-444444444444', RC,
                                             node_uuid=NODE, host='c2', member_epoch=3,
                                             state=models.ACTIVE).uuid
        caplog.set_level(logging.WARNING)
        started = time.monotonic()
        worker.delete_instance({}, instance_uuid=other)
        deadline = time.monotonic() + 5
        while not any('managed by c2' in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert time.monotonic() - started < 2
        assert fleet.acts == [] and driver.calls == []
        assert db_instances.get_instance(engine, other).state == models.ACTIVE
    finally:
        worker.stop()
