"""The resync: the pure comparison (rows + Placement's listing -> what to repair), property-tested,
and the executor with Placement, ZooKeeper and the fleet lock replaced by fakes, the database a
fresh sqlite file."""

from __future__ import annotations

import datetime
import json
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kazoo.exceptions import NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from computed.db import providers as db_providers
from computed.fleet.zookeeper import NoAnswer
from computed.placement.http import PlacementError, PlacementUnavailable
from computed.reporter import resync
from computed.reporter.resync import Drift, Outcome, Resync, plan
from tests import database

T0 = datetime.datetime(2026, 12, 1)


def row(uuid, generation=5, deleted=False, claim_epoch=7, seq=1):
    return db_providers.ProviderRow(uuid=uuid, claim_epoch=claim_epoch, seq=seq, host="c1",
                                    state=None if deleted else '{"reserved": 0}',
                                    deleted=deleted, updated_at=T0,
                                    placement_generation=None if deleted else generation)


# -- the pure comparison --------------------------------------------------------------------

def test_each_kind_of_drift_and_what_is_left_alone():
    rows = [row("same"), row("gone"), row("moved"), row("old", generation=None),
            row("deleted-present", deleted=True), row("deleted-absent", deleted=True)]
    listing = {"same": 5, "moved": 6, "old": 2, "deleted-present": 9, "foreign": 1}
    result = plan(rows, listing, max_repairs=10)
    assert [(r.uuid, r.drift) for r in result.repairs] == [
        ("gone", Drift.MISSING), ("moved", Drift.CHANGED), ("old", Drift.UNRECORDED)]
    assert result.checked == 4  # the deleted rows are not checked; "foreign" is not computed's
    assert result.drift == {Drift.MISSING: 1, Drift.CHANGED: 1, Drift.UNRECORDED: 1}
    assert result.deferred == 0
    assert result.repairs[1].claim_epoch == 7 and result.repairs[1].seq == 1


def test_the_cap_keeps_missing_first_and_counts_all_drift():
    rows = [row(f"c{i}") for i in range(5)] + [row(f"m{i}") for i in range(3)]
    listing = {f"c{i}": 6 for i in range(5)}
    result = plan(rows, listing, max_repairs=4)
    assert [r.uuid for r in result.repairs] == ["m0", "m1", "m2", "c0"]
    assert result.drift[Drift.MISSING] == 3 and result.drift[Drift.CHANGED] == 5
    assert result.deferred == 4


rows_strategy = st.lists(
    st.tuples(st.sampled_from("abcdefghij"), st.one_of(st.none(), st.integers(0, 3)),
              st.booleans()),
    unique_by=lambda t: t[0]).map(lambda ts: [row(u, g, d) for u, g, d in ts])
listing_strategy = st.dictionaries(st.sampled_from("abcdefghijxyz"), st.integers(0, 3))


@given(rows_strategy, listing_strategy, st.integers(0, 12))
def test_plan_properties(rows, listing, cap):
    result = plan(rows, listing, cap)
    live = {r.uuid: r for r in rows if not r.deleted}
    drifted = {u for u, r in live.items()
               if listing.get(u) is None or listing[u] != r.placement_generation}
    # Exactly the live rows whose provider is absent or whose generation is not the recorded
    # one drift; never a deleted row, never a provider computed did not report.
    assert result.checked == len(live)
    assert sum(result.drift.values()) == len(drifted)
    assert {r.uuid for r in result.repairs} <= drifted
    assert len(result.repairs) == min(cap, len(drifted))
    assert result.deferred == len(drifted) - len(result.repairs)
    for repair in result.repairs:
        want = (Drift.MISSING if repair.uuid not in listing else
                Drift.UNRECORDED if live[repair.uuid].placement_generation is None else
                Drift.CHANGED)
        assert repair.drift is want
    # Missing ones are never deferred while a lesser kind is repaired.
    kinds = [r.drift for r in result.repairs]
    assert kinds == sorted(kinds, key=list(Drift).index)
    if any(r.drift is not Drift.MISSING for r in result.repairs):
        assert kinds.count(Drift.MISSING) == result.drift[Drift.MISSING]


# -- the executor ---------------------------------------------------------------------------

U1 = "11111111-1111-1111-1111-111111111111"
U2 = "22222222-2222-2222-2222-222222222222"
U3 = "33333333-3333-3333-3333-333333333333"


def state(uuid, reserved=0, traits=()):
    return {"uuid": uuid, "name": uuid, "resource_class": "CUSTOM_GOLD", "reserved": reserved,
            "traits": list(traits)}


class FakePlacement:
    """Providers as ``{uuid: (state dict, generation)}``; counts requests as the real client
    would (one listing; a verify re-reads with two GETs and writes what differs)."""

    def __init__(self):
        self.providers = {}
        self.request_count = 0
        self.down = False
        self.applied = []

    def put_by_hand(self, uuid, **changes):
        old, generation = self.providers[uuid]
        self.providers[uuid] = ({**old, **changes}, generation + 1)

    def generations(self):
        if self.down:
            raise PlacementUnavailable(None, "list providers")
        self.request_count += 1
        return {uuid: generation for uuid, (_, generation) in self.providers.items()}

    def apply(self, provider, verify=False):
        if self.down:
            raise PlacementUnavailable(provider.uuid, "apply")
        assert verify
        self.applied.append(provider.uuid)
        self.request_count += 2
        wanted = provider.to_dict()
        have = self.providers.get(provider.uuid)
        if have is not None and have[0] == wanted:
            return False
        self.request_count += 1
        self.providers[provider.uuid] = (wanted, (have[1] if have else 0) + 1)
        return True

    def generation(self, uuid):
        return self.providers[uuid][1] if uuid in self.providers else None


class FakeClaims:
    """The live claims: ``{node: claim epoch}`` held by "c1", unless ``hosts`` names another."""

    def __init__(self, epochs, hosts=None):
        self.epochs = dict(epochs)
        self.hosts = dict(hosts or {})

    def claim_holders(self, nodes):
        return {node: (self.epochs[node], self.hosts.get(node, "c1"))
                for node in nodes if node in self.epochs}


def report(engine, placement, uuid, seq=1, claim_epoch=7, **kw):
    """What the applier does: apply the state, record it with Placement's generation."""
    st_ = state(uuid, **kw)
    placement.providers[uuid] = (st_, placement.providers.get(uuid, (None, 0))[1] + 1)
    assert database.apply_report_if_newer(
        engine, uuid, claim_epoch, seq, "c1",
        lambda row: db_providers.Applied(json.dumps(st_, sort_keys=True),
                                         placement.providers[uuid][1]))


def make(engine, placement, claims=None, max_repairs=100, **kw):
    forgotten = []
    runner = Resync(placement, claims or FakeClaims({U1: 7, U2: 7, U3: 7}), engine,
                    provider_lock=lambda uuid: threading.Lock(), interval=60,
                    max_repairs=max_repairs, forget=forgotten.append, **kw)
    return runner, forgotten


def test_a_quiet_round_costs_one_request(engine):
    placement = FakePlacement()
    for uuid in (U1, U2, U3):
        report(engine, placement, uuid)
    runner, _ = make(engine, placement)
    result = runner.run_once()
    assert result.requests == 1 and result.plan.checked == 3 and not result.plan.repairs
    assert "3 provider(s) checked" in result.line() and "1 Placement request(s)" in result.line()
    assert runner.counts["rounds_done"] == 1 and runner.counts["requests"] == 1


def test_missing_and_changed_are_repaired_and_generations_recorded(engine):
    placement = FakePlacement()
    for uuid in (U1, U2, U3):
        report(engine, placement, uuid, traits=["CUSTOM_A"])
    del placement.providers[U1]                      # deleted by hand
    placement.put_by_hand(U2, traits=["CUSTOM_B"])   # retraited by hand
    placement.put_by_hand(U3, reserved=1)            # reserved by hand
    runner, forgotten = make(engine, placement)
    result = runner.run_once()
    assert result.plan.drift == {Drift.MISSING: 1, Drift.CHANGED: 2, Drift.UNRECORDED: 0}
    assert result.outcomes == {Outcome.REPAIRED: 3}
    for uuid in (U1, U2, U3):
        assert placement.providers[uuid][0] == state(uuid, traits=["CUSTOM_A"])
        assert database.get_provider(engine, uuid).placement_generation == \
            placement.providers[uuid][1]
    assert sorted(forgotten) == [U1, U2, U3]
    # The next round finds nothing: the recorded generations are Placement's.
    assert runner.run_once().requests == 1
    assert runner.counts["repaired"] == 3 and runner.counts["drift_changed"] == 2


def test_a_bump_without_a_change_is_verified_not_written(engine):
    placement = FakePlacement()
    report(engine, placement, U1)
    old, generation = placement.providers[U1]
    placement.providers[U1] = (old, generation + 1)  # an allocation bumps the generation
    runner, _ = make(engine, placement)
    result = runner.run_once()
    assert result.outcomes == {Outcome.VERIFIED: 1}
    assert result.requests == 3  # the listing and a re-read, no write
    assert database.get_provider(engine, U1).placement_generation == generation + 1


def test_unrecorded_rows_are_verified_once(engine):
    placement = FakePlacement()
    report(engine, placement, U1)
    # As written before migration 0003: no generation.
    assert database.apply_report_if_newer(engine, U1, 7, 2, "c1", lambda row: json.dumps(
        state(U1), sort_keys=True))
    runner, _ = make(engine, placement)
    assert runner.run_once().plan.drift[Drift.UNRECORDED] == 1
    assert runner.run_once().plan.drift[Drift.UNRECORDED] == 0


def test_fenced_deleted_and_moved_rows_are_left_alone(engine):
    placement = FakePlacement()
    for uuid in (U1, U2, U3):
        report(engine, placement, uuid)
    # U1: its claim is another's now (the new owner will report it).
    del placement.providers[U1]
    # U2: its last report was a delete but the provider was kept (allocations).
    assert database.apply_report_if_newer(engine, U2, 7, 2, "c1", lambda row: None)
    placement.put_by_hand(U2, reserved=1)
    # U3: changed by hand, and a newer report lands between the comparison and the repair.
    placement.put_by_hand(U3, reserved=1)
    claims = FakeClaims({U1: 8, U2: 7, U3: 7})
    runner, _ = make(engine, placement, claims)
    real_plan = resync.plan

    def plan_then_report(rows, listing, cap):
        result = real_plan(rows, listing, cap)
        report(engine, placement, U3, seq=2, reserved=1)
        return result

    resync.plan = plan_then_report
    try:
        result = runner.run_once()
    finally:
        resync.plan = real_plan
    assert result.plan.checked == 2
    assert result.outcomes == {Outcome.FENCED: 1, Outcome.MOVED: 1}
    assert U1 not in placement.providers
    assert placement.providers[U2][0]["reserved"] == 1
    assert placement.applied == []
    assert database.get_provider(engine, U3).seq == 2


def test_the_cap_and_a_failing_placement(engine):
    placement = FakePlacement()
    for uuid in (U1, U2, U3):
        report(engine, placement, uuid)
    placement.providers.clear()
    runner, _ = make(engine, placement, max_repairs=2)
    result = runner.run_once()
    assert result.outcomes == {Outcome.REPAIRED: 2} and result.plan.deferred == 1
    assert runner.run_once().outcomes == {Outcome.REPAIRED: 1}

    placement.providers.clear()
    real_apply = placement.apply
    tried = []

    def down(provider, verify=False):
        tried.append(provider.uuid)
        raise PlacementUnavailable(provider.uuid, "apply")

    placement.apply = down
    result = runner.run_once()
    # Placement away (a timeout is this too): the round stops at the first repair rather than
    # wait out one timeout per repair; the rest is found again by the next round.
    assert result.outcomes == {Outcome.FAILED: 1} and len(tried) == 1
    # Nothing recorded for a failed repair: the next round tries again.
    placement.apply = real_apply
    assert runner.run_once().plan.drift[Drift.MISSING] == 3


def test_a_provider_placement_refuses_does_not_stop_the_round(engine):
    placement = FakePlacement()
    for uuid in (U1, U2, U3):
        report(engine, placement, uuid)
    placement.providers.clear()
    runner, _ = make(engine, placement)
    real_apply = placement.apply

    def refuse_one(provider, verify=False):
        if provider.uuid == U1:
            raise PlacementError(provider.uuid, "apply", status=400, detail="bad trait")
        return real_apply(provider, verify=verify)

    placement.apply = refuse_one
    assert runner.run_once().outcomes == {Outcome.FAILED: 1, Outcome.REPAIRED: 2}


class FakeLock:
    held = set()

    def __init__(self, path, identifier):
        self.path = path

    def acquire(self, blocking=True):
        assert blocking is False
        if self.path in FakeLock.held:
            return False
        FakeLock.held.add(self.path)
        return True

    def release(self):
        FakeLock.held.discard(self.path)


class FakeZooKeeper:
    def __init__(self):
        self.nodes = {}
        self.Lock = FakeLock

    def get_async(self, path):
        return Answered(lambda: (self.nodes[path], None))

    def set_async(self, path, data):
        def write():
            if path not in self.nodes:
                raise NoNodeError(path)
            self.nodes[path] = data
        return Answered(write)

    def create_async(self, path, data, makepath=False):
        return Answered(lambda: self.nodes.__setitem__(path, data))


class Answered:
    """A kazoo async result answered at once: what ``call`` returns, or raises (a missing
    znode: NoNodeError, as kazoo's)."""

    def __init__(self, call):
        self.call = call

    def get(self, timeout=None):
        try:
            return self.call()
        except KeyError as exc:
            raise NoNodeError(str(exc)) from None


def test_one_replica_at_a_time_and_about_one_round_per_interval(engine):
    placement = FakePlacement()
    report(engine, placement, U1)
    zookeeper = FakeZooKeeper()
    first, _ = make(engine, placement, zookeeper=zookeeper, root="/computed/g", host="r1")
    second, _ = make(engine, placement, zookeeper=zookeeper, root="/computed/g", host="r2")
    FakeLock.held = {"/computed/g/resync-lock"}  # another replica is resyncing
    assert first.run_once() is None and first.counts["rounds_skipped"] == 1
    FakeLock.held = set()
    assert first.run_once() is not None
    assert json.loads(zookeeper.nodes["/computed/g/resync-last"])["host"] == "r1"
    assert second.run_once() is None  # r1 resynced within the interval
    assert first.run_once() is not None  # r1's own timer decides for r1
    zookeeper.nodes["/computed/g/resync-last"] = json.dumps(
        {"host": "r1", "finished": 0}).encode()
    assert second.run_once() is not None  # r1's last round is old: r2 takes over
    assert not FakeLock.held  # released after every round


class Unanswered:
    def get(self, timeout=None):
        raise KazooTimeoutError(f"no answer within {timeout}")


class GoneZooKeeper(FakeZooKeeper):
    """A ZooKeeper that answers nothing; its Lock must not be asked for (kazoo's waits for an
    answer without a limit)."""

    def __init__(self):
        super().__init__()
        self.Lock = None

    def get_async(self, path):
        return Unanswered()


def test_a_round_does_not_ask_for_kazoos_lock_when_zookeeper_does_not_answer(engine):
    runner, _ = make(engine, FakePlacement(), zookeeper=GoneZooKeeper(), root="/computed/g",
                     host="r1", timeout=0.01)
    with pytest.raises(NoAnswer):
        runner.run_once()


def test_the_thread_runs_rounds_and_survives_failures(engine):
    placement = FakePlacement()
    report(engine, placement, U1)
    placement.down = True
    runner, _ = make(engine, placement)
    runner.interval = 0.05
    runner.start()
    try:
        deadline = threading.Event()
        for _ in range(200):
            if runner.counts["rounds_failed"] >= 2:
                break
            deadline.wait(0.02)
        placement.down = False
        for _ in range(200):
            if runner.counts["rounds_done"]:
                break
            deadline.wait(0.02)
    finally:
        runner.stop()
    assert runner.counts["rounds_failed"] >= 2 and runner.counts["rounds_done"] >= 1


def test_off_starts_no_thread(engine):
    runner, _ = make(engine, FakePlacement())
    runner.interval = 0
    runner.start()
    assert runner._thread is None
    runner.stop()


def test_a_row_whose_claim_epoch_is_now_held_by_another_host_is_fenced(engine):
    placement = FakePlacement()
    report(engine, placement, U1)
    del placement.providers[U1]  # deleted by hand
    runner, _ = make(engine, placement, FakeClaims({U1: 7}, hosts={U1: "intruder"}))
    result = runner.run_once()
    assert result.outcomes == {Outcome.FENCED: 1}
    assert U1 not in placement.providers


def test_the_applier_s_view_of_a_repaired_provider_is_dropped_before_its_lock_goes(engine):
    """An RPC worker waiting for the provider's lock while the resync repairs it must find the
    applier's cached view already dropped when it gets the lock: the order of the events on the
    lock says so, whatever the threads' timing."""
    placement = FakePlacement()
    report(engine, placement, U1)
    placement.put_by_hand(U1, reserved=1)
    events = []

    class RecordingLock:
        def __enter__(self):
            events.append("locked")

        def __exit__(self, *exc):
            events.append("unlocked")

    runner = Resync(placement, FakeClaims({U1: 7}), engine,
                    provider_lock=lambda uuid: RecordingLock(), interval=60, max_repairs=10,
                    forget=lambda uuid: events.append(f"forget {uuid}"))
    assert runner.run_once().outcomes == {Outcome.REPAIRED: 1}
    assert events == ["locked", f"forget {U1}", "unlocked"]
