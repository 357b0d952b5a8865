"""``/os-migrations``: the migrations of servers, which on computed's bare metal are none.

Owns the listing's answer and the checks of its query. computed never moves a server: there
is no resize, cold or live migration nor evacuation of a bare-metal server (a server stays on
its node; a dead daemon's servers are re-homed to another daemon, which moves no server and is
no migration in Nova's sense). So the list is always empty, ``{"migrations": []}``, for an
admin (Nova's ``os_compute_api:os-migrations:index``; others a 403). The query is checked as
Nova's: below 2.59 any parameter is taken (Nova's schema allows more than it reads); from 2.59
only Nova's (``hidden``, ``host``, ``instance_uuid``, ``source_compute``, ``status``,
``migration_type``, ``limit``, ``marker``, ``changes-since``), ``limit`` a number,
``changes-since`` a time, and a ``marker`` names no migration (400, as Nova's for a marker it
does not find).
"""

from __future__ import annotations

import webob

from computed.api import errors, policy, usage
from computed.api.request import Call, json_response
from computed.db import models

INDEX = 'compute:migrations:index'

#: The query parameters Nova's listing takes from 2.59 (anything else a 400).
PARAMETERS_2_59 = frozenset({'hidden', 'host', 'instance_uuid', 'source_compute', 'status',
                             'migration_type', 'limit', 'marker', 'changes-since'})


def check_query(call: Call) -> None:
    """400 naming the first parameter Nova's schema of the microversion refuses."""
    if not call.at_least(2, 59):
        return
    for name in call.request.GET:
        if name not in PARAMETERS_2_59:
            raise errors.BadRequest(f'Invalid input for query parameters {name}: additional '
                                    'properties are not allowed')
    call.query_int('limit')
    since = call.query('changes-since')
    if since is not None:
        usage.parse_time('changes-since', since, models.utcnow())
    marker = call.query('marker')
    if marker is not None:
        raise errors.BadRequest(f'Marker {marker} could not be found.')


def index(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, INDEX, call.context)
    check_query(call)
    return json_response(200, {'migrations': []})
