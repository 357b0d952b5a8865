"""Instance allocations in Placement: the candidates for a request, claiming one, removing it.

Owns the Placement requests of scheduling, of quotas (``GET /usages``, :func:`project_usages`)
and of the instance lifecycle: ``GET
/allocation_candidates`` (:func:`candidates`), and ``PUT`` / ``DELETE`` / ``GET`` of
``/allocations/{instance}`` (:func:`put`, :func:`remove`, :func:`read`,
:func:`project_and_user`). The consumer is the
instance (its uuid); each allocation holds one unit of one resource class on one provider
(node). Which candidate to try, and what to do when it is taken, is
:mod:`computed.instances.scheduler`'s decision, not this module's.

Each function takes the keystoneauth ``Adapter`` for Placement and sends its request through
the shared HTTP layer (:mod:`computed.placement.http`): same microversion and same errors as
the providers client, naming the consumer.

Guarantees: :func:`put` claims only free capacity (Placement's check) and answers False rather
than raising when the node is taken; :func:`remove` is idempotent. Any other refusal is a
:class:`~computed.placement.http.PlacementError`, and a failure to reach Placement a
:class:`~computed.placement.http.PlacementUnavailable`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from computed.placement.http import PlacementError, PlacementHTTP, error, json_body

#: The microversion of ``GET /usages`` (see :func:`project_usages`).
USAGES_MICROVERSION = '1.9'
#: The ``consumer_type`` of every allocation computed writes.
CONSUMER_TYPE = 'INSTANCE'


def candidates(placement: Any, resource_class: str, traits: Iterable[str] = (), *,
               limit: int, forbidden: Iterable[str] = ()) -> list[str]:
    """Provider uuids able to take one unit of ``resource_class`` with ``traits`` and without
    ``forbidden`` traits (``required=!TRAIT``, Placement 1.22+), in Placement's order, at most
    ``limit`` requests' worth.

    :raises PlacementError: status 400 when Placement refuses the request (e.g. an unknown
        resource class or trait; ``detail`` says which).
    """
    params = {'resources': f'{resource_class}:1', 'limit': str(limit)}
    wanted = list(traits) + [f'!{trait}' for trait in forbidden]
    if wanted:
        params['required'] = ','.join(wanted)
    query = '&'.join(f'{key}={value}' for key, value in params.items())
    resp = PlacementHTTP(placement).request('GET', f'/allocation_candidates?{query}')
    body = json_body(None, 'allocation candidates', resp)
    nodes: list[str] = []
    for request in body.get('allocation_requests', []):
        for provider in request.get('allocations', {}):
            if provider not in nodes:
                nodes.append(provider)
    return nodes


def put(placement: Any, instance_uuid: str, node: str, resource_class: str, *,
        project_id: str, user_id: str) -> bool:
    """Allocate one ``resource_class`` on ``node`` to the instance; False when Placement says
    the node has no capacity left (or the consumer changed meanwhile)."""
    body = {'allocations': {node: {'resources': {resource_class: 1}}},
            'consumer_generation': None, 'project_id': project_id, 'user_id': user_id,
            'consumer_type': CONSUMER_TYPE}
    resp = PlacementHTTP(placement).request('PUT', f'/allocations/{instance_uuid}', body=body,
                                            consumer=instance_uuid)
    if resp.status_code == 204:
        return True
    if resp.status_code == 409:
        return False
    raise error(None, f'allocate {resource_class} on {node}', resp, consumer=instance_uuid)


def remove(placement: Any, instance_uuid: str) -> bool:
    """Remove every allocation of the instance; True if there was one (idempotent)."""
    resp = PlacementHTTP(placement).request('DELETE', f'/allocations/{instance_uuid}',
                                            consumer=instance_uuid)
    if resp.status_code == 204:
        return True
    if resp.status_code == 404:
        return False
    raise error(None, 'remove allocations', resp, consumer=instance_uuid)


def read(placement: Any, instance_uuid: str) -> dict[str, Any]:
    """``{provider uuid: {resources}}`` the instance holds (empty if none)."""
    resp = PlacementHTTP(placement).request('GET', f'/allocations/{instance_uuid}',
                                            consumer=instance_uuid)
    body = json_body(None, 'read allocations', resp, consumer=instance_uuid)
    return {rp: alloc.get('resources', {}) for rp, alloc in body.get('allocations', {}).items()}


def project_and_user(placement: Any, instance_uuid: str) -> tuple[str, str] | None:
    """The ``(project_id, user_id)`` the instance's allocations are counted against (what a
    retried build allocates under again); None when it holds none."""
    resp = PlacementHTTP(placement).request('GET', f'/allocations/{instance_uuid}',
                                            consumer=instance_uuid)
    body = json_body(None, 'read allocations', resp, consumer=instance_uuid)
    if not body.get('allocations'):
        return None
    project, user = body.get('project_id'), body.get('user_id')
    if not isinstance(project, str) or not isinstance(user, str):
        raise PlacementError(None, 'read allocations', status=resp.status_code,
                             detail='answer has no project_id/user_id', consumer=instance_uuid)
    return project, user


def project_usages(placement: Any, project_id: str) -> dict[str, int]:
    """``{resource class: units}`` the project's consumers hold (``GET /usages``): what quotas
    count. Asked at microversion 1.9, the plain totals: from 1.38 Placement groups them by
    consumer type, and its query for that fails on PostgreSQL (a GROUP BY error, HTTP 500)."""
    resp = PlacementHTTP(placement, USAGES_MICROVERSION).request(
        'GET', f'/usages?project_id={quote(project_id)}')
    body = json_body(None, f'usages of project {project_id}', resp)
    return {rc: int(amount) for rc, amount in body.get('usages', {}).items()}
