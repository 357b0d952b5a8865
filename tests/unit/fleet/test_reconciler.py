"""The Fleet executor driven by in-memory claims and membership (tests/unit/fleet/fakes.py), a
real fence on a fake clock and a real audit log: no ZooKeeper, no subprocess."""

from __future__ import annotations

import threading
import time

import pytest

from computed.fleet.audit import AuditLog, read
from computed.fleet.fence import Fence, SessionState
from computed.fleet.reconciler import Fleet, FleetState
from hashring.ownership import Member, compute_ownership
from tests.unit.fleet.fakes import Clock, Ensemble, FakeClaims, FakeMembership

NODES = [f"node-{i:03d}" for i in range(60)]
SESSION = 10.0


class Daemon:
    """One daemon's Fleet and the stand-ins around it. The Fleet reads ``nodes`` and
    ``instance_hosts`` on every pass (the daemon is its node set and its hosting), so a test
    changes them by assigning."""

    def __init__(self, ensemble, host, tmp_path, nodes=NODES, instance_hosts=None,
                 drain_timeout=5.0, membership=None):
        self.clock = Clock()
        self.fence = Fence(SESSION, clock=self.clock)
        self.fence.connected()
        assert self.fence.renew(lambda: None)
        self.membership = membership or FakeMembership(ensemble, host)
        self.claims = FakeClaims(ensemble, host)
        self.audit_path = tmp_path / f"{host}.audit"
        self.nodes = nodes
        self.instance_hosts = dict(instance_hosts or {})
        self.joins: list[int] = []
        self.fleet = Fleet(self.membership, self.claims, self.fence, nodes=self, hosting=self,
                           audit=AuditLog(str(self.audit_path), host), join_timeout=1.0,
                           drain_timeout=drain_timeout, tick=0.01)

    # the fleet's node set and hosting
    def uuids(self):
        return self.nodes

    def hosts(self):
        return self.instance_hosts

    def joined(self, member_epoch):
        self.joins.append(member_epoch)

    def held(self) -> set[str]:
        return set(self.claims.held())

    def records(self, event: str) -> list[dict]:
        return [r for r in read(self.audit_path) if r["event"] == event]


def settled_alone(tmp_path, **options):
    """Daemon "a", alone in a new ensemble, after its join and first pass."""
    ensemble = Ensemble()
    a = Daemon(ensemble, "a", tmp_path, **options)
    a.fleet.join()
    a.fleet.reconcile()
    return ensemble, a


def rules(ensemble, nodes=NODES, instance_hosts=None):
    members = [Member(name, weight, name in ensemble.draining)
               for name, (weight, _) in ensemble.members.items()]
    return compute_ownership(members, nodes, instance_hosts or {})


def test_join_makes_a_member_with_a_new_member_epoch(tmp_path):
    ensemble = Ensemble()
    a = Daemon(ensemble, "a", tmp_path)
    a.fleet.join()
    assert a.fleet.state is FleetState.ACTIVE
    assert ensemble.members["a"] == (1, a.membership.member_epoch)
    assert a.joins == [a.membership.member_epoch]
    (record,) = a.records("join")
    assert (record["member_epoch"], record["term"]) == (a.membership.member_epoch, a.fence.term)


def test_a_pass_takes_the_nodes_the_rules_give(tmp_path):
    _, a = settled_alone(tmp_path)
    assert a.held() == set(NODES)
    assert {claim.term for claim in a.claims.held().values()} == {a.fence.term}
    assert a.fleet.claimed == len(NODES) and a.fleet.plan.member


def test_a_newcomer_gets_its_share_released_first_then_taken(tmp_path):
    ensemble = Ensemble()
    a, b = Daemon(ensemble, "a", tmp_path), Daemon(ensemble, "b", tmp_path)
    a.fleet.join()
    a.fleet.reconcile()
    b.fleet.join()
    b.fleet.reconcile()  # a still holds b's share: busy, nothing taken
    assert b.held() == set() and ensemble.owners() == dict.fromkeys(NODES, "a")
    a.claims.calls.clear()
    a.fleet.reconcile()
    expected = rules(ensemble)
    assert a.claims.calls == [("release", sorted(expected.managed["b"]))]
    assert a.held() == expected.managed["a"] and a.fleet.released == len(expected.managed["b"])
    b.fleet.reconcile()
    assert ensemble.owners() == expected.owners()


def test_release_comes_before_take_in_a_pass(tmp_path):
    ensemble = Ensemble()
    a, b, c = (Daemon(ensemble, host, tmp_path) for host in ("a", "b", "c"))
    for d in (a, b):
        d.fleet.join()
    for d in (a, b, a, b):
        d.fleet.reconcile()
    assert ensemble.owners() == rules(ensemble).owners()
    # b dies and c joins at once: a hands some nodes to c and takes some of b's.
    ensemble.expire("b")
    c.fleet.join()
    a.claims.calls.clear()
    a.fleet.reconcile()
    assert [call for call, _ in a.claims.calls] == ["release", "acquire"]
    assert a.held() == rules(ensemble).managed["a"]


def test_no_node_list_yet_claims_and_releases_nothing(tmp_path):
    _, a = settled_alone(tmp_path, nodes=None)
    assert a.claims.calls == [] and a.fleet.plan is None


def test_every_connected_pass_retries_the_deletes_zookeeper_did_not_answer(tmp_path):
    # A release whose delete was lost with a connection blocks its node until it is deleted:
    # the pass after the reconnect (the fence's CONNECTED wakes it) deletes it.
    ensemble, a = settled_alone(tmp_path)
    before = a.claims.delete_released_passes
    a.fleet.reconcile()
    assert a.claims.delete_released_passes == before + 1
    a.fence.suspended()
    a.fleet.reconcile()  # no answer to expect while suspended
    assert a.claims.delete_released_passes == before + 1


def test_suspended_acts_on_nothing(tmp_path):
    ensemble, a = settled_alone(tmp_path)
    a.fence.suspended()
    a.fleet.session_changed(SessionState.SUSPENDED)
    a.claims.calls.clear()
    ensemble.members["b"] = (1, ensemble.next_zxid())  # even a membership change waits
    a.fleet.reconcile()
    assert a.fleet.state is FleetState.SUSPENDED
    assert a.claims.calls == [] and a.held() == set(NODES)
    done = []
    assert not a.fleet.act(NODES[0], "sync", done.append)
    assert done == [] and a.records("act") == []
    (record,) = a.records("suspended")
    assert record["term"] == a.fence.term


def test_lost_forgets_every_claim_then_rejoins_with_a_new_member_epoch(tmp_path):
    ensemble, a = settled_alone(tmp_path)
    old_member_epoch, old_term = a.membership.member_epoch, a.fence.term
    old_claim = a.claims.get(NODES[0])
    a.fence.lost()
    ensemble.expire("a")
    a.fleet.reconcile()
    assert a.fleet.state is FleetState.LOST and a.held() == set()
    assert not a.fleet.act(NODES[0], "sync")
    a.fence.connected()  # a new session
    assert a.fence.renew(lambda: None)
    a.fleet.reconcile()
    assert a.fleet.state is FleetState.ACTIVE
    assert a.membership.member_epoch > old_member_epoch
    assert a.joins == [old_member_epoch, a.membership.member_epoch]
    assert a.held() == set(NODES)
    claim = a.claims.get(NODES[0])
    assert claim.term == old_term + 1 and claim.epoch > old_claim.epoch
    assert not a.fence.may_act(old_claim.term)


def test_a_session_lost_and_regained_between_two_passes_rejoins_too(tmp_path):
    ensemble, a = settled_alone(tmp_path)
    old_member_epoch = a.membership.member_epoch
    a.fence.lost()
    ensemble.expire("a")
    a.fence.connected()
    a.fleet.reconcile()  # never saw LOST: the new term says the claims are dead
    assert a.membership.member_epoch > old_member_epoch
    assert {claim.term for claim in a.claims.held().values()} == {a.fence.term}
    assert a.held() == set(NODES)


def test_a_daemon_that_is_no_member_releases_everything_and_joins_again(tmp_path):
    ensemble, a = settled_alone(tmp_path)
    del ensemble.members["a"]  # its membership znode deleted by hand
    a.claims.calls.clear()
    a.fleet.reconcile()
    assert a.claims.calls == [("release", NODES)]
    assert "a" in ensemble.members and len(a.joins) == 2
    a.fleet.reconcile()
    assert a.held() == set(NODES)


def test_draining_releases_free_nodes_and_keeps_instance_nodes_until_it_leaves(tmp_path):
    ensemble = Ensemble()
    hosts = {NODES[0]: "a"}
    a = Daemon(ensemble, "a", tmp_path, instance_hosts=hosts, drain_timeout=0.05)
    b = Daemon(ensemble, "b", tmp_path, instance_hosts=hosts)
    for d in (a, b):
        d.fleet.join()
    for d in (a, b, a):
        d.fleet.reconcile()
    assert NODES[0] in a.held() and len(a.held()) > 1
    a.claims.calls.clear()
    a.fleet.drain_and_leave()
    assert NODES[0] not in a.claims.calls[0][1]  # first the free nodes
    assert a.claims.calls[-1] == ("release", [NODES[0]])  # the instance's node at the leave
    assert all(call == "release" for call, _ in a.claims.calls)
    assert a.fleet.state is FleetState.STOPPED and a.held() == set()
    assert "a" not in ensemble.members
    assert a.records("leave")[0]["member_epoch"] == a.membership.member_epoch


def test_a_drain_ends_when_only_instance_nodes_are_left_not_at_the_timeout(tmp_path):
    # The upgrade test saw every daemon hosting an instance wait its whole drain_timeout (60 s
    # by default) on each restart: its instances' nodes are the rules' to keep until it leaves.
    ensemble = Ensemble()
    hosts = {NODES[0]: "a"}
    a = Daemon(ensemble, "a", tmp_path, instance_hosts=hosts, drain_timeout=3600)
    b = Daemon(ensemble, "b", tmp_path, instance_hosts=hosts)
    for d in (a, b):
        d.fleet.join()
    for d in (a, b, a):
        d.fleet.reconcile()
    drain = threading.Thread(target=a.fleet.drain_and_leave, daemon=True)
    drain.start()
    drain.join(30)  # a guard against the hour-long wait, not a measure
    assert not drain.is_alive(), "the drain waited for nodes only the leave releases"
    assert a.fleet.state is FleetState.STOPPED and a.held() == set()
    assert a.claims.calls[-1] == ("release", [NODES[0]])


def test_a_drain_waits_while_there_is_no_node_list(tmp_path):
    ensemble, a = settled_alone(tmp_path, drain_timeout=0.2)
    a.nodes = None  # no listing yet: the rules cannot say what to hand over
    a.claims.calls.clear()
    passes = []
    pass_once = a.fleet.reconcile_draining
    a.fleet.reconcile_draining = lambda: passes.append(pass_once())
    a.fleet.drain_and_leave()
    assert len(passes) > 1 and set(passes) == {None}  # kept trying until the timeout
    assert a.claims.calls == [("release", NODES)]  # all at the leave


def test_reconcile_draining_keeps_only_what_a_draining_member_keeps(tmp_path):
    hosts = {NODES[0]: "a"}
    _, a = settled_alone(tmp_path, instance_hosts=hosts)
    a.membership.set_draining("stopping", persistent=False)
    a.fleet.reconcile_draining()
    assert a.held() == {NODES[0]}
    assert a.fleet.plan.take == frozenset()  # even with nobody to take the free nodes


def test_act_runs_only_on_a_held_claim_while_the_fence_is_open(tmp_path):
    _, a = settled_alone(tmp_path)
    done = []
    assert a.fleet.act(NODES[0], "sync", done.append, gone=False)
    assert done == [a.claims.get(NODES[0])]
    (record,) = a.records("act")
    assert (record["node"], record["claim_epoch"], record["action"], record["gone"]) == \
        (NODES[0], a.claims.get(NODES[0]).epoch, "sync", False)
    a.clock.now += SESSION  # no round trip for a whole session timeout: the lease ran out
    assert not a.fleet.act(NODES[0], "sync", done.append)
    assert a.fleet.claim_for(NODES[0]) is None
    assert a.fence.renew(lambda: None)
    assert a.fleet.act(NODES[0], "sync", done.append)
    assert not a.fleet.act("not-ours", "sync", done.append)
    assert len(done) == 2


def test_the_ring_is_built_once_per_membership(tmp_path):
    ensemble, a = settled_alone(tmp_path)
    ring = a.fleet.plan.ring
    a.fleet.reconcile()
    a.nodes = NODES[:10]  # the node list changes, the members do not
    a.fleet.reconcile()
    assert a.fleet.plan.ring is ring
    ensemble.members["b"] = (1, ensemble.next_zxid())
    a.fleet.reconcile()
    assert a.fleet.plan.ring is not ring
    assert dict(a.fleet.plan.ring.nodes) == {"a": 1, "b": 1}


def test_a_pass_with_nothing_changed_does_not_place_the_nodes_again(tmp_path):
    # A pass every tick must not cost a placement of every node on the ring (issue 13 item 7).
    ensemble, a = settled_alone(tmp_path)
    ownership = a.fleet.plan.ownership
    for _ in range(3):
        a.fleet.reconcile()
        assert a.fleet.plan.ownership is ownership
    a.nodes = NODES[:10]
    a.fleet.reconcile()
    assert a.fleet.plan.ownership is not ownership
    assert a.held() == set(NODES[:10])
    ownership = a.fleet.plan.ownership
    ensemble.members["b"] = (1, ensemble.next_zxid())
    a.fleet.reconcile()
    assert a.fleet.plan.ownership is not ownership
    ownership = a.fleet.plan.ownership
    a.instance_hosts = {NODES[0]: "b"}
    a.fleet.reconcile()
    assert a.fleet.plan.ownership is not ownership
    assert NODES[0] not in a.held()


def _wait_until_holding_every_node(daemon: Daemon) -> None:
    """Wait (10 s at most) until ``daemon``'s fleet thread holds every node of the ensemble."""
    deadline = time.monotonic() + 10
    while daemon.held() != set(NODES):
        assert time.monotonic() < deadline, daemon.fleet.state
        time.sleep(0.01)


def test_run_joins_follows_events_then_drains_and_leaves(tmp_path):
    ensemble = Ensemble()
    a = Daemon(ensemble, "a", tmp_path, drain_timeout=1.0)
    thread = threading.Thread(target=a.fleet.run)
    thread.start()
    try:
        _wait_until_holding_every_node(a)
        assert a.membership.watching
    finally:
        a.fleet.request_stop()
        thread.join(10)
    assert not thread.is_alive()
    assert a.fleet.state is FleetState.STOPPED
    assert a.held() == set() and ensemble.claims == {} and "a" not in ensemble.members


def test_a_stop_without_drain_leaves_at_once_releasing_everything_in_one_step(tmp_path):
    # What a test's tear-down (or an operator who cannot wait) asks: no draining mark, no
    # drain passes; every claim released and the group left, as a leave after a drain ends.
    ensemble = Ensemble()
    a = Daemon(ensemble, "a", tmp_path, drain_timeout=3600)
    thread = threading.Thread(target=a.fleet.run, daemon=True)  # a failure must not hang pytest
    thread.start()
    try:
        _wait_until_holding_every_node(a)
        a.claims.calls.clear()
        marked = []
        a.membership.set_draining = lambda reason, persistent: marked.append(reason)
    finally:
        a.fleet.request_stop(drain=False)
        thread.join(10)
    assert not thread.is_alive()
    assert marked == []
    assert [call for call, _ in a.claims.calls] == ["release"]
    assert a.fleet.state is FleetState.STOPPED
    assert a.held() == set() and ensemble.claims == {} and "a" not in ensemble.members
    assert len(a.records("leave")) == 1


# --- the guard of in-flight actions, and the standing the re-homing asks for ------------------

def test_a_guard_holds_while_the_claim_is_held_and_the_fence_allows(tmp_path):
    from computed.fleet.claims import NotOurs
    ensemble, a = settled_alone(tmp_path)
    node = sorted(a.held())[0]
    guard = a.fleet.guard(a.claims.get(node))
    guard.check()
    a.clock.now += SESSION  # past the lease: no round trip renewed it
    with pytest.raises(NotOurs, match=f"node {node}: .*fence refuses"):
        guard.check()
    assert a.fence.renew(lambda: None)
    guard.check()
    a.fence.suspended()
    with pytest.raises(NotOurs, match="session suspended"):
        guard.check()


def test_a_guard_fails_once_its_claim_is_released_lost_or_replaced(tmp_path):
    from computed.fleet.claims import NotOurs
    ensemble, a = settled_alone(tmp_path)
    first, second = sorted(a.held())[:2]
    released = a.fleet.guard(a.claims.get(first))
    a.claims.release([first])
    with pytest.raises(NotOurs, match="no longer held"):
        released.check()
    a.fleet.reconcile()  # claimed again: a new claim epoch, the old guard stays dead
    assert a.claims.get(first) is not None
    with pytest.raises(NotOurs):
        released.check()
    a.fleet.guard(a.claims.get(first)).check()
    lost = a.fleet.guard(a.claims.get(second))
    a.claims.forget()
    with pytest.raises(NotOurs):
        lost.check()


def test_may_act_as_only_under_the_current_member_epoch_while_the_fence_allows(tmp_path):
    ensemble, a = settled_alone(tmp_path)
    epoch = a.membership.member_epoch
    assert a.fleet.may_act_as(epoch)
    assert not a.fleet.may_act_as(epoch - 1)
    a.fence.suspended()
    assert not a.fleet.may_act_as(epoch)



class FlakyMembership(FakeMembership):
    """Joining, then watching, fail first with the errors given, as when the ZooKeeper
    connection drops while the daemon starts (seen at load ~30: the daemon died before its
    first join was done)."""

    def __init__(self, ensemble, host, join_errors=(), watch_errors=()):
        super().__init__(ensemble, host)
        self.join_errors, self.watch_errors = list(join_errors), list(watch_errors)

    def join(self, timeout, stopping):
        if self.join_errors:
            raise self.join_errors.pop(0)
        return super().join(timeout, stopping)

    def watch(self):
        if self.watch_errors:
            raise self.watch_errors.pop(0)
        super().watch()


def test_a_zookeeper_error_while_starting_is_retried_not_fatal(tmp_path):
    from kazoo import exceptions as zk_exc
    from tooz import coordination
    ensemble = Ensemble()
    membership = FlakyMembership(
        ensemble, "a", join_errors=[zk_exc.ConnectionLoss(), zk_exc.SessionExpiredError(),
                                    coordination.ToozConnectionError("connection lost")],
        watch_errors=[zk_exc.ConnectionLoss()])
    a = Daemon(ensemble, "a", tmp_path, membership=membership)
    runner = threading.Thread(target=a.fleet.run)
    runner.start()
    _wait_until_holding_every_node(a)
    a.fleet.request_stop()
    runner.join(10)
    assert not runner.is_alive()
    assert a.held() == set()  # it ran, claimed everything, then drained and left
    assert membership.join_errors == membership.watch_errors == []
    assert membership.watching and len(a.records("leave")) == 1


def test_a_membership_error_while_starting_still_ends_the_run(tmp_path):
    from computed.fleet.membership import MembershipError
    ensemble = Ensemble()
    membership = FlakyMembership(ensemble, "a", join_errors=[MembershipError("duplicate host")])
    a = Daemon(ensemble, "a", tmp_path, membership=membership)
    with pytest.raises(MembershipError):
        a.fleet.run()
