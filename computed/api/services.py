"""``/os-services``: the daemons as Compute services, disabled and enabled by draining.

Owns the service documents. The services are the ``computed`` daemons of ``[coordination]
group``: a member of the group in ZooKeeper is ``up``; a host that is not a member but still
hosts live instances or has a drain marker is ``down`` (as ``computed-manage
fleet status`` reads them, :mod:`computed.fleet.membership`). A service is ``disabled`` while
it has a persistent drain marker (the operator's, as ``computed-manage fleet drain`` writes it;
the marker's reason is the ``disabled_reason``): disabling drains the daemon (its free nodes
move to its peers, so nothing new is scheduled on it), enabling removes the marker. Nova's
``COMPUTE_STATUS_DISABLED`` trait is not set on the nodes: draining already keeps builds off
them.

The daemons answer to two binary names: ``computed``, and ``nova-compute`` (what Nova's
Ironic driver runs in), so that tools looking compute services up by Nova's name find them;
a document shows the name it was asked for (``computed`` when none was). Any other binary
(``nova-scheduler``...) has no service here.

A service's id is a uuid derived from the group and host (stable across restarts) from
microversion 2.53 on, its position in the host list before.

Claims are not read: a daemon's claims live and die with its ZooKeeper session, as its
membership does, and reading them would cost a request per node on every listing.
"""

from __future__ import annotations

import json
import uuid as uuidlib
from typing import Any

import webob
from kazoo import exceptions as zk_exc

from computed.api import errors, policy, schemas
from computed.api.backends import Backends
from computed.api.request import Call, json_response
from computed.conf.coordination import session_timeout
from computed.conf.default import normalise_host
from computed.db import instances as db_instances
from computed.fleet.membership import (
    clear_draining,
    drain_markers_path,
    mark_draining,
    read_members,
)
from computed.fleet.zookeeper import Deadline, answer, group_path

RULE = 'compute:services'
BINARY = 'computed'
#: Nova's name of what the daemons are (Nova's Ironic driver runs in nova-compute): tools that
#: look compute services up by it (``?binary=nova-compute``, Tempest, ``openstack compute
#: service set HOST nova-compute``) find the daemons under it, shown with the name asked for.
NOVA_BINARY = 'nova-compute'
BINARIES = (BINARY, NOVA_BINARY)
ZONE = 'nova'
NAMESPACE = uuidlib.UUID('5d0b5d1e-1f0c-4a38-9f0e-6f1b2b7c0a15')
DEFAULT_REASON = 'disabled through the compute API'


def _disabled(backends: Backends, path: str) -> dict[str, str]:
    """``{host: reason}`` of the persistent (operator's) drain markers; each round of reads
    answered within the session timeout, else :class:`~computed.fleet.zookeeper.NoAnswer` (a
    request thread must not wait for ever on a ZooKeeper that is gone)."""
    client = backends.zookeeper
    timeout = session_timeout(backends.conf.coordination.backend_url)
    try:
        hosts = answer(client.get_children_async(path), timeout, f'the list of {path}')
    except zk_exc.NoNodeError:
        return {}
    result = {}
    deadline = Deadline(timeout)
    reads = [(host, client.get_async(f'{path}/{host}')) for host in hosts]
    for host, read in reads:
        try:
            data, stat = answer(read, deadline, f'a read of {path}/{host}')
        except zk_exc.NoNodeError:
            continue
        if stat.ephemeralOwner:
            continue  # a daemon draining itself on its way out, not disabled
        try:
            reason = str(json.loads(data).get('reason') or '')
        except (ValueError, AttributeError):
            reason = ''
        result[host] = reason
    return result


def _services(backends: Backends) -> list[dict[str, Any]]:
    group = backends.group
    draining = drain_markers_path(group)
    with _zookeeper():
        members = {m.name for m in read_members(backends.zookeeper,
                                                group_path(backends.coordinator, group),
                                                draining)}
        disabled = _disabled(backends, draining)
    hosts = members | set(disabled) | set(db_instances.instance_hosts(
        backends.engine).values())
    return [{'host': host, 'up': host in members, 'disabled': host in disabled,
             'reason': disabled.get(host)} for host in sorted(hosts)]


def daemons(backends: Backends) -> list[dict[str, Any]]:
    """The daemons as services, in host order (``host``, ``up``, ``disabled``, ``reason``):
    what ``/os-services`` lists and ``/os-hypervisors`` and ``/os-availability-zone`` read."""
    return _services(backends)


class _zookeeper:
    """ZooKeeper failures as a 503."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: Any, _tb: Any) -> bool:
        if exc is not None and isinstance(exc, errors.ZOOKEEPER_ERRORS):
            raise errors.zookeeper_unavailable(exc) from None
        return False


def service_id(call: Call, group: str, host: str, position: int) -> str | int:
    if call.at_least(2, 53):
        return str(uuidlib.uuid5(NAMESPACE, f'{group}/{host}'))
    return position


def document(call: Call, service: dict[str, Any], position: int,
             binary: str = BINARY) -> dict[str, Any]:
    doc: dict[str, Any] = {
        'id': service_id(call, call.backends.group, service['host'], position),
        'binary': binary, 'host': service['host'], 'zone': ZONE,
        'status': 'disabled' if service['disabled'] else 'enabled',
        'state': 'up' if service['up'] else 'down',
        'updated_at': None, 'disabled_reason': service['reason'] or None
        if service['disabled'] else None}
    if call.at_least(2, 11):
        doc['forced_down'] = False
    return doc


def index(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, RULE, call.context)
    services = _services(call.backends)
    host, binary = call.query('host'), call.query('binary')
    documents = [document(call, service, position, binary or BINARY)
                 for position, service in enumerate(services, start=1)
                 if (host is None or service['host'] == normalise_host(host))
                 and (binary is None or binary in BINARIES)]
    return json_response(200, {'services': documents})


def set_disabled(call: Call, host: str, disable: bool, reason: str | None) -> dict[str, Any]:
    """Disable (drain, with ``reason``) or enable the daemon ``host``; its service as
    :func:`daemons` lists it, changed. 404 for an unknown host, 409 to disable one that is
    down. What ``PUT /os-services`` and ``PUT /os-hosts`` change."""
    backends = call.backends
    services = {service['host']: service for service in _services(backends)}
    if host not in services:
        raise errors.NotFound(f'Service for host {host} could not be found.')
    if disable and not services[host]['up']:
        raise errors.Conflict(f'{host} is not a member of group {backends.group}: a daemon '
                              'that is down cannot drain')
    draining = drain_markers_path(backends.group)
    with _zookeeper():
        if disable:
            clear_draining(backends.zookeeper, draining, host)  # a new reason replaces it
            mark_draining(backends.zookeeper, draining, host, reason or DEFAULT_REASON,
                          persistent=True)
        else:
            clear_draining(backends.zookeeper, draining, host)
    return dict(services[host], disabled=disable, reason=reason if disable else None)


def update(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, RULE, call.context)
    target = call.params['service_id']
    if not call.at_least(2, 53):
        if target not in ('enable', 'disable', 'disable-log-reason'):
            raise errors.NotFound(f'Unknown action {target}')
        body = call.body(schemas.SERVICE_UPDATE_LEGACY)
        if body['binary'] not in BINARIES:
            raise errors.NotFound(f'Service {body["binary"]} on host {body["host"]} could not '
                                  'be found.')
        reason = body.get('disabled_reason')
        host = normalise_host(body['host'])
        set_disabled(call, host, target != 'enable', reason)
        result = {'host': host, 'binary': body['binary'],
                  'status': 'enabled' if target == 'enable' else 'disabled'}
        if target == 'disable-log-reason':
            result['disabled_reason'] = reason
        return json_response(200, {'service': result})
    body = call.body(schemas.SERVICE_UPDATE)
    services = _services(call.backends)
    by_id = {service_id(call, call.backends.group, s['host'], 0): s for s in services}
    if target not in by_id:
        raise errors.NotFound(f'Service {target} could not be found.')
    service = set_disabled(call, by_id[target]['host'], body['status'] == 'disabled',
                   body.get('disabled_reason'))
    return json_response(200, {'service': document(call, service, 0)})
