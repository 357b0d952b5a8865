"""The node sync pass, without ZooKeeper: from a node change to a report, through real calls.

The catalog, the fence and the outbox are the real ones; Ironic, the fleet's claims and the
reporters are in-memory stand-ins passed as constructor arguments.
"""

from __future__ import annotations

import dataclasses
import logging
import threading

import pytest

from computed.baremetal.catalog import NodeCatalog
from computed.baremetal.driver import Node
from computed.baremetal.events import MISSED_EVENT, MISSED_UNAPPLIED
from computed.daemon.sync import LISTING_EVENTS, NodeSync, ReportGate
from computed.providers.outbox import Outbox, Verdict
from computed.providers.state import provider_from_node
from tests.unit.daemon.fakes import Clock, Fleet, Ironic, KnownProviders, open_fence
from tests.unit.report.fakes import Reporter

N1 = "11111111-1111-1111-1111-111111111111"
N2 = "22222222-2222-2222-2222-222222222222"
UPDATE = "baremetal.node.update.end"


N3 = "33333333-3333-3333-3333-333333333333"


def node(uuid: str = N1, **fields) -> Node:
    return Node(uuid=uuid, resource_class="gold", provision_state="available",
                power_state="power off", **fields)


class Daemon:
    """One daemon's sync path, wired as computed.cmd.daemon wires it."""

    def __init__(self, *nodes: Node, known: tuple[str, ...] = (), listed: bool = True):
        self.clock = Clock()
        self.ironic = Ironic(*nodes)
        self.catalog = NodeCatalog(self.ironic, clock=self.clock)
        if listed:
            self.catalog.refresh()
        self.fence = open_fence(self.clock)
        self.fleet = Fleet(self.fence)
        self.known = KnownProviders(*known)
        self.reporter = Reporter()
        self.outbox = Outbox("c1", self.reporter, ReportGate(self.fleet.claims, self.fence),
                             batch_size=100)
        self.sync = NodeSync(self.catalog, self.known, self.ironic, self.fleet, self.outbox,
                             clock=self.clock)

    def change(self, uuid: str, **fields) -> None:
        """Change a node in Ironic and send its notification."""
        self.ironic.nodes[uuid] = dataclasses.replace(self.ironic.nodes[uuid], **fields)
        self.sync.hint(uuid, UPDATE)

    def node_pass(self) -> int:
        """One pass of the node thread's sync."""
        self.sync.reread_hinted()
        return self.sync.sync_claimed()

    def sent(self) -> list[tuple[str, int, dict | None]]:
        """Send what is queued; (uuid, claim epoch, state) of every report sent."""
        self.outbox.send_batch()
        return [(r.uuid, r.claim_epoch, r.state) for r in self.reporter.batches[-1]] \
            if self.reporter.batches else []


def wire(n: Node) -> dict:
    return provider_from_node(n).to_dict()


def test_a_node_change_is_offered_once_and_sent_under_the_claim_epoch():
    daemon = Daemon(node())
    daemon.fleet.claim(N1, 7)
    assert daemon.node_pass() == 1
    assert daemon.sent() == [(N1, 7, wire(node()))]

    daemon.change(N1, maintenance=True)
    assert daemon.node_pass() == 1
    assert daemon.ironic.reads == [N1]  # the event made the node thread re-read it
    assert daemon.outbox.pending() == 1
    assert daemon.node_pass() == 0  # the same snapshot again: nothing more
    assert daemon.outbox.pending() == 1
    assert daemon.sent() == [(N1, 7, wire(node(maintenance=True)))]
    assert wire(node(maintenance=True))["reserved"] == 1
    assert [(n, action, epoch) for n, action, epoch, _ in daemon.fleet.acts] == \
        [(N1, "sync", 7), (N1, "sync", 7)]


def test_unchanged_nodes_offer_nothing():
    daemon = Daemon(node(N1), node(N2))
    daemon.fleet.claim(N1, 7)
    daemon.fleet.claim(N2, 8)
    assert daemon.node_pass() == 2
    daemon.sent()
    daemon.catalog.refresh()  # a new listing with the same nodes
    daemon.sync.hint(N1, UPDATE)  # an event that changed nothing
    assert daemon.node_pass() == 0
    assert daemon.outbox.pending() == 0 and len(daemon.reporter.batches) == 1
    assert len(daemon.fleet.acts) == 2


def test_a_new_claim_epoch_syncs_the_node_again():
    daemon = Daemon(node())
    daemon.fleet.claim(N1, 7)
    daemon.node_pass()
    daemon.sent()
    daemon.fleet.claim(N1, 9)  # lost and taken again: its owner reports under the new epoch
    assert daemon.node_pass() == 1
    assert daemon.sent() == [(N1, 9, wire(node()))]


def test_a_node_gone_from_ironic_with_a_known_provider_offers_none():
    daemon = Daemon(node(N1), known=(N2,))
    daemon.fleet.claim(N2, 8)  # a provider computed reported; Ironic no longer lists its node
    assert daemon.node_pass() == 1
    assert daemon.sent() == [(N2, 8, None)]
    assert daemon.fleet.acts[0][3] == {"provision_state": None, "maintenance": None,
                                       "gone": True}


def test_a_claimed_node_neither_listed_nor_known_is_skipped():
    daemon = Daemon(node(N1))
    daemon.fleet.claim(N2, 8)
    assert daemon.node_pass() == 0
    assert daemon.outbox.pending() == 0 and daemon.fleet.acts == []


def test_a_node_deleted_in_ironic_is_reported_gone():
    daemon = Daemon(node(N1), node(N2), known=(N2,))
    daemon.fleet.claim(N2, 8)
    daemon.node_pass()
    daemon.sent()
    del daemon.ironic.nodes[N2]
    daemon.sync.hint(N2, "baremetal.node.delete.end")
    assert daemon.node_pass() == 1
    assert daemon.known.refresh_requests == 0  # the node alone is re-read, no full listing
    assert daemon.known.provider_reads == 1  # its provider keeps it shared out
    assert daemon.sent() == [(N2, 8, None)]


@pytest.mark.parametrize("event", LISTING_EVENTS + (MISSED_EVENT,))
def test_a_node_that_comes_or_goes_is_reread_by_every_daemon_not_only_its_holder(event):
    daemon = Daemon(node(N1))  # holds nothing
    daemon.ironic.nodes[N2] = node(N2)  # enrolled after the listing
    daemon.sync.hint(N2, event)
    daemon.node_pass()
    assert daemon.ironic.reads == [N2]
    assert N2 in daemon.catalog.view().nodes  # shared out without a full listing
    assert daemon.fleet.woken == 1  # the plan changes
    del daemon.ironic.nodes[N1]
    daemon.sync.hint(N1, event)
    daemon.node_pass()
    assert N1 not in daemon.catalog.view().nodes and daemon.fleet.woken == 2
    daemon.sync.hint(N2, event)  # re-read, unchanged: the plan stays
    daemon.node_pass()
    assert daemon.fleet.woken == 2 and daemon.known.refresh_requests == 0


def test_a_new_node_of_another_fleet_is_left_alone():
    daemon = Daemon(node(N1))
    daemon.ironic.shard = "a"
    daemon.ironic.nodes[N2] = node(N2, shard="b")
    daemon.sync.hint(N2, LISTING_EVENTS[0])
    daemon.node_pass()
    assert N2 not in daemon.catalog.view().nodes and daemon.known.foreign == set()


def test_a_failed_reread_of_a_coming_or_going_node_is_tried_at_the_next_pass():
    daemon = Daemon(node(N1))
    daemon.ironic.nodes[N2] = node(N2)
    daemon.ironic.down = True
    daemon.sync.hint(N2, LISTING_EVENTS[0])
    daemon.node_pass()
    daemon.ironic.down = False
    daemon.node_pass()
    assert daemon.ironic.reads == [N2, N2] and N2 in daemon.catalog.view().nodes


@pytest.mark.parametrize("announced", (MISSED_EVENT, MISSED_UNAPPLIED))
def test_a_missed_announcement_is_not_an_event_heard_from_ironic(announced):
    daemon = Daemon(node(N1))
    daemon.sync.hint(N1, announced)
    assert daemon.sync.last_event_at is None


def test_a_node_announced_with_nothing_applied_is_reread_by_its_holder_and_who_does_not_list_it():
    # A cold start's rounds announce thousands of nodes whose first report is not applied yet:
    # their Ironic data did not change, so only their holder re-reads them (and reports), and
    # a daemon that never listed the node (its creation may be the missed event).
    daemon = Daemon(node(N1), node(N2))
    daemon.fleet.claim(N1, 7)
    daemon.node_pass()
    daemon.sync.hint(N1, MISSED_UNAPPLIED)  # held
    daemon.sync.hint(N2, MISSED_UNAPPLIED)  # listed, held elsewhere: its listed copy stands
    daemon.ironic.nodes[N3] = node(N3)  # enrolled after the listing, its event lost
    daemon.sync.hint(N3, MISSED_UNAPPLIED)
    daemon.node_pass()
    assert sorted(daemon.ironic.reads) == sorted([N1, N3])
    assert N3 in daemon.catalog.view().nodes and daemon.fleet.woken == 1
    daemon.fleet.claim(N2, 9)  # N2 handed over before a new listing: re-read now
    daemon.node_pass()
    assert daemon.ironic.reads[-1] == N2


# --- issue 13: handovers, filters, bad nodes -------------------------------------------------



def test_an_event_for_a_node_held_elsewhere_is_reread_once_the_node_is_claimed():
    daemon = Daemon(node(N1), node(N2))
    daemon.fleet.claim(N1, 7)
    daemon.node_pass()
    daemon.sent()
    daemon.change(N2, maintenance=True)  # N2's owner dies about now: the event is ours too
    assert daemon.node_pass() == 0 and daemon.ironic.reads == []
    daemon.fleet.claim(N2, 9)  # the handover, before any new listing
    assert daemon.node_pass() == 1
    assert daemon.ironic.reads == [N2]
    assert daemon.sent() == [(N2, 9, wire(node(N2, maintenance=True)))]


def test_an_event_heard_during_the_first_listing_is_applied_after_it():
    # The first listing is the only one at start (computed.daemon.listing): an event that
    # arrives while it runs, about a node it read before the change, must not be lost to it.
    daemon = Daemon(node(N1), node(N2), listed=False)
    list_nodes = daemon.ironic.list_nodes

    def listing():
        nodes = list_nodes()  # N1 read before its change ...
        daemon.clock.now += 1
        daemon.change(N1, maintenance=True)  # ... changed, and its event heard, meanwhile
        assert daemon.node_pass() == 0  # the node thread during the listing: nothing listed
        return nodes

    daemon.ironic.list_nodes = listing
    daemon.catalog.refresh()
    assert daemon.catalog.view().nodes[N1] == node(N1)  # the listing's stale copy
    daemon.fleet.claim(N1, 7)  # claimed after the first listing
    assert daemon.node_pass() == 1
    assert daemon.ironic.reads == [N1]  # re-read: the hint is newer than the listing's start
    assert daemon.sent() == [(N1, 7, wire(node(N1, maintenance=True)))]


def test_a_hint_for_a_node_held_elsewhere_is_dropped_once_a_later_listing_read_it():
    daemon = Daemon(node(N1), node(N2))
    daemon.change(N2, maintenance=True)
    daemon.node_pass()
    daemon.clock.now += 1
    daemon.catalog.refresh()  # started after the event: it has the change
    daemon.node_pass()
    daemon.fleet.claim(N2, 9)
    assert daemon.node_pass() == 1
    assert daemon.ironic.reads == []  # the listing's copy is the node's latest
    assert daemon.sent() == [(N2, 9, wire(node(N2, maintenance=True)))]


def test_an_unlisted_node_that_still_exists_left_the_filter_and_keeps_its_provider():
    daemon = Daemon(node(N1, shard="a"), node(N2, shard="a"), known=(N2,))
    daemon.ironic.shard = "a"
    daemon.fleet.claim(N2, 8)
    daemon.node_pass()
    daemon.sent()
    daemon.ironic.nodes[N2] = node(N2, shard="b")  # moved to another shard
    daemon.catalog.refresh()
    assert daemon.node_pass() == 0
    assert daemon.ironic.reads == [N2]  # asked Ironic for that node alone
    assert daemon.known.foreign == {N2} and daemon.fleet.woken == 1  # released, not deleted
    assert daemon.outbox.pending() == 0
    assert daemon.node_pass() == 0 and daemon.ironic.reads == [N2]  # asked once


def test_an_event_that_moves_a_node_out_of_the_filter_releases_it():
    daemon = Daemon(node(N1, shard="a"), node(N2, shard="a"), known=(N2,))
    daemon.ironic.shard = "a"
    daemon.fleet.claim(N2, 8)
    daemon.node_pass()
    daemon.sent()
    daemon.change(N2, shard="b")
    assert daemon.node_pass() == 0
    assert daemon.known.foreign == {N2} and N2 not in daemon.catalog.view().nodes
    assert daemon.outbox.pending() == 0


def test_an_empty_listing_deletes_only_what_ironic_confirms_gone():
    daemon = Daemon(node(N1, shard="a"), node(N2, shard="a"), node(N3, shard="a"),
                    known=(N1, N2, N3))
    for uuid, epoch in ((N1, 7), (N2, 8), (N3, 9)):
        daemon.fleet.claim(uuid, epoch)
    daemon.node_pass()
    daemon.sent()
    daemon.ironic.shard = "typo"  # Ironic answers 200 with no node
    del daemon.ironic.nodes[N3]  # and one is really gone
    daemon.catalog.refresh()
    assert daemon.catalog.view().nodes == {}
    assert daemon.node_pass() == 1
    assert daemon.sent() == [(N3, 9, None)]
    assert daemon.known.foreign == {N1, N2}


def test_an_unlisted_node_ironic_cannot_look_up_is_asked_again_and_not_deleted(caplog):
    daemon = Daemon(node(N1), node(N2), known=(N2,))
    daemon.fleet.claim(N2, 8)
    daemon.node_pass()
    daemon.sent()
    del daemon.ironic.nodes[N2]
    daemon.catalog.refresh()
    daemon.ironic.down = True
    with caplog.at_level(logging.WARNING):
        assert daemon.node_pass() == 0
    assert N2 in caplog.text and daemon.outbox.pending() == 0
    daemon.ironic.down = False
    assert daemon.node_pass() == 1
    assert daemon.sent() == [(N2, 8, None)]


def test_one_node_that_cannot_be_reported_stops_nothing_else(caplog):
    bad = node(N1, traits=("not a trait",))
    daemon = Daemon(bad, node(N2), node(N3))
    for uuid, epoch in ((N1, 7), (N2, 8), (N3, 9)):
        daemon.fleet.claim(uuid, epoch)
    with caplog.at_level(logging.ERROR):
        assert daemon.node_pass() == 2
        assert daemon.node_pass() == 0  # tried again, logged once
    assert [r.getMessage().split(":")[0] for r in caplog.records] == \
        [f"node {N1} cannot be reported, retrying at every pass"]
    assert daemon.sync.failing == {N1: bad} and daemon.sync.failures == 2
    assert sorted(uuid for uuid, _, _ in daemon.sent()) == [N2, N3]
    daemon.change(N1, traits=("CUSTOM_FINE",))  # repaired in Ironic
    assert daemon.node_pass() == 1 and daemon.sync.failing == {}


def test_a_claim_lost_drops_pending_reports():
    daemon = Daemon(node(N1), node(N2))
    daemon.fleet.claim(N1, 7)
    daemon.fleet.claim(N2, 8)
    daemon.node_pass()
    assert daemon.outbox.pending() == 2
    daemon.fleet.release(N1)
    assert daemon.node_pass() == 0
    assert daemon.outbox.pending() == 1
    assert daemon.sent() == [(N2, 8, wire(node(N2)))]


def test_a_report_is_dropped_when_its_claim_changed_epoch_before_it_was_sent():
    daemon = Daemon(node())
    daemon.fleet.claim(N1, 7)
    daemon.node_pass()
    daemon.fleet.claim(N1, 9)  # before the report thread sent the epoch-7 report
    assert daemon.outbox.send_batch() == 0 and daemon.outbox.pending() == 0
    assert daemon.reporter.batches == []


def test_the_fence_closed_holds_reports():
    daemon = Daemon(node())
    daemon.fleet.claim(N1, 7)
    daemon.node_pass()
    daemon.fence.suspended()  # ZooKeeper connection dropped: the claim may still be ours
    assert daemon.outbox.send_batch() == 0
    assert daemon.outbox.pending() == 1 and daemon.reporter.batches == []
    daemon.change(N1, maintenance=True)
    assert daemon.node_pass() == 0  # no sync either while the fence is closed
    daemon.fence.connected()  # reconnected to the same session
    daemon.fence.renew(lambda: None)
    assert daemon.node_pass() == 1
    assert daemon.sent() == [(N1, 7, wire(node(maintenance=True)))]


def test_a_node_with_no_resource_class_is_not_reported_and_logged_once(caplog):
    daemon = Daemon(Node(uuid=N1))  # enrolled without a resource class
    daemon.fleet.claim(N1, 7)
    with caplog.at_level(logging.WARNING, logger="computed.daemon.sync"):
        assert daemon.node_pass() == 1
        daemon.change(N1, maintenance=True)
        assert daemon.node_pass() == 1
    assert daemon.outbox.pending() == 0
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [f"node {N1} has no resource class: not reported to Placement"]


def test_only_held_nodes_are_reread_and_a_failed_reread_keeps_the_listed_node(caplog):
    daemon = Daemon(node(N1), node(N2))
    daemon.fleet.claim(N1, 7)
    daemon.sync.hint(N2, UPDATE)  # not ours: its owner re-reads it
    daemon.node_pass()
    assert daemon.ironic.reads == []
    daemon.ironic.down = True
    daemon.sync.hint(N1, UPDATE)
    daemon.node_pass()
    assert daemon.ironic.reads == [N1]
    assert daemon.catalog.view().nodes[N1] == node(N1)
    assert f"cannot re-read node {N1} after an event" in caplog.text


@pytest.mark.parametrize("event", (UPDATE,) + LISTING_EVENTS)
def test_hints_record_the_event_time(event):
    daemon = Daemon(node())
    assert daemon.sync.last_event_at is None
    daemon.clock.now = 1234.5
    daemon.sync.hint(N1, event)
    assert daemon.sync.last_event_at == 1234.5


def test_a_hint_wakes_the_node_thread():
    daemon = Daemon(node())
    woke = threading.Event()

    def node_thread():
        daemon.sync.wait(30)
        woke.set()

    thread = threading.Thread(target=node_thread)
    thread.start()
    daemon.sync.hint(N1, UPDATE)
    thread.join(5)
    assert woke.is_set()


@pytest.mark.parametrize("held, connected, verdict", [
    (7, True, Verdict.SEND),
    (9, True, Verdict.DROP),   # the claim was taken again since: the report is not ours
    (7, False, Verdict.HOLD),  # ours, but the fence is closed for now
    (None, True, Verdict.DROP),  # not claimed any more
])
def test_report_gate_for_a_report_made_under_claim_epoch_7(held, connected, verdict):
    clock = Clock()
    fence = open_fence(clock)
    fleet = Fleet(fence)
    if held is not None:
        fleet.claim(N1, held)
    if not connected:
        fence.suspended()
    assert ReportGate(fleet.claims, fence).verdict(N1, 7) is verdict


def test_report_gate_holds_when_the_lease_ran_out():
    clock = Clock()
    fence = open_fence(clock)
    fleet = Fleet(fence)
    fleet.claim(N1, 7)
    clock.now += 60  # a pause longer than the session: nothing is acted on until a round trip
    assert ReportGate(fleet.claims, fence).verdict(N1, 7) is Verdict.HOLD


def test_malformed_capabilities_fail_only_their_node_and_changed_ones_follow(caplog):
    bad = node(N1, properties={"capabilities": "boot_mode"})
    daemon = Daemon(bad, node(N2, properties={"capabilities": "boot_mode:bios"}))
    daemon.fleet.claim(N1, 7)
    daemon.fleet.claim(N2, 8)
    with caplog.at_level(logging.ERROR):
        assert daemon.node_pass() == 1
    assert f"node {N1} cannot be reported" in caplog.text and "'capabilities'" in caplog.text
    assert [(uuid, state["traits"]) for uuid, _, state in daemon.sent()] == \
        [(N2, ["CUSTOM_CAP_BOOT_MODE__BIOS"])]
    daemon.change(N2, properties={"capabilities": "boot_mode:uefi"})
    daemon.change(N1, properties={"capabilities": "boot_mode:uefi"})  # repaired in Ironic
    assert daemon.node_pass() == 2 and daemon.sync.failing == {}
    assert {uuid: state["traits"] for uuid, _, state in daemon.sent()} == \
        {N1: ["CUSTOM_CAP_BOOT_MODE__UEFI"], N2: ["CUSTOM_CAP_BOOT_MODE__UEFI"]}


def test_a_pass_with_nothing_new_looks_at_no_node():
    # The node thread passes every second: with nothing changed (same listing, same claims, same
    # known providers) a pass must cost no work per node (issue 13 item 7).
    daemon = Daemon(node(N1), node(N2))
    daemon.fleet.claim(N1, 7)
    daemon.fleet.claim(N2, 8)
    assert daemon.node_pass() == 2
    examined = daemon.sync.examined
    assert daemon.node_pass() == 0 and daemon.sync.examined == examined
    # A new listing of equal nodes (new objects): looked at once, nothing offered, then quiet.
    daemon.catalog.refresh()
    assert daemon.node_pass() == 0 and daemon.sync.examined == examined + 2
    assert daemon.node_pass() == 0 and daemon.sync.examined == examined + 2
    # A claim that changes is looked at again, and synced.
    daemon.fleet.claim(N2, 9)
    assert daemon.node_pass() == 1
    assert daemon.sent()[-1][:2] == (N2, 9)
    examined = daemon.sync.examined
    assert daemon.node_pass() == 0 and daemon.sync.examined == examined
    # A node that cannot be synced now (the fence closed) is looked at again at every pass.
    daemon.change(N1, maintenance=True)
    daemon.fence.lost()
    assert daemon.node_pass() == 0
    examined = daemon.sync.examined
    assert daemon.node_pass() == 0 and daemon.sync.examined > examined
