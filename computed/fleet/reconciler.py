"""The fleet reconciler: carries the reconcile plan out against ZooKeeper, pass after pass.

Owns the daemon's life in the fleet, as a state machine driven by events (membership and drain
changes, claims freed by a peer, the node list, ZooKeeper session changes), each of which wakes
one reconciler thread::

    JOINING --joined--> ACTIVE <--reconnected, same session-- SUSPENDED
                          |  \\--connection lost---------------^     |
                          |                                          | session expired
                          |                 LOST <-------------------+
                          |                   \\--new session: rejoin, new member epoch--> ACTIVE
                          +--stop--> DRAINING --free nodes released/timeout--> LEAVING --> STOPPED

A pass in ACTIVE reads its inputs (the members, the claims held, the node list, the instances'
hosts), asks :func:`computed.fleet.plan.compute_plan` what to do (pure: the rules and their
guarantees live there) and does it through the :class:`computed.fleet.claims.ClaimTable`:
**release first** what is no longer ours (so a node moving to a peer is dropped before the peer
can claim it), then **take** what is ours and free. A node a peer still holds is watched and
retried the moment it is freed. Nodes that do not move are untouched: a join or leave moves only
the keys the ring moves, with no fleet-wide pause. The ring is rebuilt only when the membership
changes (:class:`computed.fleet.plan.RingCache`), and the nodes are placed on it again only when
the members, the node set or the instances' hosts changed
(:class:`computed.fleet.plan.OwnershipCache`): a pass with nothing new places no node again.

Actions go through :meth:`Fleet.act`, which acts only on a claim this daemon holds and only while
the fence (:mod:`computed.fleet.fence`) says the session is alive and the lease fresh. That check
opens an action; an action that writes for long (an Ironic deploy, undeploy or power change,
retried) also runs under :meth:`Fleet.guard`, a :class:`computed.fleet.claims.ClaimGuard` that it
checks again before every write, each retry included, and that stops it (``NotOurs``) once the
claim is released, lost or deleted behind our back, or the fence refuses. On SUSPENDED nothing is
acted on; on LOST every claim is forgotten and the daemon rejoins with a new member epoch, then
claims again, with new claim epochs, in the fence's new term. :meth:`Fleet.may_act_as` tells
the re-homing whether this daemon is an active member under a given member epoch with a fence
that allows acting.

Every wait for ZooKeeper in a pass, the drain and the leave is bounded by the session timeout
(:mod:`computed.fleet.zookeeper`, "Bounded waits"): an unanswered request is a lost connection,
which a pass retries; a stop with ZooKeeper gone skips the drain and leaves the claims and the
member it could not delete to the session's expiry (they are ephemeral), so ``systemctl stop``
ends in bounded time.

Nodes hosting an instance stay with the instance's host (``instance_hosts``, read on every pass);
the last pass's plan (:attr:`Fleet.plan`) tells the re-homing (:mod:`computed.fleet.rehome`) which
orphaned instances this daemon adopts.

Threads: one fleet thread (:meth:`Fleet.run`) makes every pass, join and drain, and is the only
writer of :attr:`Fleet.state`, :attr:`Fleet.plan`, the counters (:attr:`Fleet.claimed`,
:attr:`Fleet.released`, :attr:`Fleet.passes`: a single writer's ``+=``, read by the metrics
endpoint's request threads) and the ring caches. :meth:`Fleet.wake`, :meth:`Fleet.request_stop`
and :meth:`Fleet.session_changed` come from any thread (kazoo's connection thread through the
daemon's session relay, the listing and node threads, the instance worker's threads), and the
claims' and membership's watches set the wake-up Event from kazoo's event thread; all of them
only set Events and write the audit log, which has its own lock. The node thread
reads :attr:`Fleet.plan` (an immutable :class:`Plan`, swapped whole) and asks
:meth:`Fleet.may_act_as`; the node thread and the instance worker's threads call
:meth:`Fleet.act`, :meth:`Fleet.claim_for` and :meth:`Fleet.guard`, which read the claim table
and the fence under their locks. The standing :meth:`Fleet.may_act_as` reads (state, member
epoch, term) is written by a join in several steps: those three are read and written together
under one lock, so a rejoin in progress is never seen half done (the old member epoch with the
new term).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from kazoo import exceptions as zk_exc
from tooz import coordination

from computed.fleet.audit import AuditEvent, AuditLog
from computed.fleet.claims import Claim, ClaimGuard, ClaimTable
from computed.fleet.fence import Fence, SessionState
from computed.fleet.membership import Membership
from computed.fleet.plan import OwnershipCache, Plan, RingCache, compute_plan

LOG = logging.getLogger(__name__)

# Seconds between two passes when no event wakes the reconciler: the net under a missed watch.
TICK = 1.0


class FleetState(enum.Enum):
    JOINING = "joining"
    ACTIVE = "active"
    SUSPENDED = "suspended"
    LOST = "lost"
    DRAINING = "draining"
    LEAVING = "leaving"
    STOPPED = "stopped"


class NodeSet(Protocol):
    """The node uuids the fleet shares out (``computed.daemon.nodes.FleetNodes``)."""

    def uuids(self) -> Iterable[str] | None:
        """Every node uuid; None until a first list is read."""


class InstanceHosting(Protocol):
    """Where the instances live (``computed.daemon.hosting.Hosting``)."""

    def hosts(self) -> Mapping[str, str]:
        """The host of the instance on each node that hosts one."""

    def joined(self, member_epoch: int) -> None:
        """This daemon (re)joined the group with ``member_epoch``."""


class Fleet:
    """One daemon's membership, claims and fence, reconciled by one thread.

    Each pass reads ``nodes.uuids()`` and ``hosting.hosts()``; every (re)join is told to
    ``hosting.joined``. ``run`` is the thread; ``join``, ``reconcile``, ``reconcile_draining``,
    ``drain_and_leave`` and ``leave`` are its steps.
    """

    def __init__(self, membership: Membership, claims: ClaimTable, fence: Fence,
                 nodes: NodeSet, hosting: InstanceHosting, audit: AuditLog,
                 join_timeout: float, drain_timeout: float, tick: float = TICK,
                 wake: threading.Event | None = None):
        self.host = membership.host
        self.state = FleetState.JOINING
        self.claims = claims
        self._membership = membership
        self._fence = fence
        self._nodes = nodes
        self._hosting = hosting
        self._audit = audit
        self._join_timeout = join_timeout
        self._drain_timeout = drain_timeout
        self._tick = tick
        self._rings = RingCache()
        self._ownerships = OwnershipCache()
        # What wakes a pass: the Event the membership's and the claims' watches set (given when
        # they were built first, as the daemon builds them), or one of its own.
        self._wake = wake if wake is not None else threading.Event()
        self._stop = threading.Event()
        self._no_drain = threading.Event()  # set by request_stop(drain=False)
        self._term = 0  # the fence term our membership and claims belong to
        self._member_epoch: int | None = None  # of the last join, once it is complete
        # Guards (state, _member_epoch, _term) as one: a join changes them in several steps.
        self._standing = threading.Lock()
        # Claims taken and released since start (read by computed.daemon.metrics).
        self.claimed = 0
        self.released = 0
        self.passes = 0
        self.plan: Plan | None = None  # the last pass's (read by the re-homing, on another thread)

    # --- events (any thread) -------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    def session_changed(self, state: SessionState) -> None:
        """Called by the fence on every session state change; never blocks. The members are
        read again on the next pass, whatever the watches said."""
        self._membership.invalidate()
        self._audit.record(AuditEvent(state.value), member_epoch=self._membership.member_epoch,
                           term=self._fence.term)
        if state is SessionState.CONNECTED:
            LOG.info("ZooKeeper session connected")
        else:
            LOG.warning("ZooKeeper session %s", state.value)
        self.wake()

    def request_stop(self, drain: bool = True) -> None:
        """Ask :meth:`run` to end: after a drain (the daemon's SIGTERM), or with ``drain``
        false by leaving at once (:meth:`leave`: the peers take the nodes without waiting
        for a session to expire, but with no hand-over in order). A request without drain
        made before the run ends its drain wins."""
        if not drain:
            self._no_drain.set()
        self._stop.set()
        self.wake()

    # --- the reconciler thread -------------------------------------------------------------

    def run(self) -> None:
        """Join, then reconcile on every event until asked to stop; then drain and leave (or
        leave at once, when the stop asked for no drain).

        Raises :class:`computed.fleet.membership.MembershipError` when the daemon cannot be a
        member (another daemon runs with its host name); a lost ZooKeeper connection while
        joining is waited out, as in any pass."""
        if not self._start():
            return
        while not self._stop.is_set():
            self._wake.wait(self._tick)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.reconcile()
            except (zk_exc.ConnectionLoss, zk_exc.SessionExpiredError) as exc:
                # The session's trouble, which the fence already acts on: one line, no trace.
                LOG.warning("reconcile pass interrupted by ZooKeeper (%s); retrying",
                            type(exc).__name__)
                time.sleep(min(self._tick, 1.0))
            except Exception:  # a pass failing must not end the daemon: the next one retries
                LOG.exception("reconcile pass failed; retrying")
                time.sleep(min(self._tick, 1.0))
        if self._no_drain.is_set():
            self.leave()
        else:
            self.drain_and_leave()

    def _start(self) -> bool:
        """The first join and the watches, retried while ZooKeeper is away (a connection that
        drops while a loaded daemon starts must not end it); False when asked to stop first."""
        while not self._stop.is_set():
            try:
                if self._member_epoch is None or self._term != self._fence.term:
                    self.join()
                self._membership.watch()
                return True
            except (zk_exc.ConnectionLoss, zk_exc.SessionExpiredError,
                    coordination.ToozConnectionError) as exc:
                LOG.warning("joining group %s interrupted by ZooKeeper (%s); retrying",
                            self._membership.group, type(exc).__name__)
                self._wake.wait(min(self._tick, 1.0))
                self._wake.clear()
        return False

    def join(self) -> None:
        """Join the group in the fence's current term, with a new member epoch."""
        with self._standing:
            self.state = FleetState.JOINING
            self._member_epoch = None
            self._term = self._fence.term
        self.claims.ensure_root()
        member_epoch = self._membership.join(self._join_timeout, stopping=self._stop.is_set)
        self._audit.record(AuditEvent.JOIN, member_epoch=member_epoch, term=self._term)
        LOG.info("host %s joined group %s with member epoch %s", self.host,
                 self._membership.group, member_epoch)
        self._hosting.joined(member_epoch)
        with self._standing:
            self._member_epoch = member_epoch
            self.state = FleetState.ACTIVE

    def reconcile(self) -> None:
        """One pass: follow the session, then carry out the plan."""
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
            self.join()  # a new session: new member epoch, then claims anew below
        self.state = FleetState.ACTIVE
        self.claims.delete_released()
        plan = self._plan(draining=False)
        if plan is None:
            return  # no node list yet: claim nothing, release nothing
        if not plan.member:
            # Our membership znode is gone though the session lives (deleted by hand?): we are
            # not a member, so we own nothing; join again.
            LOG.warning("host %s is not in group %s; releasing all and joining again",
                        self.host, self._membership.group)
            self._release(plan.release)
            self.join()
            return
        self._release(plan.release)
        self._take(plan.take)

    def _plan(self, draining: bool) -> Plan | None:
        """Read the inputs and decide; None while there is no node list yet."""
        nodes = self._nodes.uuids()
        if nodes is None:
            return None
        if not isinstance(nodes, frozenset):
            nodes = frozenset(nodes)
        members = [member.as_ring_member() for member in self._membership.members()]
        ring = self._rings.ring_for(members)
        instance_hosts = self._hosting.hosts()
        ownership = self._ownerships.ownership_for(members, nodes, instance_hosts, ring)
        self.plan = compute_plan(members, self.claims.held().keys(), nodes, instance_hosts,
                                 self.host, draining=draining, ring=ring, ownership=ownership)
        return self.plan

    def _release(self, nodes: Iterable[str]) -> None:
        self.released += len(self.claims.release(sorted(nodes)))

    def _take(self, nodes: Iterable[str]) -> None:
        nodes = sorted(nodes)
        if not nodes:
            return
        result = self.claims.acquire(nodes, self._membership.member_epoch, self._term)
        self.claimed += len(result.acquired)
        if result.acquired or result.busy:
            LOG.info("claimed %d nodes (%d held by peers, watched; %d failed)",
                     len(result.acquired), len(result.busy), len(result.failed))
        if result.failed:
            self.wake()

    def _forget_claims(self) -> None:
        dropped = self.claims.forget()
        if dropped:
            LOG.warning("session lost: dropped %d claims", len(dropped))

    def drain_and_leave(self) -> None:
        """Hand free nodes to peers before leaving, so they take over without a session timeout.

        The drain ends as soon as a pass finds nothing more to release: what is still held then
        is what the rules keep for a draining member (the nodes of its own instances, released
        at the leave below), and waiting longer would not hand it over (the drain waited the
        whole ``drain_timeout`` on every daemon hosting an instance: a minute per host in a
        rolling upgrade, tests/upgrade/grenade.py)."""
        self.state = FleetState.DRAINING
        interrupted = ""
        try:
            if self._fence.state is SessionState.CONNECTED:
                self._membership.set_draining("stopping", persistent=False)
                deadline = time.monotonic() + self._drain_timeout
                while time.monotonic() < deadline:
                    plan = self.reconcile_draining()
                    if not self.claims.held() or (plan is not None and not plan.release):
                        break
                    self._wake.wait(self._tick)
                    self._wake.clear()
        except (zk_exc.ConnectionLoss, zk_exc.SessionExpiredError) as exc:
            # ZooKeeper went away while draining (NoAnswer included): one line, no trace.
            interrupted = str(exc) or type(exc).__name__
        except Exception:
            LOG.exception("draining failed; leaving anyway")
        if interrupted:  # logged outside the except: oslo.log would append the exception
            LOG.warning("draining interrupted by ZooKeeper (%s); leaving anyway", interrupted)
        self.leave()

    def leave(self) -> None:
        """Release every claim still held and leave the group (the end of every run). Each
        wait for ZooKeeper is bounded by the session timeout: with ZooKeeper gone the claims and
        the member are left to the session's expiry (they are ephemeral), one line each."""
        self.state = FleetState.LEAVING
        self.released += len(self.claims.release(sorted(self.claims.held().keys()),
                                                  leaving=True))
        self._membership.leave()
        self._audit.record(AuditEvent.LEAVE, member_epoch=self._membership.member_epoch)
        self.state = FleetState.STOPPED

    def reconcile_draining(self) -> Plan | None:
        """A pass while draining: keep only what the rules still give a draining member.
        Returns the pass's plan (None when there was none: no session, no node list yet)."""
        if self._fence.state is not SessionState.CONNECTED:
            return None
        plan = self._plan(draining=True)
        if plan is not None:
            self._release(plan.release)
        return plan

    # --- acting on nodes -------------------------------------------------------------------

    def claim_for(self, node: str) -> Claim | None:
        """The claim this daemon may act on for ``node`` right now, or None."""
        claim = self.claims.get(node)
        if claim is None or not self._fence.may_act(claim.term):
            return None
        return claim

    def guard(self, claim: Claim) -> ClaimGuard:
        """The guard an action under ``claim`` checks before each of its writes."""
        return ClaimGuard(self.claims, self._fence, claim)

    def may_act_as(self, member_epoch: int) -> bool:
        """True while this daemon is an active member under ``member_epoch`` (its last join's)
        and the fence allows acting in that join's term."""
        with self._standing:  # read together: a join writes them in several steps
            state, current, term = self.state, self._member_epoch, self._term
        return (state is FleetState.ACTIVE and current == member_epoch
                and self._fence.may_act(term))

    def act(self, node: str, action: str, do: Callable[[Claim], Any] | None = None,
            **details: Any) -> bool:
        """Run ``do(claim)`` for ``node`` if, and only if, this daemon may act on it now."""
        claim = self.claim_for(node)
        if claim is None:
            return False
        # Recorded only while the claim is still held (the fleet thread, or kazoo's, may have
        # released it since claim_for): the act record then always precedes its release's.
        if not self.claims.while_held(claim, lambda: self._audit.record(
                AuditEvent.ACT, node=node, claim_epoch=claim.epoch, action=action, **details)):
            return False
        if do is not None:
            do(claim)
        return True
