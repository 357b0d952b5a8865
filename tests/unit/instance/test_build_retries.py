"""A failed build is retried on another node (issue 15 item 5): lifecycle + reschedule + the
worker's hand-over, with the in-memory Ironic and Placement."""

import random
import threading
import time

import pytest

from computed.baremetal.driver import DeployFailed
from computed.db import instances as db_instances
from computed.db import models
from computed.instances import lifecycle, scheduler
from computed.instances.worker import InstanceWorker
from tests.unit.instance.fakes import FakeDriver, FakePlacement

RC = 'CUSTOM_GOLD'
A, B, C = (f'{i}' * 8 + '-0000-0000-0000-000000000000' for i in 'abc')
NODES = (A, B, C)
# Who owns each node: the retried build goes to that daemon.
OWNERS = {A: ('c1', 7), B: ('c2', 8), C: ('c3', 9)}


class World:
    def __init__(self, engine, nodes=NODES, max_attempts=3):
        self.engine = engine
        self.driver = FakeDriver(*nodes)
        self.placement = FakePlacement()
        for node in nodes:
            self.placement.add(node, RC)
        self.max_attempts = max_attempts

    def owner(self, node):
        host, epoch = OWNERS[node]
        return lifecycle.Owner(self.engine, self.driver, self.placement, host, epoch,
                               max_attempts=self.max_attempts, owner_of=OWNERS.get)

    def schedule(self):
        return scheduler.schedule(self.placement, self.engine, RC, image='http://img',
                                  owner_of=OWNERS.get, project_id='p1', user_id='u1')

    def build_until_done(self, row):
        """What the daemons do: build on the row's node by its owner, until not BUILDING."""
        tried = []
        while row.state == models.BUILDING:
            tried.append(row.node_uuid)
            row = lifecycle.build(self.owner(row.node_uuid), row.uuid)
        return row, tried


def test_a_failed_deploy_moves_the_build_to_another_node_and_its_owner(engine):
    world = World(engine)
    row = world.schedule()
    first = row.node_uuid
    world.driver.fail_deploy[first] = 'image not found'
    moved = lifecycle.build(world.owner(first), row.uuid)
    assert moved.state == models.BUILDING and moved.node_uuid not in (None, first)
    assert (moved.host, moved.member_epoch) == OWNERS[moved.node_uuid]
    assert moved.fault == f'attempt 1 on node {first}: image not found'
    # The failed node was cleared and its allocation removed before the next was made.
    assert world.driver.nodes[first]['instance_uuid'] is None
    assert world.placement.allocations == {row.uuid: moved.node_uuid}
    assert world.placement.consumers[row.uuid] == ('p1', 'u1')
    assert ('clear', first, row.uuid) in world.driver.calls
    writes = [method for method, url in world.placement.requests
              if url == f'/allocations/{row.uuid}' and method != 'GET']
    assert writes == ['PUT', 'DELETE', 'PUT']  # removed before the next allocation is made
    done = lifecycle.build(world.owner(moved.node_uuid), row.uuid)
    assert done.state == models.ACTIVE and done.node_uuid == moved.node_uuid
    assert done.fault == f'attempt 1 on node {first}: image not found'  # the attempt recorded


def test_the_old_owner_can_no_longer_touch_a_moved_build(engine):
    world = World(engine)
    row = world.schedule()
    world.driver.fail_deploy[row.node_uuid] = 'boom'
    moved = lifecycle.build(world.owner(row.node_uuid), row.uuid)
    with pytest.raises(db_instances.InstanceConflict):
        lifecycle.build(world.owner(row.node_uuid), row.uuid)
    assert db_instances.get_instance(engine, row.uuid) == moved


def test_every_node_failing_ends_in_error_listing_each_attempt_and_no_allocation(engine):
    world = World(engine)
    for node in NODES:
        world.driver.fail_deploy[node] = f'bad {node[:1]}'
    row, tried = world.build_until_done(world.schedule())
    assert row.state == models.ERROR and row.node_uuid is None
    assert sorted(tried) == sorted(NODES)
    assert row.fault.splitlines() == [
        *(f'attempt {i} on node {node}: bad {node[:1]}' for i, node in enumerate(tried, 1)),
        'build given up: max_attempts 3 reached']
    assert world.placement.allocations == {}
    assert all(world.driver.nodes[n]['instance_uuid'] is None for n in NODES)


def test_fewer_good_nodes_than_attempts_ends_in_error_when_none_is_left(engine):
    world = World(engine, nodes=(A, B), max_attempts=3)
    world.driver.fail_deploy.update({A: 'bad a', B: 'bad b'})
    row, tried = world.build_until_done(world.schedule())
    assert row.state == models.ERROR and len(tried) == 2
    assert row.fault.splitlines()[-1] == 'build given up: no other node can take the instance'
    assert world.placement.allocations == {}


def test_max_attempts_caps_the_nodes_tried(engine):
    world = World(engine, max_attempts=2)
    for node in NODES:
        world.driver.fail_deploy[node] = 'bad'
    row, tried = world.build_until_done(world.schedule())
    assert row.state == models.ERROR and len(tried) == 2
    assert world.placement.allocations == {}


def test_a_node_that_cannot_be_cleared_is_not_retried(engine):
    world = World(engine)
    row = world.schedule()
    world.driver.fail_deploy[row.node_uuid] = 'boom'
    world.driver.fail_undeploy[row.node_uuid] = 'Ironic down'
    row, tried = world.build_until_done(row)
    assert row.state == models.ERROR and len(tried) == 1 and row.node_uuid == tried[0]
    assert 'Ironic down' in row.fault and world.placement.allocations == {}


def test_resume_of_a_build_whose_deploy_failed_retries_too(engine):
    world = World(engine)
    row = world.schedule()
    first = row.node_uuid
    world.driver.fail_deploy[first] = 'deploy step failed'
    with pytest.raises(DeployFailed):
        world.driver.deploy(first, row.uuid, None, timeout=1)  # the daemon died meanwhile
    moved = lifecycle.resume(world.owner(first), row.uuid)
    assert moved.state == models.BUILDING and moved.node_uuid != first


class Fleet:
    """The fleet as the worker sees it: every node claimed, acting runs at once."""

    def claim_for(self, node):
        return object()

    def wake(self):
        pass

    def act(self, node, what, fn, **kw):
        fn(None)
        return True

    def guard(self, claim):
        return None  # no claim to check: the unit under test is the hand-over


class Compute:
    def __init__(self):
        self.casts = []
        self.cast = threading.Event()

    def build_instance(self, host, instance_uuid, member_epoch=None):
        self.casts.append((host, instance_uuid))
        self.cast.set()


def test_the_worker_casts_a_moved_build_to_the_new_nodes_owner(engine):
    world = World(engine)
    row = world.schedule()
    world.driver.fail_deploy[row.node_uuid] = 'boom'
    compute = Compute()
    worker = InstanceWorker(Fleet(), world.owner(row.node_uuid), compute=compute)
    try:
        worker.build_instance({}, row.uuid)
        assert compute.cast.wait(10)
    finally:
        worker.stop()
    moved = db_instances.get_instance(engine, row.uuid)
    assert compute.casts == [(moved.host, row.uuid)] and moved.node_uuid != row.node_uuid


def test_the_worker_casts_nothing_after_a_build_that_ends(engine):
    world = World(engine)
    row = world.schedule()
    compute = Compute()
    worker = InstanceWorker(Fleet(), world.owner(row.node_uuid), compute=compute)
    try:
        worker.build_instance({}, row.uuid)
        deadline = time.monotonic() + 10
        while db_instances.get_instance(engine, row.uuid).state == models.BUILDING:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        worker.stop()
    assert db_instances.get_instance(engine,
                                     row.uuid).state == models.ACTIVE and compute.casts == []


class Notifier:
    def __init__(self):
        self.sent = []

    def start(self, operation, row):
        self.sent.append(('start', operation, row.state))

    def end(self, operation, row):
        self.sent.append(('end', operation, row.state))


def test_the_worker_announces_each_operation_before_and_after(engine):
    world = World(engine)
    row = world.schedule()
    world.driver.fail_deploy[row.node_uuid] = 'boom'
    compute, notifier = Compute(), Notifier()
    worker = InstanceWorker(Fleet(), world.owner(row.node_uuid), compute=compute,
                            notifier=notifier)
    try:
        worker.build_instance({}, row.uuid)
        assert compute.cast.wait(10)
    finally:
        worker.stop()
    assert notifier.sent == [('start', 'build_instance', 'BUILDING'),
                             ('end', 'build_instance', 'BUILDING')]


def test_a_retry_keeps_the_flavors_forbidden_traits(engine):
    world = World(engine)
    world.placement.add(C, RC, ['CUSTOM_SLOW'])
    row = scheduler.schedule(world.placement, engine, RC, image='http://img', owner_of=OWNERS.get,
                             forbidden=['CUSTOM_SLOW'], rand=random.Random(1),
                             flavor={'id': 'f1', 'extra_specs': {
                                 f'resources:{RC}': '1', 'trait:CUSTOM_SLOW': 'forbidden'}})
    assert row.node_uuid in (A, B)
    world.driver.fail_deploy[row.node_uuid] = 'boom'
    moved = lifecycle.build(world.owner(row.node_uuid), row.uuid)
    assert moved.state == models.BUILDING and moved.node_uuid in (A, B)  # never C
    world.driver.fail_deploy[moved.node_uuid] = 'bang'
    done = lifecycle.build(world.owner(moved.node_uuid), row.uuid)
    assert done.state == models.ERROR
    assert done.fault.splitlines()[-1] == 'build given up: no other node can take the instance'
