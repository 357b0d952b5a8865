"""``/os-simple-tenant-usage``: what each project's servers used over a period, as Nova's
(Horizon's overview, ``openstack usage list/show``).

Owns the usage documents. A server counts from its launch (its creation, for a server that got
a node; one that never had a node never launched: 0 hours, as Nova's) to its deletion, clipped
to the period; its sizes are the flavor copy it was built from (``memory_mb`` its ``ram``,
``local_gb`` its ``disk`` plus ``ephemeral``, ``vcpus``), times the hours in the totals. The
servers are read from computed's database in one query (those created before the period's end
and not deleted before its start), so deleted servers count for the time they lived.

``start`` and ``end`` are Nova's formats (``2026-11-01T00:00:00``, with ``.ffffff`` or a space
instead of ``T``; ISO 8601 with an offset too), default now; a start after the end, or a value
that is no time, is a 400. From 2.40 the servers are paged (``limit``, ``marker`` a server's
uuid), as Nova's. The listing of every project is an admin's; a project reads its own.
:func:`summarise` is pure.
"""

from __future__ import annotations

import datetime
from typing import Any

import webob

from computed.api import errors, policy, server_status
from computed.api.request import Call, flag, json_response, microsecond_time
from computed.db import instances as db_instances
from computed.db import models

LIST = 'compute:usage:list'
SHOW = 'compute:usage:show'
FORMATS = ('%Y-%m-%dT%H:%M:%S', '%Y-%m-%dT%H:%M:%S.%f', '%Y-%m-%d %H:%M:%S.%f')


def parse_time(name: str, text: str | None, now: datetime.datetime) -> datetime.datetime:
    """A query time as naive UTC (``now`` when absent); 400 naming ``name`` otherwise."""
    if text is None:
        return now
    for form in FORMATS:
        try:
            return datetime.datetime.strptime(text, form)
        except ValueError:
            pass
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise errors.BadRequest(f'Invalid {name} {text[:64]!r}: Datetime is in invalid '
                                'format') from None
    if value.tzinfo is not None:
        value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return value


def server_usage(row: db_instances.InstanceRow, start: datetime.datetime, stop: datetime.datetime,
                 now: datetime.datetime) -> dict[str, Any]:
    """One server's usage over [start, stop) (Nova's ``server_usages`` item). Pure."""
    launched = row.created_at if row.node_uuid else None
    ended = row.deleted_at
    hours = 0.0
    if launched is not None and launched <= stop and (ended is None or ended >= start):
        hours = max((min(stop, ended or stop) - max(launched, start)).total_seconds(),
                    0) / 3600.0
    flavor = row.flavor or {}
    state = 'terminated' if ended is not None or row.state == models.DELETED.value \
        else server_status.view(row.state).vm_state
    uptime = int(((ended or now) - launched).total_seconds()) if launched else 0
    return {'instance_id': row.uuid, 'name': row.name or '', 'tenant_id': row.project_id,
            'hours': hours, 'memory_mb': int(flavor.get('ram', 0)),
            'local_gb': int(flavor.get('disk', 0)) + int(flavor.get('ephemeral', 0)),
            'vcpus': int(flavor.get('vcpus', 0)),
            'flavor': flavor.get('name', row.resource_class),
            'started_at': microsecond_time(launched), 'ended_at': microsecond_time(ended),
            'state': state, 'uptime': uptime}


def summarise(rows: list[db_instances.InstanceRow], start: datetime.datetime,
              stop: datetime.datetime, now: datetime.datetime, detailed: bool
              ) -> list[dict[str, Any]]:
    """Nova's ``tenant_usages``: one summary per project, in the order of its first server.
    Pure."""
    result: dict[str, dict[str, Any]] = {}
    for row in rows:
        info = server_usage(row, start, stop, now)
        summary = result.setdefault(str(row.project_id), {
            'tenant_id': row.project_id, 'total_local_gb_usage': 0.0,
            'total_vcpus_usage': 0.0, 'total_memory_mb_usage': 0.0, 'total_hours': 0.0,
            'start': microsecond_time(start), 'stop': microsecond_time(stop),
            **({'server_usages': []} if detailed else {})})
        summary['total_local_gb_usage'] += info['local_gb'] * info['hours']
        summary['total_vcpus_usage'] += info['vcpus'] * info['hours']
        summary['total_memory_mb_usage'] += info['memory_mb'] * info['hours']
        summary['total_hours'] += info['hours']
        if detailed:
            summary['server_usages'].append(info)
    return list(result.values())


def _period(call: Call) -> tuple[datetime.datetime, datetime.datetime, datetime.datetime]:
    now = models.utcnow()
    start = parse_time('start', call.query('start'), now)
    stop = parse_time('end', call.query('end'), now)
    if start > stop:
        raise errors.BadRequest('Invalid start time. The start time cannot occur after the '
                                'end time.')
    return start, stop, now


def _page(call: Call, rows: list[db_instances.InstanceRow], links_key: str
          ) -> tuple[list[db_instances.InstanceRow], dict[str, Any]]:
    """From 2.40, the servers after ``marker`` up to ``limit``, and the next link."""
    if not call.at_least(2, 40):
        return rows, {}
    limit = call.limit()
    marker = call.query('marker')
    if marker is not None:
        found = [index for index, row in enumerate(rows) if row.uuid == marker]
        if not found:
            raise errors.BadRequest(f'marker [{marker}] not found')
        rows = rows[found[0] + 1:]
    if len(rows) <= limit:
        return rows, {}
    rows = rows[:limit]
    path = call.request.path_info.split('/v2.1', 1)[-1]
    return rows, {links_key: call.next_links(path, rows[-1].uuid)}


def index(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, LIST, call.context)
    start, stop, now = _period(call)
    # Nova reads '1' only; openstacksdk (openstack usage list) sends 'True': both are taken.
    detailed = flag(call.query('detailed'))
    rows = db_instances.instances_in_period(call.backends.engine, start, stop)
    rows, links = _page(call, rows, 'tenant_usages_links')
    return json_response(200, {'tenant_usages': summarise(rows, start, stop, now, detailed),
                               **links})


def show(call: Call) -> webob.Response:
    project_id = call.params['tenant_id']
    policy.authorize(call.backends.enforcer, SHOW, call.context, {'project_id': project_id})
    start, stop, now = _period(call)
    rows = db_instances.instances_in_period(call.backends.engine, start, stop, project_id)
    rows, links = _page(call, rows, 'tenant_usage_links')
    summaries = summarise(rows, start, stop, now, detailed=True)
    # Nova answers an empty object for a project without servers in the period.
    return json_response(200, {'tenant_usage': summaries[0] if summaries else {}, **links})
