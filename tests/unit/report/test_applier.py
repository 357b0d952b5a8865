"""The reporter's rules, with Placement and ZooKeeper replaced by fakes and the database a
fresh sqlite file."""

import pytest

from computed.db import common as db_common
from computed.db import providers as db_providers
from computed.placement.client import DeleteOutcome
from computed.placement.http import PlacementRequestFailed, PlacementUnavailable
from computed.providers.report import Report
from computed.reporter.applier import ReportApplier, newest_per_provider, split_new
from tests import database

U1 = "11111111-1111-1111-1111-111111111111"
U2 = "22222222-2222-2222-2222-222222222222"
U3 = "33333333-3333-3333-3333-333333333333"


def state(uuid=U1, reserved=0, rc="CUSTOM_GOLD"):
    return {"uuid": uuid, "name": uuid, "resource_class": rc, "reserved": reserved,
            "traits": []}


class FakePlacement:
    def __init__(self):
        self.providers = {}
        self.generations = {}
        self.allocations = set()
        self.down = False
        self.created = []
        self.reshaped = []

    def create(self, provider):
        if self.down:
            raise PlacementUnavailable(provider.uuid, "connection refused")
        self.created.append(provider.uuid)
        return provider.uuid not in self.providers

    def set_new_inventories(self, states):
        self.reshaped.append([provider.uuid for provider in states])
        return []

    def apply(self, provider, assume_new=False, last_applied=None):
        if self.down:
            raise PlacementUnavailable(provider.uuid, "connection refused")
        self.providers[provider.uuid] = provider
        self.generations[provider.uuid] = self.generations.get(provider.uuid, 0) + 1
        return True

    def generation(self, uuid):
        return self.generations.get(uuid) if uuid in self.providers else None

    def delete(self, uuid):
        if uuid in self.allocations:
            return DeleteOutcome.KEPT
        if self.providers.pop(uuid, None):
            return DeleteOutcome.DELETED
        return DeleteOutcome.ABSENT


class FakeClaims:
    """The live claims, as ZooKeeper would answer; ``down`` when it cannot be read.

    ``epochs`` maps a node to its claim epoch, held by ``hosts.get(node, "c1")``; a host of None
    is a claim whose data cannot be parsed."""

    def __init__(self, epochs):
        self.epochs = dict(epochs)
        self.hosts = {}
        self.down = False

    def claim_holders(self, nodes):
        if self.down:
            raise ConnectionError("zookeeper down")
        return {node: (self.epochs[node], self.hosts.get(node, "c1"))
                for node in nodes if node in self.epochs}


def last_applied(engine, uuid):
    row = database.get_provider(engine, uuid)
    return None if row is None else (row.claim_epoch, row.seq)


@pytest.fixture
def world(engine):
    placement, claims = FakePlacement(), FakeClaims({U1: 7, U2: 9})
    applier = ReportApplier(placement, claims, engine, workers=2)
    yield placement, engine, claims.epochs, applier
    applier.close()


def report(uuid=U1, epoch=7, seq=1, st="default", host="c1"):
    return Report(uuid, epoch, seq, host, state(uuid) if st == "default" else st).to_dict()


def test_applied_then_duplicate_and_older_are_stale(world):
    placement, engine, _, applier = world
    assert applier.apply([report(seq=5)]) == [[U1, 5, "applied"]]
    assert placement.providers[U1].resource_class == "CUSTOM_GOLD"
    # The generation Placement answered is recorded: the resync compares it with the listing.
    assert database.get_provider(engine, U1).placement_generation == 1
    assert applier.apply([report(seq=5), report(seq=4)]) == [[U1, 5, "stale"], [U1, 4, "stale"]]


def test_report_from_a_fenced_out_owner_is_refused(world):
    placement, _, claims, applier = world
    claims[U1] = 12  # the node was claimed again by someone else
    assert applier.apply([report(epoch=7, seq=99)]) == [[U1, 99, "fenced"]]
    del claims[U1]  # released: nobody holds it
    assert applier.apply([report(epoch=7, seq=100)]) == [[U1, 100, "fenced"]]
    assert placement.providers == {}


def test_report_naming_another_host_with_the_right_epoch_is_fenced(engine):
    placement, claims = FakePlacement(), FakeClaims({U1: 7})
    applier = ReportApplier(placement, claims, engine)
    try:
        # Anyone on the bus can read the claim epoch from ZooKeeper: the host must match too.
        assert applier.apply([report(epoch=7, seq=5, host="intruder")]) == [[U1, 5, "fenced"]]
        assert placement.providers == {} and last_applied(engine, U1) is None
        assert applier.apply([report(epoch=7, seq=5)]) == [[U1, 5, "applied"]]
        assert applier.counts["fenced"] == 1
    finally:
        applier.close()


def test_a_claim_whose_data_cannot_be_parsed_fences_every_report(engine):
    placement, claims = FakePlacement(), FakeClaims({U1: 7})
    claims.hosts[U1] = None
    applier = ReportApplier(placement, claims, engine)
    try:
        assert applier.apply([report(epoch=7, seq=5)]) == [[U1, 5, "fenced"]]
        assert placement.providers == {} and last_applied(engine, U1) is None
    finally:
        applier.close()


def test_a_seq_far_ahead_of_the_clock_is_invalid_and_later_reports_still_apply(engine):
    now = 1_700_000_000.0  # the reporter's wall clock, in seconds
    placement, claims = FakePlacement(), FakeClaims({U1: 7})
    applier = ReportApplier(placement, claims, engine, clock=lambda: now)
    try:
        assert applier.apply([report(seq=2**62)]) == [[U1, 2**62, "invalid"]]
        assert placement.providers == {} and last_applied(engine, U1) is None
        honest = int(now * 1000) + 50_000  # a sender that started now and offered 50,000
        assert applier.apply([report(seq=honest)]) == [[U1, honest, "applied"]]
        assert last_applied(engine, U1) == (7, honest)
    finally:
        applier.close()


def test_delete_is_refused_while_the_provider_has_allocations(world):
    placement, engine, _, applier = world
    applier.apply([report(seq=1)])
    placement.allocations.add(U1)
    assert applier.apply([report(seq=2, st=None)]) == [[U1, 2, "kept"]]
    assert U1 in placement.providers and last_applied(engine, U1) == (7, 1)
    placement.allocations.clear()
    assert applier.apply([report(seq=3, st=None)]) == [[U1, 3, "applied"]]
    assert U1 not in placement.providers


def test_placement_down_answers_failed_and_the_report_can_be_resent(world):
    placement, _, _, applier = world
    placement.down = True
    assert applier.apply([report(seq=1)]) == [[U1, 1, "failed"]]
    placement.down = False
    assert applier.apply([report(seq=1)]) == [[U1, 1, "applied"]]


def test_zookeeper_unreachable_applies_nothing(world):
    placement, engine, _, _ = world
    claims = FakeClaims({U1: 7})
    claims.down = True
    applier = ReportApplier(placement, claims, engine)
    try:
        assert applier.apply([report(seq=1)]) == [[U1, 1, "failed"]]
    finally:
        applier.close()
    assert placement.providers == {} and last_applied(engine, U1) is None


@pytest.mark.parametrize("bad", [
    "not a list",
    None,
])
def test_a_malformed_message_is_dropped(world, bad):
    *_, applier = world
    assert applier.apply(bad) == []
    assert applier.counts["invalid"] == 1


def test_malformed_reports_in_a_batch_do_not_spoil_the_others(world):
    placement, _, _, applier = world
    bad_state = dict(state(U2), reserved=7)
    answers = applier.apply([report(seq=1), {"garbage": True},
                             report(U2, epoch=9, seq=1, st=bad_state)])
    assert [U1, 1, "applied"] in answers and [U2, 1, "invalid"] in answers
    assert list(placement.providers) == [U1]
    assert applier.counts["invalid"] == 2


def test_a_placement_that_does_not_answer_fails_the_rest_of_the_batch_at_once(engine):
    """Each report would wait the whole HTTP timeout: the first one without an answer ends the
    batch (everything answered ``failed``, resent later) so that the reporter answers the call
    before the daemon gives up on it."""
    nodes = [f"33333333-3333-3333-3333-{i:012d}" for i in range(20)]
    placement = FakePlacement()
    tried = []

    def no_answer(provider, assume_new=False, last_applied=None):
        tried.append(provider.uuid)
        raise PlacementUnavailable(provider.uuid, "GET /resource_providers",
                                   detail="no answer from Placement within [placement] timeout")

    placement.apply = no_answer
    applier = ReportApplier(placement, FakeClaims({node: 7 for node in nodes}), engine,
                            workers=1)
    try:
        answers = applier.apply([report(node) for node in nodes])
    finally:
        applier.close()
    assert sorted(answers) == sorted([node, 1, "failed"] for node in nodes)
    assert len(tried) == 1
    assert all(last_applied(engine, node) is None for node in nodes)


def test_a_placement_error_answer_does_not_fail_the_rest_of_the_batch(world):
    """A 5xx about one provider is that provider's problem: the others are still tried."""
    placement, engine, _, applier = world
    real = placement.apply

    def error_for_u1(provider, assume_new=False, last_applied=None):
        if provider.uuid == U1:
            raise PlacementUnavailable(provider.uuid, "PUT", status=500)
        return real(provider, assume_new, last_applied)

    placement.apply = error_for_u1
    answers = applier.apply([report(U1), report(U2, epoch=9)])
    assert sorted(answers) == [[U1, 1, "failed"], [U2, 1, "applied"]]


def test_a_report_placement_itself_fails_is_invalid_once_counted_and_logged(world, caplog):
    """A 500 the request causes (PlacementRequestFailed) is not 'Placement unavailable': the
    report is answered invalid (its sender does not resend it for ever), one line names the
    provider, and it is counted; the batch's other reports are applied."""
    placement, engine, _, applier = world
    real = placement.apply

    def nul_for_u1(provider, assume_new=False, last_applied=None):
        if provider.uuid == U1:
            raise PlacementRequestFailed(provider.uuid, "POST /resource_providers", status=500,
                                         detail="the request is the cause")
        return real(provider, assume_new, last_applied)

    placement.apply = nul_for_u1
    answers = applier.apply([report(U1), report(U2, epoch=9)])
    assert sorted(answers) == [[U1, 1, "invalid"], [U2, 1, "applied"]]
    assert last_applied(engine, U1) is None
    assert applier.counts["invalid"] == 1 and applier.counts["placement_refused"] == 1
    lines = [r.getMessage() for r in caplog.records if U1 in r.getMessage()]
    assert len(lines) == 1 and "not resent" in lines[0] and "unavailable" not in lines[0]


# -- batches (issue 13 item 9) -------------------------------------------------------------------

def test_newest_per_provider_keeps_the_newest_report_of_each():
    reports = [Report(U1, 7, 3, "c1", None), Report(U2, 9, 1, "c1", None),
               Report(U1, 8, 1, "c1", None), Report(U1, 7, 9, "c1", None),
               Report(U2, 9, 1, "c1", None)]
    assert newest_per_provider(reports) == {U1: 2, U2: 1}


def test_split_new_creates_only_never_applied_providers_with_a_state():
    rows = {U1: None, U2: None, U3: "a row"}
    keys = [db_providers.ReportKey(u, 7, 1, "c1") for u in (U1, U2, U3)]
    newer = [(key, rows[key.uuid]) for key in keys]
    fresh, alone = split_new(newer, {U1: "state", U2: None, U3: "state"})
    assert fresh == [keys[0]]
    assert alone == [(keys[1], None), (keys[2], "a row")]


def test_a_batch_creates_new_providers_then_sets_their_inventories_at_once(world):
    placement, engine, claims, applier = world
    claims[U3] = 7
    assert applier.apply([report(U1, seq=2)]) == [[U1, 2, "applied"]]
    placement.created.clear(), placement.reshaped.clear()
    answers = applier.apply([report(U1, seq=3), report(U2, epoch=9), report(U3)])
    assert sorted(answers) == sorted([[U1, 3, "applied"], [U2, 1, "applied"],
                                      [U3, 1, "applied"]])
    # U1 was applied before: written alone, never created again.
    assert sorted(placement.created) == sorted([U2, U3])
    assert [sorted(batch) for batch in placement.reshaped] == [sorted([U2, U3])]
    assert [last_applied(engine, u) for u in (U1, U2, U3)] == [(7, 3), (9, 1), (7, 1)]


def test_older_reports_of_a_provider_in_one_call_answer_after_the_newest(world):
    placement, engine, _, applier = world
    answers = applier.apply([report(seq=4), report(seq=6), report(seq=5)])
    assert answers == [[U1, 4, "stale"], [U1, 6, "applied"], [U1, 5, "stale"]]
    assert last_applied(engine, U1) == (7, 6)
    placement.down = True
    answers = applier.apply([report(seq=8), report(seq=7)])
    assert answers == [[U1, 8, "failed"], [U1, 7, "failed"]]  # nothing applied: both resent
    assert last_applied(engine, U1) == (7, 6)


def test_a_provider_that_exists_already_is_written_alone(world):
    placement, engine, _, applier = world
    placement.providers[U1] = "left over"  # created by an earlier attempt whose commit failed
    assert applier.apply([report(U1), report(U2, epoch=9)]) == [[U1, 1, "applied"],
                                                                 [U2, 1, "applied"]]
    assert placement.reshaped == [[U2]]
    assert placement.providers[U1].resource_class == "CUSTOM_GOLD"


def test_a_batch_whose_commit_fails_answers_failed_and_records_nothing(world, monkeypatch):
    placement, engine, _, applier = world

    def broken(*args, **kwargs):
        raise db_common.DatabaseError("commit failed")

    monkeypatch.setattr(db_providers, "apply_reports_if_newer", broken)
    assert applier.apply([report(U1), report(U2, epoch=9)]) == [[U1, 1, "failed"],
                                                                 [U2, 1, "failed"]]
