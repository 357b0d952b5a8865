"""The connection to computed's database: engines, transactions, and the bounds on every call.

Owns how computed connects to its database, for every dialect it supports, and what bounds each
call: :func:`engine_from_conf` builds the engine a service uses from ``[database]``,
:func:`engine_from_url` the same from a URL with explicit bounds (defaults from
:mod:`computed.conf.database`), :func:`transaction` runs one transaction. The statements
themselves are the aggregate modules' (:mod:`computed.db.providers`, :mod:`.instances`,
:mod:`.flavors`, :mod:`.quotas`, :mod:`.key_pairs`).

Bounds (why: a stalled or unreachable database must give its caller an error, never hold a
thread for ever, and never stop a daemon's ZooKeeper session, lease or work on other nodes,
which run on threads of their own):

* PostgreSQL (psycopg2): a connect timeout; ``statement_timeout`` set on every session, so a
  statement stuck behind a lock is cancelled by the server; TCP keepalives (30 s idle, then
  every 10 s, 3 probes) and a TCP user timeout, so a connection to a server that went away or
  whose network dropped fails within about a minute instead of the kernel's two hours.
* MySQL/MariaDB (PyMySQL): connect, read and write timeouts on the client's socket (a client
  side bound, so even a frozen server gives an error), and the server's statement limit.
* every dialect but sqlite: a pool of ``max_pool_size`` + ``max_overflow`` connections, a thread
  waits ``pool_timeout`` seconds at most for one, and ``pool_pre_ping`` checks a pooled
  connection before use (a restarted server costs no failed request).
* sqlite: WAL, a busy timeout, foreign keys, and transactions begun here (``BEGIN IMMEDIATE``
  for writes, so concurrent writers queue on the lock instead of failing).

Threads: an engine is shared by all of a process's threads (SQLAlchemy's pool is thread-safe);
each :func:`transaction` holds one pooled connection on the calling thread only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from oslo_config import cfg
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from computed.conf import database as database_conf

# Connection execution option read by the sqlite "begin" hook: which BEGIN to emit.
_SQLITE_BEGIN = "computed_sqlite_begin"
SQLITE_BUSY_TIMEOUT_MS = 30_000
# A sqlite database file computed creates: its user only (it holds what was reported).
SQLITE_FILE_MODE = 0o600
#: psycopg2/libpq TCP keepalive settings: idle seconds before the first probe, seconds
#: between probes, probes before the connection is declared dead.
POSTGRES_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
                       "keepalives_count": 3}
#: Seconds the client waits beyond the server's statement limit before its own socket read
#: gives up (MySQL): the server's own cancellation should come first.
CLIENT_MARGIN = 5


@dataclasses.dataclass(frozen=True)
class Bounds:
    """How long any call to the database may wait, by cause (seconds)."""

    statement_timeout: int = database_conf.STATEMENT_TIMEOUT
    pool_timeout: int = database_conf.POOL_TIMEOUT
    max_pool_size: int = database_conf.MAX_POOL_SIZE
    max_overflow: int = database_conf.MAX_OVERFLOW
    connect_timeout: int = database_conf.CONNECT_TIMEOUT

    @classmethod
    def from_conf(cls, database: Any) -> Bounds:
        """From the ``[database]`` group."""
        return cls(statement_timeout=database.statement_timeout,
                   pool_timeout=database.pool_timeout, max_pool_size=database.max_pool_size,
                   max_overflow=database.max_overflow,
                   connect_timeout=database.connect_timeout)


def engine_from_conf(conf: cfg.ConfigOpts) -> Engine:
    """The engine of ``[database] connection`` with ``[database]``'s bounds."""
    return engine_from_url(conf.database.connection, Bounds.from_conf(conf.database))


def engine_from_url(url: str, bounds: Bounds = Bounds(), **kwargs: Any) -> Engine:
    """An engine for ``url`` set up as computed needs it (see the module's docstring);
    ``kwargs`` go to :func:`sqlalchemy.create_engine` (tests pass ``poolclass``)."""
    parsed = sa.engine.make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        _create_private(parsed.database)
        engine = sa.create_engine(parsed, **kwargs)
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    if "poolclass" not in kwargs:
        kwargs.setdefault("pool_size", bounds.max_pool_size)
        kwargs.setdefault("max_overflow", bounds.max_overflow)
        kwargs.setdefault("pool_timeout", bounds.pool_timeout)
    connect_args = kwargs.setdefault("connect_args", {})
    for key, value in _connect_args(backend, parsed.get_driver_name(), bounds).items():
        if key not in parsed.query:  # what the operator wrote in the URL wins
            connect_args.setdefault(key, value)
    engine = sa.create_engine(parsed, **kwargs)
    if backend == "mysql":
        event.listen(engine, "connect", _mysql_statement_limit(bounds.statement_timeout))
    return engine


def _connect_args(backend: str, driver: str, bounds: Bounds) -> dict[str, Any]:
    if backend == "postgresql" and driver == "psycopg2":
        return {"connect_timeout": bounds.connect_timeout,
                "options": f"-c statement_timeout={bounds.statement_timeout * 1000}",
                "tcp_user_timeout": (bounds.statement_timeout + CLIENT_MARGIN) * 1000,
                **POSTGRES_KEEPALIVES}
    if backend == "mysql" and driver == "pymysql":
        client = bounds.statement_timeout + CLIENT_MARGIN
        return {"connect_timeout": bounds.connect_timeout, "read_timeout": client,
                "write_timeout": client}
    return {}


def _mysql_statement_limit(seconds: int) -> Any:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            # MariaDB names it max_statement_time (seconds), MySQL max_execution_time (ms,
            # SELECTs only); each refuses the other's name.
            cursor.execute("SELECT VERSION()")
            version = str(cursor.fetchone()[0])
            if "MariaDB" in version:
                cursor.execute(f"SET SESSION max_statement_time = {int(seconds)}")
            else:
                cursor.execute(f"SET SESSION max_execution_time = {int(seconds) * 1000}")
        finally:
            cursor.close()
    return on_connect


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own transaction handling begins lazily and DEFERRED, so two processes could
    # both read a provider before either writes; it is switched off and "begin" below emits
    # BEGIN itself (which also makes DDL transactional for migrations).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        # WAL: readers do not block the writer nor the writer them.
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    mode = conn.get_execution_options().get(_SQLITE_BEGIN, "DEFERRED")
    conn.exec_driver_sql(f"BEGIN {mode}")


def _create_private(database: str | None) -> None:
    """Create a missing sqlite database file readable by its user only, whatever the umask
    (sqlite would create it, and its -wal and -shm files, with the umask's mode; it gives those
    the database file's mode). An existing file keeps the mode its owner gave it."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    try:
        fd = os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SQLITE_FILE_MODE)
    except (FileExistsError, FileNotFoundError):
        return  # exists, or its directory does not: sqlite says so in its own words
    os.fchmod(fd, SQLITE_FILE_MODE)
    os.close(fd)


@contextlib.contextmanager
def transaction(engine: Engine, write: bool = False) -> Iterator[Connection]:
    """One transaction, committed on success; ``write`` takes sqlite's write lock up front."""
    with engine.connect() as conn:
        if write:
            conn.execution_options(**{_SQLITE_BEGIN: "IMMEDIATE"})
        with conn.begin():
            yield conn


def is_deadlock(error: sa_exc.DBAPIError) -> bool:
    """A deadlock or serialization failure: the transaction may be retried as a whole."""
    orig = error.orig
    if getattr(orig, "pgcode", None) in ("40P01", "40001"):  # deadlock, serialization failure
        return True
    args = getattr(orig, "args", ())
    return bool(args) and args[0] == 1213  # MySQL ER_LOCK_DEADLOCK
