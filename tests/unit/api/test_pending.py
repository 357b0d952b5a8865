"""Servers a create admitted, placed after its answer (computed.api.pending): what a client
sees before they are placed, a delete meanwhile, a sweep taking over what a dead process
left, all or none."""

from __future__ import annotations

import dataclasses
import datetime
from concurrent import futures

from computed.api import app, pending
from computed.db import instances as db_instances
from computed.db import models
from tests.unit.api.conftest import NODES, Client
from tests.unit.api.test_app import create, flavor


class Held(futures.Executor):
    """Keeps what is submitted until :meth:`run`: a process whose scheduling threads have not
    got to the request yet (or died with it queued)."""

    def __init__(self):
        self.held = []

    def submit(self, fn, /, *args, **kwargs):
        self.held.append((fn, args, kwargs))
        return futures.Future()

    def run(self):
        held, self.held = self.held, []
        for fn, args, kwargs in held:
            fn(*args, **kwargs)


def held_api(api, timeout=120):
    """The test's API with a queue that holds its placements; (client, executor, queue)."""
    executor = Held()
    backends = api.backends
    queue = pending.BuildQueue(backends.servers, backends.engine, backends.placement,
                               executor, timeout)
    client = Client(app.build(backends.conf, dataclasses.replace(backends, builds=queue)),
                    token=api.token)
    return client, executor, queue


def row_of(api, server_id):
    return db_instances.get_instance(api.engine, server_id)


def test_a_create_answers_before_its_server_is_placed_and_shows_it_scheduling(api):
    client, executor, _queue = held_api(api)
    made = create(client, flavor(api))
    assert made.status_int == 202, made.text
    server_id = made.document['server']['id']
    shown = client('GET', f'/v2.1/servers/{server_id}').document['server']
    assert (shown['status'], shown['OS-EXT-STS:task_state']) == ('BUILD', 'scheduling')
    assert api.placement.allocations == {} and api.casts.sent == []

    executor.run()
    row = row_of(api, server_id)
    assert row.state == models.BUILDING and row.node_uuid in NODES and row.host == 'c1'
    assert api.placement.allocations == {server_id: row.node_uuid}
    assert api.casts.sent == [('build_instance', 'c1', server_id)]
    shown = client('GET', f'/v2.1/servers/{server_id}').document['server']
    assert shown['OS-EXT-STS:task_state'] == 'spawning'


def test_a_delete_before_the_placement_wins_and_the_placement_leaves_nothing(api):
    client, executor, _queue = held_api(api)
    server_id = create(client, flavor(api)).document['server']['id']
    assert client('DELETE', f'/v2.1/servers/{server_id}').status_int == 204
    assert row_of(api, server_id).state == models.DELETED

    executor.run()
    assert row_of(api, server_id).state == models.DELETED
    assert row_of(api, server_id).node_uuid is None
    assert api.placement.allocations == {} and api.casts.sent == []


def test_a_delete_after_the_take_wins_too_and_the_allocation_is_removed(api):
    # Taken by the scheduling thread, then deleted while Placement was being asked: the
    # row's compare-and-set refuses the placement, which removes the allocation it made.
    client, executor, _queue = held_api(api)
    server_id = create(client, flavor(api)).document['server']['id']
    deleted = []

    def delete_first(consumer, node):
        if not deleted:
            deleted.append(client('DELETE', f'/v2.1/servers/{server_id}').status_int)

    api.placement.before_put = delete_first
    executor.run()
    assert deleted == [204]
    assert row_of(api, server_id).state == models.DELETED
    assert api.placement.allocations == {} and api.casts.sent == []


def test_a_sweep_places_what_nobody_took_for_the_timeout_and_only_that(api):
    client, executor, _queue = held_api(api)
    gold = flavor(api)
    orphan = create(client, gold).document['server']['id']  # its process died: never run
    executor.held.clear()
    _, _, sweeper = held_api(api, timeout=3600)
    assert sweeper.sweep() == 0  # not old enough
    later = models.utcnow() + datetime.timedelta(seconds=10)
    assert [row.uuid for row in db_instances.admitted_instances(api.engine, later, 10)] == [orphan]

    _, sweep_executor, sweeper = held_api(api, timeout=0)
    assert sweeper.sweep() == 1
    sweep_executor.run()
    row = row_of(api, orphan)
    assert row.state == models.BUILDING and row.host == 'c1' and row.node_uuid in NODES
    assert api.casts.sent == [('build_instance', 'c1', orphan)]


def test_of_two_takers_that_read_the_same_row_one_takes_it(api):
    client, _executor, _queue = held_api(api)
    server_id = create(client, flavor(api)).document['server']['id']
    seen = row_of(api, server_id)
    assert pending.take(api.engine, [seen]) != ()
    assert pending.take(api.engine, [seen]) == ()


def test_one_server_of_a_request_without_a_host_leaves_every_one_in_error(api):
    client, executor, _queue = held_api(api)
    api.placement.allocations['something-else'] = NODES[0]  # 2 nodes free for 3 servers
    made = create(client, flavor(api), min_count=3, max_count=3)
    assert made.status_int == 202, made.text
    executor.run()
    rows = db_instances.list_instances(api.engine)
    assert len(rows) == 3 and {row.state for row in rows} == {models.ERROR}
    assert {row.node_uuid for row in rows} == {None}
    assert all('3 servers were requested together and server 3 found no host' in row.fault
               for row in rows)
    assert api.placement.allocations == {'something-else': NODES[0]}
    assert api.casts.sent == []


def test_requests_of_groups_rows_by_reservation_in_admission_order():
    def row(uuid, reservation, second):
        return db_instances.InstanceRow(
            uuid=uuid, node_uuid=None, host=None, member_epoch=None, state='BUILDING',
            resource_class='CUSTOM_GOLD', traits=(), image=None, fault=None,
            created_at=datetime.datetime(2026, 1, 1, 0, 0, second),
            updated_at=datetime.datetime(2026, 1, 1), deleted_at=None,
            reservation_id=reservation)

    rows = [row('b', 'r-1', 2), row('a', 'r-1', 1), row('c', None, 0), row('d', 'r-2', 3)]
    assert [[r.uuid for r in group] for group in pending.requests_of(rows)] == \
        [['a', 'b'], ['c'], ['d']]


def test_fault_of_names_the_server_that_found_no_host_when_several_were_asked():
    assert pending.fault_of(1, 0, 'No valid host was found: none') == \
        'No valid host was found: none'
    assert pending.fault_of(3, 1, 'why') == (
        'No valid host was found: 3 servers were requested together and server 2 found no '
        'host (why); none is built')
