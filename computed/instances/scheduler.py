"""Scheduling a new instance: a node from Placement, its allocation, the instance row.

Owns the build API's placement part and the instance allocations in Placement (claim one node's
resource class for a consumer = instance uuid, remove it). It runs in any process (the CLI, an
API service); nothing here talks to Ironic or casts RPC.

:func:`schedule` asks ``GET /allocation_candidates`` for the class (and required traits), tries
the candidates in random order (so concurrent builds spread instead of all fighting for the
first), and for each: claims it with ``PUT /allocations/{instance}`` (a 409 means another build
took it: next candidate), finds the node's current owner in ZooKeeper (``owner_of``), and records
the instance (BUILDING, node, owner host, owner's member epoch). If the database refuses the node
(:class:`~computed.db.api.NodeInUse`: a live instance holds it, e.g. one in ERROR that kept its
node) the allocation is removed and the next candidate tried.

Guarantees:

* Two builds never land on one node: Placement's capacity check lets only one allocation hold
  the node's single unit, and the database's unique live-node rule refuses a second row even
  if Placement were bypassed.
* No allocation is left behind by a failed schedule: every candidate given up on has its
  allocation removed before the next is tried, and :class:`NoValidHost` leaves neither an
  allocation nor an instance row (the caller gets the error synchronously, so no request is
  lost: there is nothing to resume).
* Errors carry the object: :class:`NoValidHost` the class and traits, Placement errors the
  consumer or provider.
"""

from __future__ import annotations

import json
import logging
import random
import uuid as uuidlib
from collections.abc import Callable, Iterable
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from sqlalchemy.engine import Engine

from computed.fleet.claims import claims_path
from computed.db import api as db_api
from computed.placement.client import PlacementError, PlacementUnavailable, _code, _detail
from computed.providers.state import is_custom_name, is_trait_name, normalise_resource_class

LOG = logging.getLogger(__name__)

MICROVERSION = '1.39'
DEFAULT_PROJECT = 'computed'
DEFAULT_USER = 'computed'
CONSUMER_TYPE = 'INSTANCE'
DEFAULT_CANDIDATES = 50
#: How many times to ask Placement again when every candidate was taken meanwhile.
CANDIDATE_ROUNDS = 5

#: ``owner_of(node_uuid)`` -> (host, member epoch) of the daemon holding the node's claim.
OwnerOf = Callable[[str], 'tuple[str, int] | None']


class NoValidHost(Exception):
    """No node can take the instance (none free, or every candidate was taken meanwhile)."""

    def __init__(self, resource_class: str, traits: Iterable[str], reason: str):
        self.resource_class = resource_class
        self.traits = tuple(traits)
        self.reason = reason
        wanted = resource_class + (f" with {','.join(self.traits)}" if self.traits else '')
        super().__init__(f'no valid host for {wanted}: {reason}')


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
             rand: random.Random | None = None) -> db_api.InstanceRow:
    """Place a new instance on a free node; the BUILDING instance row (node, host and
    member_epoch set).

    ``placement`` is a keystoneauth ``Adapter`` for Placement. ``instance_uuid`` defaults to a
    new uuid. The caller casts the build to ``row.host`` afterwards.

    :raises BadRequest: bad uuid, trait or resource class name.
    :raises NoValidHost: no candidate could be claimed.
    :raises PlacementUnavailable: Placement unreachable (nothing is left behind).
    :raises InstanceExists: ``instance_uuid`` is taken.
    """
    rc = placement_class(resource_class)
    traits = tuple(sorted(set(traits)))
    instance_uuid = _check_uuid(instance_uuid or str(uuidlib.uuid4()))
    for trait in traits:
        if not is_trait_name(trait):
            raise BadRequest(f'not a trait name: {trait!r}')
    if db_api.get_instance(engine, instance_uuid) is not None:
        raise db_api.InstanceExists(instance_uuid)
    tried: set[str] = set()
    for _round in range(CANDIDATE_ROUNDS):
        # Concurrent builds get the same first candidates from Placement: when all of ours
        # were taken meanwhile, ask again (Placement no longer lists the allocated ones)
        # rather than refuse while free nodes remain.
        nodes = [node for node in candidates(placement, rc, traits, limit) if node not in tried]
        if not nodes:
            break
        (rand or random).shuffle(nodes)
        for node in nodes:
            row = _try_node(placement, engine, node, rc, traits, image, instance_uuid,
                            owner_of, project_id, user_id)
            if row is not None:
                return row
            tried.add(node)
    reason = (f'{len(tried)} candidate(s) taken meanwhile or unowned' if tried
              else 'no free node')
    raise NoValidHost(rc, traits, reason)


def _try_node(placement: Any, engine: Engine, node: str, rc: str, traits: tuple[str, ...],
              image: str | None, instance_uuid: str, owner_of: OwnerOf, project_id: str,
              user_id: str) -> db_api.InstanceRow | None:
    """The instance on ``node``, or None (and no allocation left) if the node cannot take it."""
    if not put_allocation(placement, instance_uuid, node, rc, project_id, user_id):
        LOG.info('instance %s: node %s taken meanwhile, next candidate', instance_uuid, node)
        return None
    try:
        owner = owner_of(node)
        if owner is None:
            LOG.info('instance %s: node %s has no owner daemon now, next candidate',
                     instance_uuid, node)
            remove_allocation(placement, instance_uuid)
            return None
        host, member_epoch = owner
        return db_api.create_instance(engine, instance_uuid, rc, node_uuid=node, host=host,
                                      member_epoch=member_epoch, traits=traits, image=image)
    except db_api.NodeInUse:
        LOG.info('instance %s: node %s hosts a live instance, next candidate', instance_uuid,
                 node)
        remove_allocation(placement, instance_uuid)
        return None
    except BaseException:
        remove_allocation(placement, instance_uuid)
        raise


def candidates(placement: Any, rc: str, traits: Iterable[str] = (),
               limit: int = DEFAULT_CANDIDATES) -> list[str]:
    """Provider uuids able to take one unit of ``rc`` with ``traits`` (Placement's order)."""
    params = {'resources': f'{rc}:1', 'limit': str(limit)}
    traits = list(traits)
    if traits:
        params['required'] = ','.join(traits)
    query = '&'.join(f'{key}={value}' for key, value in params.items())
    resp = _request(placement, 'GET', f'/allocation_candidates?{query}', None)
    if resp.status_code == 400:
        raise BadRequest(f'Placement refused {rc}'
                         + (f" with {','.join(traits)}" if traits else '')
                         + f': {_detail(resp)}')
    body = _body(resp, None, 'allocation candidates')
    nodes = []
    for request in body.get('allocation_requests', []):
        for provider in request.get('allocations', {}):
            if provider not in nodes:
                nodes.append(provider)
    return nodes


def put_allocation(placement: Any, instance_uuid: str, node: str, rc: str,
                   project_id: str = DEFAULT_PROJECT, user_id: str = DEFAULT_USER) -> bool:
    """Allocate one ``rc`` on ``node`` to the instance; False when Placement says the node
    has no capacity left (or the consumer changed meanwhile)."""
    body = {'allocations': {node: {'resources': {rc: 1}}}, 'consumer_generation': None,
            'project_id': project_id, 'user_id': user_id, 'consumer_type': CONSUMER_TYPE}
    resp = _request(placement, 'PUT', f'/allocations/{instance_uuid}', body)
    if resp.status_code == 204:
        return True
    if resp.status_code == 409:
        return False
    raise _error(instance_uuid, f'allocate {rc} on {node}', resp)


def remove_allocation(placement: Any, instance_uuid: str) -> bool:
    """Remove every allocation of the instance; True if there was one (idempotent)."""
    resp = _request(placement, 'DELETE', f'/allocations/{instance_uuid}', None)
    if resp.status_code == 204:
        return True
    if resp.status_code == 404:
        return False
    raise _error(instance_uuid, 'remove allocations', resp)


def allocations(placement: Any, instance_uuid: str) -> dict[str, Any]:
    """``{provider uuid: {resources}}`` the instance holds (empty if none)."""
    resp = _request(placement, 'GET', f'/allocations/{instance_uuid}', None)
    body = _body(resp, instance_uuid, 'read allocations')
    return {rp: alloc.get('resources', {}) for rp, alloc in body.get('allocations', {}).items()}


def zookeeper_owner(client: Any, root: str) -> OwnerOf:
    """``owner_of`` reading the node's claim znode: (host, the claimant's member epoch)."""
    path = claims_path(root)

    def owner_of(node: str) -> tuple[str, int] | None:
        from kazoo import exceptions as zk_exc
        try:
            data, _stat = client.get(f'{path}/{node}')
        except zk_exc.NoNodeError:
            return None
        try:
            body = json.loads(data)
            return str(body['host']), int(body['member_epoch'])
        except (ValueError, KeyError, TypeError):
            LOG.warning('claim on node %s is unreadable: %r', node, data)
            return None
    return owner_of


# -- plumbing -------------------------------------------------------------------------------

def _check_uuid(value: str) -> str:
    try:
        return str(uuidlib.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise BadRequest(f'not a uuid: {value!r}') from None


def _request(placement: Any, method: str, url: str, body: Any) -> Any:
    kwargs: dict[str, Any] = {
        'headers': {'OpenStack-API-Version': f'placement {MICROVERSION}',
                    'Accept': 'application/json'},
        'raise_exc': False}
    if body is not None:
        kwargs['json'] = body
    try:
        resp = placement.request(url, method, **kwargs)
    except (ks_exc.ConnectionError, ks_exc.RequestTimeout, ks_exc.DiscoveryFailure) as exc:
        raise PlacementUnavailable(None, f'{method} {url}', detail=str(exc)) from None
    if resp.status_code >= 500:
        raise _error(None, f'{method} {url}', resp)
    return resp


def _error(consumer: str | None, what: str, resp: Any) -> PlacementError:
    cls = PlacementUnavailable if resp.status_code >= 500 else PlacementError
    return cls(None, f'{what} (consumer {consumer})' if consumer else what,
               status=resp.status_code, code=_code(resp), detail=_detail(resp))


def _body(resp: Any, consumer: str | None, what: str) -> dict[str, Any]:
    if resp.status_code != 200:
        raise _error(consumer, what, resp)
    try:
        body = resp.json()
    except ValueError:
        raise PlacementError(None, what, status=200, detail='answer is not JSON') from None
    if not isinstance(body, dict):
        raise PlacementError(None, what, status=200, detail='answer is not an object')
    return body
