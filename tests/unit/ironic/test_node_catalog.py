"""NodeCatalog: the last good list survives a failing driver."""

from __future__ import annotations

import pytest

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
