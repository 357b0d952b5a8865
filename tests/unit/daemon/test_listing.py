"""When full listings run (issue 13 item 7): often while the event stream is in doubt, rarely and by
one daemon for the fleet while it flows; what the fleet-wide listing announces."""

from __future__ import annotations

import json
import logging

import pytest

from computed.baremetal.catalog import NodeCatalog
from computed.baremetal.driver import Node
from computed.baremetal.events import (
    HEARTBEAT_EVENT,
    MISSED_EVENT,
    MISSED_PER_MESSAGE,
    MISSED_UNAPPLIED,
    START_BEAT,
    START_BEATS,
    Heartbeat,
    NotificationEndpoint,
    StreamWatch,
    beat_wait,
)
from computed.daemon.listing import (
    FIRST_LOOK,
    ListingRound,
    Listings,
    RoundRecord,
    confirming_round,
    differing,
    first_listing_wait,
    not_applied,
    own_listing_due,
    round_compares_all,
    round_due,
    round_findings,
    round_lists_again,
    still_announced,
    to_announce,
    unreportable,
    withheld,
)
from computed.providers.state import provider_from_node
from computed.testing.znode import OneZnode
from tests.unit.daemon.fakes import Clock, Ironic

N1 = "11111111-1111-1111-1111-111111111111"
N2 = "22222222-2222-2222-2222-222222222222"
N3 = "33333333-3333-3333-3333-333333333333"


def node(uuid: str = N1, **fields) -> Node:
    fields = {"resource_class": "gold", "provision_state": "available",
              "power_state": "power off", **fields}
    return Node(uuid=uuid, **fields)


def state(n: Node) -> dict:
    return provider_from_node(n).to_dict()


# --- pure decisions ------------------------------------------------------------------------------

@pytest.mark.parametrize("trusted, age, due", [
    (False, None, 0.0),          # never listed: now
    (True, None, 0.0),           # never listed, even with events flowing
    (False, 10.0, 20.0),         # in doubt: every 30 s
    (False, 45.0, 0.0),
    (True, 10_000.0, float("inf")),  # trusted since the last listing: not this daemon's job
])
def test_own_listing_due(trusted, age, due):
    assert own_listing_due(trusted, age, 30.0) == due


@pytest.mark.parametrize("stream_ok, waited, wait", [
    (True, 0.0, 0.0),     # the heartbeat came back: list now, trusted from before the listing
    (False, 0.0, 30.0),   # not yet: wait for it ...
    (False, 12.0, 18.0),
    (False, 30.0, 0.0),   # ... at most one interval (a broker down at start)
    (False, 99.0, 0.0),
])
def test_first_listing_waits_for_the_stream_at_most_one_interval(stream_ok, waited, wait):
    assert first_listing_wait(stream_ok, waited, 30.0) == wait


@pytest.mark.parametrize("own_done, again", [
    (None, True), (0.0, False), (29.9, False), (30.0, True), (600.0, True)])
def test_a_round_right_after_the_own_listing_compares_that_listing(own_done, again):
    assert round_lists_again(own_done, 30.0, 600.0) is again


@pytest.mark.parametrize("own_done, again", [
    (None, True), (30.0, False), (599.9, False), (600.0, True)])
def test_a_round_confirming_the_last_ones_findings_compares_until_the_listing_is_rare_old(
        own_done, again):
    assert round_lists_again(own_done, 30.0, 600.0, confirming=True) is again


@pytest.mark.parametrize("heard, beats, wait", [
    (False, 1, START_BEAT),            # none back yet: soon again
    (False, START_BEATS - 1, START_BEAT),
    (False, START_BEATS, 5.0),         # a broker down at start is not hammered
    (True, 1, 5.0),
])
def test_heartbeats_are_quick_until_the_first_comes_back(heard, beats, wait):
    assert beat_wait(heard, beats, 5.0) == wait


@pytest.mark.parametrize("last, now, host, due", [
    (None, 0.0, "c1", True),
    (RoundRecord(1000.0, "c1", 0), 1599.0, "c1", False),
    (RoundRecord(1000.0, "c1", 0), 1600.0, "c1", True),
    (RoundRecord(1000.0, "c1", 0), 1600.0, "c2", False),  # the last lister keeps the rounds
    (RoundRecord(1000.0, "c1", 0), 1610.0, "c2", True),   # ... unless it is gone
    (RoundRecord(1000.0, "c1", 3), 1030.0, "c1", True),    # it found differences: 30 s
    (RoundRecord(1000.0, "c1", None), 1030.0, "c1", False),  # still running: the usual interval
    # A round that listed for 95 s (50,000 nodes): counted from its end, not its start, so
    # another daemon does not win the next round the moment it finishes.
    (RoundRecord(1000.0, "c1", 3, 1095.0), 1100.0, "c2", False),
    (RoundRecord(1000.0, "c1", 3, 1095.0), 1124.0, "c1", False),
    (RoundRecord(1000.0, "c1", 3, 1095.0), 1125.0, "c1", True),
    (RoundRecord(1000.0, "c1", 3, 1095.0), 1135.0, "c2", True),
])
def test_round_due(last, now, host, due):
    assert round_due(now, last, rare=600.0, frequent=30.0, host=host) is due


def test_only_differences_that_outlived_a_round_are_announced_and_at_most_a_limit():
    first = {N1: ("n1", "a"), N2: ("n2", "a")}
    assert to_announce(first, {}, 10) == []  # maybe reports on their way
    again = {N1: ("n1", "a"), N2: ("n2", "b"), N3: ("n3", "a")}  # N2's report landed meanwhile
    assert to_announce(again, first, 10) == [N1]
    many = {f"{i:03d}": ("n", "a") for i in range(300)}
    assert to_announce(many, many, 100) == sorted(many)[:100]


def test_changes_with_no_event_are_announced_before_nodes_not_applied_yet():
    unapplied = {f"0{i}": (node(N1), None) for i in range(5)}  # sorts before N1 and N2
    changed = {N1: (node(N1, maintenance=True), "{}"), N2: (None, "{}")}  # N2 not listed
    found = {**unapplied, **changed}
    assert to_announce(found, found, 3) == [N1, N2, "00"]


def test_a_node_with_no_provider_applied_is_not_a_change_with_no_event():
    assert not_applied((node(N1), None))
    assert not not_applied((node(N1), "{}"))   # listed, differs from what was applied
    assert not not_applied((None, "{}"))       # applied, no longer listed


def test_a_cold_starts_rounds_warn_of_no_change_with_no_event():
    # A cold start's confirming round: thousands listed, nothing applied yet for them.
    found = {f"{i:04d}": (node(N1), None) for i in range(1000)}
    findings = round_findings(found, to_announce(found, found, 100))
    assert (findings.changed, findings.unapplied, findings.pending) == (0, 100, 900)
    assert findings.level() == logging.INFO
    assert "0 changed with no event" in findings.describe([])
    # Differences seen for the first time are no change with no event yet either.
    fresh = {N1: (node(N1, maintenance=True), "{}")}
    assert round_findings(fresh, to_announce(fresh, {}, 100)).level() == logging.INFO
    # One that outlived a round, among the cold start's backlog, is.
    found[N1] = fresh[N1]
    findings = round_findings(found, to_announce(found, found, 100))
    assert (findings.changed, findings.unapplied, findings.pending) == (1, 99, 901)
    assert findings.level() == logging.WARNING
    assert "1 changed with no event" in findings.describe([N1])


def test_a_node_that_cannot_make_a_provider_is_announced_once_then_withheld():
    bad = (node(N1, traits=("lower",)), json.dumps(state(node(N1))))  # Placement refuses it
    changed = (node(N2, maintenance=True), json.dumps(state(node(N2))))
    assert unreportable(bad) and not unreportable(changed) and not unreportable((None, "{}"))
    found = {N1: bad, N2: changed}
    # First confirmed: both announced (the owner of N1 re-reads it and logs why).
    assert withheld(found, {}) == set()
    announce = to_announce(found, found, 10, withheld(found, {}))
    assert announce == [N1, N2]
    announced = still_announced(found, {}, announce)
    # The next round finds both the same way: only the unreportable one is withheld, the
    # other is announced again (its report may have been lost).
    skip = withheld(found, announced)
    assert skip == {N1} and to_announce(found, found, 10, skip) == [N2]
    findings = round_findings(found, [N2], skip)
    assert (findings.changed, findings.unapplied, findings.pending, findings.unreportable) == \
        (1, 0, 0, 1)
    assert findings.missed() == 1 and "1 that cannot make a provider" in findings.describe([])
    # Once it differs another way (the node changed in Ironic), it is announced again.
    other = {N1: (node(N1, traits=("lower", "other")), bad[1])}
    assert withheld(other, announced) == set()
    assert still_announced(other, announced, []) == {}  # nothing it remembers differs so still


def test_a_round_that_finds_only_withheld_nodes_records_nothing_missed():
    bad = {N1: (node(N1, traits=("lower",)), None)}
    findings = round_findings(bad, [], {N1})
    assert findings.missed() == 0 and findings.level() == logging.INFO


def applied_pairs(applied):
    """``(uuid, state as stored)`` pairs of ``{uuid: state dict, or None}``."""
    return [(u, None if s is None else json.dumps(s)) for u, s in applied.items()]


def test_differing_says_how():
    listed = {N1: node(N1, maintenance=True)}
    found = differing(listed, applied_pairs({N1: state(node(N1))}))
    assert set(found) == {N1}
    assert found[N1] == (node(N1, maintenance=True), json.dumps(state(node(N1))))
    assert differing(listed, applied_pairs({N1: state(node(N1, maintenance=True))})) == {}


@pytest.mark.parametrize("relist, confirming, every", [
    (True, False, True), (True, True, True),   # a round that lists compares every node
    (False, False, True),                      # so does the first round after a fresh listing
    (False, True, False),                      # a confirming round: what the last one found
])
def test_only_a_confirming_round_that_keeps_its_listing_compares_less_than_every_node(
        relist, confirming, every):
    assert round_compares_all(relist, confirming) is every


OURS = RoundRecord(1000.0, "c1", 2, 1001.0)


@pytest.mark.parametrize("replaced, ours, found, confirming", [
    (OURS, OURS, {N1: ()}, True),
    (RoundRecord(1000.0, "c1", None), OURS, {N1: ()}, True),  # as read back: same round
    (OURS, OURS, {}, False),                                    # it found nothing
    (RoundRecord(1040.0, "c2", 0, 1041.0), OURS, {N1: ()}, False),  # another's round came since
    (RoundRecord(1040.0, "c1", None), OURS, {N1: ()}, False),  # ours, never finished
    (None, OURS, {N1: ()}, False), (OURS, None, {N1: ()}, False),
])
def test_a_round_confirms_only_the_fleets_last_round_when_it_was_this_daemons(
        replaced, ours, found, confirming):
    assert confirming_round(replaced, ours, found) is confirming


def test_differing_compares_only_the_nodes_asked_for():
    listed = {N1: node(N1, maintenance=True), N2: node(N2, maintenance=True), N3: node(N3)}
    applied = applied_pairs({N1: state(node(N1)), N2: state(node(N2)), "gone": state(node(N1))})
    assert set(differing(listed, applied, only={N1, N3, "gone", "never"})) == {N1, N3, "gone"}
    assert set(differing(listed, applied)) == {N1, N2, N3, "gone"}


def test_differing_does_not_make_again_what_the_last_round_found_unchanged(monkeypatch):
    made = []
    real = provider_from_node
    monkeypatch.setattr("computed.daemon.listing.provider_from_node",
                        lambda n: made.append(n.uuid) or real(n))
    listed = {N1: node(N1, maintenance=True), N2: node(N2)}
    applied = applied_pairs({N1: state(node(N1))})
    first = differing(listed, applied)
    assert set(first) == {N1, N2} and sorted(made) == [N1, N2]
    made.clear()
    # Same node objects, same applied texts: each differs the same way, nothing made again.
    again = differing(listed, applied, first, only=first.keys())
    assert again == first and made == []
    # N2's report landed (a new applied text), N1 was re-read by an event (a new object).
    listed = {N1: node(N1, maintenance=True), N2: node(N2)}
    landed = applied_pairs({N1: state(node(N1)), N2: state(node(N2))})
    assert set(differing(listed, landed, first, only=first.keys())) == {N1}
    assert sorted(made) == [N1, N2]


def test_round_record_round_trips_and_garbage_is_no_record():
    for record in (RoundRecord(12.5, "c2", 4), RoundRecord(12.5, "c2", 4, 20.0)):
        assert RoundRecord.from_bytes(record.to_bytes()) == record
    for junk in (b"", b"\xff", b"[]", b'{"host": "c1"}', b'{"started": "x", "host": 1}'):
        assert RoundRecord.from_bytes(junk) is None


def test_differing_compares_with_what_computed_applied():
    listed = {N1: node(N1), N2: node(N2, maintenance=True), N3: node(N3, resource_class=None)}
    applied = {N1: state(node(N1)), N2: state(node(N2)), "gone": state(node(N1)),
               "deleted": None}
    # N2 changed with no event, "gone" vanished with no event; N3 has nothing to report.
    assert set(differing(listed, applied_pairs(applied))) == {N2, "gone"}
    assert set(differing({N1: node(N1, traits=("bad trait",))}, [])) == {N1}
    # Never applied, or applied and deleted since: a listed node with a provider differs.
    assert set(differing({N1: node(N1), N2: node(N2)}, [(N2, None)])) == {N1, N2}


def test_differing_reads_the_applied_states_once_one_at_a_time():
    listed = {N1: node(N1), N2: node(N2, maintenance=True)}
    pairs = iter(applied_pairs({N1: state(node(N1)), N2: state(node(N2))}))
    assert set(differing(listed, pairs)) == {N2}
    assert next(pairs, None) is None


# --- the stream watch ----------------------------------------------------------------------------

class Wall(Clock):
    pass


def watch_and_clocks():
    clock, wall = Clock(100.0), Wall(5000.0)
    return StreamWatch("c1", 5.0, 5.0, clock=clock, wall=wall), clock, wall


def beat(watch, clock, wall, lag=0.1, host="c1"):
    sent = wall.now
    clock.now += lag
    wall.now += lag
    watch.heard({"host": host, "sent": sent})


def test_the_stream_is_trusted_once_heartbeats_come_back_on_time():
    watch, clock, wall = watch_and_clocks()
    assert not watch.trusted()  # nothing heard yet
    beat(watch, clock, wall)
    assert watch.trusted()
    assert not watch.trusted_since(90.0)  # in doubt until the first heartbeat
    listed = clock.now + 0.5  # a listing that started after the first heartbeat came back
    clock.now += 1
    beat(watch, clock, wall)
    for _ in range(10):
        clock.now += 4.9
        wall.now += 4.9
        beat(watch, clock, wall)
    assert watch.trusted_since(listed)


def test_a_late_heartbeat_a_gap_or_silence_is_a_doubt_remembered_until_the_next_listing():
    watch, clock, wall = watch_and_clocks()
    beat(watch, clock, wall)
    listed = clock.now + 0.5
    clock.now, wall.now = clock.now + 1, wall.now + 1
    beat(watch, clock, wall, lag=6.0)  # lagging
    assert not watch.trusted()
    beat(watch, clock, wall)
    assert watch.trusted() and not watch.trusted_since(listed)
    listed = clock.now + 0.5
    clock.now, wall.now = clock.now + 11, wall.now + 11  # silence: more than 5 + 5 s
    assert not watch.trusted()
    beat(watch, clock, wall)  # back, after a gap: a new listing is due
    assert watch.trusted() and not watch.trusted_since(listed)
    assert watch.trusted_since(clock.now + 0.5)  # a listing after the gap ended


def test_other_hosts_heartbeats_and_garbage_do_not_count():
    watch, clock, wall = watch_and_clocks()
    beat(watch, clock, wall, host="c2")
    for junk in (None, [], {"host": "c1"}, {"host": "c1", "sent": "x"},
                 {"host": "c1", "sent": True}):
        watch.heard(junk)
    assert watch.last_heard is None and not watch.trusted()


class Notifier:
    def __init__(self, fail: bool = False):
        self.sent: list[tuple[str, dict]] = []
        self.fail = fail

    def info(self, ctxt, event_type, payload):
        if self.fail:
            raise ConnectionError("broker down")
        self.sent.append((event_type, payload))


class Hints:
    def __init__(self):
        self.hints: list[tuple[str, str]] = []

    def hint(self, uuid, event_type):
        self.hints.append((uuid, event_type))


def test_heartbeats_and_missed_announcements_travel_through_the_endpoint():
    watch, clock, wall = watch_and_clocks()
    notifier, hints = Notifier(), Hints()
    heartbeat = Heartbeat(notifier, "c1", wall=wall)
    heartbeat.beat()
    uuids = [f"{i:08d}-0000-0000-0000-000000000000" for i in range(MISSED_PER_MESSAGE + 1)]
    assert heartbeat.announce_missed(uuids)
    assert [e for e, _ in notifier.sent] == [HEARTBEAT_EVENT, MISSED_EVENT, MISSED_EVENT]
    endpoint = NotificationEndpoint(hints, watch)
    for event_type, payload in notifier.sent:
        endpoint.info({}, "computed.c1", event_type, payload, {})
    endpoint.info({}, "computed.c2", MISSED_EVENT, {"nodes": "not a list"}, {})
    assert watch.trusted()
    assert sorted(u for u, _ in hints.hints) == uuids
    assert {e for _, e in hints.hints} == {MISSED_EVENT}


def test_an_announcement_says_which_nodes_have_nothing_applied():
    notifier, hints = Notifier(), Hints()
    heartbeat = Heartbeat(notifier, "c1")
    uuids = [f"{i:08d}-0000-0000-0000-000000000000" for i in range(MISSED_PER_MESSAGE + 2)]
    unapplied = {uuids[0], uuids[-1]}
    assert heartbeat.announce_missed(uuids, unapplied)
    assert [p.get("unapplied") for _, p in notifier.sent] == [[uuids[0]], [uuids[-1]]]
    endpoint = NotificationEndpoint(hints)
    for event_type, payload in notifier.sent:
        endpoint.info({}, "computed.c1", event_type, payload, {})
    # a daemon of an earlier release sends no such list: every node is re-read everywhere
    endpoint.info({}, "computed.c2", MISSED_EVENT, {"nodes": [N1], "unapplied": "bad"}, {})
    kinds = dict(hints.hints)
    assert {u for u, e in kinds.items() if e == MISSED_UNAPPLIED} == unapplied
    assert kinds[uuids[1]] == MISSED_EVENT and kinds[N1] == MISSED_EVENT


def test_a_failed_send_is_logged_not_raised(caplog):
    heartbeat = Heartbeat(Notifier(fail=True), "c1")
    heartbeat.beat()
    assert not heartbeat.announce_missed([N1])
    assert "cannot send the event stream heartbeat" in caplog.text


# --- the round in ZooKeeper ----------------------------------------------------------------------

def test_one_daemon_wins_each_round_and_its_findings_set_the_next():
    zk, wall = OneZnode(), Wall(1000.0)
    c1, c2 = (ListingRound(zk, "/r", host, wall=wall) for host in ("c1", "c2"))
    mine = c1.claim(600.0, 30.0)
    assert mine == RoundRecord(1000.0, "c1") and c2.claim(600.0, 30.0) is None
    c1.finish(mine, 2)
    wall.now = 1031.0  # differences: the next round 30 s later, c1's (it ran the last)
    assert c2.claim(600.0, 30.0) is None
    wall.now = 1041.0  # c1 did not take it: c2 does
    theirs = c2.claim(600.0, 30.0)
    assert theirs is not None and c1.claim(600.0, 30.0) is None
    c2.finish(theirs, 0)
    wall.now = 1645.0
    assert c1.claim(600.0, 30.0) is None
    wall.now = 1651.0
    assert c1.claim(600.0, 30.0) is not None


def test_a_claim_says_which_round_it_replaced():
    zk, wall = OneZnode(), Wall(1000.0)
    c1, c2 = (ListingRound(zk, "/r", host, wall=wall) for host in ("c1", "c2"))
    first = c1.claim(600.0, 30.0)
    assert c1.replaced is None
    c1.finish(first, 2)
    wall.now = 1031.0
    assert c1.claim(600.0, 30.0) is not None
    assert c1.replaced == RoundRecord(1000.0, "c1", 2, 1000.0)
    c1.finish(RoundRecord(1031.0, "c1"), 1)
    wall.now = 1100.0
    theirs = c2.claim(600.0, 30.0)
    c2.finish(theirs, 1)
    wall.now = 1200.0
    assert c1.claim(600.0, 30.0) is not None and c1.replaced.host == "c2"


def test_a_round_claimed_concurrently_goes_to_one_daemon():
    zk, wall = OneZnode(), Wall(1000.0)
    c1, c2 = (ListingRound(zk, "/r", host, wall=wall) for host in ("c1", "c2"))
    c1.finish(c1.claim(600.0, 30.0), 0)
    wall.now = 2000.0
    read = zk.get_async("/r")
    c1_round = c1.claim(600.0, 30.0)  # c1 writes between c2's read and c2's write
    zk.get_async = lambda path: read
    assert c2.claim(600.0, 30.0) is None and c1_round is not None
    assert json.loads(zk.data)["host"] == "c1"


# --- the executor ------------------------------------------------------------------------------

class Nodes:
    """What Listings uses of FleetNodes."""

    def __init__(self, catalog):
        self.catalog = catalog
        self.refreshes = 0
        self.provider_reads = 0

    def refresh(self):
        self.refreshes += 1
        self.catalog.refresh()
        return False

    def refresh_providers(self):
        self.provider_reads += 1
        return False


class TrustedWatch:
    def __init__(self, ok=True):
        self.ok = ok

    def trusted(self):
        return self.ok

    def trusted_since(self, since):
        return self.ok


def listings(monkeypatch, watch, applied=()):
    clock = Clock()
    ironic = Ironic(node(N1), node(N2))
    catalog = NodeCatalog(ironic, clock=clock)
    nodes = Nodes(catalog)
    zk = OneZnode()
    notifier = Notifier()
    rows = [(u, json.dumps(s)) for u, s in applied]
    monkeypatch.setattr("computed.db.providers.applied_states",
                        lambda engine, uuids=None: iter(rows))
    result = Listings(nodes, catalog, None, 30.0, 600.0, watch,
                      None if watch is None else ListingRound(zk, "/r", "c1", wall=clock),
                      Heartbeat(notifier, "c1"), clock=clock)
    return result, nodes, clock, notifier, ironic


def test_without_notifications_every_daemon_lists_every_interval(monkeypatch):
    lister, nodes, clock, _, _ = listings(monkeypatch, None)
    assert lister.step() == (False, 30.0) and nodes.refreshes == 1
    clock.now += 10
    assert lister.step() == (False, 20.0) and nodes.refreshes == 1
    clock.now += 20
    lister.step()
    assert nodes.refreshes == 2


def test_while_events_flow_one_round_lists_for_the_fleet_and_announces_what_events_missed(
        monkeypatch):
    watch = TrustedWatch(False)
    lister, nodes, clock, notifier, ironic = listings(
        monkeypatch, watch, applied=[(N1, state(node(N1))), (N2, state(node(N2)))])
    lister.step()  # the first listing waits for the stream ...
    assert nodes.refreshes == 0
    clock.now += 30
    lister.step()  # ... at most 30 s: the daemon's own first listing, untrusted
    assert nodes.refreshes == 1
    watch.ok = True
    clock.now += 30  # its own listing is 30 s old: the round lists again
    changed, wait = lister.step()  # first round: nobody listed for the fleet yet
    assert nodes.refreshes == 2 and wait == 5.0 and notifier.sent == []
    for _ in range(100):  # 500 s: nothing due
        clock.now += 5
        lister.step()
    assert nodes.refreshes == 2 and nodes.provider_reads == 17  # every 30 s
    ironic.nodes[N2] = node(N2, maintenance=True)  # changed, no event
    clock.now += 100
    lister.step()
    assert nodes.refreshes == 3 and notifier.sent == []  # seen once: maybe a report under way
    clock.now += 30  # a round that found differences: the next one 30 s later, which compares
    lister.step()    # the listing it made (no report came: N2 still differs) without listing
    assert nodes.refreshes == 3
    assert notifier.sent == [(MISSED_EVENT, {"host": "c1", "nodes": [N2]})]
    assert lister.last_missed == 1
    watch.ok = False  # the stream in doubt: this daemon lists on its own again
    clock.now += 30
    lister.step()
    assert nodes.refreshes == 4


def test_rounds_during_a_cold_start_compare_one_listing_until_the_reports_land(monkeypatch):
    # Nothing applied yet (every report on its way): the rounds every 30 s confirm or clear
    # against the applied states, not against new listings of every node.
    lister, nodes, clock, notifier, _ = listings(monkeypatch, TrustedWatch(True))
    lister.step()  # the first listing, trusted
    lister.step()  # the first round compares it: both nodes differ (never applied)
    assert nodes.refreshes == 1 and notifier.sent == []
    applied = [(n.uuid, json.dumps(state(n))) for n in (node(N1), node(N2))]
    monkeypatch.setattr("computed.db.providers.applied_states",
                        lambda engine, uuids=None: iter(applied))
    for _ in range(6):  # 30 s: the next round clears both (the reports landed), no listing
        clock.now += 5
        lister.step()
    assert nodes.refreshes == 1 and notifier.sent == [] and lister.last_missed == 0
    for _ in range(120):  # 600 s: nothing differs, so the next round is the audit's, which lists
        clock.now += 5
        lister.step()
    assert nodes.refreshes == 2 and notifier.sent == []


def test_reports_not_applied_yet_are_announced_without_a_warning(monkeypatch, caplog):
    # A cold start whose reporters are behind: nothing applied at two rounds in a row. The
    # nodes are announced (a first report may have been lost), but nothing changed with no
    # event: no warning (it was logged every 30 s through a cold start).
    caplog.set_level(logging.INFO, logger="computed.daemon.listing")
    lister, nodes, clock, notifier, _ = listings(monkeypatch, TrustedWatch(True))
    lister.step()  # the first listing, trusted
    lister.step()  # the first round compares it: both nodes differ (never applied)
    for _ in range(6):  # 30 s: the round that confirms them
        clock.now += 5
        lister.step()
    assert notifier.sent == [(MISSED_EVENT, {"host": "c1", "nodes": [N1, N2],
                                             "unapplied": [N1, N2]})]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert "0 changed with no event" in caplog.text
    assert "2 with no provider applied yet" in caplog.text


def test_a_node_that_cannot_make_a_provider_is_announced_once_and_rounds_go_back_to_rare(
        monkeypatch, caplog):
    # N2 was reported, then Ironic gave it a trait Placement refuses, with no event. The round
    # that confirms it announces it once (its owner re-reads it and logs why it cannot report
    # it); after that the rounds neither announce it nor warn, and come every ``rare`` seconds,
    # not every ``frequent`` (it is no missed change: it made every daemon re-read it every 30 s).
    caplog.set_level(logging.INFO, logger="computed.daemon.listing")
    lister, nodes, clock, notifier, ironic = listings(
        monkeypatch, TrustedWatch(True),
        applied=[(N1, state(node(N1))), (N2, state(node(N2)))])
    ironic.nodes[N2] = node(N2, traits=("lower",))
    lister.step()  # the first listing, trusted
    for _ in range(8):  # the first round finds N2, the one 30 s later confirms and announces it
        clock.now += 5
        lister.step()
    assert notifier.sent == [(MISSED_EVENT, {"host": "c1", "nodes": [N2]})]
    caplog.clear()
    for _ in range(100):  # 500 s: one round withholds it, the next is not due before ``rare``
        clock.now += 5
        lister.step()
    assert notifier.sent == [(MISSED_EVENT, {"host": "c1", "nodes": [N2]})]
    assert caplog.text.count("fleet-wide listing found") == 1
    assert "1 that cannot make a provider" in caplog.text
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_confirming_round_compares_only_what_the_last_one_found(monkeypatch):
    # 10 nodes, 8 applied; N1 changed in Ironic with no event. The first round compares every
    # node: N1 and the 2 never applied differ. The round that confirms them compares those 3
    # alone: it makes no provider state (nothing about them changed) and does not look at N2,
    # which an event changed meanwhile (its owner heard that event and reports it).
    others = [f"{i:08d}-0000-0000-0000-000000000000" for i in range(7)]
    unapplied = others[5:]
    lister, nodes, clock, notifier, ironic = listings(monkeypatch, TrustedWatch(True))
    ironic.nodes[N1] = node(N1, maintenance=True)
    for u in others:
        ironic.nodes[u] = node(u)
    ironic.nodes[N3] = node(N3)
    asked = []
    rows = dict(applied_pairs({N1: state(node(N1)), N2: state(node(N2)), N3: state(node(N3)),
                               **{u: state(node(u)) for u in others[:5]}}))

    def applied_states(engine, uuids=None):
        asked.append(None if uuids is None else set(uuids))
        return iter([(u, t) for u, t in rows.items() if uuids is None or u in uuids])
    monkeypatch.setattr("computed.db.providers.applied_states", applied_states)
    made = []
    real = provider_from_node
    monkeypatch.setattr("computed.daemon.listing.provider_from_node",
                        lambda n: made.append(n.uuid) or real(n))
    lister.step()  # the first listing, trusted
    lister.step()  # the first round compares it, every node
    assert nodes.refreshes == 1 and asked == [None] and len(made) == 10
    nodes.catalog.update(N2, node(N2, maintenance=True))  # an event: its owner reports it
    made.clear()
    for _ in range(6):  # 30 s: the round that confirms the first's findings
        clock.now += 5
        lister.step()
    assert nodes.refreshes == 1 and made == [] and asked[1] == {N1, *unapplied}
    assert notifier.sent == [(MISSED_EVENT, {"host": "c1", "nodes": sorted([N1, *unapplied]),
                                             "unapplied": sorted(unapplied)})]
    assert lister.compared == 3


# --- one listing at start (issue 27 item 3) ----------------------------------------------------

class SlowNodes(Nodes):
    """A listing that takes ``seconds``, with this daemon's heartbeats coming back during it."""

    def __init__(self, catalog, clock, wall, watch, seconds):
        super().__init__(catalog)
        self.clock, self.wall, self.watch, self.seconds = clock, wall, watch, seconds

    def refresh(self):
        for _ in range(int(self.seconds // 5)):
            self.clock.now += 5
            self.wall.now += 5
            beat(self.watch, self.clock, self.wall)
        return super().refresh()


def started(monkeypatch, seconds=80.0):
    """A daemon just started, with the real StreamWatch and a listing of ``seconds``."""
    clock, wall = Clock(100.0), Wall(5000.0)
    watch = StreamWatch("c1", 5.0, 5.0, clock=clock, wall=wall)
    catalog = NodeCatalog(Ironic(node(N1), node(N2)), clock=clock)
    nodes = SlowNodes(catalog, clock, wall, watch, seconds)
    rows = [(n.uuid, json.dumps(state(n))) for n in (node(N1), node(N2))]  # every report applied
    monkeypatch.setattr("computed.db.providers.applied_states",
                        lambda engine, uuids=None: iter(rows))
    notifier = Notifier()
    lister = Listings(nodes, catalog, None, 30.0, 600.0, watch,
                      ListingRound(OneZnode(), "/r", "c1", wall=wall),
                      Heartbeat(notifier, "c1", wall=wall, watch=watch), clock=clock)
    return lister, nodes, watch, clock, wall


def test_one_listing_at_start_when_the_stream_is_healthy_from_before_it(monkeypatch):
    lister, nodes, watch, clock, wall = started(monkeypatch)
    assert lister.step() == (False, FIRST_LOOK) and nodes.refreshes == 0  # no heartbeat back
    clock.now += 1.0
    beat(watch, clock, wall)  # the listener is bound: its own heartbeat came back
    clock.now += FIRST_LOOK
    _, wait = lister.step()  # the first listing (80 s, heartbeats on time throughout)
    assert nodes.refreshes == 1
    # After the first listing completes with the stream healthy since before it began, no
    # second listing is due, and the fleet's first round compares that listing (new fleet).
    # The thread sleeps what each step answers (the next look must come while the listing is
    # fresh: after a wait of node_refresh_interval the round listed again).
    waited = 0.0
    while waited < 300:
        clock.now += wait
        wall.now += wait
        waited += wait
        beat(watch, clock, wall)
        _, wait = lister.step()
    assert nodes.refreshes == 1 and lister.listings == 1


def test_a_daemon_whose_stream_never_proves_itself_lists_after_one_interval(monkeypatch):
    lister, nodes, watch, clock, _ = started(monkeypatch, seconds=0.0)
    waited = 0.0
    while True:
        _, wait = lister.step()
        if nodes.refreshes:
            break
        clock.now += wait
        waited += wait
    assert 30.0 <= waited < 30.0 + 2 * FIRST_LOOK
    lister.step()  # still untrusted: the next own listing 30 s after the first
    assert nodes.refreshes == 1


def test_a_doubt_during_the_first_listing_still_costs_a_second_one(monkeypatch):
    lister, nodes, watch, clock, wall = started(monkeypatch, seconds=0.0)
    beat(watch, clock, wall)
    clock.now += FIRST_LOOK
    lister.step()
    assert nodes.refreshes == 1
    clock.now += 1
    wall.now += 1
    beat(watch, clock, wall, lag=6.0)  # late: events may be late or lost
    clock.now += 30
    wall.now += 30
    beat(watch, clock, wall)
    lister.step()
    assert nodes.refreshes == 2


def test_heartbeats_are_sent_every_second_until_the_first_comes_back():
    watch, clock, wall = watch_and_clocks()
    heartbeat = Heartbeat(Notifier(), "c1", wall=wall, watch=watch)
    waits = []
    for _ in range(3):
        heartbeat.beat()
        waits.append(heartbeat.next_wait(5.0))
    beat(watch, clock, wall)
    heartbeat.beat()
    waits.append(heartbeat.next_wait(5.0))
    assert waits == [START_BEAT, START_BEAT, START_BEAT, 5.0]
    assert Heartbeat(Notifier(), "c1").next_wait(5.0) == 5.0  # no watch: the interval
