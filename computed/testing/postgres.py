"""PostgreSQL for computed's own database, when a server is available.

Reuses a server answering on 127.0.0.1:5432 (trust authentication for ``postgres``, as Debian's
test machines have it) and creates a scratch database per stack, dropped on stop, and as many more
as callers ask for (also dropped on stop), empty or copied from a template database. When no server
answers but Debian's PostgreSQL binaries are installed, runs a private cluster as the ``postgres``
user in the scratch directory (its databases go with its files on stop). When neither is possible
the stack has no PostgreSQL and the database layer is exercised on sqlite only (:func:`available`
says which).

Ready when the port answers an SSLRequest with ``S`` or ``N`` (the wire protocol's first exchange).
"""

from __future__ import annotations

import glob
import os
import shutil
import struct
import tempfile
import uuid
from concurrent import futures
from pathlib import Path
from urllib import parse

from computed.testing import process
from computed.testing.service import Service

SHARED_PORT = 5432
SSL_REQUEST = struct.pack("!ii", 8, 80877103)
#: Sessions a stop drops its databases with, at once (each a psql; see PostgreSQL._drop).
DROP_CONNECTIONS = 12


def speaks_postgres(port: int) -> bool:
    return process.exchange(port, SSL_REQUEST, 1) in (b"S", b"N")


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def client(tool: str) -> str:
    """The path of one of PostgreSQL's client programs (``psql``, ``pg_dump``)."""
    return shutil.which(tool) or str((_bindir() or Path("/usr/bin")) / tool)


def server_of(url: str) -> tuple[str, int]:
    """(host, port) of the server of a SQLAlchemy PostgreSQL URL."""
    parts = parse.urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or SHARED_PORT


def psql(host: str, port: int, sql: str = "", database: str = "postgres",
         file: Path | None = None) -> None:
    """Run ``sql`` (or the statements of ``file``) as ``postgres`` in ``database``; stops at
    the first error, which raises."""
    what = ["-f", str(file)] if file is not None else ["-c", sql]
    _run_psql(host, port, database, what, f"psql: {sql or file} in {database}")


def psql_each(host: str, port: int, statements: list[str], database: str = "postgres") -> None:
    """Run ``statements`` as ``postgres`` in ``database``, in one session, each in a
    transaction of its own (statements such as DROP DATABASE take no transaction block); stops
    at the first error, which raises."""
    what = [arg for statement in statements for arg in ("-c", statement)]
    _run_psql(host, port, database, what,
              f"psql: {len(statements)} statement(s) in {database}, the first {statements[0]}")


def _run_psql(host: str, port: int, database: str, what: list[str], description: str) -> None:
    process.run([client("psql"), "-h", host, "-p", str(port), "-U", "postgres", "-d", database,
                 "-q", "-v", "ON_ERROR_STOP=1", *what], description,
                env={**os.environ, "PGCONNECT_TIMEOUT": "5"})


def dump(host: str, port: int, database: str, path: Path) -> None:
    """``database`` as SQL statements in ``path`` (schema and rows, no owner nor grants: they
    load into a database of any server of this major version)."""
    process.run([client("pg_dump"), "-h", host, "-p", str(port), "-U", "postgres",
                 "--no-owner", "--no-privileges", "-f", str(path), database],
                f"pg_dump {database}", env={**os.environ, "PGCONNECT_TIMEOUT": "5"})


def available() -> bool:
    return speaks_postgres(SHARED_PORT) or (_bindir() is not None and shutil.which("runuser"))


class PostgreSQL(Service):
    name = "postgres"

    def start(self) -> None:
        if not self.info.get("private") and speaks_postgres(SHARED_PORT):
            self.info.update(port=SHARED_PORT, reused=True)
        else:
            self._start_private()
        database = self.info.get("database") or f"computed_{uuid.uuid4().hex[:8]}"
        self.info.update(database=database, url=self.create_database(database))

    def create_database(self, name: str, template: str = "") -> str:
        """Create database ``name`` (dropped with the stack) and return its SQLAlchemy URL.
        With ``template``, the new database is a copy of that one (PostgreSQL copies its files:
        a migrated schema without running the migrations again); nothing may be connected to
        the template while it is copied."""
        copy = f' TEMPLATE "{template}"' if template else ""
        self._psql(f'CREATE DATABASE "{name}"{copy}')
        extra = self.info.setdefault("extra_databases", [])
        if name != self.info.get("database") and name not in extra:
            extra.append(name)
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.info['port']}/{name}"

    def _start_private(self) -> None:
        bindir = _bindir()
        if bindir is None:
            raise process.ServiceError("postgres: no server on 127.0.0.1:5432 and no PostgreSQL "
                                       "binaries under /usr/lib/postgresql")
        data = self._data_dir()
        port = self.info.get("port") or process.free_port()
        if not (data / "PG_VERSION").exists():
            data.mkdir(parents=True, exist_ok=True)
            shutil.chown(data, "postgres", "postgres")
            process.run(["runuser", "-u", "postgres", "--", str(bindir / "initdb"), "-A", "trust",
                         "-U", "postgres", "-D", str(data)], "postgres initdb")
        self.info.update(port=port, private=True)
        argv = ["runuser", "-u", "postgres", "--", str(bindir / "postgres"), "-D", str(data),
                "-h", "127.0.0.1", "-p", str(port), "-k", str(data), "-c", "fsync=off"]
        self.info["pid"] = process.spawn(argv, self.log)
        process.wait_until(self.ready, 60, "postgres", pid=self.pid, log=self.log)

    def _data_dir(self) -> Path:
        """Where the private cluster keeps its files: a folder the ``postgres`` user can reach.
        A scratch directory under pytest's or the caller's 0700 folders is not: the cluster then
        lives in a folder of its own under the system's temporary directory, removed on stop."""
        if self.info.get("data"):
            return Path(self.info["data"]) / "postgres"
        data = Path(tempfile.mkdtemp(prefix="computed-postgres-"))
        data.chmod(0o711)
        self.info["data"] = str(data)
        return data / "postgres"

    def _psql(self, sql: str) -> None:
        psql("127.0.0.1", self.info["port"], sql)

    def _drop(self, names: list[str | None]) -> None:
        """Drop the databases ``names``: :data:`DROP_CONNECTIONS` sessions at once, each
        dropping its share in turn; a share whose session failed (a server short of
        connections refuses some) is then dropped one database at a time, and a failure there
        is left.

        Every DROP DATABASE waits for a checkpoint it asks for (PostgreSQL 15) and for every
        backend of the server to close the database's files: waits on the whole server (the
        first drop of a suite's stack stop once waited 5.5 s for a checkpoint syncing 9,763
        files), which drops made at once share and drops one after another each pay. Not one
        session per database: a suite worker's stack has tens (~70 tests copy one), four
        workers end together, and the server takes 100 connections (a refused drop was a
        database left on it)."""
        names = list(dict.fromkeys(name for name in names if name))
        shares = [names[index::DROP_CONNECTIONS]
                  for index in range(min(DROP_CONNECTIONS, len(names)))]

        def drop(share: list[str]) -> list[str]:
            try:
                psql_each("127.0.0.1", self.info["port"],
                          [f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)' for name in share])
            except process.ServiceError:
                return share
            return []

        with futures.ThreadPoolExecutor(max(len(shares), 1)) as pool:
            failed = [name for share in pool.map(drop, shares) for name in share]
        for name in failed:
            drop([name])

    def ready(self) -> bool:
        return speaks_postgres(self.info.get("port", 0))

    def stop(self) -> None:
        # A private cluster's databases go with its files: only a reused server's are dropped.
        if self.info.get("reused") and self.ready():
            self._drop([self.info.get("database"), *self.info.get("extra_databases", [])])
        if not self.info.get("reused"):
            super().stop()
            if self.info.get("data"):
                shutil.rmtree(self.info.pop("data"), ignore_errors=True)
