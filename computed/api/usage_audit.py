"""``/os-instance_usage_audit_log``: how far each compute host got with the usage audit of the
last completed period, as Nova's (admins: Nova's ``os_compute_api:os-instance-usage-audit-log``
rules; others a 403).

Owns the audit log documents and the reading of the period. In Nova each compute service runs
the ``instance_usage_audit`` task (off by default) once per period, a month by default, and
records its progress; this API reports it, every compute service that recorded nothing for the
period being a host "not run". computed runs no such audit: usage is what
``/os-simple-tenant-usage`` computes from the servers' rows (:mod:`computed.api.usage`), and
nothing is sent to a billing system. So every daemon (the compute hosts of ``/os-services``,
disabled ones included, as Nova's) is a host not run, with no instances nor errors, and the
log is empty, which is what Nova answers with the audit off.

The period is Nova's default: the last calendar month completed before now (``GET
/os-instance_usage_audit_log``) or before the time of ``GET
/os-instance_usage_audit_log/{before}`` (``YYYY-MM-DD HH:MM:SS``, with ``.ffffff`` or not, as
Nova's; anything else a 400). :func:`audit_period` and :func:`audit_log` are pure.
"""

from __future__ import annotations

import datetime
from typing import Any

import webob

from computed.api import errors, policy, services
from computed.api.request import Call, json_response
from computed.db import models

LIST = 'compute:usage_audit_log:list'
SHOW = 'compute:usage_audit_log:show'
FORMATS = ('%Y-%m-%d %H:%M:%S', '%Y-%m-%d %H:%M:%S.%f')


def _month_before(first: datetime.datetime) -> datetime.datetime:
    """The first instant of the month before the one ``first`` starts."""
    if first.month == 1:
        return first.replace(year=first.year - 1, month=12)
    return first.replace(month=first.month - 1)


def audit_period(before: datetime.datetime) -> tuple[datetime.datetime, datetime.datetime]:
    """[begin, end) of the last calendar month that ended before ``before`` (an end exactly at
    ``before`` has not completed before it)."""
    end = before.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if end >= before:
        end = _month_before(end)
    return _month_before(end), end


def audit_log(hosts: list[str], before: datetime.datetime) -> dict[str, Any]:
    """Nova's audit log document of the period before ``before``, every host not run (computed
    runs no usage audit)."""
    begin, end = audit_period(before)
    return {'period_beginning': str(begin), 'period_ending': str(end),
            'num_hosts': len(hosts), 'num_hosts_done': 0, 'num_hosts_running': 0,
            'num_hosts_not_run': len(hosts), 'hosts_not_run': sorted(hosts),
            'total_instances': 0, 'total_errors': 0,
            'overall_status': ('ALL' if not hosts else f'0 of {len(hosts)}')
            + ' hosts done. 0 errors.',
            'log': {}}


def _hosts(call: Call) -> list[str]:
    return [daemon['host'] for daemon in services.daemons(call.backends)]


def index(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, LIST, call.context)
    return json_response(200, {'instance_usage_audit_logs': audit_log(_hosts(call),
                                                                      models.utcnow())})


def parse_before(text: str) -> datetime.datetime:
    """The time of ``/os-instance_usage_audit_log/{before}``; 400 unless one of Nova's forms."""
    for form in FORMATS:
        try:
            return datetime.datetime.strptime(text, form)
        except ValueError:
            pass
    raise errors.BadRequest(f'Invalid timestamp for date {text[:64]}')


def show(call: Call) -> webob.Response:
    policy.authorize(call.backends.enforcer, SHOW, call.context)
    before = parse_before(call.params['before'])
    return json_response(200, {'instance_usage_audit_log': audit_log(_hosts(call), before)})
