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


KNOWN = ['0001', '0002', '0003', '0004', '0005']


def test_schema_against_the_release_revisions():
    assert checks.schema('0005', '0005', known=KNOWN) == Result(Code.SUCCESS, 'at head (0005)')
    newer = checks.schema('0009', '0005', known=KNOWN)
    assert newer.code is Code.FAILURE and 'does not know' in newer.details
    # Contractions from 0005 on wait: at the expansions is a success, behind them a failure.
    waiting = checks.schema('0004', '0005', expanded='0004', known=KNOWN)
    assert waiting.code is Code.SUCCESS and 'contractions to 0005 wait' in waiting.details
    behind = checks.schema('0003', '0005', expanded='0004', known=KNOWN)
    assert behind.code is Code.FAILURE and 'needs 0004' in behind.details


def test_schema_vs_code():
    lacking = checks.schema('0005', '0005', known=KNOWN,
                            missing=['add_index ix_a on instances'])
    assert lacking.code is Code.FAILURE and 'add_index ix_a on instances' in lacking.details
    other = checks.schema('0005', '0005', known=KNOWN,
                          differences=['remove_column instances.old'])
    assert other.code is Code.WARNING and 'remove_column instances.old' in other.details


def test_schema_changes():
    assert checks.schema_changes([], [], [], [], '0.1.0') == \
        Result(Code.SUCCESS, 'the revisions since 0.1.0 only expand')
    bad = checks.schema_changes(['revision 0009: drops table x'], [], [], [], '0.1.0')
    assert bad.code is Code.FAILURE and 'revision 0009: drops table x' in bad.details
    early = checks.schema_changes([], ['0010'], [], ['computed on c1: 0.1.0'], '0.1.0')
    assert early.code is Code.FAILURE and 'computed on c1: 0.1.0' in early.details
    assert checks.schema_changes([], [], ['0010'], ['computed on c1: 0.1.0'],
                                 '0.1.0').code is Code.SUCCESS
    due = checks.schema_changes([], [], ['0010'], [], '0.1.0')
    assert due.code is Code.WARNING and 'db sync --contract' in due.details


def test_older_services():
    services = [ServiceRecord('computed', 'a', None), ServiceRecord('computed', 'b', '0.1.0'),
                ServiceRecord('computed', 'c', '0.2.0.dev0'),
                ServiceRecord('computed-reporter', 'd', 'garbage')]
    assert checks.older_services(services, '0.1.0') == [
        'computed on a: 0.1.0 (publishes no version)', 'computed on b: 0.1.0',
        'computed-reporter on d: garbage']


def test_data_migrations_pending_and_done():
    left = checks.data_migrations({'instance_reservation_ids': 4, 'other': 0})
    assert left.code is Code.WARNING
    assert 'instance_reservation_ids: 4' in left.details and 'other' not in left.details
    assert checks.data_migrations({'instance_reservation_ids': 0}) == Result(
        Code.SUCCESS, 'none pending (instance_reservation_ids done)')


def test_deprecated_configuration():
    said = checks.configuration({'reports': 'auto'}, ['[api] old: use [api] new'])
    assert said.code is Code.WARNING and '[api] old: use [api] new' in said.details
