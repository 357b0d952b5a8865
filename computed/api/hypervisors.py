"""``/os-hypervisors``: each Ironic node a hypervisor, as Nova's Ironic driver shows them
(list, detail, show, statistics; before 2.53 also search, servers; uptime a 501).

Owns the hypervisor documents of each microversion. What they are made of, read once per
request, none of it from Ironic nor per node from Placement (a fleet has 10,000 nodes):

* the nodes are computed's providers, as the reporters last wrote them to Placement
  (:func:`computed.db.providers.live_providers`: the node's class and whether its one unit is
  reserved); a node no reporter wrote yet is not a hypervisor yet;
* the server on each node is computed's live instance there (the database);
* the service of a node is the daemon that last reported it, as ``/os-services`` shows it
  (:func:`computed.api.services.daemons`: up while a member of the group, disabled while the
  operator drains it).

Decisions (docs/api.md): ``hypervisor_hostname`` is the node's uuid, as in Nova; the id is the
uuid from 2.53 on, before it a 52-bit number derived from the uuid (stable, and an integer as
those clients expect); ``hypervisor_type`` ``ironic``, ``hypervisor_version`` 1; ``state`` is
the daemon's (``up``/``down``); ``status`` is ``disabled`` when the daemon is disabled, or when
the node cannot take a new server without hosting one (its unit reserved: maintenance,
cleaning, a power fault: what Nova's driver reserves it for). The CPU, memory and disk fields
are 0 (a node is one unit of its resource class, the only inventory Nova's Ironic driver
reports too); ``running_vms`` counts the node's server.

Pure parts (:func:`view`, :func:`statistics`, :func:`legacy_id`) take what was read; the
controllers read and answer. Every bad query (an unknown parameter from 2.53 on, a malformed
``limit``, ``marker`` or ``with_servers``, paging with a pattern) is a 400 naming it.
"""

from __future__ import annotations

import dataclasses
import json
import uuid as uuidlib
from collections.abc import Iterable
from typing import Any

import webob

from computed.api import errors, limits, policy, services
from computed.api.request import Call, json_response
from computed.db import instances as db_instances
from computed.db import providers as db_providers

RULE = 'compute:hypervisors'
TYPE = 'ironic'
VERSION = 1
#: The CPU, memory and disk fields: a node's capacity is its one unit of its class.
SIZES = ('vcpus', 'memory_mb', 'local_gb', 'vcpus_used', 'memory_mb_used', 'local_gb_used',
         'free_ram_mb', 'free_disk_gb', 'current_workload', 'disk_available_least')
#: Query parameters of the listings from 2.53 on (Nova's schema refuses any other).
LIST_QUERY = frozenset({'limit', 'marker', 'hypervisor_hostname_pattern', 'with_servers'})
SHOW_QUERY = frozenset({'with_servers'})
TRUE = frozenset({'1', 't', 'true', 'on', 'y', 'yes'})
FALSE = frozenset({'0', 'f', 'false', 'off', 'n', 'no'})


@dataclasses.dataclass(frozen=True)
class Node:
    """One node as the hypervisor views read it."""

    uuid: str
    resource_class: str
    reserved: bool
    host: str  # the daemon that last reported it
    servers: tuple[tuple[str, str], ...] = ()  # (uuid, name) of its live server


def legacy_id(node_uuid: str) -> int:
    """The id before 2.53: the uuid's first 52 bits (an integer JavaScript clients keep exact;
    two nodes sharing it among 10,000 has odds below 1 in 10 million)."""
    return int(node_uuid.replace('-', '')[:13], 16)


def hypervisor_id(call: Call, node: Node) -> str | int:
    return node.uuid if call.at_least(2, 53) else legacy_id(node.uuid)


def read_nodes(call: Call) -> list[Node]:
    """Every node a reporter wrote, in uuid order, with the server on it."""
    engine = call.backends.engine
    on_node: dict[str, list[tuple[str, str]]] = {}
    for row in db_instances.live_instances(engine):
        if row.node_uuid:
            on_node.setdefault(row.node_uuid, []).append((row.uuid, row.name or ''))
    result = []
    for provider in db_providers.live_providers(engine):
        try:
            state = json.loads(provider.state or '{}')
        except ValueError:
            state = {}
        result.append(Node(uuid=provider.uuid,
                           resource_class=str(state.get('resource_class', '')),
                           reserved=bool(state.get('reserved')), host=provider.host,
                           servers=tuple(on_node.get(provider.uuid, ()))))
    return result


def view(call: Call, node: Node, daemon: dict[str, Any] | None, position: int, detail: bool,
         with_servers: bool) -> dict[str, Any]:
    """The hypervisor document of ``node`` at the call's microversion; ``daemon`` is its
    service as ``/os-services`` lists it (None: not a service any more), ``position`` its place
    in that list (the service id before 2.53)."""
    up = bool(daemon and daemon['up'])
    disabled = bool(daemon and daemon['disabled']) or (node.reserved and not node.servers)
    doc: dict[str, Any] = {
        'id': hypervisor_id(call, node),
        'hypervisor_hostname': node.uuid,
        'state': 'up' if up else 'down',
        'status': 'disabled' if disabled else 'enabled',
    }
    if detail:
        doc.update({'hypervisor_type': TYPE, 'hypervisor_version': VERSION,
                    'host_ip': None,
                    'service': {'id': services.service_id(call, call.backends.group,
                                                          node.host, position),
                                'host': node.host,
                                'disabled_reason': (daemon or {}).get('reason')
                                if daemon and daemon['disabled'] else None}})
        if call.at_least(2, 88):
            doc['uptime'] = None
        else:
            doc.update({size: 0 for size in SIZES})
            doc['running_vms'] = len(node.servers)
            # A JSON object from 2.28 on, its text before.
            doc['cpu_info'] = {} if call.at_least(2, 28) else ''
    if with_servers and (node.servers or call.at_least(2, 75)):
        doc['servers'] = [{'uuid': uuid, 'name': name} for uuid, name in node.servers]
    return doc


def statistics(nodes: Iterable[Node]) -> dict[str, int]:
    """Nova's ``hypervisor_statistics`` over ``nodes`` (sizes 0: see the module)."""
    nodes = list(nodes)
    result = {size: 0 for size in SIZES}
    result.update(count=len(nodes), running_vms=sum(len(node.servers) for node in nodes))
    return result


# -- queries ---------------------------------------------------------------------------------

def _flag(call: Call, name: str) -> bool:
    value = call.query(name)
    if value is None:
        return False
    if value.strip().lower() in TRUE:
        return True
    if value.strip().lower() in FALSE:
        return False
    raise errors.BadRequest(f'Invalid {name} {value!r}: a boolean')


def _only(call: Call, allowed: frozenset[str]) -> None:
    """From 2.53 on, Nova's query schemas refuse any other parameter."""
    if call.at_least(2, 53):
        for name in call.request.GET:
            if name not in allowed:
                raise errors.BadRequest(f'Invalid input for query parameters {name}: '
                                        'additional properties are not allowed')


def _daemons(call: Call) -> dict[str, tuple[dict[str, Any], int]]:
    """``{host: (service, position)}`` as ``/os-services`` lists them."""
    return {daemon['host']: (daemon, position)
            for position, daemon in enumerate(services.daemons(call.backends), start=1)}


def _views(call: Call, nodes: list[Node], detail: bool, with_servers: bool
           ) -> list[dict[str, Any]]:
    daemons = _daemons(call)
    return [view(call, node, *daemons.get(node.host, (None, 0)), detail=detail,
                 with_servers=with_servers) for node in nodes]


def _find(call: Call, nodes: list[Node], hypervisor_id: str) -> Node:
    """The node of ``hypervisor_id`` (a uuid from 2.53 on, the number before); 404 if none,
    400 for what cannot be an id at 2.53."""
    if call.at_least(2, 53):
        try:
            wanted = str(uuidlib.UUID(hypervisor_id))
        except ValueError:
            raise errors.BadRequest(f'Invalid uuid {hypervisor_id}') from None
        match = [node for node in nodes if node.uuid == wanted]
    else:
        match = [node for node in nodes
                 if hypervisor_id.isascii() and hypervisor_id.isdigit()
                 and legacy_id(node.uuid) == int(hypervisor_id)]
    if not match:
        raise errors.NotFound(f"Hypervisor with ID '{hypervisor_id}' could not be found.")
    return match[0]


def _list(call: Call, detail: bool) -> webob.Response:
    policy.authorize(call.backends.enforcer, RULE, call.context)
    _only(call, LIST_QUERY)
    with_servers = call.at_least(2, 53) and _flag(call, 'with_servers')
    pattern = call.query('hypervisor_hostname_pattern') if call.at_least(2, 53) else None
    paged = call.at_least(2, 33)
    limit = call.limit() if paged else None
    marker = call.query('marker') if paged else None
    if pattern is not None and (call.query('limit') is not None or marker is not None):
        raise errors.BadRequest('Paging over hypervisors with the '
                                'hypervisor_hostname_pattern query parameter is not supported.')
    nodes = read_nodes(call)
    if pattern is not None:
        limits.identifier(pattern, 'hypervisor_hostname_pattern')
        nodes = [node for node in nodes if pattern in node.uuid]
        if not nodes:
            raise errors.NotFound(f"No hypervisor matching '{pattern}' could be found.")
    if marker is not None:
        try:
            start = nodes.index(_find(call, nodes, marker)) + 1
        except errors.APIError:
            raise errors.BadRequest(f'marker [{marker}] not found') from None
        nodes = nodes[start:]
    body: dict[str, Any] = {}
    if limit is not None:
        more = len(nodes) > limit
        nodes = nodes[:limit]
        if more and nodes:
            path = '/os-hypervisors/detail' if detail else '/os-hypervisors'
            body['hypervisors_links'] = call.next_links(
                path, str(hypervisor_id(call, nodes[-1])))
    body['hypervisors'] = _views(call, nodes, detail, with_servers)
    return json_response(200, body)


def index(call: Call) -> webob.Response:
    return _list(call, detail=False)


def detail(call: Call) -> webob.Response:
    return _list(call, detail=True)


def show(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, RULE, call.context)
    _only(call, SHOW_QUERY)
    with_servers = call.at_least(2, 53) and _flag(call, 'with_servers')
    node = _find(call, read_nodes(call), call.params['hypervisor_id'])
    (document,) = _views(call, [node], True, with_servers)
    return json_response(200, {'hypervisor': document})


def uptime(call: Call) -> webob.Response:
    """Nova's Ironic driver has no host uptime: a 501, as Nova answers (removed at 2.88)."""
    policy.authorize(call.backends.enforcer, RULE, call.context)
    if call.at_least(2, 88):
        raise errors.NotFound('No resource at /os-hypervisors/{id}/uptime from 2.88 on')
    _find(call, read_nodes(call), call.params['hypervisor_id'])
    raise errors.NotImplementedHere('Virt driver does not implement host uptime function.')


def statistics_view(call: Call) -> webob.Response:
    """``GET /os-hypervisors/statistics`` (removed at 2.88, as Nova)."""
    policy.authorize(call.backends.enforcer, RULE, call.context)
    if call.at_least(2, 88):
        raise errors.NotFound('No resource at /os-hypervisors/statistics from 2.88 on')
    return json_response(200, {'hypervisor_statistics': statistics(read_nodes(call))})


def _matching(call: Call, with_servers: bool) -> webob.Response:
    """``/os-hypervisors/{pattern}/search`` and ``/servers``, before 2.53 (404 from it on)."""
    policy.authorize(call.backends.enforcer, RULE, call.context)
    pattern = call.params['pattern']
    if call.at_least(2, 53):
        raise errors.NotFound(f'No resource at /os-hypervisors/{pattern}: use '
                              'hypervisor_hostname_pattern from 2.53 on')
    nodes = [node for node in read_nodes(call) if pattern in node.uuid]
    if not nodes:
        raise errors.NotFound(f"No hypervisor matching '{pattern}' could be found.")
    return json_response(200, {'hypervisors': _views(call, nodes, False, with_servers)})


def search(call: Call) -> webob.Response:
    return _matching(call, with_servers=False)


def servers(call: Call) -> webob.Response:
    return _matching(call, with_servers=True)
