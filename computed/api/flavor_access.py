"""Private flavors' access lists (Nova's ``os-flavor-access``): ``GET
/flavors/{id}/os-flavor-access`` and the ``addTenantAccess``/``removeTenantAccess`` actions of
``POST /flavors/{id}/action``.

Owns these controllers (admins: policy ``compute:flavors:access``, checked before anything is
read, as Nova's). A private flavor (``os-flavor-access:is_public`` false at creation) is seen,
listed and built from by admins and by the projects on its access list only
(:mod:`computed.api.flavors`, :mod:`computed.api.servers`); nobody is on it at creation (Nova's
rule: not even the admin's project). Answers as Nova's: the list is ``[{flavor_id,
tenant_id}]``; a public flavor has no list (404 on GET, 409 on add, as Nova from 2.7: an entry
would do nothing); adding a project already there is a 409, removing one that is not a 404; an
unknown flavor a 404. The project is not looked up in Keystone (Nova does when it can reach
Keystone): an unknown project id is kept and gives nobody access.
"""

from __future__ import annotations

from typing import Any

import webob

from computed.api import errors, policy, schemas
from computed.api.request import Call, json_response
from computed.db import flavors as db_flavors

ACCESS = 'compute:flavors:access'


def _document(flavor_id: str, projects: list[str]) -> dict[str, Any]:
    return {'flavor_access': [{'flavor_id': flavor_id, 'tenant_id': project}
                              for project in projects]}


def _private(call: Call, flavor_id: str) -> db_flavors.FlavorRow:
    try:
        flavor = db_flavors.get_flavor(call.backends.engine, flavor_id)
    except db_flavors.FlavorNotFound:
        raise errors.NotFound(f'Flavor {flavor_id} could not be found.') from None
    return flavor


def index(call: Call) -> webob.Response:
    """``GET /flavors/{id}/os-flavor-access``: the projects a private flavor is for."""
    policy.authorize(call.backends.enforcer, ACCESS, call.context)
    flavor_id = call.params['flavor_id']
    if _private(call, flavor_id).is_public:
        raise errors.NotFound(f'Access list not available for public flavor {flavor_id}.')
    try:
        projects = db_flavors.flavor_access(call.backends.engine, flavor_id)
    except db_flavors.FlavorNotFound:
        raise errors.NotFound(f'Flavor {flavor_id} could not be found.') from None
    return json_response(200, _document(flavor_id, projects))


def _add(call: Call, flavor_id: str, project_id: str) -> webob.Response:
    if _private(call, flavor_id).is_public:
        raise errors.Conflict(f'Can not add access to public flavor {flavor_id}.')
    try:
        projects = db_flavors.add_flavor_access(call.backends.engine, flavor_id, project_id)
    except db_flavors.FlavorNotFound:
        raise errors.NotFound(f'Flavor {flavor_id} could not be found.') from None
    except db_flavors.FlavorAccessExists:
        raise errors.Conflict(f'Flavor access already exists for flavor {flavor_id} and '
                              f'project {project_id} combination.') from None
    return json_response(200, _document(flavor_id, projects))


def _remove(call: Call, flavor_id: str, project_id: str) -> webob.Response:
    _private(call, flavor_id)
    try:
        projects = db_flavors.remove_flavor_access(call.backends.engine, flavor_id,
                                                   project_id)
    except db_flavors.FlavorNotFound:
        raise errors.NotFound(f'Flavor {flavor_id} could not be found.') from None
    except db_flavors.FlavorAccessNotFound:
        raise errors.NotFound(f'Flavor access not found for {flavor_id} / {project_id} '
                              'combination.') from None
    return json_response(200, _document(flavor_id, projects))


def action(call: Call) -> webob.Response:
    """``POST /flavors/{id}/action``: ``addTenantAccess`` or ``removeTenantAccess``
    (``{"tenant": PROJECT}``); anything else is a 400."""
    body = call.body({'type': 'object', 'minProperties': 1, 'maxProperties': 1})
    (name,) = body
    if name not in ('addTenantAccess', 'removeTenantAccess'):
        raise errors.BadRequest(f'There is no such action: {name}')
    policy.authorize(call.backends.enforcer, ACCESS, call.context)
    project_id = call.body(schemas.TENANT_ACCESS[name])[name]['tenant']
    flavor_id = call.params['flavor_id']
    if name == 'addTenantAccess':
        return _add(call, flavor_id, project_id)
    return _remove(call, flavor_id, project_id)
