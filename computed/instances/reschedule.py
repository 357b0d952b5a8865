"""Handing a failed build to another node: the executor of a :class:`retries.NextAttempt`.

Owns the I/O of a retry, after :mod:`computed.instances.lifecycle` unwound the failed attempt
(node cleared, allocation removed): ask Placement for the candidates of the instance's class and
traits (without the traits its flavor forbids), leave out every node that failed the build, run
the rest through the scheduling pipeline (the flavor's capability operators and the filters and
weighers of :func:`computed.scheduling.loader.default_pipeline` unless one is given, with the
build's scheduler hints as its row records them), claim one with an
allocation, find its owner daemon (``owner_of``), and move the instance row
there with a compare-and-set on the (host, member epoch) that made the failed attempt. The
caller then casts the build to the row's new host
(:class:`computed.instances.worker.InstanceWorker`).

Guarantees:

* No allocation is left by a candidate given up on (taken meanwhile, unowned, hosting another
  live instance in the database, or an error): it is removed before the next is tried, and
  before an error leaves this module.
* The move is fenced: a daemon that lost the instance (re-homed, deleted meanwhile) gets
  :class:`~computed.db.instances.InstanceConflict` and the new allocation is removed.
* Nodes in ``exclude`` are never tried.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from sqlalchemy.engine import Engine

from computed.db import instances as db_instances
from computed.db import models
from computed.db.instances import InstanceRow
from computed.instances import flavor_specs, scheduler
from computed.instances.retries import NextAttempt
from computed.placement import allocations
from computed.scheduling import candidates
from computed.scheduling.host_state import RequestSpec
from computed.scheduling.pipeline import Pipeline

LOG = logging.getLogger(__name__)


def next_node(placement: Any, engine: Engine, row: InstanceRow, decision: NextAttempt, *,
              owner_of: scheduler.OwnerOf, project_id: str, user_id: str,
              limit: int = scheduler.DEFAULT_CANDIDATES,
              rand: random.Random | None = None,
              pipeline: Pipeline | None = None) -> InstanceRow | None:
    """The BUILDING row moved to a node outside ``decision.exclude`` (its allocation made,
    ``fault`` = the attempts so far), or None when no such node can take it.

    ``row`` is the instance as the failed attempt left it (BUILDING, its host and member epoch
    those of the daemon that made the attempt), with no allocation.

    :raises InstanceConflict: the instance is no longer BUILDING under (row.host,
        row.member_epoch).
    :raises PlacementError: Placement refused or could not answer (nothing is left behind).
    """
    forbidden = forbidden_traits(row)
    facts = [node for node in candidates.read(placement, row.resource_class, row.traits,
                                              limit=limit, forbidden=forbidden)
             if node.uuid not in decision.exclude]
    spec = RequestSpec(row.flavor, hints=row.scheduler_hints, project_id=project_id,
                       user_id=user_id,
                       instance_uuid=row.uuid, image=row.image,
                       resource_class=row.resource_class, traits=row.traits,
                       forbidden=forbidden)
    chosen = scheduler.choose(pipeline or scheduler.default_pipeline(), facts, spec,
                              rand or random.Random())
    for node in (host.uuid for host in chosen.hosts):
        if not allocations.put(placement, row.uuid, node, row.resource_class,
                               project_id=project_id, user_id=user_id):
            continue  # taken meanwhile
        try:
            owner = owner_of(node)
            if owner is None:
                LOG.info('instance %s: node %s has no owner daemon now, next candidate',
                         row.uuid, node)
                allocations.remove(placement, row.uuid)
                continue
            host, member_epoch = owner
            moved = db_instances.assign_node(engine, row.uuid, node, host, member_epoch,
                                             expect_state=models.BUILDING, expect_host=row.host,
                                             expect_member_epoch=row.member_epoch,
                                             fault=decision.fault)
        except db_instances.NodeInUse:
            LOG.info('instance %s: node %s hosts a live instance, next candidate', row.uuid,
                     node)
            allocations.remove(placement, row.uuid)
            continue
        except BaseException:
            allocations.remove(placement, row.uuid)
            raise
        LOG.info('instance %s: build handed from node %s to node %s on %s', row.uuid,
                 row.node_uuid, node, host)
        return moved
    return None


def forbidden_traits(row: InstanceRow) -> frozenset[str]:
    """The traits the instance's flavor forbids (the row keeps the required ones itself; the
    forbidden ones only in its copy of the flavor). None without a flavor (``computed-manage``)."""
    specs = (row.flavor or {}).get('extra_specs')
    if not specs:
        return frozenset()
    return flavor_specs.placement_request(specs).forbidden
