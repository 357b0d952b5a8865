"""What the fleet shares out: Ironic's last good listing plus the providers whose node is gone."""

from __future__ import annotations

import threading

import sqlalchemy

from computed.baremetal.catalog import NodeCatalog
from computed.baremetal.driver import Node, shared_uuid
from computed.daemon import nodes as nodes_module
from computed.daemon.nodes import FleetNodes
from computed.db import models
from tests import database
from tests.unit.daemon.fakes import Ironic

N1 = "11111111-1111-1111-1111-111111111111"
N2 = "22222222-2222-2222-2222-222222222222"


def record_provider(engine, uuid: str) -> None:
    """A provider the reporters applied (as computed-reporter records it)."""
    assert database.apply_report_if_newer(engine, uuid, 5, 1, "c1", lambda row: "{}")


def test_nothing_is_shared_until_ironic_was_listed_once(engine):
    ironic = Ironic(Node(uuid=N1))
    ironic.down = True
    nodes = FleetNodes(NodeCatalog(ironic), engine)
    assert not nodes.refresh()
    assert nodes.uuids() is None
    ironic.down = False
    assert nodes.refresh()
    assert nodes.uuids() == {N1}


def test_providers_whose_node_is_gone_are_shared_and_known(engine):
    ironic = Ironic(Node(uuid=N1))
    record_provider(engine, N2)
    nodes = FleetNodes(NodeCatalog(ironic), engine)
    assert nodes.refresh()
    assert sorted(nodes.uuids()) == [N1, N2]
    assert nodes.is_known_provider(N2) and not nodes.is_known_provider(N1)
    assert not nodes.refresh()  # the same set again: nothing for the fleet to do


def test_an_ironic_outage_keeps_the_last_good_list(engine):
    ironic = Ironic(Node(uuid=N1), Node(uuid=N2))
    nodes = FleetNodes(NodeCatalog(ironic), engine)
    nodes.refresh()
    ironic.down = True
    assert not nodes.refresh()
    assert sorted(nodes.uuids()) == [N1, N2]


def test_an_unreadable_database_keeps_the_last_known_providers(engine, caplog):
    record_provider(engine, N2)
    nodes = FleetNodes(NodeCatalog(Ironic(Node(uuid=N1))), engine)
    nodes.refresh()
    with engine.begin() as connection:  # a database that answers, but not this question
        connection.execute(sqlalchemy.text(f"DROP TABLE {models.Provider.__tablename__}"))
    assert not nodes.refresh()
    assert nodes.is_known_provider(N2) and sorted(nodes.uuids()) == [N1, N2]
    assert "cannot read known providers" in caplog.text


def test_a_requested_refresh_ends_the_wait_at_once():
    nodes = FleetNodes(NodeCatalog(Ironic()), engine=None)
    nodes.request_refresh()
    done = threading.Event()
    thread = threading.Thread(target=lambda: (nodes.wait_for_refresh(30), done.set()))
    thread.start()
    thread.join(5)
    assert done.is_set()


def test_the_shared_set_is_the_same_object_until_something_changes(engine):
    # The fleet passes every second; it compares the set by identity (no work per node) while
    # nothing changed (issue 13 item 7).
    ironic = Ironic(Node(uuid=N1))
    catalog = NodeCatalog(ironic)
    nodes = FleetNodes(catalog, engine)
    nodes.refresh()
    first = nodes.uuids()
    assert first == {N1} and nodes.uuids() is first
    assert not nodes.refresh_providers() and nodes.uuids() is first  # same providers
    record_provider(engine, N2)
    assert nodes.refresh_providers()
    second = nodes.uuids()
    assert second == {N1, N2} and nodes.uuids() is second
    catalog.update(N1, None)  # an event: the node is gone
    assert nodes.uuids() == {N2}
    nodes.mark_foreign(N2)
    assert nodes.uuids() == frozenset()


def test_known_providers_share_the_listing_s_uuid_strings(engine):
    listed = "".join(list(N1))  # a string of its own, as a listing parses one
    ironic = Ironic(Node(uuid=shared_uuid(listed)))
    record_provider(engine, N1)
    nodes = FleetNodes(NodeCatalog(ironic), engine)
    nodes.refresh()
    (provider,) = nodes._providers
    assert provider is listed  # not the database's copy of the text


def test_an_event_that_changes_a_node_data_builds_no_new_set(engine, monkeypatch):
    # At 50,000 nodes every rebuild of the shared set was ~5 MB of sets made and thrown away:
    # a node's new data (most events) leaves the uuids, and so the shared set, as they were.
    catalog = NodeCatalog(Ironic(Node(uuid=N1), Node(uuid=N2)))
    nodes = FleetNodes(catalog, engine)
    nodes.refresh()
    shared = nodes.uuids()
    built = []

    class Counted(frozenset):
        def __new__(cls, *args):
            built.append(args)
            return super().__new__(cls, *args)

    # The sets the module builds, counted.
    monkeypatch.setattr(nodes_module, "frozenset", Counted, raising=False)
    catalog.update(N1, Node(uuid=N1, maintenance=True))
    assert nodes.uuids() is shared and built == []
    catalog.update(N2, None)  # a node gone: the set is built again
    assert nodes.uuids() == {N1} and len(built) == 1
