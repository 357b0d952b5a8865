"""computed's database on real servers: PostgreSQL (from the stack), MySQL/MariaDB (when one
answers on 127.0.0.1:3306 as root without password) and sqlite.

Each backend gets a fresh database for this module, synced once; the backend-neutral checks of
tests/unit/db/checks.py run on it, then the multi-process report test (tests/unit/db/hammer.py).
The migrations' checks on a database holding rows (tests/unit/db/upgrades.py) get a fresh
database each.
Without PostgreSQL in the stack the "postgresql" cases run on sqlite instead, so they never
silently pass as skipped. ``computed-manage db sync`` runs (in this process, tests/cli.py)
against a fresh PostgreSQL database.
"""

from __future__ import annotations

import socket
import uuid

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from computed import db
from computed.db import engine as db_engine
from computed.db import models
from computed.db import providers as db_providers
from tests import cli
from tests.unit.db import checks, hammer, upgrades

MYSQL_PORT = 3306
MYSQL_URL = f"mysql+pymysql://root@127.0.0.1:{MYSQL_PORT}"


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _admin(url: str, database: str):
    """An autocommit engine on the server's maintenance database (CREATE/DROP DATABASE)."""
    return sa.create_engine(sa.engine.make_url(url).set(database=database),
                            isolation_level="AUTOCOMMIT")


def _scratch_postgres(stack) -> tuple[str, callable]:
    name = f"computed_db_{uuid.uuid4().hex[:8]}"
    admin = _admin(stack["postgres"].url, "postgres")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')

    def drop():
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()

    return str(sa.engine.make_url(stack["postgres"].url).set(database=name)), drop


def _scratch_mysql() -> tuple[str, callable]:
    if not _answers(MYSQL_PORT):
        pytest.skip("no MySQL/MariaDB on 127.0.0.1:3306")
    pytest.importorskip("pymysql")
    name = f"computed_db_{uuid.uuid4().hex[:8]}"
    admin = _admin(MYSQL_URL, "mysql")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE `{name}`")
    except sa.exc.OperationalError as error:
        pytest.skip(f"MySQL/MariaDB on 127.0.0.1:3306 refuses root without password: {error}")

    def drop():
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()

    return f"{MYSQL_URL}/{name}?charset=utf8mb4", drop


def _scratch(backend: str, request, tmp_path_factory) -> tuple[str, callable]:
    if backend == "postgresql":
        stack = request.getfixturevalue("stack")
        if "postgres" in stack:
            return _scratch_postgres(stack)
    elif backend == "mysql":
        return _scratch_mysql()
    path = tmp_path_factory.mktemp(f"db-{backend}") / "computed.sqlite"
    return f"sqlite:///{path}", lambda: None


@pytest.fixture(scope="module", params=["postgresql", "mysql", "sqlite"])
def url(request, tmp_path_factory):
    url, drop = _scratch(request.param, request, tmp_path_factory)
    try:
        assert db.sync(url) == db.head_revision()
        yield url
    finally:
        drop()


@pytest.fixture(scope="module")
def engine(url):
    engine = db_engine.engine_from_url(url)
    yield engine
    engine.dispose()


def test_resync_and_no_drift(url, engine):
    assert db.current_revision(url) == db.head_revision()
    assert db.sync(url) == db.head_revision()
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, models.Base.metadata) == []


@pytest.mark.parametrize("check", checks.ALL, ids=lambda check: check.__name__[len("check_"):])
def test_check(engine, check):
    check(engine)


def test_processes_apply_reports_in_order(url, engine, tmp_path):
    outcome = hammer.run(url, str(uuid.uuid4()), tmp_path, processes=4, epochs=3,
                         per_epoch=40)
    hammer.verify(outcome)
    # Several processes won races, so the lock was contended, not merely taken in turn.
    assert len({entry["process"] for entry in outcome["log"]}) > 1


@pytest.mark.parametrize("check", upgrades.ALL, ids=lambda check: check.__name__[len("check_"):])
@pytest.mark.parametrize("backend", ["postgresql", "mysql", "sqlite"])
def test_migrations_keep_rows(backend, check, request, tmp_path_factory):
    url, drop = _scratch(backend, request, tmp_path_factory)
    try:
        check(url)
    finally:
        drop()


def test_manage_db_sync(stack, tmp_path_factory, request, tmp_path):
    url, drop = _scratch("postgresql", request, tmp_path_factory)
    try:
        conf = tmp_path / "computed.conf"
        conf.write_text(f"[DEFAULT]\ntransport_url = fake://\n"
                        f"[coordination]\nbackend_url = file://{tmp_path}/coordination\n"
                        f"[database]\nconnection = {url}\n")

        def manage(action):
            result = cli.run("computed-manage", "--config-file", conf, "db", action,
                             home=tmp_path, env={"PATH": "/usr/bin:/bin"})
            assert result.threads_left == (), result
            return result

        assert "current: none" in manage("version").stdout
        synced = manage("sync")
        assert synced.returncode == 0, synced
        assert f"at revision {db.head_revision()}" in synced.stdout
        assert manage("sync").returncode == 0
        assert manage("version").stdout.strip() == \
            f"current: {db.head_revision()}, head: {db.head_revision()}"
        engine = db_engine.engine_from_url(url)
        try:
            assert {"providers", "instances"} <= set(sa.inspect(engine).get_table_names())
        finally:
            engine.dispose()
    finally:
        drop()


def test_a_statement_past_the_statement_timeout_is_cancelled(url):
    # The bound [database] statement_timeout sets on every session: a statement stuck behind a
    # lock, or simply too long, ends with an error instead of holding its thread. A 1 s limit
    # against a 3 s sleep on PostgreSQL and MariaDB/MySQL; sqlite has no server, and its bound
    # is the busy timeout on its lock.
    from computed.db import engine as db_engine
    engine = db_engine.engine_from_url(url, db_engine.Bounds(statement_timeout=1))
    try:
        with engine.connect() as conn:
            if url.startswith("sqlite"):
                assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == \
                    db_engine.SQLITE_BUSY_TIMEOUT_MS
                return
            sleep = "SELECT pg_sleep(3)" if url.startswith("postgresql") else "SELECT SLEEP(3)"
            with pytest.raises(sa.exc.OperationalError,
                               match="statement timeout|max_statement_time|max_execution_time"):
                conn.exec_driver_sql(sleep)
    finally:
        engine.dispose()


def test_the_rows_to_lock_of_a_batch_are_inserted_in_one_statement(url, engine):
    # One multi-row INSERT per batch where the backend has ON CONFLICT (PostgreSQL, sqlite), not
    # one round trip per row: SQLAlchemy batches an executemany INSERT ... ON CONFLICT only
    # when it has RETURNING (computed.db.providers._insert_unapplied_many).
    inserts = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO PROVIDERS"):
            inserts.append(statement)

    uuids = sorted(str(uuid.uuid4()) for _ in range(50))
    sa.event.listen(engine, "before_cursor_execute", seen)
    try:
        result = db_providers.apply_reports_if_newer(
            engine, [db_providers.ReportKey(u, 1, 1, "c1") for u in uuids],
            lambda newer: {key.uuid: db_providers.Applied("{}") for key, _ in newer})
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)
    assert result.applied == frozenset(uuids)
    if engine.dialect.name in ("mysql", "mariadb"):  # insert_missing: a statement per row
        assert len(inserts) == len(uuids), inserts
        return
    # One statement holding every row, not the driver's executemany of a one-row statement (a
    # round trip per row).
    assert len(inserts) == 1 and inserts[0].count("), (") == len(uuids) - 1, inserts
