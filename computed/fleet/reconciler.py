"""The fleet reconciler: from who is live to which nodes this daemon claims and acts on.

Owns the daemon's life in the fleet, as a state machine driven by events (membership and drain
changes, claims freed by a peer, the node list, ZooKeeper session changes), each of which wakes
one reconciler thread::

    JOINING --joined--> ACTIVE <--reconnected, same session-- SUSPENDED
                          |  \\--connection lost---------------^     |
                          |                                          | session expired
                          |                 LOST <-------------------+
                          |                   \\--new session: rejoin, new member epoch--> ACTIVE
                          +--stop--> DRAINING --free nodes released/timeout--> LEAVING --> STOPPED

Each pass in ACTIVE computes this daemon's managed set with :mod:`hashring.ownership` (pure) and
moves the claims toward it: **release first** what is no longer ours (so a node moving to a peer
is dropped before the peer can claim it), then **acquire** what is ours and free. A node a peer
still holds is watched and retried the moment it is freed. Nodes that do not move are untouched:
a join or leave moves only the keys the ring moves, with no fleet-wide pause.

Actions go through :meth:`Fleet.act`, which acts only on a claim this daemon holds and only while
the fence (:mod:`computed.fleet.fence`) says the session is alive and the lease fresh. On SUSPENDED
nothing is acted on; on LOST every claim is forgotten and the daemon rejoins with a new member
epoch, then claims again, with new claim epochs, in the fence's new term.

Instance stickiness (nodes kept by the daemon hosting their instance) plugs in through
``instance_hosts``; until instances exist it is empty.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from typing import Any, Callable, Iterable, Mapping

from computed.fleet.audit import AuditEvent, AuditLog
from computed.fleet.claims import Claim, ClaimTable
from computed.fleet.fence import Fence, SessionState
from computed.fleet.membership import Membership
from hashring.ownership import Ownership, compute_ownership

LOG = logging.getLogger(__name__)


class FleetState(enum.Enum):
    JOINING = "joining"
    ACTIVE = "active"
    SUSPENDED = "suspended"
    LOST = "lost"
    DRAINING = "draining"
    LEAVING = "leaving"
    STOPPED = "stopped"


class Fleet:
    """One daemon's membership, claims and fence, reconciled by one thread."""

    def __init__(self, client: Any, membership: Membership, fence: Fence, root: str,
                 nodes: Callable[[], Iterable[str] | None], audit: AuditLog,
                 instance_hosts: Callable[[], Mapping[str, str]] = dict,
                 join_timeout: float = 30.0, tick: float = 1.0,
                 on_joined: Callable[[int], None] = lambda member_epoch: None):
        self.host = membership.host
        self.state = FleetState.JOINING
        self._client = client
        self._membership = membership
        self._fence = fence
        self._nodes = nodes
        self._instance_hosts = instance_hosts
        self._audit = audit
        self._join_timeout = join_timeout
        self._on_joined = on_joined
        self._tick = tick
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._term = 0  # the fence term our membership and claims belong to
        # Claims taken and released since start (read by computed.runtime.metrics).
        self.claimed = 0
        self.released = 0
        self.members: list = []
        self.ownership: Ownership | None = None  # the rules' answer at the last pass
        self.claims = ClaimTable(client, root, self.host, on_freed=lambda _node: self.wake(),
                                 on_claimed=self._record_claim, on_released=self._record_release)
        self.passes = 0

    # --- events (any thread) -------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    def session_changed(self, state: SessionState) -> None:
        """Called by the fence on every session state change; never blocks."""
        self._audit.record(AuditEvent(state.value), member_epoch=self._membership.member_epoch,
                           term=self._fence.term)
        LOG.warning("ZooKeeper session %s", state.value) if state is not SessionState.CONNECTED \
            else LOG.info("ZooKeeper session connected")
        self.wake()

    def request_stop(self) -> None:
        self._stop.set()
        self.wake()

    # --- the reconciler thread -------------------------------------------------------------

    def run(self, drain_timeout: float = 30.0) -> None:
        """Join, then reconcile on every event until asked to stop; then drain and leave."""
        self._join()
        self._membership.watch()
        while not self._stop.is_set():
            self._wake.wait(self._tick)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.reconcile()
            except Exception:  # a pass failing must not end the daemon: the next one retries
                LOG.exception("reconcile pass failed; retrying")
                time.sleep(min(self._tick, 1.0))
        self._drain_and_leave(drain_timeout)

    def _join(self) -> None:
        self.state = FleetState.JOINING
        self._term = self._fence.term
        self.claims.ensure_root()
        member_epoch = self._membership.join(self._join_timeout, stopping=self._stop.is_set)
        self._audit.record(AuditEvent.JOIN, member_epoch=member_epoch, term=self._term)
        LOG.info("host %s joined group %s with member epoch %s", self.host,
                 self._membership.group, member_epoch)
        self._on_joined(member_epoch)
        self.state = FleetState.ACTIVE

    def reconcile(self) -> None:
        """One pass: follow the session, then move claims toward this daemon's managed set."""
        self.passes += 1
        session = self._fence.state
        if session is SessionState.SUSPENDED:
            self.state = FleetState.SUSPENDED
            return
        if session is SessionState.LOST or self._term != self._fence.term:
            self._forget_claims()
            if session is SessionState.LOST:
                self.state = FleetState.LOST
                return
            self._join()  # a new session: new member epoch, then claims anew below
        self.state = FleetState.ACTIVE
        nodes = self._nodes()
        if nodes is None:
            return  # no node list yet: claim nothing, release nothing
        desired = self._desired(set(nodes))
        if desired is None:
            # Our membership znode is gone though the session lives (deleted by hand?): we are
            # not a member, so we own nothing; join again.
            LOG.warning("host %s is not in group %s; releasing all and joining again",
                        self.host, self._membership.group)
            self._release(self.claims.held().keys())
            self._join()
            return
        held = self.claims.held()
        self._release(held.keys() - desired)
        self._acquire(desired - held.keys())

    def _desired(self, nodes: set[str]) -> frozenset[str] | None:
        """The nodes the rules give this daemon; None when it is not a member."""
        members = self._membership.members()
        if self.host not in {member.name for member in members}:
            return None
        ownership = compute_ownership([m.as_ring_member() for m in members], nodes,
                                      self._instance_hosts())
        # Kept for the service: orphans (instances whose host is gone) are re-homed from it.
        self.members, self.ownership = members, ownership
        return ownership.managed.get(self.host, frozenset())

    def _record_claim(self, claim: Claim) -> None:
        self.claimed += 1
        self._audit.record(AuditEvent.CLAIM, node=claim.node, claim_epoch=claim.epoch,
                           member_epoch=self._membership.member_epoch)

    def _record_release(self, claim: Claim) -> None:
        self.released += 1
        self._audit.record(AuditEvent.RELEASE, node=claim.node, claim_epoch=claim.epoch)

    def _release(self, nodes: Iterable[str]) -> None:
        self.claims.release(sorted(nodes))

    def _acquire(self, nodes: set[str]) -> None:
        if not nodes:
            return
        result = self.claims.acquire(sorted(nodes), self._membership.member_epoch, self._term)
        if result.acquired or result.busy:
            LOG.info("claimed %d nodes (%d held by peers, watched; %d failed)",
                     len(result.acquired), len(result.busy), len(result.failed))
        if result.failed:
            self.wake()

    def _forget_claims(self) -> None:
        dropped = self.claims.forget()
        if dropped:
            LOG.warning("session lost: dropped %d claims", len(dropped))
        for claim in dropped:
            self._audit.record(AuditEvent.RELEASE, node=claim.node, claim_epoch=claim.epoch,
                               lost=True)

    def _drain_and_leave(self, timeout: float) -> None:
        """Hand free nodes to peers before leaving, so they take over without a session timeout."""
        self.state = FleetState.DRAINING
        try:
            if self._fence.state is SessionState.CONNECTED:
                self._membership.set_draining("stopping", persistent=False)
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline:
                    self.reconcile_draining()
                    if not self.claims.held():
                        break
                    self._wake.wait(self._tick)
                    self._wake.clear()
        except Exception:
            LOG.exception("draining failed; leaving anyway")
        self.state = FleetState.LEAVING
        self._release(self.claims.held().keys())
        self._membership.leave()
        self._audit.record(AuditEvent.LEAVE, member_epoch=self._membership.member_epoch)
        self.state = FleetState.STOPPED

    def reconcile_draining(self) -> None:
        """A pass while draining: keep only what the rules still give a draining member."""
        nodes = self._nodes()
        if nodes is None or self._fence.state is not SessionState.CONNECTED:
            return
        desired = self._desired(set(nodes)) or frozenset()
        self._release(self.claims.held().keys() - desired)

    # --- acting on nodes -------------------------------------------------------------------

    def claim_for(self, node: str) -> Claim | None:
        """The claim this daemon may act on for ``node`` right now, or None."""
        claim = self.claims.get(node)
        if claim is None or not self._fence.may_act(claim.term):
            return None
        return claim

    def act(self, node: str, action: str, do: Callable[[Claim], Any] | None = None,
            **details: Any) -> bool:
        """Run ``do(claim)`` for ``node`` if, and only if, this daemon may act on it now."""
        claim = self.claim_for(node)
        if claim is None:
            return False
        self._audit.record(AuditEvent.ACT, node=node, claim_epoch=claim.epoch, action=action,
                           **details)
        if do is not None:
            do(claim)
        return True
