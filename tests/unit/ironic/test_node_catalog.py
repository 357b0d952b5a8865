"""NodeCatalog: the last good list survives a failing driver."""

from __future__ import annotations

import pytest

from computed.baremetal import catalog as catalog_module
from computed.baremetal.catalog import Freshness, NodeCatalog
from computed.baremetal.driver import BaremetalDriver, DriverError, DriverUnavailable, Node


class ScriptedDriver(BaremetalDriver):
    """Answers list_nodes from a script: lists of nodes or errors to raise."""

    def __init__(self, *outcomes):
        self.outcomes = list(outcomes)

    def list_nodes(self):
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def get_node(self, uuid):
        return None


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def nodes(*uuids):
    return [Node(uuid=u) for u in uuids]


def test_first_listing_makes_a_fresh_view():
    catalog = NodeCatalog(ScriptedDriver(nodes('a', 'b')), clock=Clock())
    assert catalog.view() is None
    view = catalog.refresh()
    assert view.freshness is Freshness.FRESH and not view.stale
    assert set(view.nodes) == {'a', 'b'} and 'a' in view and len(view) == 2
    assert catalog.view() is view


def test_failure_keeps_the_last_good_list_marked_stale_with_age_and_error():
    clock = Clock()
    outage = DriverUnavailable('list nodes', 'refused', attempts=4)
    catalog = NodeCatalog(ScriptedDriver(nodes('a', 'b'), outage, outage), clock=clock)
    good = catalog.refresh()
    clock.now += 30
    stale = catalog.refresh()
    assert stale.stale and stale.error is outage and stale.failures == 1
    assert stale.nodes == good.nodes
    assert stale.age(clock()) == 30
    clock.now += 30
    assert catalog.refresh().failures == 2 and catalog.view().age(clock()) == 60


def test_recovery_makes_the_view_fresh_again():
    catalog = NodeCatalog(ScriptedDriver(nodes('a'), DriverUnavailable('x', 'down'),
                                         nodes('a', 'c')), clock=Clock())
    catalog.refresh()
    catalog.refresh()
    view = catalog.refresh()
    assert view.freshness is Freshness.FRESH and view.error is None and view.failures == 0
    assert set(view.nodes) == {'a', 'c'}


def test_any_driver_error_keeps_the_last_good_list():
    catalog = NodeCatalog(ScriptedDriver(nodes('a'), DriverError('list nodes', 'HTTP 400')),
                          clock=Clock())
    catalog.refresh()
    assert set(catalog.refresh().nodes) == {'a'}


def test_failure_before_any_good_listing_raises():
    outage = DriverUnavailable('list nodes', 'refused')
    catalog = NodeCatalog(ScriptedDriver(outage), clock=Clock())
    with pytest.raises(DriverUnavailable):
        catalog.refresh()
    assert catalog.view() is None


def test_an_empty_answer_is_a_valid_listing():
    catalog = NodeCatalog(ScriptedDriver(nodes('a'), []), clock=Clock())
    catalog.refresh()
    view = catalog.refresh()
    assert len(view) == 0 and not view.stale


def test_view_cannot_be_modified():
    catalog = NodeCatalog(ScriptedDriver(nodes('a')), clock=Clock())
    view = catalog.refresh()
    with pytest.raises(TypeError):
        view.nodes['b'] = Node(uuid='b')


def test_update_replaces_one_node_and_removes_a_gone_one():
    catalog = NodeCatalog(ScriptedDriver(nodes('a', 'b')), clock=Clock())
    catalog.update('a', Node(uuid='a', maintenance=True))  # before any listing: ignored
    assert catalog.view() is None
    catalog.refresh()
    catalog.update('a', Node(uuid='a', maintenance=True))
    catalog.update('b', None)
    assert catalog.view().nodes['a'].maintenance is True
    assert set(catalog.view().nodes) == {'a'}


def test_a_listing_started_before_an_update_does_not_undo_it():
    # An event re-read node 'a' while a full listing (which read the old 'a') was in flight.
    clock = Clock()

    class SlowDriver(ScriptedDriver):
        def list_nodes(self):
            listed = super().list_nodes()
            clock.now += 1
            catalog.update('a', Node(uuid='a', maintenance=True))
            catalog.update('c', None)
            return listed

    catalog = NodeCatalog(ScriptedDriver(nodes('a', 'c')), clock=clock)
    catalog.refresh()
    catalog._driver = SlowDriver(nodes('a', 'b', 'c'))
    view = catalog.refresh()
    assert view.nodes['a'].maintenance is True
    assert set(view.nodes) == {'a', 'b'}
    # The next listing, started after the update, is the truth again.
    clock.now += 1
    catalog._driver = ScriptedDriver(nodes('a', 'c'))
    assert set(catalog.refresh().nodes) == {'a', 'c'}
    assert catalog.view().nodes['a'].maintenance is False


def test_a_listing_keeps_the_objects_of_unchanged_nodes():
    # A steady listing of thousands of nodes then frees every object it parsed in one go
    # instead of leaving the catalog spread over the memory that parsing used (issue 13 item
    # 10: the daemon's RSS), and readers can compare an unchanged node by identity.
    def fresh(name):  # an equal uuid that is another str object, as each listing parses
        return ''.join(['node-', name])

    first = [Node(uuid=fresh('a')), Node(uuid=fresh('b'), maintenance=False)]
    again = [Node(uuid=fresh('a')), Node(uuid=fresh('b'), maintenance=True),
             Node(uuid=fresh('c'))]
    assert first[0] == again[0] and first[0] is not again[0]
    assert first[0].uuid is not again[0].uuid
    catalog = NodeCatalog(ScriptedDriver(first, again), clock=Clock())
    catalog.refresh()
    view = catalog.refresh()
    assert view.nodes['node-a'] is first[0]
    assert next(k for k in view.nodes if k == 'node-a') is first[0].uuid  # its key too
    assert view.nodes['node-b'] is again[1] and view.nodes['node-b'].maintenance
    assert view.nodes['node-c'] is again[2]


def test_an_update_with_an_unchanged_node_keeps_the_view():
    # An event re-reads a node that did not change: the view, and the node's object, stay (no
    # copy of a 50,000-entry view per event, and readers still see nothing new by identity).
    catalog = NodeCatalog(ScriptedDriver(nodes('a', 'b')), clock=Clock())
    view = catalog.refresh()
    catalog.update('a', Node(uuid=''.join(['a'])))
    assert catalog.view() is view
    catalog._driver = ScriptedDriver([Node(uuid='a', maintenance=True), Node(uuid='b')])
    catalog._clock.now -= 1  # a listing in flight since before the update: the update wins
    assert catalog.refresh().nodes['a'].maintenance is False


def test_views_with_the_same_uuids_and_only_those_share_a_uuids_version():
    error = DriverUnavailable('list nodes', 'refused')
    catalog = NodeCatalog(ScriptedDriver(nodes('a', 'b'), [Node(uuid='a', maintenance=True),
                                                           Node(uuid='b')],
                                         error, nodes('a', 'c'), nodes('a')), clock=Clock())
    versions = [catalog.refresh().uuids_version]
    catalog.update('a', Node(uuid='a', power_state='power on'))  # one node's data
    versions.append(catalog.view().uuids_version)
    catalog.update('z', None)  # gone, and never listed: the same uuids
    versions.append(catalog.view().uuids_version)
    versions.append(catalog.refresh().uuids_version)  # listed again: the same uuids
    versions.append(catalog.refresh().uuids_version)  # stale: the last good list
    assert len(set(versions)) == 1, versions
    others = [catalog.refresh().uuids_version]  # a, c: another set
    catalog.update('d', Node(uuid='d'))  # added
    others.append(catalog.view().uuids_version)
    catalog.update('d', None)  # removed again: a, c as before, but told apart
    others.append(catalog.view().uuids_version)
    others.append(catalog.refresh().uuids_version)  # a alone
    assert len(set(versions + others)) == 5, (versions, others)


def test_updates_read_as_a_plain_mapping_before_and_after_they_are_folded():
    # A model dict takes the same updates; the view must read the same through every way a
    # reader reads it, before and after the re-reads are folded into one mapping.
    import random

    rng = random.Random(7)
    listed = [Node(uuid=f'n{i}') for i in range(40)]
    catalog = NodeCatalog(ScriptedDriver(listed), clock=Clock())
    catalog.refresh()
    model = {node.uuid: node for node in listed}
    for step in range(2 * catalog_module.FOLD_AT_LEAST):
        uuid = f'n{rng.randrange(60)}'  # some never listed
        node = None if rng.random() < 0.3 else Node(uuid=uuid, power_state=f'p{step}')
        catalog.update(uuid, node)
        if node is None:
            model.pop(uuid, None)
        else:
            model[uuid] = node
        nodes = catalog.view().nodes
        assert len(nodes) == len(model) and set(nodes) == set(model)
        assert list(nodes) == list(dict.fromkeys(nodes))  # each uuid once
        assert dict(nodes.items()) == model and nodes.keys() == model.keys()
        assert all((f'n{i}' in nodes) == (f'n{i}' in model) for i in range(60))
        assert all(nodes.get(f'n{i}') == model.get(f'n{i}') for i in range(60))


def test_an_event_does_not_copy_the_listing():
    # At 50,000 nodes a copy per event was 2.6 MB, and a burst of events left every daemon
    # 4-6 MB bigger (the allocator keeps the freed copies mapped).
    import tracemalloc

    count = 20_000  # a copy of the view: ~1 MB
    catalog = NodeCatalog(ScriptedDriver(nodes(*(f'n{i}' for i in range(count)))),
                          clock=Clock())
    catalog.refresh()
    catalog.update('n1', Node(uuid='n1', maintenance=True))  # the first re-read
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for i in range(2, 12):
            catalog.update(f'n{i}', Node(uuid=f'n{i}', maintenance=True))
        grown = sum(stat.size_diff for stat in
                    tracemalloc.take_snapshot().compare_to(before, 'filename'))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert catalog.view().nodes['n11'].maintenance and len(catalog.view()) == count
    assert peak < 200_000, peak
    assert grown < 50_000, grown


def test_a_listing_after_events_with_the_same_uuids_keeps_the_uuids_version():
    catalog = NodeCatalog(ScriptedDriver(nodes('a', 'b'), nodes('a', 'b')), clock=Clock())
    version = catalog.refresh().uuids_version
    catalog.update('a', Node(uuid='a', maintenance=True))
    catalog._clock.now += 1
    view = catalog.refresh()
    assert view.uuids_version == version and view.nodes['a'].maintenance is False
