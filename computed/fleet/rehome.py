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

The grace clock starts when this daemon first sees the orphan; a daemon that restarts starts it
again, which only delays adoption.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from computed.db import api as db_api
from computed.fleet.plan import Plan
from hashring.ownership import Member, adopters

LOG = logging.getLogger(__name__)

# Seconds between two looks for node-less instances of gone hosts (rare: failed builds).
NODELESS_INTERVAL = 10.0


class Rehomer:
    """This daemon's adoptions: each orphan's grace clock, and the compare-and-sets."""

    def __init__(self, engine: Any, host: str, grace: float,
                 clock: Callable[[], float] = time.monotonic):
        self._engine = engine
        self._host = host
        self._grace = grace
        self._clock = clock
        self._orphaned_since: dict[str, float] = {}
        self._nodeless: dict[str, str] = {}
        self._next_nodeless = float("-inf")

    def due(self, orphans: Mapping[str, str]) -> list[str]:
        """Nodes orphaned for at least the grace period (and forget those no longer orphans)."""
        now = self._clock()
        for node in list(self._orphaned_since):
            if node not in orphans:
                del self._orphaned_since[node]
        for node in orphans:
            self._orphaned_since.setdefault(node, now)
        return sorted(node for node, since in self._orphaned_since.items()
                      if now - since >= self._grace)

    def step(self, plan: Plan, member_epoch: int) -> list[str]:
        """Adopt the instances of due orphans whose adopter is this daemon; returns their uuids.

        Orphaned nodes and their adopters come from ``plan``. Instances without a node (a failed
        build that released it) are orphans too when their host is gone: nobody else could delete
        them. Their adopter is chosen the same way, by instance uuid.
        """
        nodeless = self._nodeless_orphans(plan.members)
        orphans = {**plan.orphans, **nodeless}
        due = {key: orphans[key] for key in self.due(orphans)}
        nodeless_due = {key: host for key, host in due.items() if key in nodeless}
        nodeless_adopters = adopters(plan.members, nodeless_due, ring=plan.ring)
        mine = sorted(key for key in due
                      if key in plan.adopt or nodeless_adopters.get(key) == self._host)
        if not mine:
            return []
        adopted = []
        wanted = set(mine)
        by_node = {row.node_uuid or row.uuid: row for row in db_api.live_instances(self._engine)
                   if (row.node_uuid or row.uuid) in wanted}
        for node in mine:
            row = by_node.get(node)
            if row is None:
                continue
            # From the host we saw gone, not the row's host now: the row may have been
            # adopted by someone else since (the compare-and-set then fails, as it should).
            if db_api.rehome_instance(self._engine, row.uuid, due[node], row.member_epoch,
                                      self._host, member_epoch):
                LOG.warning("re-homed instance %s on node %s from %s (gone for %.0fs or more) "
                            "to %s", row.uuid, node, row.host, self._grace, self._host)
                adopted.append(row.uuid)
                self._orphaned_since.pop(node, None)
            else:
                LOG.info("instance %s on node %s was adopted by someone else first",
                         row.uuid, node)
        return adopted

    def _nodeless_orphans(self, members: Iterable[Member]) -> dict[str, str]:
        """{instance uuid: gone host} for node-less live instances of hosts not in the group
        (keyed by instance uuid: there is no node to key them by)."""
        live = {member.name for member in members}
        now = self._clock()
        if now < self._next_nodeless:
            return self._nodeless
        self._next_nodeless = now + NODELESS_INTERVAL
        self._nodeless = {row.uuid: row.host for row in db_api.nodeless_instances(self._engine)
                          if row.host is not None and row.host not in live}
        return self._nodeless


def readopt_own(engine: Any, host: str, member_epoch: int) -> list[str]:
    """Move this host's instances from its previous member epochs to the current one."""
    moved = []
    for row in db_api.instances_by_host(engine, host):
        if row.member_epoch == member_epoch:
            continue
        if db_api.rehome_instance(engine, row.uuid, host, row.member_epoch, host, member_epoch):
            moved.append(row.uuid)
        else:
            LOG.info("instance %s changed hands while %s was away; leaving it", row.uuid, host)
    return moved
