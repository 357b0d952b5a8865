"""``/flavors`` and ``/flavors/{id}/os-extra_specs``: list, show, create, delete flavors and
set their extra specs.

Owns the flavor documents of each microversion (``description`` from 2.55, and changing it
with ``PUT``; ``extra_specs`` in the flavor from 2.61), the ``minRam``/``minDisk`` filters,
``sort_key``/``sort_dir`` (Nova's keys; an unknown one is a 400), and the checks of what an
admin writes: sizes within the database's integers, an id that is not one
of the API's own paths (``detail``), and an extra spec scheduling could never honour
(:func:`computed.instances.flavor_specs.check_spec`), alone or with the flavor's others (a
second resource class: :func:`check_whole`, under the flavor's row lock), refused when it is
set, not when a build finds out.

A flavor is public or private (``os-flavor-access:is_public`` at creation, Nova's booleans). As
Nova's: admins see every flavor; anyone else sees, shows and reads the extra specs of the public
ones and of the private ones whose access list has their project
(:mod:`computed.api.flavor_access`), a 404 otherwise. Listings take Nova's ``is_public`` filter
from admins (absent: the public ones and those the admin's project is on; ``none``: all; a
boolean: those; anything else a 400) and ignore it from anyone else.
"""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import webob

from computed.api import errors, limits, policy, schemas
from computed.api.request import Call, empty, json_response
from computed.db import flavors as db_flavors
from computed.instances import flavor_specs

READ = 'compute:flavors:read'
MANAGE = 'compute:flavors:manage'
#: Ids a flavor cannot have: /flavors/detail is the listing, and clients collapse the dot
#: segments of /flavors/. and /flavors/.. before sending them.
RESERVED_IDS = frozenset({'detail', '.', '..'})
#: Nova's sort keys of flavors -> computed's columns (Nova's default: flavorid, ascending).
SORT_KEYS = {'flavorid': 'id', 'id': 'id', 'name': 'name', 'memory_mb': 'ram',
             'vcpus': 'vcpus', 'root_gb': 'disk', 'ephemeral_gb': 'ephemeral', 'swap': 'swap',
             'created_at': 'created_at'}


def links(call: Call, flavor_id: str) -> list[dict[str, str]]:
    bookmark = call.request.application_url
    return [{'rel': 'self', 'href': f'{call.base_url}/flavors/{flavor_id}'},
            {'rel': 'bookmark', 'href': f'{bookmark}/flavors/{flavor_id}'}]


def document(call: Call, flavor: db_flavors.FlavorRow, detail: bool = True) -> dict[str, Any]:
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


def is_public_filter(value: str | None) -> bool | None:
    """Nova's ``is_public`` listing filter as an admin gives it: absent, True; ``none``,
    None (every flavor); else a boolean of oslo's strict words (400 otherwise). Pure."""
    if value is None:
        return True
    text = value.strip().lower()
    if text == 'none':
        return None
    if text in ('1', 't', 'true', 'on', 'y', 'yes'):
        return True
    if text in ('0', 'f', 'false', 'off', 'n', 'no'):
        return False
    raise errors.BadRequest(f'Invalid is_public filter [{value}]')


def _visible_to(call: Call) -> str | None:
    """The project whose view of the flavors the caller has: None for admins (every flavor),
    else the caller's own project."""
    if policy.is_admin(call.backends.enforcer, call.context):
        return None
    return call.context.project_id


def _list(call: Call, detail: bool) -> webob.Response:
    policy.authorize(call.backends.enforcer, READ, call.context)
    visible_to = _visible_to(call)
    # Admins filter on is_public (Nova's); anyone else sees what they may, whatever they ask.
    is_public = is_public_filter(call.query('is_public')) if visible_to is None else True
    marker, limit = call.query('marker'), call.limit()
    # Nova's filters: flavors with at least this much RAM (MB) and disk (GB).
    min_ram, min_disk = call.query_int('minRam'), call.query_int('minDisk')
    sort_key = call.query('sort_key') or 'flavorid'
    if sort_key not in SORT_KEYS:
        raise errors.BadRequest(f'sort_key {sort_key!r} is not one of '
                                f'{", ".join(sorted(SORT_KEYS))}')
    # sort_dir is asc or desc once past the Call's checks.
    ascending = (call.query('sort_dir') or 'asc') == 'asc'
    try:
        rows = db_flavors.list_flavors(call.backends.engine, marker=marker, limit=limit,
                                       min_ram=min_ram, min_disk=min_disk,
                                       sort_key=SORT_KEYS[sort_key], ascending=ascending,
                                       is_public=is_public,
                                       project_id=call.context.project_id,
                                       visible_to=visible_to)
    except db_flavors.FlavorNotFound:
        raise errors.BadRequest(f'marker [{marker}] not found') from None
    body: dict[str, Any] = {'flavors': [document(call, row, detail) for row in rows]}
    if rows and len(rows) == limit:
        body['flavors_links'] = call.next_links('/flavors/detail' if detail else '/flavors',
                                                rows[-1].id, limit)
    return json_response(200, body)


def index(call: Call) -> webob.Response:
    return _list(call, detail=False)


def detail(call: Call) -> webob.Response:
    return _list(call, detail=True)


def get(call: Call, flavor_id: str) -> db_flavors.FlavorRow:
    """The flavor as the caller sees it: a private one it may not see is a 404."""
    try:
        return db_flavors.get_flavor(call.backends.engine, flavor_id,
                                     visible_to=_visible_to(call))
    except db_flavors.FlavorNotFound:
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
    is_public = _public(spec.get('os-flavor-access:is_public', True))
    if 'description' in spec and not call.at_least(2, 55):
        raise errors.BadRequest('description needs microversion 2.55 or later')
    flavor_id = str(spec['id']) if spec.get('id') is not None else str(uuidlib.uuid4())
    if flavor_id in RESERVED_IDS:
        raise errors.BadRequest(f'Flavor id {flavor_id!r} is taken by the API\'s own paths '
                                f'(/flavors/{flavor_id} could never show it)')
    sizes = {key: limits.integer(spec.get(key) or 0, key, 0)
             for key in ('vcpus', 'ram', 'disk', 'OS-FLV-EXT-DATA:ephemeral', 'swap')}
    try:
        row = db_flavors.create_flavor(
            call.backends.engine, flavor_id, spec['name'], vcpus=sizes['vcpus'],
            ram=sizes['ram'], disk=sizes['disk'],
            ephemeral=sizes['OS-FLV-EXT-DATA:ephemeral'], swap=sizes['swap'],
            is_public=is_public, description=spec.get('description'))
    except db_flavors.FlavorExists as exc:
        raise errors.Conflict(f'Flavor with ID {exc.flavor_id} or name {exc.name} already '
                              'exists.') from None
    return json_response(200, {'flavor': document(call, row)})


def update(call: Call) -> webob.Response:
    """``PUT /flavors/{id}`` (2.55): the description is the one thing that changes."""
    policy.authorize(call.backends.enforcer, MANAGE, call.context)
    if not call.at_least(2, 55):
        raise errors.MethodNotAllowed('PUT /flavors/{flavor_id} needs microversion 2.55 or '
                                      'later', {'Allow': 'GET, DELETE'})
    description = call.body(schemas.FLAVOR_UPDATE)['flavor']['description']
    flavor_id = call.params['flavor_id']
    try:
        row = db_flavors.set_flavor_description(call.backends.engine, flavor_id, description)
    except db_flavors.FlavorNotFound:
        raise errors.NotFound(f'Flavor {flavor_id} could not be found.') from None
    return json_response(200, {'flavor': document(call, row)})


def delete(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, MANAGE, call.context)
    flavor_id = call.params['flavor_id']
    try:
        db_flavors.delete_flavor(call.backends.engine, flavor_id)
    except db_flavors.FlavorNotFound:
        raise errors.NotFound(f'Flavor {flavor_id} could not be found.') from None
    return empty(202)


def _checked(specs: dict[str, Any]) -> dict[str, str]:
    """The specs as strings, each one checked; 400 naming the first refused."""
    result = {key: str(value).lower() if isinstance(value, bool) else str(value)
              for key, value in specs.items()}
    for key, value in result.items():
        if len(value) > limits.MAX_ID_LENGTH:
            raise errors.BadRequest(f'extra spec {key}: the value is {len(value)} characters '
                                    f'long; the limit is {limits.MAX_ID_LENGTH}')
        try:
            flavor_specs.check_spec(key, value)
        except flavor_specs.InvalidExtraSpec as exc:
            raise errors.BadRequest(str(exc)) from None
    return result


def check_whole(flavor_id: str, specs: dict[str, str]) -> None:
    """400 when the flavor's specs together (what they would be once set) could never be
    scheduled although each is fine alone: a second resource class, a trait both required and
    forbidden. A flavor without any resource class yet is fine (specs are set one by one)."""
    request_classes = {key for key, value in specs.items()
                       if key.startswith(f'{flavor_specs.RESOURCES}:') and not _zero(value)}
    if len(request_classes) > 1:
        raise errors.BadRequest(
            f'Flavor {flavor_id} would ask for {len(request_classes)} resource classes '
            f'({", ".join(sorted(request_classes))}): a bare-metal flavor is exactly one '
            'resources:CUSTOM_<CLASS>=1')
    if request_classes:
        try:
            flavor_specs.placement_request(specs)
        except flavor_specs.InvalidExtraSpec as exc:
            raise errors.BadRequest(f'Flavor {flavor_id} could never be scheduled: '
                                    f'{exc}') from None


def _zero(value: str) -> bool:
    try:
        return int(value) == 0
    except ValueError:
        return False


def _set(call: Call, flavor_id: str, specs: dict[str, str]) -> None:
    try:
        db_flavors.set_extra_specs(call.backends.engine, flavor_id, specs,
                                   check=lambda whole: check_whole(flavor_id, whole))
    except db_flavors.FlavorNotFound:
        raise errors.NotFound(f'Flavor {flavor_id} could not be found.') from None


def extra_specs_index(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, READ, call.context)
    return json_response(200, {'extra_specs': get(call, call.params['flavor_id']).extra_specs})


def extra_specs_create(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, MANAGE, call.context)
    specs = _checked(call.body(schemas.EXTRA_SPECS_CREATE)['extra_specs'])
    _set(call, call.params['flavor_id'], specs)
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
    _set(call, call.params['flavor_id'], specs)
    return json_response(200, specs)


def extra_spec_delete(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, MANAGE, call.context)
    flavor_id, key = call.params['flavor_id'], call.params['key']
    try:
        removed = db_flavors.delete_extra_spec(call.backends.engine, flavor_id, key)
    except db_flavors.FlavorNotFound:
        raise errors.NotFound(f'Flavor {flavor_id} could not be found.') from None
    if not removed:
        raise errors.NotFound(f'Flavor {flavor_id} has no extra specs with key {key}.')
    return empty(200)  # as Nova answers
