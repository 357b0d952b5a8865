"""The fence: whether this daemon may act on the nodes it claimed, right now.

Owns the daemon's view of its ZooKeeper session and the rule that gates every action on a node.
ZooKeeper makes a claim exclusive (see :mod:`computed.fleet.claims`), but a daemon learns that its
session expired only when it talks to ZooKeeper again: a daemon frozen (SIGSTOP, a long GC or VM
pause) or cut off past the session timeout would, on waking, still believe it holds its claims
while a peer already took them over. The fence closes that window with two rules:

* **Session state.** Kazoo's connection states drive a small state machine::

      CONNECTED --(connection dropped)--> SUSPENDED --(reconnected, same session)--> CONNECTED
          |                                   |
          +------------(session expired)------+--> LOST --(new session)--> CONNECTED, term+1

  Only CONNECTED may act. On SUSPENDED every action stops at once (peers may already have taken
  the nodes over if the session expires). LOST ends the fence's *term*: the next session starts
  a new one, and every claim made in an older term is dead, whatever the process remembers.

* **Lease.** Even while CONNECTED, the fence acts only within a lease that a successful round trip
  to ZooKeeper renews: a request sent at ``t`` and answered proves ZooKeeper heard from the session
  at or after ``t``, so the session cannot expire before ``t + session_timeout``. The lease runs
  to ``t + session_timeout * LEASE_FRACTION``, on the monotonic clock, which keeps counting while a
  process is stopped. A process that wakes after a long pause finds its lease expired and acts on
  nothing until a fresh round trip succeeds, which it cannot on an expired session.

Checked before every write, not once: ``may_act`` answers from memory (no round trip), so an
action that writes for long checks it again before each write through its
:class:`computed.fleet.claims.ClaimGuard`, and stops as soon as the session is in doubt or the
lease has run out, even in the middle of a retried request.

Claim epochs: every claim carries the creation zxid of its znode, which ZooKeeper makes unique and
increasing across the ensemble, so a later owner of a node always holds a larger claim epoch;
downstream writers keep the largest claim epoch they have seen per node and refuse smaller ones
(fencing tokens). A member epoch is the zxid of a daemon's group membership znode, new on every
join. Neither is the fence's term, which only this process counts.

Threads: kazoo's connection thread drives the state machine (:meth:`Fence.connected`,
:meth:`Fence.suspended`, :meth:`Fence.lost`, through the daemon's listener; the main thread
also calls :meth:`Fence.granted` and :meth:`Fence.connected` once at start); the lease thread
calls :meth:`Fence.renew`; the fleet, node, report and instance worker threads ask
:meth:`Fence.may_act`; the metrics endpoint's request threads read the state, the lease left
and the session timeout. State, term, lease and session timeout change only under the fence's
lock, and :meth:`Fence.may_act` reads them together under it; the properties read one of them
without it (an atomic read of one reference). :meth:`Fence.renew` makes its round trip outside
the lock and extends the lease only if the term it started in is still the current one and the
session still connected, so a round trip that spans a lost session never renews the new one.
Each transition says whether it changed the state; the daemon tells the fleet after it, outside
the lock: kazoo calls its listeners one at a time, so only the start's own
:meth:`Fence.connected` can race one of kazoo's, and then the fleet may hear of two changes in
the other order (it reads the state itself on each pass; only the audit log's order of session
records can differ).
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable

# Share of the session timeout a successful round trip is trusted for. ZooKeeper cannot expire the
# session sooner than a full timeout after it heard from us; the rest is margin for clock rate
# differences and for the time between a check and the action it guards.
LEASE_FRACTION = 2 / 3


class SessionState(enum.Enum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"


class Fence:
    """Session state + lease; thread-safe. ``may_act(term)`` gates every action."""

    def __init__(self, session_timeout: float, clock: Callable[[], float] = time.monotonic):
        if session_timeout <= 0:
            raise ValueError(f"session timeout must be positive, got {session_timeout}")
        # Asked for in the backend URL; until :meth:`granted` says otherwise, also the lease's base.
        self.requested_session_timeout = session_timeout
        self.session_timeout = session_timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._state = SessionState.LOST
        self._term = 0
        self._lease_until = float("-inf")

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def term(self) -> int:
        """Bumped each time a session is lost: claims of an older term are dead."""
        return self._term

    def granted(self, session_timeout: float) -> None:
        """The session timeout ZooKeeper granted (it clamps the one asked for to its own
        bounds, see :func:`computed.fleet.zookeeper.granted_session_timeout`): leases are
        computed from it from now on."""
        if session_timeout <= 0:
            raise ValueError(f"session timeout must be positive, got {session_timeout}")
        with self._lock:
            self.session_timeout = session_timeout
            self._lease_until = min(self._lease_until,
                                    self._clock() + session_timeout * LEASE_FRACTION)

    # connected, suspended and lost say whether the state changed: the caller (the daemon's
    # relay of kazoo's states, computed.daemon.service) then tells the fleet.

    def connected(self) -> bool:
        """The client is connected: to a new session when coming from LOST (or the start)."""
        with self._lock:
            if self._state is SessionState.CONNECTED:
                return False
            if self._state is SessionState.LOST:
                self._term += 1
            self._state = SessionState.CONNECTED
        return True

    def suspended(self) -> bool:
        with self._lock:
            if self._state is not SessionState.CONNECTED:
                return False
            self._state = SessionState.SUSPENDED
            self._lease_until = float("-inf")
        return True

    def lost(self) -> bool:
        """The session expired; always news (each loss ends whatever the fleet was doing)."""
        with self._lock:
            self._state = SessionState.LOST
            self._lease_until = float("-inf")
        return True

    def renew(self, round_trip: Callable[[], object]) -> bool:
        """Run ``round_trip`` (a request to ZooKeeper); on success extend the lease from its
        start."""
        sent = self._clock()
        term = self._term
        try:
            round_trip()
        except Exception:  # any failure leaves the lease to run out; the state machine says why
            return False
        with self._lock:
            if self._state is SessionState.CONNECTED and self._term == term:
                self._lease_until = max(self._lease_until,
                                        sent + self.session_timeout * LEASE_FRACTION)
                return True
        return False

    def may_act(self, term: int) -> bool:
        """True when a claim made in ``term`` may be acted on now."""
        with self._lock:
            return (self._state is SessionState.CONNECTED and term == self._term
                    and self._clock() < self._lease_until)

    def lease_remaining(self) -> float:
        return max(0.0, self._lease_until - self._clock())
