"""/os-instance_usage_audit_log in-process: every daemon a host that did not run the usage
audit (computed runs none), over Nova's default period, the last completed month; admins'
(Tempest's InstanceUsageAuditLog tests answered 404)."""

from __future__ import annotations

import datetime
import urllib.parse

import pytest

from computed.api import services, usage_audit
from tests.unit.api.test_app import ADMIN, error_of

DAEMONS = [{'host': 'c2', 'up': True, 'disabled': True, 'reason': 'r'},
           {'host': 'c1', 'up': False, 'disabled': False, 'reason': None}]


@pytest.fixture
def admin(api, monkeypatch):
    monkeypatch.setattr(services, '_services', lambda backends: [dict(d) for d in DAEMONS])
    return api.as_(ADMIN)


@pytest.mark.parametrize('before, begin, end', [
    ('2026-11-28 07:16:06', '2026-10-01 00:00:00', '2026-11-01 00:00:00'),
    ('2026-01-15 00:00:00', '2025-12-01 00:00:00', '2026-01-01 00:00:00'),
    # A month that ends exactly then has not completed before it.
    ('2026-03-01 00:00:00', '2026-01-01 00:00:00', '2026-02-01 00:00:00'),
    ('2026-03-01 00:00:00.000001', '2026-02-01 00:00:00', '2026-03-01 00:00:00'),
])
def test_the_period_is_the_last_month_completed_before(admin, before, begin, end):
    shown = admin('GET', '/v2.1/os-instance_usage_audit_log/' + urllib.parse.quote(before))
    assert shown.status_int == 200, shown.text
    log = shown.document['instance_usage_audit_log']
    assert (log['period_beginning'], log['period_ending']) == (begin, end)


def test_every_daemon_is_a_host_not_run_and_nothing_was_audited(admin):
    listed = admin('GET', '/v2.1/os-instance_usage_audit_log')
    assert listed.status_int == 200, listed.text
    log = listed.document['instance_usage_audit_logs']
    begin, end = usage_audit.audit_period(datetime.datetime.now(datetime.timezone.utc)
                                           .replace(tzinfo=None))
    assert log == {'period_beginning': str(begin), 'period_ending': str(end),
                   'num_hosts': 2, 'num_hosts_done': 0, 'num_hosts_running': 0,
                   'num_hosts_not_run': 2, 'hosts_not_run': ['c1', 'c2'],
                   'total_instances': 0, 'total_errors': 0,
                   'overall_status': '0 of 2 hosts done. 0 errors.', 'log': {}}


def test_no_daemon_is_all_hosts_done_as_novas():
    assert usage_audit.audit_log([], datetime.datetime(2026, 5, 5))['overall_status'] == \
        'ALL hosts done. 0 errors.'


def test_a_time_that_is_not_novas_is_a_400_and_others_are_refused(api, admin):
    for before in ('invalid_time', '2026-11-28T07:16:06', '2026-13-01 00:00:00'):
        assert error_of(admin('GET', '/v2.1/os-instance_usage_audit_log/'
                              + urllib.parse.quote(before)), 400)[1] == \
            f'Invalid timestamp for date {before}'
    assert error_of(api('GET', '/v2.1/os-instance_usage_audit_log'), 403)
    assert error_of(api('GET', '/v2.1/os-instance_usage_audit_log/'
                           '2026-11-28%2007%3A16%3A06'), 403)
