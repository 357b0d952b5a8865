"""The judgments of computed-status upgrade check (pure)."""

from __future__ import annotations

from computed.upgrade import checks
from computed.upgrade.checks import Code, Result
from computed.upgrade.records import ServiceRecord


def test_exit_status_is_the_worst_code():
    assert checks.exit_status([]) == 0
    assert checks.exit_status([Result(Code.SUCCESS, ''), Result(Code.WARNING, '')]) == 1
    assert checks.exit_status([Result(Code.FAILURE, ''), Result(Code.WARNING, '')]) == 2


def test_schema():
    assert checks.schema('0007', '0007').code is Code.SUCCESS
    behind = checks.schema('0006', '0007')
    assert behind.code is Code.FAILURE and 'db sync' in behind.details
    assert checks.schema(None, '0007').code is Code.FAILURE


def test_data_migrations():
    assert checks.data_migrations({}) == Result(
        Code.SUCCESS, 'none (this release has no online data migrations)')
    assert checks.data_migrations({'a': 0}).code is Code.SUCCESS
    assert checks.data_migrations({'a': 3}).code is Code.WARNING


def test_service_versions():
    new = ServiceRecord('computed', 'c1', '0.2.0')
    assert checks.service_versions([], 'g').code is Code.WARNING
    assert checks.service_versions([new, ServiceRecord('computed-reporter', 'r1', '0.2.0')],
                                   'g') == Result(Code.SUCCESS, '2 live service(s), all 0.2.0')
    mixed = checks.service_versions([new, ServiceRecord('computed', 'c2', None)], 'g')
    assert mixed.code is Code.WARNING
    assert 'computed on c2: 0.1.0 (publishes no version)' in mixed.details


def test_configuration():
    assert checks.configuration({'reports': 'auto', 'instances': 'auto'}).code is Code.SUCCESS
    pinned = checks.configuration({'reports': '1.0', 'instances': 'auto'})
    assert pinned.code is Code.WARNING and 'reports = 1.0' in pinned.details


def test_session_timeout():
    assert checks.session_timeout(10, 10).code is Code.SUCCESS
    assert checks.session_timeout(10, 4).code is Code.WARNING
    unknown = checks.session_timeout(10, None, 'no server answered')
    assert unknown.code is Code.FAILURE and 'no server answered' in unknown.details
