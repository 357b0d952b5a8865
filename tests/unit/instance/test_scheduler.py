"""computed.instances.scheduler: candidates, retries on conflicts, no leftovers, the race for
one node."""

import random
import threading
import uuid

import pytest

from computed.db import instances as db_instances
from computed.db import models
from computed.instances import scheduler
from computed.instances.rpcapi import ServerAPI
from tests.unit.instance.fakes import FakePlacement

RC = 'CUSTOM_GOLD'
A, B, C = (f'{i}' * 8 + '-0000-0000-0000-000000000000' for i in 'abc')


def owners(host='c1', member_epoch=3, missing=()):
    return lambda node: None if node in missing else (host, member_epoch)


def test_placement_class_accepts_ironic_and_custom_names():
    assert scheduler.placement_class('gold-1') == 'CUSTOM_GOLD_1'
    assert scheduler.placement_class('CUSTOM_GOLD') == 'CUSTOM_GOLD'
    with pytest.raises(scheduler.BadRequest):
        scheduler.placement_class(' ')


def test_schedules_with_traits_and_records_owner(engine):
    placement = FakePlacement()
    placement.add(A, RC)
    placement.add(B, RC, ['CUSTOM_FAST'])
    row = scheduler.schedule(placement, engine, 'gold', ['CUSTOM_FAST'], 'http://i',
                             owner_of=owners('c2', 11))
    assert (row.node_uuid, row.host, row.member_epoch, row.state) == (B, 'c2', 11, models.BUILDING)
    assert (row.resource_class, row.traits, row.image) == (RC, ('CUSTOM_FAST',), 'http://i')
    assert placement.allocations == {row.uuid: B}
    assert ('GET', f'/allocation_candidates?resources={RC}:1&limit=50&required=CUSTOM_FAST') \
        in placement.requests


def test_forbidden_traits_and_the_project_of_the_allocation(engine):
    placement = FakePlacement()
    placement.add(A, RC, ['CUSTOM_RAID'])
    placement.add(B, RC, ['CUSTOM_FAST'])
    row = scheduler.schedule(placement, engine, RC, forbidden=['CUSTOM_RAID'],
                             owner_of=owners(), project_id='p1', user_id='u1', name='web',
                             metadata={'k': 'v'}, flavor={'id': 'f'})
    assert row.node_uuid == B
    assert (row.project_id, row.user_id, row.name, row.metadata, row.flavor) == \
        ('p1', 'u1', 'web', {'k': 'v'}, {'id': 'f'})
    assert ('GET', f'/allocation_candidates?resources={RC}:1&limit=50&required=!CUSTOM_RAID') \
        in placement.requests
    with pytest.raises(scheduler.NoValidHost, match='without CUSTOM_FAST,CUSTOM_RAID') as e:
        scheduler.schedule(placement, engine, RC, forbidden=['CUSTOM_RAID', 'CUSTOM_FAST'],
                           owner_of=owners())
    assert e.value.forbidden == ('CUSTOM_FAST', 'CUSTOM_RAID')
    with pytest.raises(scheduler.BadRequest, match='both required and forbidden'):
        scheduler.schedule(placement, engine, RC, ['CUSTOM_FAST'], forbidden=['CUSTOM_FAST'],
                           owner_of=owners())
    assert placement.allocations == {row.uuid: B}


def test_a_409_moves_on_to_the_next_candidate(engine):
    placement = FakePlacement()
    placement.add(A, RC)
    placement.add(B, RC)
    stolen = []

    def steal(consumer, node):  # another build takes the first candidate right before us
        if not stolen:
            stolen.append(node)
            placement.allocations['thief'] = node
    placement.before_put = steal
    row = scheduler.schedule(placement, engine, RC, owner_of=owners())
    assert row.node_uuid != stolen[0]
    assert placement.allocations == {'thief': stolen[0], row.uuid: row.node_uuid}


def test_node_in_use_in_the_database_removes_the_allocation_and_moves_on(engine):
    placement = FakePlacement()
    placement.add(A, RC)
    placement.add(B, RC)
    db_instances.create_instance(engine, str(uuid.uuid4()), RC, node_uuid=A, host='c1',
                                 member_epoch=1,
                                 state=models.ERROR)  # holds A without an allocation
    row = scheduler.schedule(placement, engine, RC, owner_of=owners(),
                             rand=random.Random(0))
    assert row.node_uuid == B
    assert placement.allocations == {row.uuid: B}


def test_an_unowned_node_is_skipped(engine):
    placement = FakePlacement()
    placement.add(A, RC)
    placement.add(B, RC)
    row = scheduler.schedule(placement, engine, RC, owner_of=owners(missing={A}))
    assert row.node_uuid == B and placement.allocations == {row.uuid: B}


def test_no_valid_host_leaves_no_row_and_no_allocation(engine):
    placement = FakePlacement()
    placement.add(A, RC)
    with pytest.raises(scheduler.NoValidHost, match='CUSTOM_GOLD with CUSTOM_X'):
        scheduler.schedule(placement, engine, RC, ['CUSTOM_X'], owner_of=owners())
    with pytest.raises(scheduler.NoValidHost, match='taken meanwhile or unowned'):
        scheduler.schedule(placement, engine, RC, owner_of=owners(missing={A}))
    assert placement.allocations == {} and db_instances.live_instances(engine) == []


def test_bad_input_is_refused_before_anything_is_written(engine):
    placement = FakePlacement()
    placement.add(A, RC)
    with pytest.raises(scheduler.BadRequest, match='No such resource class CUSTOM_NOPE'):
        scheduler.schedule(placement, engine, 'nope', owner_of=owners())
    with pytest.raises(scheduler.BadRequest, match='not a uuid'):
        scheduler.schedule(placement, engine, RC, instance_uuid='x', owner_of=owners())
    with pytest.raises(scheduler.BadRequest, match='not a trait'):
        scheduler.schedule(placement, engine, RC, ['lower'], owner_of=owners())
    assert placement.allocations == {} and db_instances.live_instances(engine) == []


def test_an_existing_instance_uuid_is_refused(engine):
    placement = FakePlacement()
    placement.add(A, RC)
    placement.add(B, RC)
    row = scheduler.schedule(placement, engine, RC, owner_of=owners())
    with pytest.raises(db_instances.InstanceExists):
        scheduler.schedule(placement, engine, RC, instance_uuid=row.uuid, owner_of=owners())
    assert placement.allocations == {row.uuid: row.node_uuid}


def test_racing_builds_for_the_last_node_never_share_it(engine):
    for _ in range(5):
        placement = FakePlacement()
        node = str(uuid.uuid4())
        placement.add(node, RC)
        barrier = threading.Barrier(2)
        placement.before_put = lambda consumer, n, barrier=barrier: barrier.wait(timeout=5)
        results = []

        def build(placement=placement, results=results):
            try:
                results.append(scheduler.schedule(placement, engine, RC, owner_of=owners()))
            except scheduler.NoValidHost as exc:
                results.append(exc)
        threads = [threading.Thread(target=build, args=(placement, results)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rows = [r for r in results if isinstance(r, db_instances.InstanceRow)]
        assert len(rows) == 1 and len(results) == 2
        assert placement.allocations == {rows[0].uuid: node}
        db_instances.set_instance_state(engine, rows[0].uuid, models.DELETED)


class RecordingCompute:
    """Records each cast with the instance's state in the database when it was cast."""

    def __init__(self, engine):
        self.engine = engine
        self.casts = []

    def __getattr__(self, name):
        def cast(host, instance_uuid, member_epoch):
            state = db_instances.get_instance(self.engine, instance_uuid).state
            self.casts.append((name, host, instance_uuid, member_epoch, state))
        return cast


def test_server_api_casts_build_to_the_owner_and_actions_to_the_current_host(engine):
    placement = FakePlacement()
    placement.add(A, RC)
    compute = RecordingCompute(engine)
    servers = ServerAPI(engine, placement, compute, owners('c1', 3))
    row = servers.create('gold')
    assert compute.casts == [('build_instance', 'c1', row.uuid, 3, 'BUILDING')]
    db_instances.set_instance_state(engine, row.uuid, models.ACTIVE)
    db_instances.rehome_instance(engine, row.uuid, 'c1', 3, 'c3', 5)
    servers.action('reboot', row.uuid)
    assert compute.casts[-1] == ('reboot_instance', 'c3', row.uuid, 5, 'REBOOTING')
    db_instances.set_instance_state(engine, row.uuid, models.DELETED)
    servers.action('delete', row.uuid)  # already deleted: nothing cast
    assert len(compute.casts) == 2
    with pytest.raises(db_instances.InstanceNotFound):
        servers.action('stop', str(uuid.uuid4()))
    with pytest.raises(scheduler.BadRequest):
        servers.action('stop', 'not-a-uuid')


def test_when_every_candidate_was_taken_placement_is_asked_again(engine):
    # Concurrent builds all get the same first candidates: losing every one of them must not
    # end in NoValidHost while Placement still has free nodes beyond that first page.
    placement = FakePlacement()
    for node in (A, B, C):
        placement.add(node, RC)
    taken = []

    def others_win(consumer, node):
        if node in (A, B) and node not in taken:
            taken.append(node)
            placement.allocations[f'other-{node}'] = node
    placement.before_put = others_win
    row = scheduler.schedule(placement, engine, RC, owner_of=owners(), limit=2,
                             rand=random.Random(1))
    assert row.node_uuid == C
    assert sum(1 for method, path in placement.requests
               if path.startswith('/allocation_candidates')) == 2


@pytest.mark.parametrize('action, before, recorded', [
    ('delete', 'ERROR', 'DELETING'), ('delete', 'BUILDING', 'DELETING'),
    ('stop', 'ACTIVE', 'STOPPING'), ('start', 'STOPPED', 'STARTING'),
    ('reboot', 'STOPPED', 'REBOOTING'), ('stop', 'STOPPING', 'STOPPING')])
def test_an_action_is_recorded_as_a_transitional_state_before_it_is_cast(engine, action,
                                                                         before, recorded):
    placement = FakePlacement()
    placement.add(A, RC)
    compute = RecordingCompute(engine)
    servers = ServerAPI(engine, placement, compute, owners('c1', 3))
    row = servers.create('gold')
    db_instances.set_instance_state(engine, row.uuid, before, 'an old fault')
    after = servers.action(action, row.uuid)
    assert after.state == recorded
    assert compute.casts[-1] == (f'{action}_instance', 'c1', row.uuid, 3, recorded)
    # a delete keeps the fault visible until DELETED; a power action starts afresh
    assert after.fault == ('an old fault' if action == 'delete' or before == recorded
                           else None)


@pytest.mark.parametrize('action, state', [('stop', 'BUILDING'), ('start', 'DELETING'),
                                           ('reboot', 'STOPPING'), ('stop', 'ERROR')])
def test_an_action_the_state_does_not_allow_is_refused_and_never_cast(engine, action, state):
    placement = FakePlacement()
    placement.add(A, RC)
    compute = RecordingCompute(engine)
    servers = ServerAPI(engine, placement, compute, owners('c1', 3))
    row = servers.create('gold')
    db_instances.set_instance_state(engine, row.uuid, state)
    with pytest.raises(db_instances.InstanceConflict, match=f'found state {state}'):
        servers.action(action, row.uuid)
    assert [cast[0] for cast in compute.casts] == ['build_instance']
    assert db_instances.get_instance(engine, row.uuid).state == state


@pytest.mark.parametrize('action, state', [('stop', 'STOPPED'), ('start', 'ACTIVE'),
                                           ('delete', 'DELETED')])
def test_an_action_with_nothing_to_do_records_and_casts_nothing(engine, action, state):
    placement = FakePlacement()
    placement.add(A, RC)
    compute = RecordingCompute(engine)
    servers = ServerAPI(engine, placement, compute, owners('c1', 3))
    row = servers.create('gold')
    db_instances.set_instance_state(engine, row.uuid, state)
    assert servers.action(action, row.uuid).state == state
    assert [cast[0] for cast in compute.casts] == ['build_instance']


def test_the_api_records_a_build_without_host_in_error_and_can_delete_it(engine):
    placement = FakePlacement()
    placement.add(A, RC)
    placement.allocations['other'] = A
    casts = []

    class Compute:
        def build_instance(self, host, uuid, member_epoch=None):
            casts.append((host, uuid))

    servers = ServerAPI(engine, placement, Compute(), owners())
    with pytest.raises(scheduler.NoValidHost):
        servers.create(RC)
    assert db_instances.live_instances(engine) == []
    row = servers.create(RC, project_id='p1', user_id='u1', name='web', record_failure=True)
    assert (row.state, row.node_uuid, row.host, row.project_id, row.name) == \
        (models.ERROR, None, None, 'p1', 'web')
    assert row.fault.startswith('No valid host was found: no valid host for CUSTOM_GOLD')
    assert casts == [] and placement.allocations == {'other': A}
    deleted = servers.action('delete', row.uuid)
    assert deleted.state == models.DELETED and casts == []


def test_the_owner_read_waits_out_a_dropped_connection():
    from kazoo import exceptions as zk_exc

    class Flaky:
        calls = 0

        def get_async(self, path):  # answered at once: a lost connection, then the claim
            self.calls += 1
            return self

        def get(self, timeout=None):
            if self.calls == 1:
                raise zk_exc.ConnectionLoss()
            return b'{"host": "c2", "member_epoch": 9}', None

    client = Flaky()
    assert scheduler.zookeeper_owner(client, '/computed/g')('n-1') == ('c2', 9)
    assert client.calls == 2
