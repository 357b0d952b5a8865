"""NodeCatalog: the last good list survives a failing driver."""

from __future__ import annotations

import pytest

from computed.driver import BaremetalDriver, DriverError, DriverUnavailable, Node
from computed.node import Freshness, NodeCatalog


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
