"""PostgreSQL for computed's own database, when a server is available.

Reuses a server answering on 127.0.0.1:5432 (trust authentication for ``postgres``, as Debian's
test machines have it) and creates a scratch database per stack, dropped on stop, and as many more
as callers ask for (also dropped on stop), empty or copied from a template database. When no server
answers but Debian's PostgreSQL binaries are installed, runs a private cluster as the ``postgres``
user in the scratch directory. When neither is possible the stack has no PostgreSQL and the
database layer is exercised on sqlite only (:func:`available` says which).

Ready when the port answers an SSLRequest with ``S`` or ``N`` (the wire protocol's first exchange).
"""

from __future__ import annotations

import glob
import os
import shutil
import struct
import tempfile
import threading
import uuid
from pathlib import Path
from urllib import parse

from computed.testing import process
from computed.testing.service import Service

SHARED_PORT = 5432
SSL_REQUEST = struct.pack("!ii", 8, 80877103)


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
    process.run([client("psql"), "-h", host, "-p", str(port), "-U", "postgres", "-d", database,
                 "-q", "-v", "ON_ERROR_STOP=1", *what], f"psql: {sql or file} in {database}",
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

    def ready(self) -> bool:
        return speaks_postgres(self.info.get("port", 0))

    def _drop(self, name: str) -> None:
        try:
            self._psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except process.ServiceError:
            pass

    def stop(self) -> None:
        if self.ready():
            # All at once: each DROP DATABASE waits for a checkpoint of the whole server, and
            # drops waiting together share one. One after the other, a local run's drops (the
            # stack's, Placement's, the run's own) took 3.0-7.9 s of its stop on the shared
            # server while other stacks wrote (one drop 6.5 s); three drops of empty databases
            # 1.6 and 3.4 s one after the other, 0.8 and 1.1 s at once (load ~20), 0.25-0.30
            # against 0.07 s (load ~13; measured 2026-11-28).
            names = dict.fromkeys([self.info.get("database"),
                                   *self.info.get("extra_databases", [])])
            drops = [threading.Thread(target=self._drop, args=(name,), daemon=True)
                     for name in names if name]
            for drop in drops:
                drop.start()
            for drop in drops:
                drop.join()
        if not self.info.get("reused"):
            super().stop()
            if self.info.get("data"):
                shutil.rmtree(self.info.pop("data"), ignore_errors=True)
