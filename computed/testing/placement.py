"""OpenStack Placement (PyPI ``openstack-placement``) in a virtualenv of its own, over HTTP.

No auth (``noauth2``: any ``X-Auth-Token`` is accepted, ``admin`` gets admin rights), its database
on the stack's PostgreSQL when there is one (sqlite answers concurrent writes with "database is
locked", which would make every benchmark measure sqlite), else sqlite in the scratch directory,
served by computed/testing/bin/wsgi_serve.py: one process (a thread per request) unless
``info["workers"]`` asks for more worker processes on the same port (pre-forked, as a production
Placement runs under uwsgi; the benchmarks' ``--placement-workers``). The count is kept in
``info``, so a restart or a stack loaded from its state file starts as many again; stopping stops
every worker (they are in the server's process group, and end with it). Ready when ``GET /``
lists the API versions (a worker answered).

The database is migrated by loading what ``placement-manage db sync`` made once per virtualenv
(the statements ``pg_dump`` wrote of a database it migrated, or its sqlite file), not by running
the command at each start.

Placement's default policy keeps ``POST /reshaper`` to the ``service`` role, which a cloud gives
the service users (Nova's, computed's); ``noauth2`` gives the ``admin`` token the admin role
only, so a ``policy.yaml`` here lets admin reshape too, as the service role would.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
import uuid
from pathlib import Path
from urllib import parse

from computed.testing import postgres, process, venvs
from computed.testing.service import Service

REQUIREMENTS = ("openstack-placement==16.0.0", "psycopg2-binary>=2.9")
# Kept in a folder of its own: the script's folder goes first on sys.path, and this one
# holds modules named placement and ironic.
RESHAPE_RULE = "placement:reshaper:reshape"
SERVE = Path(__file__).parent / "bin" / "wsgi_serve.py"


def http_json(url: str, timeout: float = 2.0) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return json.load(resp)
    except (OSError, ValueError):
        return None


class Placement(Service):
    name = "placement"

    def start(self) -> None:
        venv = venvs.ensure("placement", REQUIREMENTS)
        home = self.workdir / "placement"
        home.mkdir(parents=True, exist_ok=True)
        conf = home / "placement.conf"
        if self.workers > 1 and not self.info.get("database"):
            # N processes starting on one sqlite file lock each other out ("database is locked").
            raise ValueError(f"placement: {self.workers} workers need a database server "
                             "(info['database'], a stack's PostgreSQL); sqlite takes one writer")
        connection = self.info.get("database") or f"sqlite:///{home / 'placement.sqlite'}"
        conf.write_text("\n".join([
            "[DEFAULT]",
            "debug = false",
            "[api]",
            "auth_strategy = noauth2",
            "[placement_database]",
            f"connection = {connection}",
            "",
        ]))
        (home / "policy.yaml").write_text(f'"{RESHAPE_RULE}": "role:admin or role:service"\n')
        if not self.info.get("migrated"):  # a restart finds its database as it left it
            _load_schema(venv, connection)
            self.info["migrated"] = True
        port = self.info.get("port") or process.free_port()
        self.info.update(port=port, url=f"http://127.0.0.1:{port}", database=connection)
        env = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": str(home)}
        self.info["pid"] = process.spawn(
            [str(venv / "bin" / "python"), str(SERVE), "placement.wsgi.api:application",
             str(port), str(self.workers)], self.log, env=env)
        process.wait_until(self.ready, 60, "placement", pid=self.pid, log=self.log)

    @property
    def workers(self) -> int:
        """Worker processes serving Placement (1: one process, no fork)."""
        workers = int(self.info.get("workers", 1))
        if workers < 1:
            raise ValueError(f"placement: workers {workers}: at least 1")
        return workers

    def ready(self) -> bool:
        if not self.info.get("port"):
            return False
        versions = http_json(self.url + "/")
        return bool(versions and versions.get("versions"))


def _load_schema(venv: Path, connection: str) -> None:
    """Placement's migrated, empty database at ``connection`` (an empty PostgreSQL database, or
    a sqlite file not made yet): a copy of what ``placement-manage db sync`` made once per
    virtualenv (:func:`venvs.made_once`; the command costs 2 CPU s of imports at each start)."""
    if connection.startswith("postgresql"):
        host, port = postgres.server_of(connection)
        statements = venvs.made_once(venv, lambda folder: _dump_migrated(venv, host, port,
                                                                         folder),
                                     kind="postgresql") / "placement.sql"
        postgres.psql(host, port, database=parse.urlsplit(connection).path.lstrip("/"),
                      file=statements)
        return
    path = Path(connection.removeprefix("sqlite:///"))
    if not path.exists():
        shutil.copy2(venvs.made_once(venv, lambda folder: _sync(venv, f"sqlite:///{folder}/"
                                                                      "placement.sqlite", folder),
                                     kind="sqlite") / "placement.sqlite", path)


def _sync(venv: Path, connection: str, folder: Path) -> None:
    """``placement-manage db sync`` on ``connection`` (its configuration written in
    ``folder``)."""
    conf = folder / "placement-manage.conf"
    conf.write_text(f"[placement_database]\nconnection = {connection}\n")
    process.run([str(venv / "bin" / "placement-manage"), "--config-file", str(conf), "db",
                 "sync"], "placement-manage db sync")


def _dump_migrated(venv: Path, host: str, port: int, folder: Path) -> None:
    """``folder``/placement.sql: the statements of a database migrated by ``placement-manage
    db sync`` in a scratch database of the server at (host, port), dropped afterwards."""
    scratch = f"placement_template_{uuid.uuid4().hex[:8]}"
    postgres.psql(host, port, f'CREATE DATABASE "{scratch}"')
    try:
        _sync(venv, f"postgresql+psycopg2://postgres@{host}:{port}/{scratch}", folder)
        postgres.dump(host, port, scratch, folder / "placement.sql")
    finally:
        postgres.psql(host, port, f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
