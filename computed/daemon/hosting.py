"""This daemon as the host of instances: what the fleet needs to know, and when to resume work.

Owns the daemon's side of instances (their operations are :mod:`computed.instances`):

* **Stickiness.** :meth:`Hosting.hosts` tells the fleet which nodes host live instances, and on
  which daemon (a node hosting an instance stays with it). When the database cannot be read the
  last answer is kept: dropping stickiness would move nodes away from their instances.
* **Rejoining.** :meth:`Hosting.joined` (the fleet calls it after every join) moves this host's
  instances to its new member epoch with :func:`computed.fleet.rehome.readopt_own`, a
  compare-and-set that can never take back an instance re-homed while the daemon was away. It
  never raises: when the database fails, the re-adoption stays pending and :meth:`Hosting.readopt`
  (the node thread calls it every pass) retries it with a capped exponential backoff
  (:func:`readopt_delay`, computed's one backoff rule,
  :class:`computed.runtime.retry.Backoff`: a schedule, not a sleeping loop, as the node thread
  has other work), logging each failure with its cause and counting it
  (``readopt_failures``, a metric) until it succeeds. While it is pending nothing of this host is
  resumed (:meth:`Hosting.resume_due` says no): its instances are still under the old member
  epoch, and every operation on them would fail the compare-and-set.
* **Re-homing.** :meth:`Hosting.rehome_orphans` adopts the instances orphaned for longer than
  ``[fleet] rehome_grace`` whose adopter is this daemon (:class:`computed.fleet.rehome.Rehomer`).
* **Resuming.** :meth:`Hosting.resume_due` says when the instance worker should pick up this host's
  instances left in a transitional state: right after a (re)join or an adoption, and every
  ``resume_interval`` seconds (``[fleet] resume_interval``), because a cast can be lost on the
  bus (see :mod:`computed.instances.rpcapi`).

Threads: the fleet thread calls :meth:`Hosting.hosts` (the only writer of the last answer kept,
a mapping swapped whole) and :meth:`Hosting.joined`; the node thread calls
:meth:`Hosting.readopt`, :meth:`Hosting.rehome_orphans` and :meth:`Hosting.resume_due` (the only
user of the resume schedule and of the :class:`computed.fleet.rehome.Rehomer`). The pending
re-adoption (member epoch, tries, next try, :attr:`Hosting.readopt_failures`) is shared by the
fleet thread (a join) and the node thread (a retry): every change is under the re-adoption lock,
which is held across the database call so a join and a retry never re-adopt at once. The metrics
endpoint's request threads read :attr:`Hosting.readopt_pending` and the failure count without
it: atomic reads of one reference. A join or an adoption asks for a resume through an Event.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from sqlalchemy.engine import Engine

from computed.db import instances as db_instances
from computed.fleet.audit import AuditEvent, AuditLog
from computed.fleet.membership import Membership
from computed.fleet.plan import Plan
from computed.fleet.rehome import Rehomer, Standing, readopt_own
from computed.runtime.retry import Backoff

LOG = logging.getLogger(__name__)

# Backoff of a failed re-adoption: 1 s, doubling, at most this many seconds between two tries
# (a database back after an outage is used within this bound).
READOPT_MAX_DELAY = 30.0
_READOPT_BACKOFF = Backoff(first=1.0, cap=READOPT_MAX_DELAY)


def readopt_delay(failures: int) -> float:
    """Seconds before the next try of a re-adoption that failed ``failures`` times in a row."""
    return _READOPT_BACKOFF.delay(failures)


class Hosting:
    """Stickiness for the fleet, re-adoption on join, re-homing of orphans, resume schedule."""

    def __init__(self, engine: Engine, membership: Membership, rehomer: Rehomer, audit: AuditLog,
                 resume_interval: float, clock: Callable[[], float] = time.monotonic):
        self._engine = engine
        self._membership = membership
        self._rehomer = rehomer
        self._audit = audit
        self._clock = clock
        self._sticky: Mapping[str, str] = {}
        self._resume_now = threading.Event()  # set by a join or an adoption
        self._resume_interval = resume_interval
        self._next_resume = clock() + resume_interval
        # Re-adoption: the member epoch still to move this host's instances to (None: done), the
        # failures in a row for it, and when to try again. The lock serialises the fleet thread
        # (a join) with the node thread (a retry).
        self._readopt_lock = threading.Lock()
        self._readopt_epoch: int | None = None
        self._readopt_tries = 0
        self._next_readopt = 0.0
        #: Failed re-adoptions since start (read by computed.daemon.metrics).
        self.readopt_failures = 0

    def hosts(self) -> Mapping[str, str]:
        """Nodes hosting live instances -> the instances' hosts (for stickiness)."""
        try:
            self._sticky = db_instances.instance_hosts(self._engine)
        except Exception as exc:  # keep the last answer: dropping stickiness would move nodes
            LOG.warning("cannot read instance hosts, keeping the last ones: %s", exc)
        return self._sticky

    def joined(self, member_epoch: int) -> None:
        """A (re)join: keep this host's instances under its new member epoch.

        Never raises: a failure leaves the re-adoption pending for :meth:`readopt`."""
        with self._readopt_lock:
            self._readopt_epoch = member_epoch
            self._readopt_tries = 0
            self._next_readopt = self._clock()
        self.readopt()

    @property
    def readopt_pending(self) -> bool:
        """True while this host's instances are not yet under its current member epoch."""
        return self._readopt_epoch is not None

    def readopt(self) -> bool:
        """Re-adopt this host's instances if a re-adoption is pending and due; True when none is
        pending any more."""
        with self._readopt_lock:
            member_epoch = self._readopt_epoch
            if member_epoch is None:
                return True
            if self._clock() < self._next_readopt:
                return False
            try:
                moved = readopt_own(self._engine, self._membership.host, member_epoch)
            except Exception as exc:  # the database: keep the epoch pending, try again later
                self._readopt_tries += 1
                self.readopt_failures += 1
                delay = readopt_delay(self._readopt_tries)
                self._next_readopt = self._clock() + delay
                LOG.warning("cannot re-adopt the instances of host %s under member epoch %s "
                            "(try %d), retrying in %.0fs: %s", self._membership.host,
                            member_epoch, self._readopt_tries, delay,
                            " ".join(str(exc).split()))  # the driver's message spans lines
                return False
            self._readopt_epoch = None
        if moved:
            LOG.info("kept %d instance(s) of this host under member epoch %s", len(moved),
                     member_epoch)
        self._resume_now.set()  # finish what a previous life left half done
        return True

    def rehome_orphans(self, plan: Plan | None, standing: Standing) -> list[str]:
        """Adopt instances orphaned for longer than the grace period, if this daemon is their
        adopter in the fleet's last ``plan`` and ``standing`` (the fleet) says it may act under
        its member epoch; returns the adopted instance uuids."""
        if plan is None:
            return []  # the fleet has not planned yet
        member_epoch = self._membership.member_epoch
        adopted = self._rehomer.step(plan, member_epoch, standing)
        for uuid in adopted:
            self._audit.record(AuditEvent.REHOME, instance=uuid, member_epoch=member_epoch)
        if adopted:
            self._resume_now.set()
        return adopted

    def resume_due(self) -> bool:
        """True when the worker should resume this host's instances now (then not again until
        the next join, adoption or interval)."""
        if self.readopt_pending:
            return False  # this host's instances are not under its member epoch yet
        now = self._clock()
        if not self._resume_now.is_set() and now < self._next_resume:
            return False
        self._resume_now.clear()
        self._next_resume = now + self._resume_interval
        return True
