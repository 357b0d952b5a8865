"""ClaimTable's watch on the claims it holds, driven by a stand-in kazoo client whose answers
the test delivers by hand (the order of ZooKeeper's events and replies is the point)."""

from __future__ import annotations

import logging
import threading
import types

import pytest
from kazoo.exceptions import NodeExistsError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType

from computed.fleet.audit import AuditLog, read
from computed.fleet.claims import ACQUIRE_WINDOW, ClaimTable


class Answer:
    """A kazoo async result the test resolves: ``resolve(stat)`` runs the rawlinked callbacks."""

    def __init__(self):
        self.callbacks = []
        self.value = None

    def rawlink(self, callback):
        self.callbacks.append(callback)

    def get(self, timeout=None):
        return self.value

    def get_nowait(self):
        return self.value

    def resolve(self, value):
        self.value = value
        for callback in self.callbacks:
            callback(self)


class Client:
    """create_async succeeds with the next zxid; exists_async answers are queued per path."""

    client_id = (1, b"")

    def __init__(self):
        self.zxid = 100
        self.watches = {}
        self.exists = []  # (path, Answer) in request order

    def create_async(self, path, value, ephemeral, include_data):
        self.zxid += 1
        answer = Answer()
        answer.value = (path, types.SimpleNamespace(czxid=self.zxid))
        return answer

    def exists_async(self, path, watch=None):
        self.watches[path] = watch
        answer = Answer()
        self.exists.append((path, answer))
        return answer

    def delete_async(self, path):
        answer = Answer()
        return answer

    def fire(self, path, event_type):
        watch = self.watches.pop(path)
        watch(types.SimpleNamespace(type=event_type, path=path, state="CONNECTED"))


def table(tmp_path, freed, session_timeout=10.0):
    client = Client()
    return ClaimTable(client, "/computed/fleet", "c1", AuditLog(str(tmp_path / "a"), "c1"),
                      wake=freed, answer_within=lambda: session_timeout), client


def stat(czxid):
    return types.SimpleNamespace(czxid=czxid)


def test_a_held_claim_deleted_behind_our_back_is_dropped_and_the_reconciler_woken(tmp_path):
    freed = threading.Event()  # the fleet's wake-up
    claims, client = table(tmp_path, freed)
    [claim] = claims.acquire(["n1"], member_epoch=7, term=1).acquired
    path, answer = client.exists[-1]
    answer.resolve(stat(claim.epoch))  # the watch is set, the claim is ours
    assert claims.get("n1") == claim
    client.fire(path, EventType.DELETED)
    client.exists[-1][1].resolve(None)  # looked again: gone
    assert claims.get("n1") is None and freed.is_set()
    assert [(r["event"], r.get("lost")) for r in read(tmp_path / "a")] == [
        ("claim", None), ("release", True)]


def test_a_late_event_of_a_released_claim_never_drops_the_claim_taken_since(tmp_path):
    freed = threading.Event()  # the fleet's wake-up
    claims, client = table(tmp_path, freed)
    [first] = claims.acquire(["n1"], member_epoch=7, term=1).acquired
    path, answer = client.exists[-1]
    answer.resolve(stat(first.epoch))
    claims.release(["n1"])
    [second] = claims.acquire(["n1"], member_epoch=7, term=1).acquired
    client.fire(path, EventType.DELETED)  # the first claim's deletion, delivered late
    for _, pending in client.exists:
        pending.resolve(stat(second.epoch))
    assert claims.get("n1") == second and not freed.is_set()


def test_a_claim_released_by_us_is_not_watched_again(tmp_path):
    freed = threading.Event()  # the fleet's wake-up
    claims, client = table(tmp_path, freed)
    claims.acquire(["n1"], member_epoch=7, term=1)
    path, answer = client.exists[-1]
    answer.resolve(stat(101))
    claims.release(["n1"])
    requests = len(client.exists)
    client.fire(path, EventType.DELETED)
    assert len(client.exists) == requests and not freed.is_set()


def test_claims_are_pipelined_a_window_at_a_time(tmp_path):
    # A cold start claims thousands of nodes: the creates go ACQUIRE_WINDOW at a time (each
    # window answered before the next is sent), not all at once, so their requests' memory is
    # reused instead of kept by the allocator; every node is still claimed, in order.
    claims, client = table(tmp_path, threading.Event())
    sent, in_flight, most = [], [], [0]
    create = client.create_async

    def counting_create(path, value, ephemeral, include_data):
        answer = create(path, value, ephemeral, include_data)
        in_flight.append(answer)
        most[0] = max(most[0], len(in_flight))
        sent.append(path.rsplit("/", 1)[-1])
        got = answer.get

        def get(timeout=None):
            in_flight.remove(answer)
            return got()
        answer.get = get
        return answer

    client.create_async = counting_create
    nodes = [f"n{i:04d}" for i in range(2 * ACQUIRE_WINDOW + 7)]
    result = claims.acquire(nodes, member_epoch=7, term=1)
    assert [c.node for c in result.acquired] == nodes == sent
    assert most[0] == ACQUIRE_WINDOW


class Unanswered(Answer):
    """A request no server answers (every ZooKeeper server gone): kazoo's get times out."""

    def get(self, timeout=None):
        assert timeout is not None, "a wait for ZooKeeper without a limit"
        raise KazooTimeoutError(f"Value not received within {timeout} seconds")


@pytest.mark.parametrize("leaving", [True, False])
def test_deletes_nobody_answers_are_waited_for_one_session_timeout_then_named_in_one_line(
        tmp_path, caplog, leaving):
    """With ZooKeeper gone a delete is never answered: the release waits at most the session
    timeout for the whole batch. Leaving, the claims are left to the session's expiry (they
    are ephemeral); otherwise they are deleted again once ZooKeeper answers."""
    claims, client = table(tmp_path, threading.Event(), session_timeout=0.01)
    claims.acquire(["n1", "n2", "n3"], member_epoch=7, term=1)
    client.delete_async = lambda path: Unanswered()
    with caplog.at_level(logging.WARNING, logger="computed.fleet.claims"):
        assert len(claims.release(["n1", "n2", "n3"], leaving=leaving)) == 3
    line, = [r.getMessage() for r in caplog.records]
    assert "3 claims (nodes n1, n2, n3)" in line
    assert "did not answer the delete of a claim within 0.01 s" in line
    if leaving:
        assert "leaving without ZooKeeper confirming" in line and "session expires" in line
    client.exists_async = lambda path, watch=None: Unanswered()
    assert claims.delete_released() == (0 if leaving else 3)


def test_a_held_claim_costs_no_object_of_its_own_beyond_its_value(tmp_path):
    # kazoo keeps the watch it is given for each watched path, and a daemon holds 10,000 claims
    # at 50,000 nodes: every held claim's watch is one shared object, and a Claim has no dict.
    claims, client = table(tmp_path, threading.Event())
    acquired = claims.acquire(["n1", "n2", "n3"], member_epoch=7, term=1).acquired
    watches = [client.watches[f"/computed/fleet/claims/{node}"] for node in ("n1", "n2", "n3")]
    assert watches[0] is watches[1] is watches[2]
    assert not hasattr(acquired[0], "__dict__")


def late_create(client, nodes):
    """Make the creates of ``nodes`` go unanswered in time (kazoo's wait times out), while
    ZooKeeper carries them out: each znode then exists under our session (client_id 1)."""
    create = client.create_async
    late = {f"/computed/fleet/claims/{node}" for node in nodes}

    def create_async(path, value, ephemeral, include_data):
        return Unanswered() if path in late else create(path, value, ephemeral, include_data)

    client.create_async = create_async


def answer_looks(client, ephemeral_owner, czxid=500):
    """Answer every exists_async from now on at once: the znode is there, of that session."""
    def exists_async(path, watch=None):
        answer = Answer()
        answer.value = types.SimpleNamespace(czxid=czxid, ephemeralOwner=ephemeral_owner)
        client.exists.append((path, answer))
        return answer

    client.exists_async = exists_async


def test_a_create_answered_too_late_that_no_acquire_took_back_is_deleted(tmp_path):
    # Seen in test_fleet under load: a claim's create timed out, ZooKeeper made it anyway, the
    # ring then gave the node to a newcomer, and our forgotten znode blocked it for good.
    claims, client = table(tmp_path, threading.Event(), session_timeout=0.01)
    late_create(client, ["n2"])
    result = claims.acquire(["n1", "n2"], member_epoch=7, term=1)
    assert result.failed == ["n2"] and claims.get("n2") is None
    deleted = []
    client.delete_async = lambda path: deleted.append(path) or Answer()
    answer_looks(client, ephemeral_owner=1)  # the znode is ours
    claims.delete_released()  # the next pass; the plan no longer wants n2
    assert deleted == ["/computed/fleet/claims/n2"]
    assert claims.get("n2") is None and claims.get("n1") is not None
    deleted.clear()
    claims.delete_released()  # settled: not looked at again
    assert deleted == []


def test_a_create_answered_too_late_of_another_session_or_taken_back_is_left_alone(tmp_path):
    claims, client = table(tmp_path, threading.Event(), session_timeout=0.01)
    late_create(client, ["n1", "n2"])
    claims.acquire(["n1", "n2"], member_epoch=7, term=1)
    deleted = []
    client.delete_async = lambda path: deleted.append(path) or Answer()
    # n1 is still wanted: the next acquire finds its znode (ours) and takes it back.
    client.create_async = lambda *a, **k: Existing()
    answer_looks(client, ephemeral_owner=1)
    [claim] = claims.acquire(["n1"], member_epoch=7, term=1).acquired
    assert claim.node == "n1" and claims.get("n1") == claim
    answer_looks(client, ephemeral_owner=2)  # n2's znode: another session's since
    claims.delete_released()
    assert deleted == [] and claims.get("n1") == claim


class Existing(Answer):
    """A create ZooKeeper refuses: the znode exists."""

    def get(self, timeout=None):
        raise NodeExistsError()
