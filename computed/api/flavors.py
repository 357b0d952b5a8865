"""``/flavors`` and ``/flavors/{id}/os-extra_specs``: list, show, create, delete flavors and
set their extra specs.

Owns the flavor documents of each microversion (``description`` from 2.55, ``extra_specs`` in
the flavor from 2.61) and the checks of what an admin writes: an extra spec scheduling could
never honour (:func:`computed.instances.flavor_specs.check_spec`) is refused when it is set,
not when a build finds out. Flavors are public; flavor access lists are not supported.
"""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import webob

from computed.api import errors, policy, schemas
from computed.api.request import Call, empty, json_response
from computed.db import api as db_api
from computed.instances import flavor_specs

READ = 'compute:flavors:read'
MANAGE = 'compute:flavors:manage'


def links(call: Call, flavor_id: str) -> list[dict[str, str]]:
    bookmark = call.request.application_url
    return [{'rel': 'self', 'href': f'{call.base_url}/flavors/{flavor_id}'},
            {'rel': 'bookmark', 'href': f'{bookmark}/flavors/{flavor_id}'}]


def document(call: Call, flavor: db_api.FlavorRow, detail: bool = True) -> dict[str, Any]:
    doc: dict[str, Any] = {'id': flavor.id, 'name': flavor.name, 'links': links(call, flavor.id)}
    if call.at_least(2, 55):
        doc['description'] = flavor.description
    if not detail:
        return doc
    doc.update({'ram': flavor.ram, 'vcpus': flavor.vcpus, 'disk': flavor.disk,
                'OS-FLV-EXT-DATA:ephemeral': flavor.ephemeral,
                'swap': flavor.swap if call.at_least(2, 75) or flavor.swap else '',
                'rxtx_factor': 1.0, 'OS-FLV-DISABLED:disabled': False,
                'os-flavor-access:is_public': flavor.is_public})
    if call.at_least(2, 61):
        doc['extra_specs'] = flavor.extra_specs
    return doc


def _paging(call: Call) -> tuple[str | None, int]:
    limit_text = call.query('limit')
    limit = call.backends.conf.api.max_limit
    if limit_text is not None:
        if not limit_text.isdigit():
            raise errors.BadRequest(f'limit must be a non-negative integer, not {limit_text!r}')
        limit = min(int(limit_text), limit)
    return call.query('marker'), limit


def _list(call: Call, detail: bool) -> webob.Response:
    policy.authorize(call.backends.enforcer, READ, call.context)
    marker, limit = _paging(call)
    try:
        rows = db_api.list_flavors(call.backends.engine, marker=marker, limit=limit)
    except db_api.FlavorNotFound:
        raise errors.BadRequest(f'marker [{marker}] not found') from None
    body: dict[str, Any] = {'flavors': [document(call, row, detail) for row in rows]}
    if rows and len(rows) == limit:
        body['flavors_links'] = [{'rel': 'next', 'href': f'{call.base_url}/flavors'
                                  f'{"/detail" if detail else ""}?limit={limit}'
                                  f'&marker={rows[-1].id}'}]
    return json_response(200, body)


def index(call: Call) -> webob.Response:
    return _list(call, detail=False)


def detail(call: Call) -> webob.Response:
    return _list(call, detail=True)


def get(call: Call, flavor_id: str) -> db_api.FlavorRow:
    try:
        return db_api.get_flavor(call.backends.engine, flavor_id)
    except db_api.FlavorNotFound:
        raise errors.NotFound(f'Flavor {flavor_id} could not be found.') from None


def show(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, READ, call.context)
    return json_response(200, {'flavor': document(call, get(call, call.params['flavor_id']))})


def _public(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ('true', '1', 'yes', 'on'):
        return True
    if text in ('false', '0', 'no', 'off'):
        return False
    raise errors.BadRequest(f'os-flavor-access:is_public must be a boolean, not {value!r}')


def create(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, MANAGE, call.context)
    spec = call.body(schemas.FLAVOR_CREATE)['flavor']
    if not _public(spec.get('os-flavor-access:is_public', True)):
        raise errors.BadRequest('private flavors (os-flavor-access:is_public=false) are not '
                                'supported')
    if 'description' in spec and not call.at_least(2, 55):
        raise errors.BadRequest('description needs microversion 2.55 or later')
    flavor_id = spec.get('id') or str(uuidlib.uuid4())
    try:
        row = db_api.create_flavor(
            call.backends.engine, flavor_id, spec['name'], vcpus=int(spec['vcpus']),
            ram=int(spec['ram']), disk=int(spec['disk']),
            ephemeral=int(spec.get('OS-FLV-EXT-DATA:ephemeral', 0)),
            swap=int(spec.get('swap') or 0), description=spec.get('description'))
    except db_api.FlavorExists as exc:
        raise errors.Conflict(f'Flavor with ID {exc.flavor_id} or name {exc.name} already '
                              'exists.') from None
    return json_response(200, {'flavor': document(call, row)})


def delete(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, MANAGE, call.context)
    flavor_id = call.params['flavor_id']
    try:
        db_api.delete_flavor(call.backends.engine, flavor_id)
    except db_api.FlavorNotFound:
        raise errors.NotFound(f'Flavor {flavor_id} could not be found.') from None
    return empty(202)


def _checked(specs: dict[str, Any]) -> dict[str, str]:
    """The specs as strings, each one checked; 400 naming the first refused."""
    result = {key: str(value).lower() if isinstance(value, bool) else str(value)
              for key, value in specs.items()}
    for key, value in result.items():
        try:
            flavor_specs.check_spec(key, value)
        except flavor_specs.InvalidExtraSpec as exc:
            raise errors.BadRequest(str(exc)) from None
    return result


def extra_specs_index(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, READ, call.context)
    return json_response(200, {'extra_specs': get(call, call.params['flavor_id']).extra_specs})


def extra_specs_create(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, MANAGE, call.context)
    specs = _checked(call.body(schemas.EXTRA_SPECS_CREATE)['extra_specs'])
    flavor_id = call.params['flavor_id']
    try:
        db_api.set_extra_specs(call.backends.engine, flavor_id, specs)
    except db_api.FlavorNotFound:
        raise errors.NotFound(f'Flavor {flavor_id} could not be found.') from None
    return json_response(200, {'extra_specs': specs})


def extra_spec_show(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, READ, call.context)
    key = call.params['key']
    specs = get(call, call.params['flavor_id']).extra_specs
    if key not in specs:
        raise errors.NotFound(f'Flavor {call.params["flavor_id"]} has no extra specs with '
                              f'key {key}.')
    return json_response(200, {key: specs[key]})


def extra_spec_update(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, MANAGE, call.context)
    key = call.params['key']
    specs = _checked(call.body(schemas.EXTRA_SPEC_UPDATE))
    if list(specs) != [key]:
        raise errors.BadRequest(f'Request body and URI mismatch: the body must set {key}')
    flavor_id = call.params['flavor_id']
    try:
        db_api.set_extra_specs(call.backends.engine, flavor_id, specs)
    except db_api.FlavorNotFound:
        raise errors.NotFound(f'Flavor {flavor_id} could not be found.') from None
    return json_response(200, specs)


def extra_spec_delete(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, MANAGE, call.context)
    flavor_id, key = call.params['flavor_id'], call.params['key']
    try:
        removed = db_api.delete_extra_spec(call.backends.engine, flavor_id, key)
    except db_api.FlavorNotFound:
        raise errors.NotFound(f'Flavor {flavor_id} could not be found.') from None
    if not removed:
        raise errors.NotFound(f'Flavor {flavor_id} has no extra specs with key {key}.')
    return empty(202)
