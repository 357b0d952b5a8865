"""Scheduling a new instance: a node from Placement, its allocation, the instance row.

Owns the scheduling decisions of the build API: which resource class and traits a request
means, which candidate node to try next, and when to give up. It runs in any process (the CLI,
an API service); nothing here talks to Ironic or casts RPC, and the Placement requests are
:mod:`computed.placement.allocations`'.

:func:`schedule` asks Placement for the allocation candidates of the class (with the required
traits and without the forbidden ones, what a flavor's extra specs ask for, see
:mod:`computed.instances.flavor_specs`), runs them through the filter and weigher pipeline
(:mod:`computed.scheduling.pipeline`: the flavor's capability operators, the scheduler hints,
operators' own Nova filters and weighers; equal candidates in random order, so concurrent
builds spread instead of all fighting for the first), and tries them in the order it gives. For
each: claims it with an allocation for
the instance (refused when another build took it: next candidate), finds the node's current
owner in ZooKeeper (``owner_of``), and records the instance (BUILDING, node, owner host,
owner's member epoch). If the database refuses the node
(:class:`~computed.db.instances.NodeInUse`: a live instance holds it, e.g. one in ERROR that kept
its node) the allocation is removed and the next candidate tried.

Guarantees:

* Two builds never land on one node: Placement's capacity check lets only one allocation hold
  the node's single unit, and the database's unique live-node rule refuses a second row even
  if Placement were bypassed.
* No allocation is left behind by a failed schedule: every candidate given up on has its
  allocation removed before the next is tried, and :class:`NoValidHost` leaves neither an
  allocation nor an instance row (the caller gets the error synchronously, so no request is
  lost: there is nothing to resume).
* Errors carry the object: :class:`NoValidHost` the class and traits (and how many candidates
  each filter refused), Placement errors the consumer or provider.
* A filter that raises refuses that candidate (logged, naming the filter), never the build.

Threads: :func:`schedule` runs on the API's request threads, several builds at once, and
rescheduling on the daemon's instance worker threads; builds race only in Placement and the
database (above). The pipeline is shared by them: its filters keep at most a per-request cache
swapped whole into a local (:mod:`computed.scheduling.filters`). The default pipeline is built
once per process under a lock (two first builds at once would each load one).
:func:`zookeeper_owner` reads through kazoo's client, safe to share, with a retry
manager of its own per call.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import threading
import uuid as uuidlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from sqlalchemy.engine import Engine

from computed.conf.coordination import DEFAULT_SESSION_TIMEOUT
from computed.db import instances as db_instances
from computed.db import models
from computed.fleet import zookeeper
from computed.fleet.claims import claims_path
from computed.placement import allocations
from computed.placement.http import PlacementError
from computed.providers.state import is_custom_name, is_trait_name, normalise_resource_class
from computed.scheduling import candidates as scheduling_candidates
from computed.scheduling import loader
from computed.scheduling.host_state import HostState, NodeFacts, RequestSpec
from computed.scheduling.pipeline import Decision, Pipeline

LOG = logging.getLogger(__name__)

#: The project and user of the allocations computed writes for callers that name none
#: (``computed-manage server``).
DEFAULT_PROJECT = models.BUILT_IN_PROJECT
DEFAULT_USER = models.BUILT_IN_USER
DEFAULT_CANDIDATES = 50
#: How many times a claim is read when ZooKeeper's connection drops meanwhile.
OWNER_READ_TRIES = 6
#: How many times to ask Placement again when every candidate was taken meanwhile.
CANDIDATE_ROUNDS = 5

#: ``owner_of(node_uuid)`` -> (host, member epoch) of the daemon holding the node's claim.
OwnerOf = Callable[[str], 'tuple[str, int] | None']


class NoValidHost(Exception):
    """No node can take the instance (none free, or every candidate was taken meanwhile)."""

    def __init__(self, resource_class: str, traits: Iterable[str], reason: str,
                 forbidden: Iterable[str] = ()):
        self.resource_class = resource_class
        self.traits = tuple(traits)
        self.forbidden = tuple(forbidden)
        self.reason = reason
        wanted = _wanted(resource_class, self.traits, self.forbidden)
        super().__init__(f'no valid host for {wanted}: {reason}')


def _wanted(rc: str, traits: Iterable[str], forbidden: Iterable[str]) -> str:
    traits, forbidden = tuple(traits), tuple(forbidden)
    return (rc + (f" with {','.join(traits)}" if traits else '')
            + (f" without {','.join(forbidden)}" if forbidden else ''))


class BadRequest(ValueError):
    """The request cannot be scheduled as given (unknown class or trait, bad uuid)."""


def placement_class(resource_class: str) -> str:
    """Placement's class for a request: a ``CUSTOM_*`` name as given, else Nova's
    normalisation of an Ironic ``resource_class`` (``gold`` -> ``CUSTOM_GOLD``)."""
    if is_custom_name(resource_class):
        return resource_class
    if not resource_class or not resource_class.strip():
        raise BadRequest('resource class must not be empty')
    return normalise_resource_class(resource_class)


def schedule(placement: Any, engine: Engine, resource_class: str, traits: Iterable[str] = (),
             image: str | None = None, instance_uuid: str | None = None, *,
             owner_of: OwnerOf, project_id: str = DEFAULT_PROJECT,
             user_id: str = DEFAULT_USER, limit: int = DEFAULT_CANDIDATES,
             rand: random.Random | None = None, forbidden: Iterable[str] = (),
             name: str | None = None, metadata: dict[str, str] | None = None,
             flavor: dict[str, Any] | None = None, pipeline: Pipeline | None = None,
             hints: Mapping[str, Any] | None = None,
             availability_zone: str | None = None) -> db_instances.InstanceRow:
    """Place a new instance on a free node; the BUILDING instance row (node, host and
    member_epoch set).

    ``pipeline`` filters and orders Placement's candidates (default: the default
    configuration's, :func:`computed.scheduling.loader.default_pipeline`); its filters see the
    request as Nova's RequestSpec: the flavor (with its extra specs), the scheduler ``hints``
    (``os:scheduler_hints``), the ``availability_zone``, the project and user.

    ``placement`` is a keystoneauth ``Adapter`` for Placement. ``instance_uuid`` defaults to a
    new uuid. ``traits`` are required, ``forbidden`` must be absent. The allocation and the
    row are the project's and user's; ``name``, ``metadata`` and ``flavor`` are recorded as
    given (what the compute API shows). The caller casts the build to ``row.host`` afterwards.

    :raises BadRequest: bad uuid, trait or resource class name.
    :raises NoValidHost: no candidate could be claimed.
    :raises PlacementUnavailable: Placement unreachable (nothing is left behind).
    :raises InstanceExists: ``instance_uuid`` is taken.
    """
    rc = placement_class(resource_class)
    traits = tuple(sorted(set(traits)))
    forbidden = tuple(sorted(set(forbidden)))
    instance_uuid = check_uuid(instance_uuid or str(uuidlib.uuid4()))
    for trait in traits + forbidden:
        if not is_trait_name(trait):
            raise BadRequest(f'not a trait name: {trait!r}')
    if set(traits) & set(forbidden):
        both = ','.join(sorted(set(traits) & set(forbidden)))
        raise BadRequest(f'traits both required and forbidden: {both}')
    record = InstanceRecord(image, project_id, user_id, name, metadata, flavor)
    if db_instances.get_instance(engine, instance_uuid) is not None:
        raise db_instances.InstanceExists(instance_uuid)
    spec = RequestSpec(flavor, hints=hints, project_id=project_id, user_id=user_id,
                       instance_uuid=instance_uuid, availability_zone=availability_zone,
                       image=image, resource_class=rc, traits=traits, forbidden=forbidden)
    search = _Search(placement, pipeline or default_pipeline(), spec, limit, rand)
    for node in search.nodes():
        row = _try_node(placement, engine, node, rc, traits, instance_uuid, owner_of, record)
        if row is not None:
            return row
        search.taken(node)
    raise search.no_valid_host()


def place_admitted(placement: Any, engine: Engine, row: db_instances.InstanceRow, *,
                   owner_of: OwnerOf, forbidden: Iterable[str] = (),
                   hints: Mapping[str, Any] | None = None,
                   pipeline: Pipeline | None = None, limit: int = DEFAULT_CANDIDATES,
                   rand: random.Random | None = None) -> db_instances.InstanceRow:
    """Place an instance the compute API admitted (``row``: BUILDING, no node nor host) as
    :func:`schedule` places a new one, recording the node and owner on its row with a
    compare-and-set on it being still unplaced; the row after.

    :raises NoValidHost: no candidate could be claimed (the row is left as it was).
    :raises InstanceConflict: the row is no longer BUILDING and unplaced (deleted, or placed by
        another process): nothing is left behind.
    :raises PlacementUnavailable: as :func:`schedule`.
    """
    forbidden = tuple(sorted(set(forbidden)))
    spec = RequestSpec(row.flavor, hints=hints, project_id=row.project_id,
                       user_id=row.user_id, instance_uuid=row.uuid, image=row.image,
                       resource_class=row.resource_class, traits=row.traits,
                       forbidden=forbidden)
    search = _Search(placement, pipeline or default_pipeline(), spec, limit, rand)
    record = InstanceRecord(row.image, row.project_id or DEFAULT_PROJECT,
                            row.user_id or DEFAULT_USER, row.name, row.metadata, row.flavor)
    for node in search.nodes():
        placed = _try_node(placement, engine, node, row.resource_class, row.traits, row.uuid,
                           owner_of, record, admitted=True)
        if placed is not None:
            return placed
        search.taken(node)
    raise search.no_valid_host()


class _Search:
    """The candidate nodes of one request, in the pipeline's order, round after round; and
    why none could be taken.

    Concurrent builds get the same first candidates from Placement: when all of a round's
    were taken meanwhile, Placement is asked again (it no longer lists the allocated ones)
    rather than the build refused while free nodes remain. A node a filter refused stays
    refused; a node :meth:`taken` is not tried again."""

    def __init__(self, placement: Any, pipeline: Pipeline, spec: RequestSpec, limit: int,
                 rand: random.Random | None):
        # Placement's request, in a stable order (the error names it).
        self._wanted = (str(spec.resource_class), tuple(sorted(spec.traits)),
                        tuple(sorted(spec.forbidden)))
        self._placement = placement
        self._pipeline = pipeline
        self._spec = spec
        self._limit = limit
        self._rand = rand
        self._tried: set[str] = set()
        self._refused: dict[str, str] = {}
        self._decision: Decision | None = None

    def nodes(self) -> Iterator[str]:
        for _round in range(CANDIDATE_ROUNDS):
            facts = [node for node in candidate_facts(self._placement, *self._wanted,
                                                      self._limit)
                     if node.uuid not in self._tried and node.uuid not in self._refused]
            if not facts:
                return
            self._decision = choose(self._pipeline, facts, self._spec, self._rand)
            self._refused.update((node, str(why))
                                 for node, why in self._decision.refused.items())
            for host in self._decision.hosts:
                yield host.uuid

    def taken(self, node: str) -> None:
        """``node`` could not be claimed (taken meanwhile, unowned, or hosting an instance)."""
        self._tried.add(node)

    def no_valid_host(self) -> NoValidHost:
        rc, traits, forbidden = self._wanted
        return NoValidHost(rc, traits, _reason(self._tried, self._refused, self._decision),
                           forbidden)


def choose(pipeline: Pipeline, facts: Iterable[NodeFacts], spec: RequestSpec,
           rand: random.Random | None = None) -> Decision:
    """The pipeline's decision on the candidate nodes (pure: no I/O); logs what it left out."""
    decision = pipeline.run([HostState(node) for node in facts], spec, rand)
    if decision.refused:
        LOG.info('instance %s: %d candidate(s) filtered out (%s), %d left', spec.instance_uuid,
                 len(decision.refused), decision.summary(), len(decision.hosts))
    return decision


def _reason(tried: set[str], refused: dict[str, str], last: Decision | None) -> str:
    parts = []
    if tried:
        parts.append(f'{len(tried)} candidate(s) taken meanwhile or unowned')
    if refused:
        summary = last.summary() if last is not None else ''
        parts.append(f'{len(refused)} candidate(s) refused by the filters'
                     + (f' ({summary} in the last pass)' if summary else ''))
    elif last is not None and last.unevaluated:
        parts.append(last.summary())
    return '; '.join(parts) or 'no free node'


_DEFAULT: list[Pipeline] = []
_DEFAULT_LOCK = threading.Lock()


def default_pipeline() -> Pipeline:
    """The pipeline of the default configuration, made once per process."""
    # Built once per process: loading imports and makes the classes. The check and the build
    # are one step, or two request threads' first builds would each make one.
    with _DEFAULT_LOCK:
        if not _DEFAULT:
            _DEFAULT.append(loader.default_pipeline())
        return _DEFAULT[0]


@dataclasses.dataclass(frozen=True)
class InstanceRecord:
    """What is recorded of a new instance besides its placement."""

    image: str | None
    project_id: str
    user_id: str
    name: str | None
    metadata: dict[str, str] | None
    flavor: dict[str, Any] | None


def _try_node(placement: Any, engine: Engine, node: str, rc: str, traits: tuple[str, ...],
              instance_uuid: str, owner_of: OwnerOf, record: InstanceRecord, *,
              admitted: bool = False) -> db_instances.InstanceRow | None:
    """The instance on ``node``, or None (and no allocation left) if the node cannot take it.
    ``admitted``: its row exists, unplaced (:func:`place_admitted`); else it is recorded."""
    if not allocations.put(placement, instance_uuid, node, rc, project_id=record.project_id,
                           user_id=record.user_id):
        LOG.info('instance %s: node %s taken meanwhile, next candidate', instance_uuid, node)
        return None
    try:
        owner = owner_of(node)
        if owner is None:
            LOG.info('instance %s: node %s has no owner daemon now, next candidate',
                     instance_uuid, node)
            allocations.remove(placement, instance_uuid)
            return None
        host, member_epoch = owner
        if admitted:
            return db_instances.assign_node(engine, instance_uuid, node, host, member_epoch,
                                      expect_state=models.BUILDING, expect_unplaced=True)
        return db_instances.create_instance(engine, instance_uuid, rc, node_uuid=node, host=host,
                                      member_epoch=member_epoch, traits=traits,
                                      image=record.image, project_id=record.project_id,
                                      user_id=record.user_id, name=record.name,
                                      metadata=record.metadata, flavor=record.flavor)
    except db_instances.NodeInUse:
        LOG.info('instance %s: node %s hosts a live instance, next candidate', instance_uuid,
                 node)
        allocations.remove(placement, instance_uuid)
        return None
    except BaseException:
        allocations.remove(placement, instance_uuid)
        raise


def candidate_facts(placement: Any, rc: str, traits: tuple[str, ...],
                    forbidden: tuple[str, ...], limit: int) -> list[NodeFacts]:
    """The candidate nodes; a request Placement refuses (unknown class or trait) is ours."""
    try:
        return scheduling_candidates.read(placement, rc, traits, limit=limit,
                                          forbidden=forbidden)
    except PlacementError as exc:
        if exc.status != 400:
            raise
        raise BadRequest(f'Placement refused {_wanted(rc, traits, forbidden)}: '
                         f'{exc.detail}') from None


def zookeeper_owner(client: Any, root: str,
                    timeout: float = DEFAULT_SESSION_TIMEOUT) -> OwnerOf:
    """``owner_of`` reading the node's claim znode: (host, the claimant's member epoch). Each
    read is answered within ``timeout`` seconds (else :class:`computed.fleet.zookeeper.NoAnswer`,
    a ConnectionLoss, retried as one): a request thread must not wait for ever on a ZooKeeper
    that went away."""
    from kazoo import exceptions as zk_exc
    from kazoo.retry import KazooRetry
    path = claims_path(root)
    # A busy process (the API under a burst of builds) can see its session's connection drop
    # and come back; the read waits for it, a little, rather than failing the build.
    retry = KazooRetry(max_tries=OWNER_READ_TRIES, delay=0.1, backoff=2, max_delay=2)

    def owner_of(node: str) -> tuple[str, int] | None:
        try:
            # A copy per call: a KazooRetry counts its attempts on itself, and request threads
            # sharing one reset each other's count (or step past max_tries: retried for ever).
            data, _stat = retry.copy()(lambda: zookeeper.answer(
                client.get_async(f'{path}/{node}'), timeout, f'a read of {path}/{node}'))
        except zk_exc.NoNodeError:
            return None
        try:
            body = json.loads(data)
            return str(body['host']), int(body['member_epoch'])
        except (ValueError, KeyError, TypeError):
            LOG.warning('claim on node %s is unreadable: %r', node, data)
            return None
    return owner_of


def check_uuid(value: str) -> str:
    """``value`` as a canonical uuid string; :class:`BadRequest` when it is not one."""
    try:
        return str(uuidlib.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise BadRequest(f'not a uuid: {value!r}') from None
