"""This daemon as the host of instances: what the fleet needs to know, and when to resume work.

Owns the daemon's side of instances (their operations are :mod:`computed.instances`):

* **Stickiness.** :meth:`Hosting.hosts` tells the fleet which nodes host live instances, and on
  which daemon (a node hosting an instance stays with it). When the database cannot be read the
  last answer is kept: dropping stickiness would move nodes away from their instances.
* **Rejoining.** :meth:`Hosting.joined` (the fleet calls it after every join) moves this host's
  instances to its new member epoch with :func:`computed.fleet.rehome.readopt_own`, a
  compare-and-set that can never take back an instance re-homed while the daemon was away.
* **Re-homing.** :meth:`Hosting.rehome_orphans` adopts the instances orphaned for longer than
  ``[fleet] rehome_grace`` whose adopter is this daemon (:class:`computed.fleet.rehome.Rehomer`).
* **Resuming.** :meth:`Hosting.resume_due` says when the instance worker should pick up this host's
  instances left in a transitional state: right after a (re)join or an adoption, and every
  ``resume_interval`` seconds (``[fleet] resume_interval``), because a cast can be lost on the
  bus (see :mod:`computed.instances.rpcapi`).

Thread-safety: the fleet thread calls :meth:`hosts` and :meth:`joined`, the node thread the rest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from sqlalchemy.engine import Engine

from computed.db import api as db_api
from computed.fleet.audit import AuditEvent, AuditLog
from computed.fleet.membership import Membership
from computed.fleet.plan import Plan
from computed.fleet.rehome import Rehomer, Standing, readopt_own

LOG = logging.getLogger(__name__)

# Seconds between two looks for this host's instances left in a transitional state.
RESUME_INTERVAL = 60.0


class Hosting:
    """Stickiness for the fleet, re-adoption on join, re-homing of orphans, resume schedule."""

    def __init__(self, engine: Engine, membership: Membership, rehomer: Rehomer, audit: AuditLog,
                 clock: Callable[[], float] = time.monotonic,
                 resume_interval: float = RESUME_INTERVAL):
        self._engine = engine
        self._membership = membership
        self._rehomer = rehomer
        self._audit = audit
        self._clock = clock
        self._sticky: Mapping[str, str] = {}
        self._resume_now = threading.Event()  # set by a join or an adoption
        self._resume_interval = resume_interval
        self._next_resume = clock() + resume_interval

    def hosts(self) -> Mapping[str, str]:
        """Nodes hosting live instances -> the instances' hosts (for stickiness)."""
        try:
            self._sticky = db_api.instance_hosts(self._engine)
        except Exception as exc:  # keep the last answer: dropping stickiness would move nodes
            LOG.warning("cannot read instance hosts, keeping the last ones: %s", exc)
        return self._sticky

    def joined(self, member_epoch: int) -> None:
        """A (re)join: keep this host's instances under its new member epoch."""
        moved = readopt_own(self._engine, self._membership.host, member_epoch)
        if moved:
            LOG.info("kept %d instance(s) of this host under member epoch %s", len(moved),
                     member_epoch)
        self._resume_now.set()  # finish what a previous life left half done

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
        now = self._clock()
        if not self._resume_now.is_set() and now < self._next_resume:
            return False
        self._resume_now.clear()
        self._next_resume = now + self._resume_interval
        return True
