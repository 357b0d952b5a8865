"""Claims: the exclusive right of one daemon to act on one Ironic node.

Owns the claim znodes ``<root>/claims/<node uuid>``. A claim is an *ephemeral* znode created by the
claiming daemon's ZooKeeper session, holding ``{"host": ..., "member_epoch": ...}``. Guarantees:

* **Exclusive.** ZooKeeper creates a znode once: two daemons can never hold a claim on one node at
  the same time. A node whose claim exists is *busy*; the table sets a watch on it and sets
  ``wake`` (the fleet's wake-up) when it is deleted, so the would-be owner retries at once, not
  on a poll.
* **Released before taken.** A daemon stops acting on a node (drops it from :meth:`held`) before it
  deletes the claim, so the next owner can only start after the previous one stopped.
* **A release is carried out.** A claim whose delete failed (the connection dropped; the session
  lived on) would block its node until the session ends, which may be never: it is kept aside
  and :meth:`ClaimTable.delete_released` (every reconcile pass) deletes it once ZooKeeper answers,
  only if the znode is still that claim of this session (same creation zxid).
* **Gone with the session.** An ephemeral znode dies with the session that made it: a crashed,
  frozen or partitioned daemon loses all its claims when ZooKeeper expires its session, and its
  peers can take them over without waiting for it.
* **Fenced.** Each claim records the znode's creation zxid as its epoch (larger for every later
  owner) and the fence term it was made in (see :mod:`computed.fleet.fence`); a claim is acted
  on only while ``fence.may_act(claim.term)``.
* **Watched while held.** Every claim this daemon holds has a watch on its znode. A claim deleted
  behind the holder's back (by hand, by a buggy tool) is dropped from :meth:`ClaimTable.held` the
  moment ZooKeeper says so, recorded as lost, and ``wake`` wakes the reconciler, which
  claims the node again (a new claim, a new claim epoch) when the ring still gives it to this
  daemon. The watch's answer is checked against the znode's creation zxid, so the late event of a
  claim this daemon released and took again never drops the new one.
* **Checked before every write.** An action on a node runs under a :class:`ClaimGuard`, which the
  action (down to the bare metal driver, each retry included) checks before every write: the
  claim is still held, with the same epoch, and the fence allows acting in its term. Otherwise
  :class:`NotOurs` is raised and the action stops writing; whoever holds the node next finishes
  it from the instance's recorded state.
* **Never waiting for ever.** Every wait for ZooKeeper's answers is bounded by the session
  timeout (``answer_within``; :func:`computed.fleet.zookeeper.answer`), one limit per pipelined
  batch: with every server gone kazoo would hold a request until one answers again, which may be
  never, and a daemon asked to stop must stop. A create or delete not answered in time counts as
  failed (its outcome unknown, as after a dropped connection: a create that ZooKeeper carries
  out later is adopted if the plan still gives us the node, else deleted by the next pass, never
  acted on; a delete is made again). A claim whose delete is not answered while the
  daemon leaves is left to the session: it is ephemeral, and goes when the session expires (one
  log line names them).
* **On record.** The audit log (:mod:`computed.fleet.audit`) gets a ``claim`` record before a
  claim becomes visible in :meth:`ClaimTable.held`, and a ``release`` record after it stops being
  visible (before its znode is deleted): the records bracket every action taken under it.

Threads: the fleet thread (:class:`computed.fleet.reconciler.Fleet`) acquires, releases,
forgets and deletes released claims; kazoo's event thread runs the watch callbacks, which drop a
claim deleted behind our back and set ``wake`` (the fleet's wake-up: an Event, never blocking
kazoo); the node thread, the report thread (:class:`computed.daemon.sync.ReportGate`), the
instance worker's threads (:class:`ClaimGuard`, :meth:`ClaimTable.while_held`) and the metrics
endpoint's request threads read. The held and undeleted claims (two dicts) and the unanswered
creates (a set) are guarded by the table's lock: every change and every read is under it, and
readers get copies or immutable :class:`Claim` values. :meth:`ClaimTable.while_held` runs its
callable (the audit's ``act`` record) under that lock, so an action is recorded only while its
claim is held and before the claim's ``release`` record: the check and the record were one
step under eventlet (no I/O between them), and are one critical section now.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kazoo import exceptions as zk_exc
from kazoo.protocol.states import EventType

from computed.conf.coordination import DEFAULT_SESSION_TIMEOUT
from computed.fleet import zookeeper
from computed.fleet.audit import AuditEvent, AuditLog
from computed.fleet.fence import Fence
from computed.fleet.zookeeper import Deadline

LOG = logging.getLogger(__name__)

#: Requests :meth:`ClaimTable.acquire` keeps in flight at once. Pipelining every claim of a
#: cold start at once (10,000 per daemon at 50,000 nodes) left 34 MB of the requests' memory
#: with the allocator after they were answered, 22 MB more than windows of 500 (measured on
#: the harness's ZooKeeper); a window of a few hundred keeps the round trips few.
ACQUIRE_WINDOW = 250
#: Nodes a log line names before it says "and N more".
NAMED_IN_A_LINE = 10


def windows(items: list, size: int) -> Iterable[list]:
    """``items`` in consecutive slices of at most ``size``."""
    return (items[i:i + size] for i in range(0, len(items), size))


@dataclass(frozen=True, slots=True)
class Claim:
    """A claim this daemon holds: its node, its epoch (the znode's czxid), the fence term.

    A daemon holds one per node of its share (10,000 at 50,000 nodes and 5 daemons): slots, no
    per-instance dict (40 bytes less each).
    """

    node: str
    epoch: int
    term: int


@dataclass(frozen=True)
class ClaimRecord:
    """A claim as anybody can read it from ZooKeeper (for status and audits)."""

    node: str
    host: str
    epoch: int
    member_epoch: int


class NotOurs(Exception):
    """An action may no longer write to ``node``: the claim it runs under (``claim_epoch``) is
    gone, or the fence refuses to act in its term. Nothing more is written under it."""

    def __init__(self, node: str, claim_epoch: int, why: str):
        super().__init__(f"node {node}: claim epoch {claim_epoch} is no longer ours to act "
                         f"under: {why}")
        self.node = node
        self.claim_epoch = claim_epoch
        self.why = why


@dataclass
class AcquireResult:
    acquired: list[Claim]
    busy: list[str]
    failed: list[str]


def claims_path(root: str) -> str:
    return f"{root}/claims"


def some_nodes(claims: list[Claim]) -> str:
    """The nodes of ``claims`` for one log line: the first few, then how many more."""
    named = ", ".join(claim.node for claim in claims[:NAMED_IN_A_LINE])
    more = len(claims) - NAMED_IN_A_LINE
    return f"{named} and {more} more" if more > 0 else named


class ClaimTable:
    """The claims this daemon holds, and the operations that change them."""

    def __init__(self, client: Any, root: str, host: str, audit: AuditLog,
                 wake: threading.Event,
                 answer_within: Callable[[], float] = lambda: DEFAULT_SESSION_TIMEOUT):
        self._client = client
        # Seconds to wait for ZooKeeper's answers to one batch: the session timeout (the
        # fence's, once the server granted it), past which an unanswered delete is moot.
        self._answer_within = answer_within
        self._path = claims_path(root)
        self._host = host
        self._audit = audit
        # Set from kazoo's thread when a claim we wait for is deleted (the reconciler's wake-up).
        self._wake = wake
        # The watch on each held claim, one object: kazoo keeps the watch it is given for every
        # watched path, and ``self._held_event`` makes a new bound method at each use (64 bytes
        # per claim held).
        self._held_watch = self._held_event
        self._held: dict[str, Claim] = {}
        # Released (not acted on) but whose znode's delete failed: deleted again by
        # delete_released.
        self._undeleted: dict[str, Claim] = {}
        # Nodes whose create ZooKeeper did not answer in time: kazoo may still send it once a
        # server answers, so the znode may exist under our session though we hold nothing.
        # delete_released looks at each and deletes one of ours that no acquire took back:
        # left alone, it would block the node's rightful owner until our session ends (seen
        # when the ring moved the node to a newcomer before our next pass).
        self._unanswered: set[str] = set()
        self._lock = threading.Lock()

    def ensure_root(self) -> None:
        """Create the parent of the claim znodes (once connected)."""
        zookeeper.answer(self._client.ensure_path_async(self._path), self._deadline(),
                         f"the creation of {self._path}")

    def _deadline(self) -> Deadline:
        return Deadline(self._answer_within())

    def held(self) -> dict[str, Claim]:
        with self._lock:
            return dict(self._held)

    def get(self, node: str) -> Claim | None:
        with self._lock:
            return self._held.get(node)

    def while_held(self, claim: Claim, do: Callable[[], None]) -> bool:
        """Run ``do`` (short, no I/O but a local file) under the table's lock if ``claim`` is
        still held; False, without running it, once it was released, lost or replaced. A release
        from another thread then comes wholly before or wholly after ``do``."""
        with self._lock:
            if self._held.get(claim.node) != claim:
                return False
            do()
            return True

    def acquire(self, nodes: Iterable[str], member_epoch: int, term: int) -> AcquireResult:
        """Create claims on ``nodes``, pipelined :data:`ACQUIRE_WINDOW` at a time; busy ones get a
        watch that sets ``wake``."""
        value = json.dumps({"host": self._host, "member_epoch": member_epoch}).encode()
        result = AcquireResult([], [], [])
        for window in windows(list(nodes), ACQUIRE_WINDOW):
            self._acquire(window, value, member_epoch, term, result)
        return result

    def _acquire(self, nodes: list[str], value: bytes, member_epoch: int, term: int,
                 result: AcquireResult) -> None:
        """One window of :meth:`acquire`: its creates pipelined, then its busy nodes looked at."""
        deadline = self._deadline()
        pending = [(node, self._client.create_async(self._node_path(node), value, ephemeral=True,
                                                    include_data=True))
                   for node in nodes]
        taken = []
        for node, async_result in pending:
            try:
                _, stat = zookeeper.answer(async_result, deadline, f"the claim on node {node}")
            except zk_exc.NodeExistsError:
                taken.append(node)
                continue
            except zk_exc.KazooException as exc:
                LOG.warning("claim on node %s failed: %s", node, exc)
                result.failed.append(node)
                if isinstance(exc, zk_exc.ConnectionLoss):  # NoAnswer too: outcome unknown
                    with self._lock:
                        self._unanswered.add(node)
                continue
            self._publish(Claim(node, stat.czxid, term), member_epoch, result)
        self._adopt_or_watch(taken, member_epoch, term, result)

    def _publish(self, claim: Claim, member_epoch: int, result: AcquireResult) -> None:
        self._audit.record(AuditEvent.CLAIM, node=claim.node, claim_epoch=claim.epoch,
                           member_epoch=member_epoch)
        with self._lock:
            self._held[claim.node] = claim
            self._undeleted.pop(claim.node, None)  # taken back (adopted) before it was deleted
            self._unanswered.discard(claim.node)
        result.acquired.append(claim)
        self._watch_held(claim.node)

    # --- claims deleted behind our back ----------------------------------------------------

    def _watch_held(self, node: str) -> None:
        """Watch the znode of a claim we hold; its answer is checked as soon as it arrives."""
        try:
            async_result = self._client.exists_async(self._node_path(node),
                                                     watch=self._held_watch)
        except zk_exc.KazooException as exc:  # no session: the fence stops acting anyway
            LOG.warning("cannot watch our claim on node %s: %s", node, exc)
            return
        async_result.rawlink(lambda answer: self._verify_held(node, answer))

    def _held_event(self, event: Any) -> None:
        # kazoo's callback thread: look again (which re-arms the one-shot watch), never block.
        # A claim we no longer hold (released: that is our own delete) is not watched again.
        node = event.path.rsplit("/", 1)[-1] if event.path else None
        if event.type != EventType.NONE and node is not None and self.get(node) is not None:
            self._watch_held(node)

    def _verify_held(self, node: str, answer: Any) -> None:
        """Drop our claim on ``node`` if its znode is gone or is another claim than ours."""
        try:
            stat = answer.get_nowait()
        except Exception:  # connection or session trouble: the fence's business, not a loss
            return
        with self._lock:
            claim = self._held.get(node)
            if claim is None or (stat is not None and stat.czxid == claim.epoch):
                return
            del self._held[node]
        self._audit.record(AuditEvent.RELEASE, node=node, claim_epoch=claim.epoch, lost=True)
        LOG.warning("our claim on node %s (claim epoch %s) was deleted behind our back: "
                    "stopped acting on it", node, claim.epoch)
        self._wake.set()

    def _adopt_or_watch(self, nodes: list[str], member_epoch: int, term: int,
                        result: AcquireResult) -> None:
        """Nodes whose claim already exists: one of ours that we forgot (a reply lost in a
        reconnect) is taken back; anybody else's is watched until it goes. Pipelined: a
        newcomer can find hundreds of nodes still held by their previous owners."""
        session_id = self._session_id()
        deadline = self._deadline()
        pending = [(node, self._client.exists_async(self._node_path(node),
                                                    watch=self._claim_event))
                   for node in nodes]
        for node, async_result in pending:
            try:
                stat = zookeeper.answer(async_result, deadline, f"a look at node {node}'s claim")
            except zk_exc.KazooException as exc:
                LOG.warning("cannot watch the claim on node %s: %s", node, exc)
                result.failed.append(node)
                continue
            if stat is None:  # released between our create and our look: try again now
                self._wake.set()
                result.busy.append(node)
            elif session_id is not None and stat.ephemeralOwner == session_id:
                self._publish(Claim(node, stat.czxid, term), member_epoch, result)
            else:
                result.busy.append(node)

    def _claim_event(self, event: Any) -> None:
        if event.type in ("DELETED", "NONE"):
            self._wake.set()

    def release(self, nodes: Iterable[str], leaving: bool = False) -> list[Claim]:
        """Stop acting on ``nodes`` first, then delete their claims. ``leaving``: the daemon
        is leaving, and a delete ZooKeeper does not answer is left to the session's expiry
        instead of being made again."""
        with self._lock:
            released = [self._held.pop(node) for node in list(nodes) if node in self._held]
        for claim in released:
            self._audit.record(AuditEvent.RELEASE, node=claim.node, claim_epoch=claim.epoch)
        self._delete(released, leaving)
        return released

    def delete_released(self) -> int:
        """Delete again the claims released earlier whose delete failed, each only if its znode
        is still that claim of this session, and the znodes of unanswered creates that turn out
        to be ours though no acquire took them (:meth:`_delete_unanswered`); returns how many
        released claims are still left to delete. Runs on the reconciler's thread, the one that
        acquires, so no acquire of ours runs meanwhile."""
        self._delete_unanswered()
        with self._lock:
            undeleted = list(self._undeleted.values())
        if not undeleted:
            return 0
        by_node = {claim.node: claim for claim in undeleted}
        ours = []
        for node, stat in self._ours(list(by_node)):
            claim = by_node[node]
            if stat is not None and stat.czxid == claim.epoch:
                ours.append(claim)
            else:  # gone, or died with an older session (whoever claimed it since owns it)
                self._settled(claim)
        self._delete(ours)
        with self._lock:
            return len(self._undeleted)

    def _ours(self, nodes: list[str]) -> list[tuple[str, Any]]:
        """Look at the claim znodes of ``nodes``, pipelined, answered within the session timeout
        in all: ``(node, stat)`` for each answered, stat None unless the znode exists and is of
        this session; a node not answered in time is left out (looked at again next pass)."""
        session_id = self._session_id()
        deadline = self._deadline()
        pending = [(node, self._client.exists_async(self._node_path(node))) for node in nodes]
        looked = []
        for node, async_result in pending:
            try:
                stat = zookeeper.answer(async_result, deadline, f"a look at node {node}'s claim")
            except zk_exc.KazooException:
                continue
            ours = stat is not None and session_id is not None and stat.ephemeralOwner == session_id
            looked.append((node, stat if ours else None))
        return looked

    def _delete_unanswered(self) -> None:
        """Settle the creates ZooKeeper did not answer in time: a znode of this session that no
        acquire took back (it would have been adopted: held) is deleted, as a claim released;
        one that is gone or another session's is forgotten; no answer yet: the next pass."""
        with self._lock:
            nodes = [node for node in self._unanswered if node not in self._held]
            self._unanswered.difference_update(self._held)
        if not nodes:
            return
        ours = []
        for node, stat in self._ours(nodes):
            with self._lock:
                self._unanswered.discard(node)
            if stat is not None:
                ours.append(Claim(node, stat.czxid, 0))  # never held: no term of ours
        if ours:
            LOG.warning("deleting %d claims of ours whose create ZooKeeper answered too late "
                        "(nodes %s): never acted on", len(ours), some_nodes(ours))
            self._delete(ours)

    def _delete(self, claims: list[Claim], leaving: bool = False) -> None:
        """Delete the znodes of released ``claims``, pipelined, waiting for the answers at most
        the session timeout in all; the ones ZooKeeper did not delete are kept for
        :meth:`delete_released`, unless the daemon is ``leaving``. One log line names them."""
        if not claims:
            return
        deadline = self._deadline()
        pending = [(claim, self._client.delete_async(self._node_path(claim.node)))
                   for claim in claims]
        failed: list[Claim] = []
        reason = ""
        for claim, async_result in pending:
            try:
                zookeeper.answer(async_result, deadline, "the delete of a claim")
            except zk_exc.NoNodeError:
                pass
            except zk_exc.KazooException as exc:
                failed.append(claim)
                reason = str(exc) or type(exc).__name__
                continue
            self._settled(claim)
        if not failed:
            return
        if leaving:
            # Past the session timeout with no answer, the delete is moot: the claims are
            # ephemeral znodes, and go with the session when it expires (if it has not yet).
            LOG.warning("leaving without ZooKeeper confirming the delete of %d claims (nodes "
                        "%s): %s; they are ephemeral and go when the session expires",
                        len(failed), some_nodes(failed), reason)
            return
        # Not acting on them any more, but their nodes stay blocked while the znodes live.
        LOG.warning("could not delete %d claims (nodes %s): %s; deleting them again once "
                    "ZooKeeper answers", len(failed), some_nodes(failed), reason)
        with self._lock:
            for claim in failed:
                if claim.node not in self._held:
                    self._undeleted[claim.node] = claim

    def _settled(self, claim: Claim) -> None:
        with self._lock:
            if self._undeleted.get(claim.node) == claim:
                del self._undeleted[claim.node]

    def forget(self) -> list[Claim]:
        """Drop every claim from memory (the session that held them is gone)."""
        with self._lock:
            dropped, self._held = list(self._held.values()), {}
            self._undeleted = {}  # their znodes died with the session
            self._unanswered = set()
        for claim in dropped:
            self._audit.record(AuditEvent.RELEASE, node=claim.node, claim_epoch=claim.epoch,
                               lost=True)
        return dropped

    def _node_path(self, node: str) -> str:
        return f"{self._path}/{node}"

    def _session_id(self) -> int | None:
        client_id = self._client.client_id
        return client_id[0] if client_id else None


class ClaimGuard:
    """Whether an action started under ``claim`` may still write; :meth:`check` before every
    write (each retry included).

    Checks, in memory and without a round trip, that this daemon still holds ``claim`` (same
    node, same claim epoch, same fence term: not released, lost with the session, or deleted
    behind its back) and that the fence allows acting now (session connected, lease fresh).
    """

    def __init__(self, table: ClaimTable, fence: Fence, claim: Claim):
        self._table = table
        self._fence = fence
        self.claim = claim

    @property
    def node(self) -> str:
        return self.claim.node

    def check(self) -> None:
        """Return if the action may write now; raise :class:`NotOurs` otherwise."""
        if self._table.get(self.claim.node) != self.claim:
            raise NotOurs(self.claim.node, self.claim.epoch, "the claim is no longer held")
        if not self._fence.may_act(self.claim.term):
            raise NotOurs(self.claim.node, self.claim.epoch,
                          f"the fence refuses to act (ZooKeeper session "
                          f"{self._fence.state.value}, lease "
                          f"{self._fence.lease_remaining():.1f} s)")


def read_claims(client: Any, root: str,
                timeout: float = DEFAULT_SESSION_TIMEOUT) -> dict[str, ClaimRecord]:
    """Every claim in the fleet, read with pipelined requests (for status and checks), each of
    the two rounds answered within ``timeout`` seconds, else
    :class:`~computed.fleet.zookeeper.NoAnswer` (a command must not hang on a ZooKeeper that
    went away after it connected)."""
    path = claims_path(root)
    try:
        children = zookeeper.answer(client.get_children_async(path), timeout,
                                    f"the list of {path}")
    except zk_exc.NoNodeError:
        return {}
    deadline = Deadline(timeout)
    pending = [(node, client.get_async(f"{path}/{node}")) for node in children]
    records = {}
    for node, async_result in pending:
        try:
            data, stat = zookeeper.answer(async_result, deadline, f"a read of {path}/{node}")
        except zk_exc.NoNodeError:
            continue
        try:
            body = json.loads(data)
            host, member_epoch = str(body["host"]), int(body["member_epoch"])
        except (ValueError, KeyError, TypeError):
            host, member_epoch = "?", 0
        records[node] = ClaimRecord(node, host, stat.czxid, member_epoch)
    return records


def claim_holders(client: Any, root: str, nodes: Iterable[str],
                  timeout: float = DEFAULT_SESSION_TIMEOUT) -> dict[str, tuple[int, str | None]]:
    """``{node: (claim epoch, host)}`` for the live claim on each of ``nodes`` that has one,
    read with one round of pipelined ``get_async`` answered within ``timeout`` seconds in all;
    unclaimed nodes are left out. ``host`` is None when the claim's data cannot be parsed (the
    reporter's fence then refuses every report). Raises what kazoo raises, other than
    NoNodeError, when ZooKeeper cannot be read (:class:`~computed.fleet.zookeeper.NoAnswer`, a
    ConnectionLoss, when it does not answer in time)."""
    path = claims_path(root)
    deadline = Deadline(timeout)
    pending = [(node, client.get_async(f"{path}/{node}")) for node in dict.fromkeys(nodes)]
    holders: dict[str, tuple[int, str | None]] = {}
    for node, async_result in pending:
        try:
            data, stat = zookeeper.answer(async_result, deadline, f"a read of {path}/{node}")
        except zk_exc.NoNodeError:
            continue
        holders[node] = (stat.czxid, _claim_host(data))
    return holders


def _claim_host(data: bytes) -> str | None:
    """The host a claim's data names; None unless it is ``{"host": "<non-empty str>", ...}``."""
    try:
        body = json.loads(data)
    except (ValueError, TypeError):
        return None
    host = body.get("host") if isinstance(body, dict) else None
    return host if isinstance(host, str) and host else None
