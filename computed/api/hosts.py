"""``/os-hosts``: Nova's deprecated host API (microversions 2.1 to 2.42), each daemon a host.

Owns the host documents. Why the daemons: Nova's hosts are its services' hosts, and a
``nova-compute`` serving Ironic is one host of many nodes, as a ``computed`` daemon is (the
nodes are ``/os-hypervisors``); the API, the reporters and the database have no host here,
as Nova lists no API service. What each call does:

* the listing: the daemons :func:`computed.api.services.daemons` lists that are not disabled
  (Nova lists only enabled services), each ``{host_name, service: compute, zone: nova}``;
  ``zone`` filters (empty: no filter; any zone but ``nova``: none);
* a host: Nova's resources: ``(total)`` and ``(used_now)`` are 0 (a node's capacity is one
  unit of its resource class, as ``/os-hypervisors`` shows it: Nova's Ironic driver reports
  no CPU, memory nor disk either), ``(used_max)`` and one entry per project sum the flavor
  copies of the live servers the daemon hosts (``vcpus``, ``ram``, ``disk`` + ``ephemeral``);
* ``PUT``: ``status`` ``enable``/``disable`` is the daemon's service enabled or disabled
  (drained) as ``PUT /os-services`` does; ``maintenance_mode`` is a 501, checked before
  anything changes: Nova's Ironic driver implements no host maintenance (Nova answers 501;
  a node's maintenance is Ironic's own);
* ``startup``, ``shutdown``, ``reboot``: a 501 once the host is known, as Nova's Ironic driver
  (no host power actions: the daemon is a process, the nodes are Ironic's).

The order of the checks is Nova's: the microversion (2.43 on: 404), the policy
(``compute:hosts``, admins: 403), the body (400, nothing changed), the host (404).
:func:`resources` is pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import webob

from computed.api import errors, policy, schemas, services
from computed.api.request import Call, json_response
from computed.conf.default import normalise_host
from computed.db import instances as db_instances

RULE = 'compute:hosts'
SERVICE = 'compute'


def _allowed(call: Call) -> None:
    if call.at_least(2, 43):
        raise errors.NotFound('No resource at /os-hosts from 2.43 on (Nova removed it: '
                              'use /os-services and /os-hypervisors)')
    policy.authorize(call.backends.enforcer, RULE, call.context)


def _daemon(call: Call, host: str) -> dict[str, Any]:
    for daemon in services.daemons(call.backends):
        if daemon['host'] == normalise_host(host):
            return daemon
    raise errors.NotFound(f'Compute host {host} could not be found.')


def resources(host: str, servers: Iterable[db_instances.InstanceRow]) -> list[dict[str, Any]]:
    """Nova's ``host`` list of one host over its live ``servers``. Pure."""
    def entry(project: str, cpu: int = 0, memory: int = 0, disk: int = 0) -> dict[str, Any]:
        return {'resource': {'host': host, 'project': project, 'cpu': cpu, 'memory_mb': memory,
                             'disk_gb': disk}}

    used = entry('(used_max)')['resource']
    projects: dict[str, dict[str, Any]] = {}
    for row in servers:
        flavor = row.flavor or {}
        sizes = (int(flavor.get('vcpus', 0)), int(flavor.get('ram', 0)),
                 int(flavor.get('disk', 0)) + int(flavor.get('ephemeral', 0)))
        own = projects.setdefault(row.project_id, entry(row.project_id)['resource'])
        for total in (used, own):
            for key, size in zip(('cpu', 'memory_mb', 'disk_gb'), sizes):
                total[key] += size
    return [entry('(total)'), entry('(used_now)'), {'resource': used}] + \
        [{'resource': projects[project]} for project in sorted(projects)]


def index(call: Call) -> webob.Response:
    _allowed(call)
    zone = call.query('zone')
    hosts = [{'host_name': daemon['host'], 'service': SERVICE, 'zone': services.ZONE}
             for daemon in services.daemons(call.backends)
             if not daemon['disabled'] and (not zone or zone == services.ZONE)]
    return json_response(200, {'hosts': hosts})


def show(call: Call) -> webob.Response:
    _allowed(call)
    host = _daemon(call, call.params['host_name'])['host']
    servers = db_instances.instances_by_host(call.backends.engine, host)
    return json_response(200, {'host': resources(host, servers)})


def update(call: Call) -> webob.Response:
    _allowed(call)
    body = call.body(schemas.HOST_UPDATE)
    host = _daemon(call, call.params['host_name'])['host']
    if 'maintenance_mode' in body:
        raise errors.NotImplementedHere('Virt driver does not implement host maintenance '
                                        'mode: a node\'s maintenance is Ironic\'s (openstack '
                                        'baremetal node maintenance set).')
    enable = body['status'].lower() == 'enable'
    services.set_disabled(call, host, not enable, None)
    return json_response(200, {'host': host, 'status': 'enabled' if enable else 'disabled'})


def _power(call: Call) -> webob.Response:
    _allowed(call)
    _daemon(call, call.params['host_name'])
    raise errors.NotImplementedHere('Virt driver does not implement host power management: '
                                    'the nodes\' power is Ironic\'s.')


startup = shutdown = reboot = _power
