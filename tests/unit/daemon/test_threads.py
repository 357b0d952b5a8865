"""The daemon's state shared between threads (issue 22 item 1): each race is provoked
deterministically (one thread held at the racy point by Events; bounded waits only guard
against a hang), never by timing."""

from __future__ import annotations

import threading

from computed.baremetal.catalog import NodeCatalog
from computed.daemon.sync import NodeSync, ReportGate
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
