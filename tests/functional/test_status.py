"""``computed-status upgrade check`` in-process (tests/cli.py) against the harness's real
ZooKeeper and PostgreSQL: one line per check, the summary table, nova-status's exit codes."""

from __future__ import annotations

import uuid

import pytest

from computed import db
from computed.cmd import status
from computed.upgrade import checks
from tests import cli

CHECKS = ('Database schema', 'Schema changes', 'Data migrations', 'Service versions',
          'Configuration', 'ZooKeeper')


@pytest.fixture
def write_conf(stack, tmp_path):
    def write(database: str = '', extra: str = '', synced: bool = True) -> str:
        if not database:
            database = stack['postgres'].create_database(f'status_{uuid.uuid4().hex[:8]}')
            stack.save()
            if synced:
                db.sync(database)
        path = tmp_path / f'{uuid.uuid4().hex[:6]}.conf'
        path.write_text(stack.computed_conf(host='status-host', database=database,
                                            extra=extra))
        return str(path)
    return write


def lines_of(result) -> dict[str, str]:
    """Each check's line: 'Name: Result: details'."""
    found = {}
    for line in result.stdout.splitlines():
        name, _, rest = line.partition(': ')
        if name in CHECKS and name not in found:
            found[name] = rest
    return found


def test_a_fresh_group_warns_that_no_service_is_live(write_conf, tmp_path):
    group = f'g{uuid.uuid4().hex[:6]}'
    result = cli.run('computed-status', '--config-file',
                     write_conf(extra=f'[coordination]\ngroup = {group}\n'),
                     'upgrade', 'check', home=tmp_path)
    found = lines_of(result)
    assert set(found) == set(CHECKS), result.stdout
    assert found['Database schema'].startswith('Success: at head')
    assert found['Schema changes'] == 'Success: the revisions since 0.1.0 only expand'
    assert found['Data migrations'] == 'Success: none pending (instance_reservation_ids done)'
    assert found['Service versions'].startswith(f'Warning: no live daemon or reporter in '
                                                f'group {group}')
    assert found['Configuration'].startswith('Success')
    assert found['ZooKeeper'].split(':')[0] in ('Success', 'Warning')
    assert 'Upgrade Check Results' in result.stdout
    assert result.returncode == 1 and result.stderr == '' and result.threads_left == ()


def test_a_schema_behind_and_a_pin_left_fail_and_warn(write_conf, tmp_path):
    result = cli.run('computed-status', '--config-file',
                     write_conf(synced=False, extra='[upgrade_levels]\nreports = 1.0\n'),
                     'upgrade', 'check', home=tmp_path)
    found = lines_of(result)
    assert found['Database schema'].startswith('Failure: the database has no schema')
    assert "computed-manage db sync" in found['Database schema']
    assert found['Data migrations'].startswith('Warning: not counted: the database is at '
                                               'revision none')
    assert found['Configuration'].startswith('Warning: [upgrade_levels] reports = 1.0 pinned')
    assert result.returncode == 2 and result.stderr == ''


def test_unreachable_services_are_failures_not_tracebacks(write_conf, tmp_path):
    # The ZooKeeper checks give up after 1 s ([coordination] command_connect_timeout, 10 s by
    # default): nothing listens on port 9.
    result = cli.run('computed-status', '--config-file', write_conf(
        database='postgresql+psycopg2://postgres@127.0.0.1:9/none',
        extra='[coordination]\nbackend_url = zookeeper://127.0.0.1:9?timeout=2\n'
              'command_connect_timeout = 1\n'),
        'upgrade', 'check', home=tmp_path)
    found = lines_of(result)
    assert found['Database schema'].startswith('Failure: cannot read database')
    assert found['Data migrations'].startswith('Failure: cannot read database')
    assert found['Service versions'].startswith('Failure: cannot reach ZooKeeper')
    assert found['ZooKeeper'].startswith('Failure: cannot reach ZooKeeper')
    assert result.returncode == 2 and 'Traceback' not in result.stderr + result.stdout


def test_an_error_running_the_checks_is_255_in_one_line(write_conf, tmp_path, monkeypatch):
    def broken(conf, session):
        raise RuntimeError('the check broke')

    monkeypatch.setitem(status.CHECKS, 'Configuration', broken)
    result = cli.run('computed-status', '--config-file', write_conf(), 'upgrade', 'check',
                     home=tmp_path)
    assert result.returncode == 255
    assert result.stderr == ('computed-status: error: running check Configuration: '
                          'RuntimeError: the check broke\n')


def test_bad_input_is_one_line(write_conf, tmp_path):
    result = cli.run('computed-status', '--config-file', write_conf(
        extra='[upgrade_levels]\ninstances = banana\n'), 'upgrade', 'check', home=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith('computed-status: error: [upgrade_levels] instances: ')
    assert len(result.stderr.splitlines()) == 1
    result = cli.run('computed-status', 'upgrade', 'chek', home=tmp_path)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr


def test_exit_status_is_nova_statuss():
    assert [int(code) for code in checks.Code] == [0, 1, 2]
    assert status.EXIT_ERROR == 255


def _url_of(path: str) -> str:
    return [line.split(' = ', 1)[1] for line in open(path).read().splitlines()
            if line.startswith('connection = ')][0]


def _conf_and_engine(write_conf):
    from computed.db import engine as db_engine
    path = write_conf()
    return path, db_engine.engine_from_url(_url_of(path))


def test_rows_the_previous_release_wrote_are_pending_until_migrated(write_conf, tmp_path):
    from tests.unit.upgrade import online
    path, engine = _conf_and_engine(write_conf)
    try:
        online.old_instances(engine, 3)  # as 0.1.0 records them: no reservation id
    finally:
        engine.dispose()
    before = lines_of(cli.run('computed-status', '--config-file', path, 'upgrade', 'check',
                              home=tmp_path))
    assert before['Data migrations'] == (
        "Warning: rows left to migrate (instance_reservation_ids: 3): once every service "
        "runs this release, run 'computed-manage db online_data_migrations'")
    migrated = cli.run('computed-manage', '--config-file', path, 'db',
                       'online_data_migrations', home=tmp_path)
    assert migrated.returncode == 0, migrated
    after = lines_of(cli.run('computed-status', '--config-file', path, 'upgrade', 'check',
                             home=tmp_path))
    assert after['Data migrations'] == 'Success: none pending (instance_reservation_ids done)'


def test_a_schema_that_differs_from_the_code_fails(write_conf, tmp_path):
    path, engine = _conf_and_engine(write_conf)
    try:
        with engine.begin() as conn:  # an operator's hand at work
            conn.exec_driver_sql('DROP INDEX ix_instances_reservation_id')
    finally:
        engine.dispose()
    found = lines_of(cli.run('computed-status', '--config-file', path, 'upgrade', 'check',
                             home=tmp_path))
    assert found['Database schema'] == (
        "Failure: the database lacks what this release's code uses (altered by hand?): "
        "add_index ix_instances_reservation_id on instances")


def test_a_database_of_a_newer_release_fails(write_conf, tmp_path):
    path, engine = _conf_and_engine(write_conf)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0999'")
    finally:
        engine.dispose()
    result = cli.run('computed-status', '--config-file', path, 'upgrade', 'check',
                     home=tmp_path)
    found = lines_of(result)
    assert found['Database schema'].startswith(
        'Failure: the database is at revision 0999, which this release does not know')
    assert found['Data migrations'].startswith('Warning: not counted')
    assert result.returncode == 2


def _marked(monkeypatch) -> tuple[str, str]:
    """As if the head revision were a contraction of this release (this release has none; the
    checks read the marks through computed.upgrade.migrations.read_revisions); (the head, the
    revision before it)."""
    import dataclasses

    from computed.upgrade import migrations
    real = migrations.read_revisions()
    head, before = real[-1].revision, real[-2].revision
    marked = [dataclasses.replace(r, contraction=r.revision == head) for r in real]
    monkeypatch.setattr(migrations, 'read_revisions', lambda directory=None: marked)
    return head, before


def test_a_waiting_contraction_is_due_once_no_old_service_is_live(write_conf, tmp_path,
                                                                  monkeypatch, stack):
    head, before = _marked(monkeypatch)
    group = f'g{uuid.uuid4().hex[:6]}'
    path = write_conf(synced=False, extra=f'[coordination]\ngroup = {group}\n')
    db.sync(_url_of(path), before)  # the expansions only, as db sync leaves it
    found = lines_of(cli.run('computed-status', '--config-file', path, 'upgrade', 'check',
                             home=tmp_path))
    assert found['Database schema'] == \
        f"Success: at {before}, this release's expansions (contractions to {head} wait)"
    assert found['Schema changes'] == (
        f"Warning: contraction(s) {head} wait and no service of 0.1.0 is live: run "
        "'computed-manage db sync --contract'")


def test_a_contraction_applied_while_an_old_daemon_is_live_fails(write_conf, tmp_path,
                                                                 monkeypatch, stack):
    from tooz import coordination
    head, _before = _marked(monkeypatch)
    group = f'g{uuid.uuid4().hex[:6]}'
    path = write_conf(extra=f'[coordination]\ngroup = {group}\n')  # at head: it is applied
    # A daemon of 0.1.0: a member of the group whose capabilities carry no version.
    old = coordination.get_coordinator(f"{stack['zookeeper'].url}?timeout=10", b'old-c1')
    old.start()
    try:
        try:
            old.create_group(group.encode()).get()
        except coordination.GroupAlreadyExist:
            pass
        old.join_group(group.encode(), capabilities={'host': 'old-c1', 'weight': 1}).get()
        result = cli.run('computed-status', '--config-file', path, 'upgrade', 'check',
                         home=tmp_path)
    finally:
        old.stop()
    found = lines_of(result)
    assert found['Schema changes'] == (
        f'Failure: contraction(s) {head} applied while services of 0.1.0 are live, which may use '
        'what they removed: upgrade them now (computed on old-c1: 0.1.0 (publishes no '
        'version))')
    assert result.returncode == 2
