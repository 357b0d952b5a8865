"""The fleet's state shared between threads (issue 22 item 1): each race is provoked
deterministically (one thread held at the racy point by Events, bounded waits only as a guard
against a hang), never by timing."""

from __future__ import annotations

import threading
import types

from computed.fleet.audit import AuditLog, fencing_violations, read
from computed.fleet.claims import ClaimTable
from computed.fleet.fence import Fence
from computed.fleet.reconciler import Fleet
from tests.unit.fleet.fakes import Clock, Ensemble, FakeMembership

# Only a guard against a hang if the code under test deadlocks: no assertion depends on it.
HANG = 10.0


class _Answer:
    def __init__(self, value=None):
        self.value = value

    def get(self, timeout=None):
        return self.value

    def get_nowait(self):
        return self.value

    def rawlink(self, callback):
        pass  # the watches' answers never come: the test is about the fleet's threads


class _Client:
    """The kazoo calls a ClaimTable makes: creates succeed, deletes and watches stay silent."""

    client_id = (1, b"")

    def __init__(self):
        self.zxid = 100

    def create_async(self, path, value, ephemeral, include_data):
        self.zxid += 1
        return _Answer((path, types.SimpleNamespace(czxid=self.zxid)))

    def exists_async(self, path, watch=None):
        return _Answer()

    def delete_async(self, path):
        return _Answer()

    def ensure_path_async(self, path):
        return _Answer()


class _PausingFence(Fence):
    """A fence that, the first time ``pause_in`` asks ``may_act``, stops there until released:
    the moment between an action's check and its audit record."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pause_in: threading.Thread | None = None
        self.checked = threading.Event()
        self.go_on = threading.Event()

    def may_act(self, term):
        answer = super().may_act(term)
        if threading.current_thread() is self.pause_in and not self.checked.is_set():
            self.checked.set()
            assert self.go_on.wait(HANG)
        return answer


def test_a_claim_released_between_an_actions_check_and_its_record_stops_the_action(tmp_path):
    """The node thread's Fleet.act checks the claim, then the fleet thread releases it: the
    action must neither run nor be on record after the release (under eventlet nothing could
    come between the check and the record; with threads the release can)."""
    path = tmp_path / "a.audit"
    audit = AuditLog(str(path), "a")
    fence = _PausingFence(10.0, clock=Clock())
    fence.connected()
    assert fence.renew(lambda: None)
    table = ClaimTable(_Client(), "/computed/fleet", "a", audit, wake=threading.Event())
    assert [claim.node for claim in table.acquire(["n1"], 1, fence.term).acquired] == ["n1"]
    hosting = types.SimpleNamespace(hosts=dict, joined=lambda member_epoch: None)
    fleet = Fleet(FakeMembership(Ensemble(), "a"), table, fence, nodes=types.SimpleNamespace(),
                  hosting=hosting, audit=audit, join_timeout=1.0, drain_timeout=1.0)
    ran, acted = [], []
    node_thread = threading.Thread(
        target=lambda: acted.append(fleet.act("n1", "sync", ran.append)), name="nodes")
    fence.pause_in = node_thread
    node_thread.start()
    assert fence.checked.wait(HANG)
    table.release(["n1"])  # what the fleet thread does when the plan moves the node away
    fence.go_on.set()
    node_thread.join(HANG)
    assert acted == [False] and ran == []
    records = read(path)
    assert [r["event"] for r in records] == ["claim", "release"]
    assert fencing_violations(records) == []



class _RejoinWhenCompared(int):
    """A member epoch whose comparison, made by the node thread inside Fleet.may_act_as, lets
    the fleet thread run a whole rejoin first: the moment between reading the fleet's member
    epoch and its term. (Python asks a subclass of int for ``==`` first.)"""

    rejoin: threading.Thread | None = None

    def __eq__(self, other):
        if self.rejoin is not None and not self.rejoin.is_alive() and other is not None:
            self.rejoin.start()
            self.rejoin.join(HANG)
        return int(self) == other

    __hash__ = int.__hash__


def test_may_act_as_never_sees_a_rejoin_half_done(tmp_path):
    """The node thread asks whether it may re-home under the member epoch of the last join while
    the fleet thread rejoins after a lost session (a new term, then a new member epoch): the old
    member epoch must not pass with the new term."""
    fence = Fence(10.0, clock=Clock())
    fence.connected()
    assert fence.renew(lambda: None)
    audit = AuditLog(str(tmp_path / "a.audit"), "a")
    table = ClaimTable(_Client(), "/computed/fleet", "a", audit, wake=threading.Event())
    hosting = types.SimpleNamespace(hosts=dict, joined=lambda member_epoch: None)
    fleet = Fleet(FakeMembership(Ensemble(), "a"), table, fence, nodes=types.SimpleNamespace(),
                  hosting=hosting, audit=audit, join_timeout=1.0, drain_timeout=1.0)
    fleet.join()
    old = _RejoinWhenCompared(fleet._membership.member_epoch)
    assert fleet.may_act_as(old)
    fence.lost()
    fence.connected()  # a new session: the next term
    assert fence.renew(lambda: None)
    old.rejoin = threading.Thread(target=fleet.join, name="fleet")
    assert not fleet.may_act_as(old)
    assert fleet._membership.member_epoch != old  # the rejoin did run meanwhile
    assert fleet.may_act_as(fleet._membership.member_epoch)
