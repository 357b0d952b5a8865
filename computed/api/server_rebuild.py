"""The ``rebuild`` server action: ``POST /servers/{id}/action {"rebuild": {...}}``.

Owns the action's request schema of each microversion, the checks made before anything is
written, and the answer. The body is Nova's: ``imageRef`` (required), ``name``, ``metadata``
(replaces the server's), ``accessIPv4``/``accessIPv6``, ``preserve_ephemeral``, ``adminPass``
and ``OS-DCF:diskConfig`` (taken, without effect, as at creation); ``description`` from 2.19,
``key_name`` from 2.54 (null removes the server's key), ``user_data`` from 2.57 (null removes
it). Anything else is a 400 naming it, as Nova's schema refuses it: ``personality`` (injected
files, which a config drive built by Ironic cannot carry; a build refuses them too) and
``trusted_image_certificates`` (2.63, above this API's 2.61). ``imageRef`` is what a build
takes (:func:`computed.api.servers.checked_image`): a Glance image the project may use, or an
image URL, where Nova takes Glance ids only.

Checks, each with Nova's code, and nothing written when one fails: 404 no such server (or
another project's); 403 policy ``compute:servers:rebuild``; 400 a bad body, an image the server
may not be built from (also one its flavor cannot hold: Nova's ``min_ram``/``min_disk``/size
checks), a key pair the caller does not have, user data that is not base64 of
UTF-8 text; 403 more metadata items than the project's ``metadata_items`` quota; 409 a locked
server (for all but admins, as Nova's), a server that is not ACTIVE, SHUTOFF or ERROR (a task in
progress, a build), one without a node (a build that found none), and every rebuild while
``[upgrade_levels] instances`` is below 1.2 (a pin, or ``auto`` with a daemon of an older release
live): such a daemon does not serve the cast, so the rebuild waits until every daemon is
upgraded rather than being sent to be dropped.

Then the row takes the new image and fields and moves to REBUILDING (REBUILDING_OFF from SHUTOFF)
in one compare-and-set, and the rebuild is cast to the daemon of the server's node
(:meth:`computed.instances.rpcapi.ServerAPI.rebuild`), which redeploys the node through Ironic's
``rebuild`` with the new image and a new config drive (key, user data, name, metadata): status
REBUILD (task ``rebuilding``) until ACTIVE again, or SHUTOFF for a server rebuilt while stopped;
ERROR with Ironic's reason if the redeploy failed (the server keeps its node: rebuild it again,
or delete it).

The answer is a 202 with the server as Nova's rebuild answers it below 2.75 (:func:`answer`): the
fields of ``PUT /servers/{id}``'s answer (no ``OS-EXT-*`` attributes), ``key_name`` from 2.54 and
``user_data`` from 2.57. ``adminPass`` is never answered: computed answers as Nova with
``[api] enable_instance_password`` off, as a build does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import webob

from computed.api import errors, policy, quotas, schemas, server_status, servers
from computed.api.request import Call, json_response
from computed.db import instances as db_instances
from computed.db import models
from computed.instances import lifecycle
from computed.instances.rpcapi import NeedsUpgrade

REBUILD = 'compute:servers:rebuild'

#: Nova's rebuild body at 2.1 (what computed takes of it; see the module docstring).
_FIELDS: dict[str, Any] = {
    'imageRef': {'type': 'string', 'minLength': 1, 'maxLength': schemas.IMAGE_URL_LENGTH,
                 'pattern': schemas.PRINTABLE},
    'name': schemas.NAME,
    'metadata': schemas.METADATA,
    'adminPass': {'type': 'string', 'maxLength': 255, 'pattern': r'^[^\x00]*$'},
    'preserve_ephemeral': schemas.BOOLEAN,
    'OS-DCF:diskConfig': {'type': 'string', 'enum': ['AUTO', 'MANUAL']},
    'accessIPv4': {'type': 'string', 'maxLength': 15},
    'accessIPv6': {'type': 'string', 'maxLength': 45},
}
#: What later microversions add: (version, field, schema).
_LATER: tuple[tuple[tuple[int, int], str, dict[str, Any]], ...] = (
    ((2, 19), 'description', {'type': ['string', 'null'], 'maxLength': 255,
                              'pattern': schemas.PRINTABLE}),
    ((2, 54), 'key_name', {'anyOf': [schemas.NAME, {'type': 'null'}]}),
    # Nova's bound: 65,535 characters of base64; null removes the server's user data.
    ((2, 57), 'user_data', {'type': ['string', 'null'], 'maxLength': 65535,
                            'pattern': schemas.PRINTABLE_LINES}),
)
#: Nova's true strings of parameter_types.boolean (the schema has checked the value is one).
_TRUE = frozenset({'true', '1', 'on', 'yes'})


def schema(version: tuple[int, int]) -> dict[str, Any]:
    """The body ``rebuild`` takes at microversion ``version``. Pure."""
    fields = dict(_FIELDS)
    fields.update({name: field for since, name, field in _LATER if version >= since})
    return {'type': 'object',
            'properties': {'rebuild': {'type': 'object', 'properties': fields,
                                       'required': ['imageRef'],
                                       'additionalProperties': False}},
            'required': ['rebuild'], 'additionalProperties': False}


def flag(value: Any) -> bool:
    """A boolean of the body as Nova's ``parameter_types.boolean`` reads it. Pure."""
    return value is True or (isinstance(value, str) and value.lower() in _TRUE)


def refusal(row: db_instances.InstanceRow) -> str | None:
    """Why a server in ``row``'s state cannot be rebuilt (Nova's 409 message), or None. Pure."""
    if row.state not in lifecycle.REBUILD_FROM:
        shown = server_status.view(row.state)
        return (f"Cannot 'rebuild' instance {row.uuid} while it is in vm_state "
                f'{shown.vm_state}' + (f' (task {shown.task_state})'
                                       if shown.task_state else ''))
    if row.node_uuid is None or row.host is None:
        return (f"Cannot 'rebuild' instance {row.uuid}: it has no node (its build found "
                'none); delete it and create it again')
    return None


def answer(call: Call, row: db_instances.InstanceRow) -> dict[str, Any]:
    """The server of the 202, as Nova's rebuild answer of the request's microversion: PUT's
    (:func:`computed.api.servers.document` without the former extensions), ``key_name`` from
    2.54, ``user_data`` from 2.57."""
    shown = servers.document(call, row, admin=False, full=False)
    if call.at_least(2, 54):
        shown['key_name'] = row.key_name
    if call.at_least(2, 57):
        shown['user_data'] = row.user_data
    return shown


def _details(call: Call, body: dict[str, Any]) -> dict[str, Any]:
    """The row's new values besides the image (400 naming a field at fault)."""
    details: dict[str, Any] = {'config_drive': True}  # what every build gets now
    if 'name' in body:
        details['name'] = body['name']
    if 'metadata' in body:
        details['metadata'] = dict(body['metadata'])
    if 'description' in body:
        details['description'] = body['description']
    if 'accessIPv4' in body:
        details['access_ip_v4'] = body['accessIPv4'] or None
    if 'accessIPv6' in body:
        details['access_ip_v6'] = body['accessIPv6'] or None
    given = {key: body[key] for key in ('key_name', 'user_data') if body.get(key) is not None}
    login = servers.login_fields(call, given)  # a key pair's copy, user data checked
    if 'key_name' in body:
        details.update({key: login.get(key) for key in ('key_name', 'key_type', 'key_data')})
    if 'user_data' in body:
        details['user_data'] = login.get('user_data')
    return details


@contextlib.contextmanager
def _refusals(row: db_instances.InstanceRow) -> Iterator[None]:
    """What the server API refuses once past the checks here, as the Compute API answers it:
    :func:`computed.api.servers.raced`'s refusals, and a fleet not upgraded for rebuilds."""
    try:
        with servers.raced('rebuild', row):
            yield
    except NeedsUpgrade as exc:
        raise errors.Conflict(f"Cannot 'rebuild' instance {row.uuid}: rebuild needs every "
                              f'compute daemon upgraded ({exc})') from None


def rebuild(call: Call) -> webob.Response:
    body = call.body(schema(call.version))['rebuild']
    for field, version in (('accessIPv4', 4), ('accessIPv6', 6)):
        if field in body:  # kept in its normal form, as Nova keeps it
            body[field] = servers.access_ip(field, body[field], version)
    row = servers.get(call, call.params['server_id'])
    policy.authorize(call.backends.enforcer, REBUILD, call.context,
                     {'project_id': row.project_id})
    servers.check_unlocked(call, 'rebuild', row)  # as Nova's: a locked server is not rebuilt
    problem = refusal(row)
    if problem is not None:
        raise errors.Conflict(problem)
    size = row.flavor or {}  # the server's flavor copy: the new image must fit it, as Nova's
    image = servers.checked_image(call, body['imageRef'], size.get('ram'), size.get('disk'))
    details = _details(call, body)
    if 'metadata' in body:
        quotas.check_metadata_items(call.backends, row.project_id, len(body['metadata']))
    with servers.backend_errors(), _refusals(row):
        row = call.backends.servers.rebuild(
            row.uuid, image, preserve_ephemeral=flag(body.get('preserve_ephemeral', False)),
            details=details, expect_state=models.InstanceState(row.state))
    return json_response(202, {'server': answer(call, row)})
