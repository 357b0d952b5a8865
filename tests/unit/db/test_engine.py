"""computed.db.engine: the sqlite set-up, the bounds of every call, what transactions do."""

import sqlite3
import threading
import time

from computed.db import engine as db_engine
from tests import database


def test_sqlite_pragmas(engine):
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        busy_timeout = conn.exec_driver_sql("PRAGMA busy_timeout").scalar()
        assert busy_timeout == db_engine.SQLITE_BUSY_TIMEOUT_MS


def test_pool_pre_ping_for_servers():
    engine = db_engine.engine_from_url("postgresql+psycopg2://u:p@127.0.0.1:1/x")
    assert engine.pool._pre_ping
    engine = db_engine.engine_from_url("mysql+pymysql://u:p@127.0.0.1:1/x")
    assert engine.pool._pre_ping


def test_every_postgresql_call_is_bounded():
    bounds = db_engine.Bounds(statement_timeout=7, pool_timeout=3, max_pool_size=4,
                              max_overflow=2, connect_timeout=5)
    engine = db_engine.engine_from_url("postgresql+psycopg2://u:p@127.0.0.1:1/x", bounds)
    assert engine.pool.timeout() == 3 and engine.pool.size() == 4
    assert engine.pool._max_overflow == 2


def test_postgresql_sessions_get_the_statement_timeout_and_keepalives():
    import psycopg2
    captured = {}

    def fake_connect(*args, **kwargs):
        captured.update(kwargs)
        raise psycopg2.OperationalError("not connecting in a unit test")

    bounds = db_engine.Bounds(statement_timeout=7, connect_timeout=5)
    engine = db_engine.engine_from_url("postgresql+psycopg2://u:p@127.0.0.1:1/x", bounds,
                                       module=_FakeDriver(psycopg2, fake_connect))
    try:
        engine.connect()
    except Exception:
        pass
    assert captured["options"] == "-c statement_timeout=7000"
    assert captured["connect_timeout"] == 5
    assert captured["keepalives"] == 1 and captured["keepalives_count"] == 3
    assert captured["tcp_user_timeout"] > 7000


def test_a_timeout_in_the_url_wins_over_the_default():
    import psycopg2
    captured = {}

    def fake_connect(*args, **kwargs):
        captured.update(kwargs)
        raise psycopg2.OperationalError("not connecting in a unit test")

    engine = db_engine.engine_from_url(
        "postgresql+psycopg2://u:p@127.0.0.1:1/x?connect_timeout=2",
        module=_FakeDriver(psycopg2, fake_connect))
    try:
        engine.connect()
    except Exception:
        pass
    assert captured["connect_timeout"] == "2"


def test_mysql_reads_and_writes_are_bounded_on_the_client_side():
    import pymysql
    captured = {}

    def fake_connect(*args, **kwargs):
        captured.update(kwargs)
        raise pymysql.err.OperationalError(2003, "not connecting in a unit test")

    engine = db_engine.engine_from_url("mysql+pymysql://u:p@127.0.0.1:1/x",
                                       db_engine.Bounds(statement_timeout=9),
                                       module=_FakeDriver(pymysql, fake_connect))
    try:
        engine.connect()
    except Exception:
        pass
    assert captured["read_timeout"] == captured["write_timeout"] == 9 + db_engine.CLIENT_MARGIN


def test_the_bounds_come_from_the_database_options():
    from oslo_config import cfg

    from computed.conf import database
    conf = cfg.ConfigOpts()
    database.register_opts(conf)
    conf([])
    conf.set_override("connection", "postgresql+psycopg2://u:p@127.0.0.1:1/x", "database")
    conf.set_override("pool_timeout", 4, "database")
    conf.set_override("statement_timeout", 12, "database")
    bounds = db_engine.Bounds.from_conf(conf.database)
    assert (bounds.pool_timeout, bounds.statement_timeout) == (4, 12)
    assert db_engine.engine_from_conf(conf).pool.timeout() == 4


class _FakeDriver:
    """psycopg2 with its connect replaced: everything else (paramstyle, errors) is the real
    module's, so SQLAlchemy's dialect is the real one."""

    def __init__(self, real, connect):
        self._real = real
        self.connect = connect

    def __getattr__(self, name):
        return getattr(self._real, name)


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
        database.apply_report_if_newer(engine, "p", 1, 4, "me", lambda row: "{}")))
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
