"""engine_from_url: the sqlite set-up, and what the transactions it makes do."""

import sqlite3
import threading
import time

from computed.db import api


def test_sqlite_pragmas(engine):
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == api.SQLITE_BUSY_TIMEOUT_MS


def test_pool_pre_ping_for_servers():
    engine = api.engine_from_url("postgresql+psycopg2://u:p@127.0.0.1:1/x")
    assert engine.pool._pre_ping
    engine = api.engine_from_url("mysql+pymysql://u:p@127.0.0.1:1/x")
    assert engine.pool._pre_ping


def test_sqlite_write_waits_for_another_process_lock(engine, url):
    # A plain sqlite3 connection stands for another process holding the write lock: the
    # report waits for it (BEGIN IMMEDIATE + busy_timeout) instead of failing or reading
    # a row that is about to change.
    other = sqlite3.connect(url[len("sqlite:///"):], isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO providers (uuid, claim_epoch, seq, host, state, deleted, "
                  "updated_at) VALUES ('p', 1, 5, 'other', '{}', 0, '2026-01-01')")
    done = []
    thread = threading.Thread(target=lambda: done.append(
        api.apply_report_if_newer(engine, "p", 1, 4, "me", lambda row: "{}")))
    thread.start()
    time.sleep(0.3)
    assert not done  # still waiting for the lock
    other.execute("COMMIT")
    thread.join(10)
    assert done == [False]  # it saw the committed (1, 5) and refused (1, 4)
    other.close()


def test_a_sqlite_database_computed_creates_is_private_whatever_the_umask(tmp_path):
    import os
    import stat

    from computed import db
    path = tmp_path / "open-umask.sqlite"
    old = os.umask(0)
    try:
        db.sync(f"sqlite:///{path}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for sidecar in tmp_path.glob("open-umask.sqlite-*"):  # WAL files follow the database's mode
        assert stat.S_IMODE(sidecar.stat().st_mode) & 0o077 == 0, sidecar


def test_the_queries_do_not_load_the_migrations_tooling():
    # The daemon and the reporter use computed.db.api only; alembic costs each of them ~12 MB of
    # RSS (issue 13 item 10), so it is imported when a migration command runs, not before.
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "import sys, computed.db.api; "
                          "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
