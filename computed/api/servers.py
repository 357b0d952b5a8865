"""``/servers``: create, list, show, delete, and the reboot, os-stop and os-start actions.

Owns the server documents of each microversion and the checks before anything is written:
the flavor must exist and its extra specs make a Placement request
(:mod:`computed.instances.flavor_specs`); ``imageRef`` must be a Glance image the project may
use, where there is an Image service (:mod:`computed.api.images`), or an image URL a conductor
may be sent (:mod:`computed.api.image_urls`); ``block_device_mapping_v2`` may only be the
image mapping of ``imageRef`` the CLI sends (:mod:`computed.api.block_devices`); the project must be
within its quotas: each server is admitted under the project's lock, counting the builds
admitted before it (:func:`computed.api.quotas.reserve`), so concurrent builds never leave
more servers than the limit, ERROR ones included. A create answers 202 once its servers are
admitted (recorded BUILDING, task ``scheduling``); they are placed after the answer, by this
process's scheduling threads (:mod:`computed.api.pending`), as Nova's conductor schedules
after its API answered. A build that finds no host leaves an ERROR server with the reason as
its fault (what Nova's cell0 is for), without node nor allocation, which its owner can see
and delete.

Several servers in one request (``min_count``/``max_count``, :class:`_Build`) follow Nova: as
many as the quota admits up to ``max_count`` (403 below ``min_count``), placed all or none
(one without a host leaves every server of the request in ERROR, nodes and allocations given
back, nothing cast). What Nova's create takes besides scheduling (``description``,
``accessIPv4``/``accessIPv6``, the request's reservation id, the scheduler hints) is kept on
the rows;
``adminPass`` is accepted, never kept nor answered (as Nova with ``enable_instance_password``
off: nothing on bare metal would set it).

A project sees its own servers only; an admin sees every project's with ``all_tenants``, and
the daemon (``OS-EXT-SRV-ATTR:host``) and node (``OS-EXT-SRV-ATTR:hypervisor_hostname``) of
each. Deleted servers are not found (404), as in Nova; nor is another project's server (404,
not 403: a stranger cannot learn that a uuid exists).

Listings filter as Nova's: ``name`` is a regular expression (:mod:`computed.api.name_filter`,
no backtracking; a plain string is a substring search in the database), ``flavor``, ``image``,
``status``, ``host`` (admins); they sort by Nova's ``sort_key``/``sort_dir`` and page by
``marker`` in that order. What the database cannot filter (a regular expression, the flavor
copy) is matched here on pages read in order, within :data:`NAME_FILTER_BUDGET`: a listing's
cost is bounded and what was not read is behind its ``next`` link.

Bad input (a control character in a query or a body, an unknown sort key, a zone that is not
``nova``...) is a 400 naming the parameter, before anything is read or written. An action that
races another on the same server (a delete and a reboot at the same moment) is a 409: the
compare-and-set of :meth:`computed.instances.rpcapi.ServerAPI.action` lets one win.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import uuid as uuidlib
from collections.abc import Callable, Iterator
from typing import Any

import webob

from computed.api import (
    block_devices,
    errors,
    glance,
    image_urls,
    images,
    limits,
    name_filter,
    policy,
    quotas,
    schemas,
    server_status,
)
from computed.api.request import Call, empty, json_response
from computed.db import flavors as db_flavors
from computed.db import instances as db_instances
from computed.db import key_pairs as db_key_pairs
from computed.db import models
from computed.instances import configdrive, flavor_specs, scheduler
from computed.instances.rpcapi import NoHost

INDEX = 'compute:servers:index'
ALL_TENANTS = 'compute:servers:index:all_tenants'
SHOW = 'compute:servers:show'
SHOW_HOST = 'compute:servers:show:host'
CREATE = 'compute:servers:create'
FORCED_HOST = 'compute:servers:create:forced_host'
#: The one availability zone (everything is in it, as in docs/api.md).
ZONE = 'nova'
DELETE = 'compute:servers:delete'
RESET_STATE = 'compute:servers:reset_state'
#: os-resetState's states (Nova's names) -> computed's.
RESET_STATES = {'active': models.ACTIVE, 'error': models.ERROR}
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
    except errors.ZOOKEEPER_ERRORS as exc:
        # By class, not by module: computed's bound on a wait (NoAnswer) is a ConnectionLoss of
        # computed.fleet.zookeeper's, and came out as a 500 with a traceback in the log.
        raise errors.zookeeper_unavailable(exc) from None
    except Exception as exc:
        if type(exc).__module__.split('.')[0] in ('oslo_messaging', 'keystoneauth1'):
            raise errors.ServiceUnavailable(f'{type(exc).__name__}: {exc}') from None
        raise


def _placed(row: db_instances.InstanceRow) -> bool:
    return row.host is not None or row.node_uuid is not None


def _time(value: Any) -> str | None:
    return None if value is None else value.strftime('%Y-%m-%dT%H:%M:%SZ')


def links(call: Call, server_id: str) -> list[dict[str, str]]:
    return [{'rel': 'self', 'href': f'{call.base_url}/servers/{server_id}'},
            {'rel': 'bookmark', 'href': f'{call.request.application_url}/servers/{server_id}'}]


def _flavor(call: Call, row: db_instances.InstanceRow) -> dict[str, Any]:
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


#: Nova shows ``progress`` in these statuses only.
PROGRESS_STATUSES = frozenset({'ACTIVE', 'BUILD', 'REBUILD', 'RESIZE', 'VERIFY_RESIZE',
                               'MIGRATING'})
#: What Nova's ``PUT /servers/{id}`` (and rebuild) answer leaves out before microversion 2.75:
#: the attributes that once were extensions.
NOT_IN_UPDATE_ANSWER = ('key_name', 'config_drive', 'OS-EXT-AZ:', 'OS-EXT-STS:',
                        'OS-SRV-USG:', 'os-extended-volumes:', 'OS-EXT-SRV-ATTR:',
                        'security_groups')


def document(call: Call, row: db_instances.InstanceRow, admin: bool,
             full: bool = True) -> dict[str, Any]:
    """The server as ``GET /servers/{id}`` shows it; ``full=False``: as Nova's answer to
    ``PUT /servers/{id}`` shows it (without the :data:`NOT_IN_UPDATE_ANSWER` attributes)."""
    shown = server_status.view(row.state, placed=_placed(row))
    host_id = hashlib.sha224(f'{row.project_id}{row.host}'.encode()).hexdigest() \
        if row.host else ''
    doc: dict[str, Any] = {
        'id': row.uuid, 'name': row.name or '', 'status': shown.status,
        'tenant_id': row.project_id, 'user_id': row.user_id, 'metadata': row.metadata,
        'hostId': host_id,
        'image': images.shown(row.image, call.request.application_url),
        'flavor': _flavor(call, row),
        'created': _time(row.created_at), 'updated': _time(row.updated_at),
        'addresses': {}, 'accessIPv4': row.access_ip_v4 or '',
        'accessIPv6': row.access_ip_v6 or '', 'key_name': row.key_name,
        # Nova's string: 'True' when built with a config drive.
        'config_drive': 'True' if row.config_drive else '', 'links': links(call, row.uuid),
        'OS-DCF:diskConfig': 'MANUAL', 'OS-EXT-AZ:availability_zone': 'nova',
        'OS-EXT-STS:vm_state': shown.vm_state, 'OS-EXT-STS:task_state': shown.task_state,
        'OS-EXT-STS:power_state': shown.power_state,
        'OS-SRV-USG:launched_at': _time(row.created_at) if row.node_uuid else None,
        'OS-SRV-USG:terminated_at': _time(row.deleted_at),
        'os-extended-volumes:volumes_attached': [],
    }
    if row.security_groups:  # as Nova's: no key when the server is in none
        doc['security_groups'] = [{'name': name} for name in row.security_groups]
    if shown.status in PROGRESS_STATUSES:
        doc['progress'] = 100 if shown.status == 'ACTIVE' else 0
    if call.at_least(2, 9):
        doc['locked'] = bool(row.locked_by)
    if call.at_least(2, 19):
        doc['description'] = row.description
    if call.at_least(2, 26):
        doc['tags'] = list(row.tags)
    if admin:
        doc.update({'OS-EXT-SRV-ATTR:host': row.host,
                    'OS-EXT-SRV-ATTR:hypervisor_hostname': row.node_uuid,
                    'OS-EXT-SRV-ATTR:instance_name': f'instance-{row.uuid}'})
        if call.at_least(2, 3):
            doc['OS-EXT-SRV-ATTR:reservation_id'] = row.reservation_id
            doc['OS-EXT-SRV-ATTR:user_data'] = row.user_data
            # Nova's other 2.3 attributes: the hostname the config drive gives the node; no
            # kernel, ramdisk nor root device name of the Compute service's on bare metal.
            doc.update({'OS-EXT-SRV-ATTR:hostname': configdrive.hostname(row.name, row.uuid),
                        'OS-EXT-SRV-ATTR:launch_index': 0, 'OS-EXT-SRV-ATTR:kernel_id': '',
                        'OS-EXT-SRV-ATTR:ramdisk_id': '',
                        'OS-EXT-SRV-ATTR:root_device_name': None})
    if row.state == models.ERROR and row.fault:
        doc['fault'] = {'code': 500, 'created': _time(row.updated_at),
                        'message': row.fault[:FAULT_MESSAGE_LENGTH]}
        if admin:
            doc['fault']['details'] = row.fault
    if not full:
        doc = {key: value for key, value in doc.items()
               if not key.startswith(NOT_IN_UPDATE_ANSWER)}
    return doc


def _sees_hosts(call: Call) -> bool:
    return policy.allowed(call.backends.enforcer, SHOW_HOST, call.context)


def get(call: Call, server_id: str) -> db_instances.InstanceRow:
    """The live server, 404 if there is none (or it is deleted), and 404 too if it is another
    project's and the caller may not see it: as Nova's project-scoped lookup answers, so that a
    stranger cannot learn that a uuid exists. 403 (policy ``compute:servers:show``) only for
    a caller of the server's own project whose roles do not allow it."""
    not_found = errors.NotFound(f'Instance {server_id} could not be found.')
    try:
        uuid = scheduler.check_uuid(server_id)
    except scheduler.BadRequest:
        raise not_found from None
    row = db_instances.get_instance(call.backends.engine, uuid)
    if row is None or row.state == models.DELETED:
        raise not_found
    target = {'project_id': row.project_id}
    if row.project_id != call.context.project_id and \
            not policy.allowed(call.backends.enforcer, SHOW, call.context, target):
        raise not_found
    policy.authorize(call.backends.enforcer, SHOW, call.context, target)
    return row


#: Nova's sort keys -> the column computed sorts on.
SORT_KEYS = {'created_at': 'created_at', 'updated_at': 'updated_at', 'uuid': 'uuid',
             'display_name': 'name', 'hostname': 'name', 'project_id': 'project_id',
             'user_id': 'user_id', 'host': 'host', 'node': 'node_uuid', 'image_ref': 'image',
             'launched_at': 'created_at', 'display_description': 'description',
             'access_ip_v4': 'access_ip_v4', 'access_ip_v6': 'access_ip_v6',
             'key_name': 'key_name'}
#: Nova's other sort keys: the ones Nova itself ignores (SERVER_LIST_IGNORE_SORT_KEY), the
#: ones every server here has the same value of, and the states (computed's states do not
#: order as Nova's vm_state/task_state/power_state strings do): accepted, without effect.
SORT_KEYS_IGNORED = frozenset({
    'architecture', 'cell_name', 'cleaned', 'default_ephemeral_device',
    'default_swap_device', 'deleted', 'deleted_at', 'disable_terminate', 'ephemeral_gb',
    'ephemeral_key_uuid', 'id', 'key_data', 'launched_on', 'locked', 'memory_mb', 'os_type',
    'reservation_id', 'root_gb', 'shutdown_terminate', 'user_data', 'vcpus', 'vm_mode',
    'auto_disk_config', 'availability_zone', 'config_drive', 'kernel_id',
    'locked_by', 'ramdisk_id', 'root_device_name', 'launch_index', 'progress',
    'terminated_at', 'instance_type_id', 'vm_state', 'task_state', 'power_state'})
SORT_DIRS = ('asc', 'desc')
#: Longest query value read (a server name, a project id, an image URL are shorter).
QUERY_LENGTH = 2048
#: Work one listing may spend matching names against a regular expression (automaton steps,
#: :mod:`computed.api.name_filter`; about half a second). A listing that reaches it returns
#: what it found so far with a ``next`` link from where it stopped.
NAME_FILTER_BUDGET = 1_000_000


def _query(call: Call, name: str) -> str | None:
    """The query parameter ``name``; 400 naming it if it holds a control character (NUL
    cannot even be stored) or is longer than :data:`QUERY_LENGTH`."""
    value = call.query(name)
    if value is not None:
        _check_text(name, value)
    return value


def _check_text(name: str, value: str, length: int = QUERY_LENGTH) -> None:
    if any(ord(ch) < 0x20 or ord(ch) == 0x7f for ch in value):
        raise errors.BadRequest(f'Invalid {name}: control characters are not allowed')
    if len(value) > length:
        raise errors.BadRequest(f'Invalid {name}: longer than {length} characters')


def _all_tenants(call: Call) -> bool:
    """``all_tenants`` as Nova reads it: present without a value means all; else a boolean
    (400 for anything else)."""
    value = _query(call, 'all_tenants')
    if value is None:
        return False
    if value.strip() == '':
        return True
    text = value.strip().lower()
    if text in ('1', 't', 'true', 'on', 'y', 'yes'):
        return True
    if text in ('0', 'f', 'false', 'off', 'n', 'no'):
        return False
    raise errors.BadRequest(f'Invalid all_tenants {value!r}: a boolean, or no value')


def _sort(call: Call) -> list[tuple[str, bool]]:
    """``sort_key``/``sort_dir`` pairs as Nova pairs them (a key without a direction takes the
    first direction; more directions than keys is a 400), as (column, ascending)."""
    keys = call.request.GET.getall('sort_key')
    dirs = call.request.GET.getall('sort_dir')
    for key in keys:
        _check_text('sort_key', key, 255)
        if key not in SORT_KEYS and key not in SORT_KEYS_IGNORED:
            raise errors.BadRequest(f'Invalid sort_key {key!r}: one of '
                                    f'{", ".join(sorted(SORT_KEYS))}')
    for direction in dirs:
        _check_text('sort_dir', direction, 255)
        if direction not in SORT_DIRS:
            raise errors.BadRequest(f"Invalid sort_dir {direction!r}: 'asc' or 'desc'")
    if len(dirs) > len(keys):
        raise errors.BadRequest('Invalid sort_dir: more sort directions than sort keys')
    dirs = dirs + [dirs[0] if dirs else 'desc'] * (len(keys) - len(dirs))
    result: list[tuple[str, bool]] = []
    for key, direction in zip(keys, dirs):
        column = SORT_KEYS.get(key)
        if column and column not in {known for known, _ascending in result}:
            result.append((column, direction == 'asc'))
    if keys and not result:  # only ignored keys: the direction still orders the listing
        result.append(('created_at', dirs[0] == 'asc'))
    return result


#: Servers one listing may read to match a filter the database does not (the flavor copy, the
#: tags); past it, the listing returns what it found with a ``next`` link from there.
SCAN_BUDGET = 10_000
#: Nova's tag filters (2.26), each a comma-separated list.
TAG_FILTERS = ('tags', 'tags-any', 'not-tags', 'not-tags-any')


def _tag_filters(call: Call) -> tuple[frozenset[str], ...] | None:
    """The tag filters of the listing from 2.26 on (ignored before, as Nova's), None when
    there are none."""
    if not call.at_least(2, 26):
        return None
    given = [_query(call, name) for name in TAG_FILTERS]
    if all(value is None for value in given):
        return None
    return tuple(frozenset(tag for tag in (value or '').split(',') if tag) for value in given)


def tags_match(tags: tuple[str, ...], all_of: frozenset[str], any_of: frozenset[str],
               not_all: frozenset[str], not_any: frozenset[str]) -> bool:
    """Nova's tag filters: the server has every tag of ``tags``, one of ``tags-any``, not all
    of ``not-tags``, none of ``not-tags-any`` (an empty filter holds). Pure."""
    have = set(tags)
    return (all_of <= have and (not any_of or bool(any_of & have))
            and (not not_all or not not_all <= have) and not not_any & have)


def _matcher(call: Call) -> tuple[str | None, name_filter.Filter | None]:
    """The ``name`` filter: (a substring the database finds, or a regular expression matched
    here); 400 for a pattern that cannot be one."""
    name = _query(call, 'name')
    if not name:
        return None, None
    if len(name) > name_filter.MAX_PATTERN:
        raise errors.BadRequest(f'Invalid name filter: longer than {name_filter.MAX_PATTERN} '
                                'characters')
    if name_filter.is_literal(name):
        return name, None
    try:
        return None, name_filter.compile_filter(name)
    except name_filter.InvalidFilter as exc:
        raise errors.BadRequest(f'Invalid name filter {name!r}: {exc}') from None


def _scan(fetch: Callable[[str | None, int], list[db_instances.InstanceRow]],
          keep: Callable[[db_instances.InstanceRow], bool], marker: str | None, limit: int,
          over_budget: Callable[[], bool]) -> tuple[list[db_instances.InstanceRow], str | None]:
    """Up to ``limit`` rows that ``keep`` keeps, read in order after ``marker`` in pages of
    ``fetch(marker, count)``; and the marker to continue from (None when all were read).
    Stops early once ``over_budget()``: a listing's cost is bounded, the rest is on the next
    page."""
    found: list[db_instances.InstanceRow] = []
    cursor = marker
    page = max(limit, 50)
    while len(found) < limit:
        rows = fetch(cursor, page)
        for row in rows:
            cursor = row.uuid
            if keep(row):
                found.append(row)
                if len(found) == limit:
                    return found, cursor
            if over_budget():
                return found, cursor
        if len(rows) < page:
            return found, None
    return found, cursor


def _list(call: Call, detail: bool) -> webob.Response:
    policy.authorize(call.backends.enforcer, INDEX, call.context)
    project_id: str | None = call.context.project_id
    if _all_tenants(call):
        policy.authorize(call.backends.enforcer, ALL_TENANTS, call.context)
        project_id = _query(call, 'project_id') or _query(call, 'tenant_id')
    states = None
    status = _query(call, 'status')
    if status:
        states = server_status.states_of(status)
        if states is None:
            if call.at_least(2, 38):
                raise errors.BadRequest(f'Invalid status value {status!r}')
            states = frozenset()
    host = _query(call, 'host')
    if host and not _sees_hosts(call):
        host = None  # as Nova: the filter is ignored for those who may not see hosts
    limit = call.limit()
    marker = _query(call, 'marker')
    flavor_id = _query(call, 'flavor')
    image = _query(call, 'image') or _query(call, 'image_ref')
    reservation_id = _query(call, 'reservation_id')
    substring, pattern = _matcher(call)
    sort = _sort(call)
    tagged = _tag_filters(call)
    read = [0]

    def fetch(after: str | None, count: int) -> list[db_instances.InstanceRow]:
        return db_instances.list_instances(
            call.backends.engine, project_id=project_id, host=host, states=states,
            name=substring, image=image, reservation_id=reservation_id,
            include_deleted=bool(states and models.DELETED.value in states),
            marker=after, limit=count, sort=sort)

    def keep(row: db_instances.InstanceRow) -> bool:
        read[0] += 1
        # The flavor is the copy the server was built from (its id at the time).
        if flavor_id is not None and (row.flavor or {}).get('id') != flavor_id:
            return False
        if tagged is not None and not tags_match(row.tags, *tagged):
            return False
        return pattern is None or pattern.matches(row.name)

    try:
        if flavor_id is None and pattern is None and tagged is None:
            rows = fetch(marker, limit)
            following = rows[-1].uuid if rows and len(rows) == limit else None
        else:
            rows, following = _scan(fetch, keep, marker, limit, lambda: bool(
                pattern and pattern.spent > NAME_FILTER_BUDGET) or read[0] > SCAN_BUDGET)
    except db_instances.InstanceNotFound:
        raise errors.BadRequest(f'marker [{marker}] not found') from None
    admin = _sees_hosts(call)
    if detail:
        servers = [document(call, row, admin) for row in rows]
    else:
        servers = [{'id': row.uuid, 'name': row.name or '', 'links': links(call, row.uuid)}
                   for row in rows]
    body: dict[str, Any] = {'servers': servers}
    if following is not None and limit:
        body['servers_links'] = call.next_links('/servers/detail' if detail else '/servers',
                                                following)
    return json_response(200, body)


def index(call: Call) -> webob.Response:
    return _list(call, detail=False)


def detail(call: Call) -> webob.Response:
    return _list(call, detail=True)


def show(call: Call) -> webob.Response:
    row = get(call, call.params['server_id'])
    return json_response(200, {'server': document(call, row, _sees_hosts(call))})


def ips(call: Call) -> webob.Response:
    """``GET /servers/{id}/ips``: a server here has no networks (docs/api.md)."""
    get(call, call.params['server_id'])
    return json_response(200, {'addresses': {}})


def ips_of_network(call: Call) -> webob.Response:
    get(call, call.params['server_id'])
    raise errors.NotFound(f"Instance {call.params['server_id']} is not attached to network "
                          f"{call.params['network']}.")


def security_groups(call: Call) -> webob.Response:
    """``GET /servers/{id}/os-security-groups``: none, without networks."""
    get(call, call.params['server_id'])
    return json_response(200, {'security_groups': []})


def interfaces(call: Call) -> webob.Response:
    """``GET /servers/{id}/os-interface``: none, without networks."""
    get(call, call.params['server_id'])
    return json_response(200, {'interfaceAttachments': []})


def checked_image(call: Call, ref: str, ram: int | None = None,
                  disk: int | None = None) -> str:
    """``imageRef`` if a server may be built from it; 400 saying why not. A uuid is a Glance
    image when there is an Image service (:mod:`computed.api.glance`): it must exist, be
    active and be visible to the project (:func:`computed.api.images.judge`; Glance down is a
    503 naming it), and fit a flavor of ``ram`` MB and ``disk`` GB where they are given
    (:func:`computed.api.images.check_fit`); anything else is an image URL
    (:mod:`computed.api.image_urls`, under ``[api] image_url_schemes`` and
    ``image_url_allowed_networks``)."""
    image_id = images.glance_id(ref)
    if image_id is not None:
        checked = _glance_image(call, image_id, ram, disk)
        if checked is not None:
            return checked
    conf = call.backends.conf.api
    backend = call.backends.glance
    try:
        return image_urls.check(ref, conf.image_url_schemes,
                                image_urls.networks(conf.image_url_allowed_networks),
                                image_service=backend is not None and image_id is None
                                and getattr(backend, 'enabled', True))
    except image_urls.BadImageURL as exc:
        raise errors.BadRequest(f'imageRef {image_urls.quoted(ref)} refused: {exc}') from None


def _glance_image(call: Call, image_id: str, ram: int | None,
                  disk: int | None) -> str | None:
    """``image_id`` once Glance shows it fit for the caller's project (and for a flavor of
    ``ram`` MB and ``disk`` GB, where given); None where there is no Image service (the uuid
    is then refused as an image URL)."""
    backend = call.backends.glance
    if backend is None:
        return None
    environ = call.request.environ
    context = call.context
    try:
        found = backend.image(environ, image_id)
        images.judge(image_id, found, context.project_id,
                     policy.is_admin(call.backends.enforcer, context),
                     member=lambda: backend.is_member(environ, image_id, context.project_id))
        if ram is not None and disk is not None:
            images.check_fit(found, ram, disk)
    except glance.NoImageService:
        return None
    except glance.GlanceUnavailable as exc:
        raise errors.ServiceUnavailable(f'Glance: {exc}') from None
    except images.BadImage as exc:
        raise errors.BadRequest(str(exc)) from None
    return image_id


def _availability_zone(call: Call, zone: str) -> None:
    """Nova's ``ZONE[:HOST[:NODE]]``: naming a host or node is an admin's (policy
    ``compute:servers:create:forced_host``, 403 otherwise, as Nova), and not supported here
    (the daemons own the nodes by the ring; 400); a zone other than ``nova`` is a 400."""
    name, _, where = zone.partition(':')
    if where.strip(':'):
        policy.authorize(call.backends.enforcer, FORCED_HOST, call.context)
        raise errors.BadRequest(f'availability_zone {zone!r}: forcing a host or node is not '
                                'supported (the daemons share the nodes by the ring)')
    if name and name != ZONE:
        raise errors.BadRequest(f'The requested availability zone {name!r} is not available '
                                f'(the only zone is {ZONE!r})')


def access_ip(field: str, value: str, version: int) -> str:
    """Nova's ``accessIPv4``/``accessIPv6``: an address of that version (an empty string
    too, as Nova's older clients send it), in its normal form, as Nova keeps and shows it
    (``0000::babe:220.12.22.2`` is ``::babe:dc0c:1602``); 400 naming the field otherwise."""
    if value == '':
        return ''
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        address = None
    if address is None or address.version != version or getattr(address, 'scope_id', None):
        raise errors.BadRequest(f'Invalid input for field/attribute {field}. {value!r} is not '
                                f'an IPv{version} address')
    return str(address)


def login_fields(call: Call, spec: dict[str, Any]) -> dict[str, Any]:
    """What a server is deployed with for its user to log in (docs/api.md, "Servers"): a copy
    of the caller's key pair ``key_name`` (400 naming it if the caller has none of that
    name), the ``user_data`` (400 unless base64 of UTF-8 text), and the config drive that
    carries them, which every server gets: there is no metadata service here, so
    ``config_drive: false`` is taken and has no effect (as Nova's ``force_config_drive``)."""
    login: dict[str, Any] = {'config_drive': True}
    if 'user_data' in spec:
        try:
            configdrive.decode_user_data(spec['user_data'])
        except configdrive.InvalidUserData as exc:
            raise errors.BadRequest(f'Invalid input for field/attribute user_data: {exc}'
                                    ) from None
        login['user_data'] = spec['user_data']
    name = spec.get('key_name')
    if name is not None:
        try:
            key = db_key_pairs.get_key_pair(call.backends.engine, call.context.user_id, name)
        except db_key_pairs.KeyPairNotFound:
            raise errors.BadRequest(f'Invalid key_name provided: user '
                                    f'{call.context.user_id} has no key pair {name!r}'
                                    ) from None
        login.update(key_name=key.name, key_type=key.type, key_data=key.public_key)
    return login


def _flavor_ref(call: Call, ref: Any) -> db_flavors.FlavorRow:
    """The flavor of ``flavorRef`` if the caller may build from it (a private flavor only
    from a project on its access list, or an admin: Nova's); 400 otherwise."""
    flavor_id = str(ref).rstrip('/').rsplit('/', 1)[-1]
    visible_to = None if policy.is_admin(call.backends.enforcer, call.context) \
        else call.context.project_id
    try:
        return db_flavors.get_flavor(call.backends.engine, flavor_id, visible_to=visible_to)
    except db_flavors.FlavorNotFound:
        raise errors.BadRequest(f'Flavor {ref} could not be found.') from None


def create(call: Call) -> webob.Response:
    context = call.context
    policy.authorize(call.backends.enforcer, CREATE, context)
    body = call.body(schemas.SERVER_CREATE)
    spec = body['server']
    if call.at_least(2, 37) and 'networks' not in spec:
        raise errors.BadRequest('networks is required from microversion 2.37 on: use '
                                '"none" or "auto"')
    if 'description' in spec and not call.at_least(2, 19):
        raise errors.BadRequest('description needs microversion 2.19 or later')
    if 'tags' in spec and not call.at_least(2, 52):
        raise errors.BadRequest('tags needs microversion 2.52 or later')
    _availability_zone(call, spec.get('availability_zone') or '')
    quotas.check_metadata_items(call.backends, context.project_id,
                                len(spec.get('metadata') or {}))
    for field, version in (('accessIPv4', 4), ('accessIPv6', 6)):
        if field in spec:
            spec[field] = access_ip(field, spec[field], version)
    try:
        block_devices.check(spec.get('block_device_mapping_v2') or [], spec['imageRef'])
    except block_devices.BadMapping as exc:
        raise errors.BadRequest(str(exc)) from None
    flavor = _flavor_ref(call, spec['flavorRef'])
    image = checked_image(call, spec['imageRef'], flavor.ram, flavor.disk)
    login = login_fields(call, spec)
    try:
        request = flavor_specs.placement_request(flavor.extra_specs)
    except flavor_specs.InvalidExtraSpec as exc:
        raise errors.BadRequest(f'Flavor {flavor.id} cannot be scheduled: {exc}') from None
    low, high = _counts(spec)
    # Nova's two names for the hints; they reach the scheduler's filters (docs/api.md).
    hints = body.get('os:scheduler_hints') or body.get('OS-SCH-HNT:scheduler_hints')
    build = _Build(call, request, image, flavor, spec, hints, login)
    with backend_errors():
        rows = build.admit(low, high)
    call.backends.builds.submit(rows)  # placed after the 202 (computed.api.pending)
    first = rows[0]
    location = f'{call.base_url}/servers/{first.uuid}'
    if _flag_value(spec.get('return_reservation_id', False)):
        return json_response(202, {'reservation_id': build.reservation_id},
                             {'Location': location})
    made = {'id': first.uuid, 'links': links(call, first.uuid), 'OS-DCF:diskConfig': 'MANUAL',
            'security_groups': [{'name': 'default'}]}
    # adminPass is accepted and never answered: nothing on bare metal sets it (Nova's Ironic
    # driver injects none either), so computed answers as Nova with [api]
    # enable_instance_password = False, rather than echo a password no node has.
    return json_response(202, {'server': made}, {'Location': location})


#: Most servers one request may create (Nova bounds them by the quota only; an unlimited
#: project would otherwise hold a worker for as many Placement requests as it asks).
MAX_COUNT = 100
#: Nova's multi_instance_display_name_template.
MULTI_NAME = '{name}-{count}'
NAME_LENGTH = 255


def _flag_value(value: Any) -> bool:
    """A boolean of a body as Nova's parameter_types.boolean takes them (the schema has
    checked it is one)."""
    return value is True or (isinstance(value, str) and value.lower() in
                             ('true', '1', 'on', 'yes'))


def _counts(spec: dict[str, Any]) -> tuple[int, int]:
    """(min_count, max_count) as Nova reads them: max_count defaults to min_count; each from
    1 to :data:`MAX_COUNT`; min_count above max_count is a 400."""
    low = limits.integer(spec.get('min_count', 1), 'min_count', 1, MAX_COUNT)
    high = limits.integer(spec.get('max_count', low), 'max_count', 1, MAX_COUNT)
    if low > high:
        raise errors.BadRequest(f'min_count ({low}) must be <= max_count ({high})')
    return low, high


def _nth_name(name: str, index: int, count: int) -> str:
    """The name of the ``index``-th (from 0) of ``count`` servers made together: Nova's
    ``name-1``, ``name-2``... (the name itself for one), cut to fit the name's column."""
    if count == 1:
        return name
    suffix = MULTI_NAME.format(name='', count=index + 1)
    return name[:NAME_LENGTH - len(suffix)] + suffix


class _Build:
    """The servers of one ``POST /servers``: admitted by quota, then placed, all or none."""

    def __init__(self, call: Call, request: Any, image: str, flavor: db_flavors.FlavorRow,
                 spec: dict[str, Any], hints: dict[str, Any] | None = None,
                 login: dict[str, Any] | None = None):
        self.call = call
        self.hints = hints
        self.login = login or {}
        self.request = request
        self.image = image
        self.flavor = _flavor_copy(flavor)
        self.spec = spec
        self.reservation_id = 'r-' + uuidlib.uuid4().hex[:8]

    def admit(self, low: int, high: int) -> list[db_instances.InstanceRow]:
        """As many servers as the quota admits, up to ``high`` (a 403 when fewer than
        ``low``: Nova's rule), each admitted under the project's lock
        (:func:`computed.api.quotas.reserve`) and recorded, not placed yet: what
        :mod:`computed.api.pending` places after the 202."""
        backends = self.call.backends
        context = self.call.context
        uuids: list[str] = []
        held: list[str] = []
        rows: list[db_instances.InstanceRow] = []
        try:
            for index in range(high):
                instance_uuid = str(uuidlib.uuid4())
                try:
                    if quotas.reserve(backends, context.project_id, self.request.resource_class,
                                      instance_uuid, cores=self.flavor['vcpus'],
                                      ram=self.flavor['ram']):
                        held.append(instance_uuid)
                except errors.Forbidden:
                    if index < low:
                        raise
                    break
                uuids.append(instance_uuid)
            engine = backends.engine
            details = self._details()
            tags = list(dict.fromkeys(self.spec.get('tags') or ()))  # once each, in order
            for index, instance_uuid in enumerate(uuids):
                row = backends.servers.admit(
                    self.request.resource_class, self.request.required, self.image,
                    instance_uuid, project_id=context.project_id, user_id=context.user_id,
                    name=_nth_name(self.spec['name'], index, len(uuids)),
                    metadata=self.spec.get('metadata'), flavor=self.flavor)
                row = db_instances.set_instance_details(engine, row.uuid, **details)
                if tags:  # Nova's 2.52: every server of the request has them
                    row = db_instances.edit_instance(engine, row.uuid,
                                                     lambda _row: {'tags': tags})
                rows.append(row)
            return rows
        except BaseException:
            for row in rows:  # all or none: nothing half-admitted is left to place
                with contextlib.suppress(Exception):
                    db_instances.set_instance_state(backends.engine, row.uuid, models.DELETED,
                                              expect_state=models.BUILDING,
                                              expect_unplaced=True)
            raise
        finally:
            # Each admitted server has its row now, which counts itself.
            for instance_uuid in held:
                quotas.release(backends, instance_uuid)

    def _details(self) -> dict[str, Any]:
        """What the servers keep of the request besides what placing needs first."""
        return {'description': self.spec.get('description'),
                'access_ip_v4': self.spec.get('accessIPv4') or None,
                'access_ip_v6': self.spec.get('accessIPv6') or None,
                'reservation_id': self.reservation_id,
                'scheduler_hints': self.hints or None, **self.login}


def _flavor_copy(flavor: db_flavors.FlavorRow) -> dict[str, Any]:
    return {'id': flavor.id, 'name': flavor.name, 'vcpus': flavor.vcpus, 'ram': flavor.ram,
            'disk': flavor.disk, 'ephemeral': flavor.ephemeral, 'swap': flavor.swap,
            'extra_specs': flavor.extra_specs}


@contextlib.contextmanager
def raced(name: str, row: db_instances.InstanceRow) -> Iterator[None]:
    """What the server API refuses once the request is past the API's own checks, as the
    Compute API answers it: the instance changed state or hands since it was read (another
    request on it at the same moment: a delete and a reboot) is a 409, gone meanwhile a 404,
    without a host to act a 409; never a 500."""
    try:
        yield
    except db_instances.InstanceConflict:
        # The details (host, member epoch) are the fleet's, not the client's.
        raise errors.Conflict(f"Cannot '{name}' instance {row.uuid}: its state changed while "
                              'the request was recorded (another request on it is in '
                              'progress)') from None
    except db_instances.InstanceNotFound:
        raise errors.NotFound(f'Instance {row.uuid} could not be found.') from None
    except NoHost:
        raise errors.Conflict(f"Cannot '{name}' instance {row.uuid} while it is in state "
                              f'{row.state}: it has no host') from None


def check_unlocked(call: Call, name: str, row: db_instances.InstanceRow) -> None:
    """409 (Nova's InstanceIsLocked) when ``row`` is locked (``lock``:
    :mod:`computed.api.server_actions`) and the caller is not an admin."""
    if row.locked_by and not policy.is_admin(call.backends.enforcer, call.context):
        raise errors.Conflict(f"Instance {row.uuid} is locked: cannot '{name}' it "
                              '(unlock it first)')


def delete(call: Call) -> webob.Response:
    row = get(call, call.params['server_id'])
    policy.authorize(call.backends.enforcer, DELETE, call.context,
                     {'project_id': row.project_id})
    check_unlocked(call, 'delete', row)
    with backend_errors(), raced('delete', row):
        call.backends.servers.action('delete', row.uuid)
    return empty(204)


def action(call: Call) -> webob.Response:
    body = call.body({'type': 'object', 'minProperties': 1, 'maxProperties': 1})
    (name,) = body
    if name == 'os-resetState':
        return _reset_state(call)
    if name not in ACTIONS:
        raise errors.BadRequest(f'There is no such action: {name}')
    call.body(ACTION_SCHEMAS[name])
    row = get(call, call.params['server_id'])
    operation, rule, from_states = ACTIONS[name]
    policy.authorize(call.backends.enforcer, rule, call.context,
                     {'project_id': row.project_id})
    check_unlocked(call, name, row)
    if row.state not in from_states:
        shown = server_status.view(row.state, placed=_placed(row))
        raise errors.Conflict(f"Cannot '{name}' instance {row.uuid} while it is in vm_state "
                              f'{shown.vm_state}' + (f' (task {shown.task_state})'
                                                     if shown.task_state else ''))
    with backend_errors(), raced(name, row):
        call.backends.servers.action(operation, row.uuid)
    return empty(202)


def _reset_state(call: Call) -> webob.Response:
    """``os-resetState`` (admins, as Nova's): the server's state set to ACTIVE or ERROR
    whatever it was, its task cleared; nothing is done to the node. A compare-and-set on the
    state read (an action meanwhile: a 409). ACTIVE needs a node: a server that has none (a
    build that found no host) has nothing to be active on (409)."""
    state = call.body(schemas.RESET_STATE)['os-resetState']['state']
    row = get(call, call.params['server_id'])
    policy.authorize(call.backends.enforcer, RESET_STATE, call.context,
                     {'project_id': row.project_id})
    target = RESET_STATES[state]
    if target == models.ACTIVE and row.node_uuid is None:
        raise errors.Conflict(f"Cannot 'os-resetState' instance {row.uuid} to active: it has "
                              'no node')
    with raced('os-resetState', row):
        # ERROR keeps the fault there is (the reason it failed, if it did).
        db_instances.set_instance_state(call.backends.engine, row.uuid, target,
                                        row.fault if target == models.ERROR else None,
                                        expect_state=row.state)
    return empty(202)
