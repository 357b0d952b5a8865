"""``GET /servers/{id}/diagnostics``: what computed knows of a bare-metal server, in the
standard form Nova's 2.48 gave diagnostics (whose ``driver`` names ``ironic``).

Owns the diagnostics document. Where computed differs from Nova: Nova's Ironic driver
implements no diagnostics, so Nova answers a 501 for a bare-metal server; computed answers what
its control plane knows, and ``null`` (the standard form allows it) for what only an agent on
the machine could measure. Known: ``state`` (the server's power state in Nova's names:
``running``, ``shutdown``, ``pending`` while it builds or after an error), ``driver`` and
``hypervisor`` ``ironic``, ``config_drive`` (whether it was deployed with one: every server
built since computed passes key pairs and user data), ``num_cpus`` and
``memory_details.maximum`` (MB) from the flavor the server was built from (a bare-metal
flavor describes its nodes), ``num_disks`` 1 when that flavor has a disk, ``num_nics`` 0
(servers have no ports). Not known: ``uptime``, ``hypervisor_os``, memory used, and the
per-CPU, per-NIC and per-disk counters (empty lists). The same document at every
microversion: before 2.48 Nova's was whatever the virt driver returned, which Nova's schema
leaves free.

Checks, as Nova's: 404 no such server (or another project's), 403 policy
``compute:servers:diagnostics`` (admins, Nova's default), 409 a server without a node yet
(Nova's "not ready" for an instance without a host). :func:`diagnostics` is pure.
"""

from __future__ import annotations

from typing import Any

import webob

from computed.api import errors, policy, server_status, servers
from computed.api.request import Call, json_response
from computed.db import instances as db_instances

DIAGNOSTICS = 'compute:servers:diagnostics'

#: Nova's names of the power states computed shows (computed.api.server_status).
POWER_STATE_NAMES = {server_status.NOSTATE: 'pending', server_status.RUNNING: 'running',
                     server_status.SHUTDOWN: 'shutdown'}


def diagnostics(row: db_instances.InstanceRow) -> dict[str, Any]:
    """The diagnostics document of the server ``row`` (see the module's docstring)."""
    flavor = row.flavor or {}
    power_state = server_status.view(row.state).power_state
    return {'state': POWER_STATE_NAMES.get(power_state, 'pending'),
            'driver': 'ironic', 'hypervisor': 'ironic', 'hypervisor_os': None, 'uptime': None,
            'config_drive': bool(row.config_drive), 'num_cpus': int(flavor.get('vcpus') or 0),
            'num_nics': 0, 'num_disks': 1 if flavor.get('disk') else 0,
            'memory_details': {'maximum': flavor.get('ram'), 'used': None},
            'cpu_details': [], 'nic_details': [], 'disk_details': []}


def show(call: Call) -> webob.Response:
    row = servers.get(call, call.params['server_id'])
    policy.authorize(call.backends.enforcer, DIAGNOSTICS, call.context,
                     {'project_id': row.project_id})
    if not row.node_uuid:
        raise errors.Conflict(f'Instance {row.uuid} is not ready: it has no node yet')
    return json_response(200, diagnostics(row))
