"""``/os-availability-zone``: how the nodes are grouped in zones. One zone, ``nova``.

Owns the zone documents. Why one zone: it is the only one a server can be created in
(:data:`computed.api.servers.ZONE`) and the zone of every node the scheduler sees
(:mod:`computed.scheduling.host_state`); Nova derives zones from host aggregates, whose zone
can only be ``nova`` here (:mod:`computed.api.aggregates`), and never from Ironic's conductor
groups (a Nova operator who wanted a zone per
conductor group made an aggregate per group by hand). The zone is available while one daemon
of the group is up and not disabled, as Nova's zone is while one of its compute services is;
the detail (admins) lists the daemons under Nova's ``nova-compute`` name, as ``/os-services``
answers to it.
"""

from __future__ import annotations

from typing import Any

import webob

from computed.api import policy, services
from computed.api.request import Call, json_response

LIST = 'compute:availability_zones:list'
DETAIL = 'compute:availability_zones:detail'
ZONE = 'nova'


def zone(daemons: list[dict[str, Any]], detail: bool) -> dict[str, Any]:
    """The zone's document over the daemons (``/os-services``' view of them). Pure."""
    available = any(daemon['up'] and not daemon['disabled'] for daemon in daemons)
    hosts = {daemon['host']: {services.NOVA_BINARY: {
        'available': daemon['up'], 'active': not daemon['disabled'], 'updated_at': None}}
        for daemon in daemons} if detail else None
    return {'zoneName': ZONE, 'zoneState': {'available': available}, 'hosts': hosts or None}


def index(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, LIST, call.context)
    daemons = services.daemons(call.backends)
    return json_response(200, {'availabilityZoneInfo': [zone(daemons, detail=False)]})


def detail(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, DETAIL, call.context)
    daemons = services.daemons(call.backends)
    return json_response(200, {'availabilityZoneInfo': [zone(daemons, detail=True)]})

