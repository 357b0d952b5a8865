"""The daemon's state shared between threads (issue 22 item 1): each race is provoked
deterministically (one thread held at the racy point by Events; bounded waits only guard
against a hang), never by timing."""

from __future__ import annotations

import threading

from computed.baremetal.catalog import NodeCatalog
from computed.daemon.nodes import FleetNodes
from computed.daemon.sync import NodeSync, ReportGate
from computed.db import providers as db_providers
from computed.providers.outbox import Outbox
from tests.unit.daemon.fakes import Clock, Fleet, Ironic, KnownProviders, open_fence
from tests.unit.daemon.test_sync import N1, N2, UPDATE, node
from tests.unit.report.fakes import Reporter

HANG = 10.0  # a guard against a deadlock in the code under test; no assertion depends on it


class _ListenerClocks:
    """The clock NodeSync reads in ``hint``: ``early`` reads 1005 and then waits until the other
    listener thread has hinted the same node at 1010."""

    def __init__(self, fallback: Clock):
        self.fallback = fallback
        self.early: threading.Thread | None = None
        self.late_done = threading.Event()

    def __call__(self) -> float:
        if threading.current_thread() is self.early:
            assert self.late_done.wait(HANG)
            return 1005.0
        if self.early is not None and threading.current_thread().name == "late":
            return 1010.0
        return self.fallback()


def test_two_listener_threads_hinting_one_node_keep_the_later_event_time():
    """Two events about N2 (held by a peer) reach two listener threads; the one read on the
    clock first records its hint last. A listing that started between the two events read the
    node before the second one: the hint must survive it, and the node is re-read once this
    daemon claims it (a change made during a failover is not lost)."""
    base = Clock(1000.0)
    ironic = Ironic(node(N1), node(N2))
    catalog = NodeCatalog(ironic, clock=base)
    catalog.refresh()
    fence = open_fence(base)
    fleet = Fleet(fence)
    fleet.claim(N1, 7)
    clocks = _ListenerClocks(base)
    sync = NodeSync(catalog, KnownProviders(), ironic, fleet,
                    Outbox("c1", Reporter(), ReportGate(fleet.claims, fence), batch_size=10),
                    clock=clocks)
    early = threading.Thread(target=sync.hint, args=(N2, UPDATE), name="early")
    late = threading.Thread(target=sync.hint, args=(N2, UPDATE), name="late")
    clocks.early = early
    early.start()
    late.start()
    late.join(HANG)
    clocks.late_done.set()
    early.join(HANG)
    assert sync.last_event_at == 1010.0

    base.now = 1007.0  # a listing started after the first event, before the second
    catalog.refresh()
    sync.reread_hinted()
    assert ironic.reads == []  # not ours yet
    fleet.claim(N2, 8)
    sync.reread_hinted()
    assert ironic.reads == [N2]



def test_an_older_read_of_the_providers_finishing_last_does_not_replace_a_newer_one(
        monkeypatch):
    """The listing thread reads the known providers; before it gets its answer, the node thread
    (an event said a node is gone) reads them again and finds the provider reported meanwhile.
    The listing thread's older answer, arriving last, must not take that provider away."""
    listing_reads, newer_done = threading.Event(), threading.Event()
    answers = {"listing": frozenset(), "nodes": frozenset({N2})}

    def provider_uuids(engine):
        name = threading.current_thread().name
        if name == "listing":
            listing_reads.set()
            assert newer_done.wait(HANG)
        return answers.get(name, frozenset())

    monkeypatch.setattr(db_providers, "provider_uuids", provider_uuids)
    nodes = FleetNodes(NodeCatalog(Ironic(node(N1))), engine=None)
    assert nodes.refresh()
    listing = threading.Thread(target=nodes.refresh_providers, name="listing")
    node_thread = threading.Thread(target=nodes.refresh_providers, name="nodes")
    listing.start()
    assert listing_reads.wait(HANG)
    node_thread.start()
    node_thread.join(HANG)
    newer_done.set()
    listing.join(HANG)
    assert nodes.is_known_provider(N2)
    assert nodes.uuids() == {N1, N2}
