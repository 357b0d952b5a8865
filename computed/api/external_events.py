"""``POST /os-server-external-events``: the events other services send about servers.

Owns the request's schema of each microversion, each event's verdict and the answer, as
Nova's: Neutron and Cinder tell Nova that a port changed or a volume grew. Who may send them:
Nova's ``os_compute_api:os-server-external-events:create`` default, a service user or an admin
(``role:service`` or ``role:admin``); others a 403.

Each event is judged alone and answered in the list, in order, with Nova's ``code`` and
``status``: a server that does not exist (or is deleted) is a 404 ``failed``; one without a
daemon (a build not placed yet, or one that found no node) a 422 ``failed``, as Nova's for an
instance without a host; at 2.51 ``volume-extended`` without a ``tag`` (the volume) a 400
``failed``; any other is accepted, 200 ``completed``. The answer is a 200 when every event was
accepted, else a 207 (Nova's multi-status), also when none was. A body Nova's schema refuses
(an unknown event name, a ``server_uuid`` that is no uuid, an empty list) is a 400 and nothing
is judged.

An accepted event changes nothing here: computed's servers have no ports and no volumes, so
there is nothing a network or volume event could update (Nova would refresh the instance's
network info cache or the volume's size). It is logged, and the answer says it was delivered,
as Nova's says for an event its compute service then ignores.
"""

from __future__ import annotations

import logging
from typing import Any

import webob

from computed.api import policy
from computed.api.request import Call, json_response
from computed.db import instances as db_instances

LOG = logging.getLogger(__name__)

CREATE = 'compute:server_external_events:create'

#: Nova's event names at 2.1, and the one 2.51 added (the others came after 2.61).
NAMES = ('network-changed', 'network-vif-plugged', 'network-vif-unplugged',
         'network-vif-deleted')
NAMES_2_51 = NAMES + ('volume-extended',)
#: Events Nova drops without a tag (which volume, which device).
TAG_REQUIRED = frozenset({'volume-extended'})
STATUSES = ('failed', 'completed', 'in-progress')
UUID = r'^([0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12})$'


def schema(names: tuple[str, ...]) -> dict[str, Any]:
    """Nova's body with the event ``names`` of a microversion."""
    event = {'type': 'object',
             'properties': {'name': {'type': 'string', 'enum': list(names)},
                            'server_uuid': {'type': 'string', 'pattern': UUID},
                            'status': {'type': 'string', 'enum': list(STATUSES)},
                            'tag': {'type': 'string', 'maxLength': 255}},
             'required': ['name', 'server_uuid'], 'additionalProperties': False}
    return {'type': 'object',
            'properties': {'events': {'type': 'array', 'minItems': 1, 'items': event}},
            'required': ['events'], 'additionalProperties': False}


def verdict(event: dict[str, Any], server: db_instances.InstanceRow | None) -> int:
    """The code Nova answers for ``event`` about ``server`` (None: no such live server):
    404, 400 (a tag required), 422 (no daemon to deliver it to) or 200. Pure."""
    if server is None or not server.live:
        return 404
    if event['name'] in TAG_REQUIRED and event.get('tag') is None:
        return 400
    return 200 if server.host else 422


def create(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, CREATE, call.context)
    body = call.body(schema(NAMES_2_51 if call.at_least(2, 51) else NAMES))
    answered = []
    for event in body['events']:
        server = db_instances.get_instance(call.backends.engine, event['server_uuid'])
        code = verdict(event, server)
        answered.append(dict(event, code=code, status='completed' if code == 200 else 'failed'))
        if code == 200:
            LOG.info('External event %s:%s for server %s on %s: nothing to update (no ports, '
                     'no volumes)', event['name'], event.get('tag'), event['server_uuid'],
                     server.host if server else None)
    status = 200 if all(event['code'] == 200 for event in answered) else 207
    return json_response(status, {'events': answered})
