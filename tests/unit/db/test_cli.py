"""``computed-manage db sync|version`` in-process (tests/cli.py), on sqlite: output, exit status,
and one line (no traceback) for every failure."""

import pytest

from tests import cli

BASE = ("[DEFAULT]\ntransport_url = fake://\n"
        "[coordination]\nbackend_url = file://{tmp}/coordination\n")


def manage(tmp_path, connection, *args):
    text = BASE.format(tmp=tmp_path)
    if connection is not None:
        text += f"[database]\nconnection = {connection}\n"
    conf = tmp_path / "computed.conf"
    conf.write_text(text)
    # Nothing from the test's environment (e.g. libpq's PG* variables) reaches the command.
    return cli.run("computed-manage", "--config-file", conf, "db", *args, home=tmp_path,
                   env={"PATH": "/usr/bin:/bin"})


def one_line(result, status):
    assert result.returncode == status, result
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_sync_then_version(tmp_path):
    from computed import db
    head = db.head_revision()
    url = f"sqlite:///{tmp_path / 'computed.sqlite'}"
    before = manage(tmp_path, url, "version")
    assert before.returncode == 0, before
    assert f"current: none, head: {head}" in before.stdout and "db sync" in before.stdout
    for _ in range(2):  # the second sync finds nothing to do
        synced = manage(tmp_path, url, "sync")
        assert synced.returncode == 0, synced
        assert f"at revision {head}" in synced.stdout
    after = manage(tmp_path, url, "version")
    assert after.stdout.strip() == f"current: {head}, head: {head}"


@pytest.mark.parametrize("action", ["sync", "version"])
def test_missing_connection_is_a_config_error(tmp_path, action):
    line = one_line(manage(tmp_path, None, action), 2)
    assert line == f"computed-manage: error: [database] connection: required by db {action}"


@pytest.mark.parametrize("action", ["sync", "version"])
def test_unreachable_database_names_the_url_without_password(tmp_path, action):
    line = one_line(manage(tmp_path, "postgresql+psycopg2://computed:s3cret@127.0.0.1:1/computed",
                           action), 1)
    assert "postgresql+psycopg2://computed:***@127.0.0.1:1/computed" in line
    assert "s3cret" not in line


def test_unopenable_sqlite_file(tmp_path):
    line = one_line(manage(tmp_path, f"sqlite:///{tmp_path}/missing/dir/x.sqlite", "sync"), 1)
    assert "cannot sync database sqlite:///" in line and "unable to open" in line
