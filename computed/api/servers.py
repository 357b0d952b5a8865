"""``/servers``: create, list, show, delete, and the reboot, os-stop and os-start actions.

Owns the server documents of each microversion and the checks before anything is written:
the flavor must exist and its extra specs make a Placement request
(:mod:`computed.instances.flavor_specs`); ``imageRef`` must be an image URL (there is no Image
service here); the project must be within its quotas: a build is admitted before it is
scheduled, under the project's lock, counting the builds admitted before it
(:func:`computed.api.quotas.reserved`), so concurrent builds never leave more servers than the
limit, ERROR ones included. A build that finds no host
still leaves an ERROR server with the reason as its fault (what Nova's cell0 is for), without
node nor allocation, which its owner can see and delete.

A project sees its own servers only; an admin sees every project's with ``all_tenants``, and
the daemon (``OS-EXT-SRV-ATTR:host``) and node (``OS-EXT-SRV-ATTR:hypervisor_hostname``) of
each. Deleted servers are not found (404), as in Nova.
"""

from __future__ import annotations

import contextlib
import hashlib
import urllib.parse
import uuid as uuidlib
from collections.abc import Iterator
from typing import Any

import webob

from computed.api import errors, policy, quotas, schemas, server_status
from computed.api.request import Call, empty, flag, json_response
from computed.db import api as db_api
from computed.db import models
from computed.instances import flavor_specs, scheduler
from computed.instances.rpcapi import NoHost

INDEX = 'compute:servers:index'
ALL_TENANTS = 'compute:servers:index:all_tenants'
SHOW = 'compute:servers:show'
SHOW_HOST = 'compute:servers:show:host'
CREATE = 'compute:servers:create'
DELETE = 'compute:servers:delete'
IMAGE_SCHEMES = ('http', 'https', 'file')
FAULT_MESSAGE_LENGTH = 255

#: action body key -> (ServerAPI action, policy rule, states it may start from)
ACTIONS = {
    'reboot': ('reboot', 'compute:servers:reboot', frozenset({models.ACTIVE.value})),
    'os-stop': ('stop', 'compute:servers:stop', frozenset({models.ACTIVE.value})),
    'os-start': ('start', 'compute:servers:start', frozenset({models.STOPPED.value})),
}
ACTION_SCHEMAS = {'reboot': schemas.REBOOT, 'os-stop': schemas.OS_STOP,
                  'os-start': schemas.OS_START}


@contextlib.contextmanager
def backend_errors() -> Iterator[None]:
    """Failures of the services behind the API as 503s naming the service."""
    from computed.placement.http import PlacementError
    try:
        yield
    except PlacementError as exc:
        raise errors.ServiceUnavailable(f'Placement: {exc}') from None
    except Exception as exc:
        if type(exc).__module__.split('.')[0] in ('oslo_messaging', 'kazoo', 'keystoneauth1'):
            raise errors.ServiceUnavailable(f'{type(exc).__name__}: {exc}') from None
        raise


def _time(value: Any) -> str | None:
    return None if value is None else value.strftime('%Y-%m-%dT%H:%M:%SZ')


def links(call: Call, server_id: str) -> list[dict[str, str]]:
    return [{'rel': 'self', 'href': f'{call.base_url}/servers/{server_id}'},
            {'rel': 'bookmark', 'href': f'{call.request.application_url}/servers/{server_id}'}]


def _flavor(call: Call, row: db_api.InstanceRow) -> dict[str, Any]:
    flavor = row.flavor or {}
    if call.at_least(2, 47):
        return {'original_name': flavor.get('name', row.resource_class),
                'vcpus': flavor.get('vcpus', 0), 'ram': flavor.get('ram', 0),
                'disk': flavor.get('disk', 0), 'ephemeral': flavor.get('ephemeral', 0),
                'swap': flavor.get('swap', 0),
                'extra_specs': flavor.get('extra_specs',
                                          {f'resources:{row.resource_class}': '1'})}
    flavor_id = flavor.get('id', '')
    return {'id': flavor_id,
            'links': [{'rel': 'bookmark',
                       'href': f'{call.request.application_url}/flavors/{flavor_id}'}]}


def document(call: Call, row: db_api.InstanceRow, admin: bool) -> dict[str, Any]:
    shown = server_status.view(row.state)
    host_id = hashlib.sha224(f'{row.project_id}{row.host}'.encode()).hexdigest() \
        if row.host else ''
    doc: dict[str, Any] = {
        'id': row.uuid, 'name': row.name or '', 'status': shown.status,
        'tenant_id': row.project_id, 'user_id': row.user_id, 'metadata': row.metadata,
        'hostId': host_id,
        'image': {'id': row.image, 'links': [{'rel': 'bookmark', 'href': row.image}]}
        if row.image else '',
        'flavor': _flavor(call, row),
        'created': _time(row.created_at), 'updated': _time(row.updated_at),
        'addresses': {}, 'accessIPv4': '', 'accessIPv6': '', 'key_name': None,
        'config_drive': '', 'links': links(call, row.uuid),
        'progress': 0 if shown.status == 'BUILD' else 100 if shown.status == 'ACTIVE' else 0,
        'OS-DCF:diskConfig': 'MANUAL', 'OS-EXT-AZ:availability_zone': 'nova',
        'OS-EXT-STS:vm_state': shown.vm_state, 'OS-EXT-STS:task_state': shown.task_state,
        'OS-EXT-STS:power_state': shown.power_state,
        'OS-SRV-USG:launched_at': _time(row.created_at) if row.node_uuid else None,
        'OS-SRV-USG:terminated_at': _time(row.deleted_at),
        'os-extended-volumes:volumes_attached': [],
    }
    if call.at_least(2, 9):
        doc['locked'] = False
    if call.at_least(2, 19):
        doc['description'] = None
    if call.at_least(2, 26):
        doc['tags'] = []
    if admin:
        doc.update({'OS-EXT-SRV-ATTR:host': row.host,
                    'OS-EXT-SRV-ATTR:hypervisor_hostname': row.node_uuid,
                    'OS-EXT-SRV-ATTR:instance_name': f'instance-{row.uuid}'})
    if row.state == models.ERROR and row.fault:
        doc['fault'] = {'code': 500, 'created': _time(row.updated_at),
                        'message': row.fault[:FAULT_MESSAGE_LENGTH]}
        if admin:
            doc['fault']['details'] = row.fault
    return doc


def _sees_hosts(call: Call) -> bool:
    return policy.allowed(call.backends.enforcer, SHOW_HOST, call.context)


def get(call: Call, server_id: str) -> db_api.InstanceRow:
    """The live server, 404 if there is none (or it is deleted); 403 if another project's
    (policy ``compute:servers:show``)."""
    try:
        uuid = scheduler.check_uuid(server_id)
    except scheduler.BadRequest:
        raise errors.NotFound(f'Instance {server_id} could not be found.') from None
    row = db_api.get_instance(call.backends.engine, uuid)
    if row is None or row.state == models.DELETED:
        raise errors.NotFound(f'Instance {server_id} could not be found.')
    policy.authorize(call.backends.enforcer, SHOW, call.context,
                     {'project_id': row.project_id})
    return row


def _list(call: Call, detail: bool) -> webob.Response:
    policy.authorize(call.backends.enforcer, INDEX, call.context)
    project_id: str | None = call.context.project_id
    if flag(call.query('all_tenants')):
        policy.authorize(call.backends.enforcer, ALL_TENANTS, call.context)
        project_id = call.query('project_id') or call.query('tenant_id')
    states = None
    status = call.query('status')
    if status:
        states = server_status.states_of(status)
        if states is None:
            if call.at_least(2, 38):
                raise errors.BadRequest(f'Invalid status value {status!r}')
            states = frozenset()
    host = call.query('host')
    if host and not _sees_hosts(call):
        host = None  # as Nova: the filter is ignored for those who may not see hosts
    limit = call.backends.conf.api.max_limit
    if call.query('limit') is not None:
        text = call.query('limit') or ''
        if not text.isdigit():
            raise errors.BadRequest(f'limit must be a non-negative integer, not {text!r}')
        limit = min(int(text), limit)
    marker = call.query('marker')
    try:
        rows = db_api.list_instances(call.backends.engine, project_id=project_id, host=host,
                                     states=states, name=call.query('name'),
                                     include_deleted=bool(states and
                                                          models.DELETED.value in states),
                                     marker=marker, limit=limit)
    except db_api.InstanceNotFound:
        raise errors.BadRequest(f'marker [{marker}] not found') from None
    admin = _sees_hosts(call)
    if detail:
        servers = [document(call, row, admin) for row in rows]
    else:
        servers = [{'id': row.uuid, 'name': row.name or '', 'links': links(call, row.uuid)}
                   for row in rows]
    body: dict[str, Any] = {'servers': servers}
    if rows and len(rows) == limit:
        query = {key: value for key, value in call.request.GET.items() if key != 'marker'}
        query['marker'] = rows[-1].uuid
        path = '/servers/detail' if detail else '/servers'
        body['servers_links'] = [{'rel': 'next', 'href': f'{call.base_url}{path}?'
                                  f'{urllib.parse.urlencode(query)}'}]
    return json_response(200, body)


def index(call: Call) -> webob.Response:
    return _list(call, detail=False)


def detail(call: Call) -> webob.Response:
    return _list(call, detail=True)


def show(call: Call) -> webob.Response:
    row = get(call, call.params['server_id'])
    return json_response(200, {'server': document(call, row, _sees_hosts(call))})


def _image(ref: str) -> str:
    parsed = urllib.parse.urlsplit(ref)
    if parsed.scheme not in IMAGE_SCHEMES or not (parsed.netloc or parsed.path):
        schemes = ', '.join(f'{scheme}://' for scheme in IMAGE_SCHEMES)
        raise errors.BadRequest(f'imageRef {ref!r} is not an image URL ({schemes}): '
                                'computed has no Image service')
    return ref


def _flavor_ref(call: Call, ref: Any) -> db_api.FlavorRow:
    flavor_id = str(ref).rstrip('/').rsplit('/', 1)[-1]
    try:
        return db_api.get_flavor(call.backends.engine, flavor_id)
    except db_api.FlavorNotFound:
        raise errors.BadRequest(f'Flavor {ref} could not be found.') from None


def create(call: Call) -> webob.Response:
    context = call.context
    policy.authorize(call.backends.enforcer, CREATE, context)
    spec = call.body(schemas.SERVER_CREATE)['server']
    if call.at_least(2, 37) and 'networks' not in spec:
        raise errors.BadRequest('networks is required from microversion 2.37 on: use '
                                '"none" or "auto"')
    if 'description' in spec and not call.at_least(2, 19):
        raise errors.BadRequest('description needs microversion 2.19 or later')
    flavor = _flavor_ref(call, spec['flavorRef'])
    image = _image(spec['imageRef'])
    try:
        request = flavor_specs.placement_request(flavor.extra_specs)
    except flavor_specs.InvalidExtraSpec as exc:
        raise errors.BadRequest(f'Flavor {flavor.id} cannot be scheduled: {exc}') from None
    servers = call.backends.servers
    instance_uuid = str(uuidlib.uuid4())
    with backend_errors():
        # Admitted by quota under the project's lock, counted until its row exists.
        with quotas.reserved(call.backends, context.project_id, request.resource_class,
                             instance_uuid):
            row = servers.place(request.resource_class, request.required, image,
                                instance_uuid, forbidden=request.forbidden,
                                project_id=context.project_id, user_id=context.user_id,
                                name=spec['name'], metadata=spec.get('metadata'),
                                flavor=_flavor_copy(flavor), record_failure=True)
        if row.state == models.BUILDING:
            servers.start_build(row)
    location = f'{call.base_url}/servers/{row.uuid}'
    return json_response(202, {'server': {
        'id': row.uuid, 'links': links(call, row.uuid), 'OS-DCF:diskConfig': 'MANUAL',
        'security_groups': [{'name': 'default'}]}}, {'Location': location})


def _flavor_copy(flavor: db_api.FlavorRow) -> dict[str, Any]:
    return {'id': flavor.id, 'name': flavor.name, 'vcpus': flavor.vcpus, 'ram': flavor.ram,
            'disk': flavor.disk, 'ephemeral': flavor.ephemeral, 'swap': flavor.swap,
            'extra_specs': flavor.extra_specs}


def delete(call: Call) -> webob.Response:
    row = get(call, call.params['server_id'])
    policy.authorize(call.backends.enforcer, DELETE, call.context,
                     {'project_id': row.project_id})
    with backend_errors():
        try:
            call.backends.servers.action('delete', row.uuid)
        except NoHost:
            raise errors.Conflict(f'Cannot delete instance {row.uuid} while it is in state '
                                  f'{row.state} without a host') from None
    return empty(204)


def action(call: Call) -> webob.Response:
    body = call.body({'type': 'object', 'minProperties': 1, 'maxProperties': 1})
    (name,) = body
    if name not in ACTIONS:
        raise errors.BadRequest(f'There is no such action: {name}')
    call.body(ACTION_SCHEMAS[name])
    row = get(call, call.params['server_id'])
    operation, rule, from_states = ACTIONS[name]
    policy.authorize(call.backends.enforcer, rule, call.context,
                     {'project_id': row.project_id})
    if row.state not in from_states:
        shown = server_status.view(row.state)
        raise errors.Conflict(f"Cannot '{name}' instance {row.uuid} while it is in vm_state "
                              f'{shown.vm_state}' + (f' (task {shown.task_state})'
                                                     if shown.task_state else ''))
    with backend_errors():
        try:
            call.backends.servers.action(operation, row.uuid)
        except NoHost:
            raise errors.Conflict(f'Instance {row.uuid} has no host') from None
    return empty(202)
