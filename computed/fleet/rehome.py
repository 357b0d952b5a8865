"""Re-homing: instances whose daemon is gone get a new one, after a grace period, safely.

Owns the rule Nova never had. A node hosting an instance stays with the instance's host (sticky);
when that host leaves the group, its instances are *orphans* (:func:`hashring.ownership.
compute_ownership`). The reconcile plan (:class:`computed.fleet.plan.Plan`) lists them, and the
ones this daemon adopts: the node's ring owner among the live, non-draining members
(:func:`hashring.ownership.adopters`: every daemon computes the same one). Once an orphan has
stayed orphaned for ``grace`` seconds, its adopter takes its instance with a compare-and-set on
(host, member epoch) in the database: of two racing adopters exactly one wins, and a daemon that
comes back finds the instance no longer has its (host, member epoch), so it leaves it alone.

Epochs here are *member* epochs (the zxid of the host's membership znode, new on every join). A
daemon that rejoins keeps its own instances by moving them from its old member epoch to its new
one (:func:`readopt_own`), with the same compare-and-set, so it can never take back an instance
that was re-homed while it was away.

Fencing, both ways:

* **From what was seen gone.** The compare-and-set expects the (host, member epoch) the instance
  had when this daemon first found it orphaned, not the row's values when the grace ends: a host
  that came back meanwhile moved its instances to its new member epoch (:func:`readopt_own`), so
  the compare-and-set fails and the live daemon keeps them, even when the adopter's plan is a
  pass behind and still calls them orphans. A changed (host, member epoch) restarts the grace.
* **Only while this daemon may act.** Before every compare-and-set the fleet is asked
  (:meth:`computed.fleet.reconciler.Fleet.may_act_as`) whether this daemon is an active member
  under the member epoch it adopts with and its fence allows acting: a daemon whose session is in
  doubt, or that rejoined since, adopts nothing.

The grace clock starts when this daemon first sees the orphan; a daemon that restarts starts it
again, which only delays adoption.

Threads: a :class:`Rehomer` is used by the node thread alone (through
:meth:`computed.daemon.hosting.Hosting.rehome_orphans`): its orphans, grace clocks and node-less
cache need no lock. What it reads from other threads comes as arguments: the fleet thread's last
plan (immutable, swapped whole) and the fleet's standing, which
:meth:`computed.fleet.reconciler.Fleet.may_act_as` reads under the fleet's lock.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from computed.db import instances as db_instances
from computed.fleet.plan import Plan
from hashring.ownership import Member, adopters

LOG = logging.getLogger(__name__)

# Seconds between two looks for node-less instances of gone hosts (rare: failed builds).
NODELESS_INTERVAL = 10.0


class Standing(Protocol):
    """What the re-homing asks the fleet (:class:`computed.fleet.reconciler.Fleet`)."""

    def may_act_as(self, member_epoch: int) -> bool:
        """True while this daemon is an active member under ``member_epoch`` and its fence
        allows acting."""


@dataclasses.dataclass(frozen=True)
class Orphan:
    """An orphan as this daemon first saw it: its instance's (host, member epoch), and when."""

    instance: str
    host: str
    member_epoch: int | None
    since: float


class Rehomer:
    """This daemon's adoptions: each orphan's grace clock, and the compare-and-sets."""

    def __init__(self, engine: Any, host: str, grace: float,
                 clock: Callable[[], float] = time.monotonic):
        self._engine = engine
        self._host = host
        self._grace = grace
        self._clock = clock
        self._orphans: dict[str, Orphan] = {}  # by node (instance uuid when it has none)
        self._nodeless: dict[str, str] = {}
        self._next_nodeless = float("-inf")

    def due(self, orphans: Mapping[str, str]) -> dict[str, Orphan]:
        """The orphans (by key) among ``orphans`` ({node: gone host}) seen for at least the grace
        period, as first seen; forgets those no longer orphans. A key seen for the first time
        (or with another host) is looked up in the database once, for its instance's member
        epoch then."""
        for key in list(self._orphans):
            if orphans.get(key) != self._orphans[key].host:
                del self._orphans[key]
        new = {key: host for key, host in orphans.items() if key not in self._orphans}
        if new:
            now = self._clock()
            for row in db_instances.live_instances(self._engine):
                key = row.node_uuid or row.uuid
                if key in new and row.host == new[key]:
                    self._orphans[key] = Orphan(row.uuid, row.host, row.member_epoch, now)
        now = self._clock()
        return {key: orphan for key, orphan in self._orphans.items()
                if now - orphan.since >= self._grace}

    def step(self, plan: Plan, member_epoch: int, standing: Standing) -> list[str]:
        """Adopt, under ``member_epoch``, the instances of due orphans whose adopter is this
        daemon; returns their uuids.

        Orphaned nodes and their adopters come from ``plan``. Instances without a node (a failed
        build that released it) are orphans too when their host is gone: nobody else could delete
        them. Their adopter is chosen the same way, by instance uuid. Each compare-and-set runs
        only while ``standing.may_act_as(member_epoch)``.
        """
        nodeless = self._nodeless_orphans(plan.members)
        orphans = {**plan.orphans, **nodeless}
        due = self.due(orphans)
        nodeless_due = {key: orphan.host for key, orphan in due.items() if key in nodeless}
        nodeless_adopters = adopters(plan.members, nodeless_due, ring=plan.ring)
        mine = sorted(key for key in due
                      if key in plan.adopt or nodeless_adopters.get(key) == self._host)
        adopted = []
        for key in mine:
            orphan = due[key]
            if not standing.may_act_as(member_epoch):
                LOG.info("not re-homing: this daemon may not act under member epoch %s now",
                         member_epoch)
                break
            # From (host, member epoch) as seen gone, not the row's now: the host may have come
            # back, or someone else adopted it since (the compare-and-set then fails, as it
            # should).
            if orphan.member_epoch is not None and db_instances.rehome_instance(
                    self._engine, orphan.instance, orphan.host, orphan.member_epoch,
                    self._host, member_epoch):
                LOG.warning("re-homed instance %s (%s) from %s, member epoch %s (gone for %.0fs "
                            "or more) to %s", orphan.instance, key, orphan.host,
                            orphan.member_epoch, self._grace, self._host)
                adopted.append(orphan.instance)
            else:
                LOG.info("instance %s (%s) is no longer %s's at member epoch %s: not re-homed",
                         orphan.instance, key, orphan.host, orphan.member_epoch)
            self._orphans.pop(key, None)
        return adopted

    def _nodeless_orphans(self, members: Iterable[Member]) -> dict[str, str]:
        """{instance uuid: gone host} for node-less live instances of hosts not in the group
        (keyed by instance uuid: there is no node to key them by)."""
        live = {member.name for member in members}
        now = self._clock()
        if now < self._next_nodeless:
            return self._nodeless
        self._next_nodeless = now + NODELESS_INTERVAL
        self._nodeless = {row.uuid: row.host
                          for row in db_instances.nodeless_instances(self._engine)
                          if row.host is not None and row.host not in live}
        return self._nodeless


def readopt_own(engine: Any, host: str, member_epoch: int) -> list[str]:
    """Move this host's instances from its previous member epochs to the current one."""
    moved = []
    for row in db_instances.instances_by_host(engine, host):
        if row.member_epoch == member_epoch:
            continue
        if db_instances.rehome_instance(engine, row.uuid, host, row.member_epoch, host,
                                        member_epoch):
            moved.append(row.uuid)
        else:
            LOG.info("instance %s changed hands while %s was away; leaving it", row.uuid, host)
    return moved
