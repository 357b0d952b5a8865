"""OpenStack Nova (PyPI ``nova``) with its own Ironic driver, the minimum it needs to manage nodes,
for the comparison benchmark (bench/nova_bench.py): what an operator runs today instead of computed.

Owns: Nova's cached virtualenv (:mod:`computed.testing.venvs`), its configuration (rendered by the
pure :func:`render_conf`), its two databases on the stack's PostgreSQL with the cell mapping
(``nova-manage api_db sync``, ``cell_v2 map_cell0``, ``cell_v2 create_cell``, ``db sync``), and its
processes: one ``nova-conductor`` and any number of ``nova-compute`` services with
``compute_driver = ironic.IronicDriver``, each in a session of its own with its log in the work
directory. Nothing else of Nova runs (no API, scheduler, Glance or Neutron: no instances).

Without Keystone: Placement is reached with keystoneauth's ``admin_token`` plugin (the harness's
``noauth2`` Placement takes the token ``admin`` as an admin), Ironic with ``auth_type = none``
and an ``endpoint_override`` (the harness's Ironic runs ``noauth``).
Every other option is Nova's default.

Guarantees: :meth:`Nova.stop` ends every process this object started (their process groups), also
those already killed; the databases go with the stack's PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from computed.testing import process, venvs

#: Nova 34.0.0 (2026.1): the first whose scheduler modules import no eventlet at import time
#: (computed's processes refuse eventlet: tests/functional/test_nova_compat.py loads them into
#: computed), and whose compute and conductor run on native threads by default, as computed does;
#: oslo.service's threading backend, which computed selects. psycopg2 for its databases on
#: PostgreSQL (Nova does not depend on a driver).
REQUIREMENTS = ("nova==34.0.0", "oslo.service[threading]>=4.2.0", "psycopg2-binary>=2.9")
CELL = "cell1"


def render_conf(*, host: str, transport_url: str, api_database: str, database: str,
                placement_url: str, ironic_url: str, state_path: Path,
                extra: dict[str, dict[str, str]] | None = None) -> str:
    """nova.conf for one Nova service of the stack: the options the Ironic driver needs, each
    other option at Nova's default; ``extra`` adds or overrides options by group. Empty database
    URLs leave the databases out, as for a compute (which reaches them through the conductor and
    refuses direct access)."""
    groups: dict[str, dict[str, str]] = {
        "DEFAULT": {"host": host, "transport_url": transport_url,
                    "compute_driver": "ironic.IronicDriver", "state_path": str(state_path),
                    "debug": "false"},
        "api_database": {"connection": api_database} if api_database else {},
        "database": {"connection": database} if database else {},
        "oslo_concurrency": {"lock_path": str(state_path / "lock")},
        "placement": {"auth_type": "admin_token", "token": "admin",
                      "endpoint": placement_url, "endpoint_override": placement_url},
        "ironic": {"auth_type": "none", "endpoint_override": ironic_url},
    }
    for group, options in (extra or {}).items():
        groups.setdefault(group, {}).update(options)
    lines: list[str] = []
    for group, options in groups.items():
        if not options:
            continue
        lines.append(f"[{group}]")
        lines += [f"{name} = {value}" for name, value in options.items()]
        lines.append("")
    return "\n".join(lines)


@dataclass
class NovaProcess:
    """One Nova service started by :class:`Nova`."""

    binary: str
    host: str
    conf: Path
    log: Path
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else 0

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the service itself (not its group: what a crash of that process is)."""
        if self.alive:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


class Nova:
    """Nova's conductor and computes against ``stack`` (its RabbitMQ, PostgreSQL, Placement and
    Ironic), with their files under ``workdir``; ``tag`` makes the database names unique."""

    def __init__(self, stack, workdir: Path, tag: str):
        if "postgres" not in stack:
            raise RuntimeError("Nova's databases need the stack's PostgreSQL, which it has not")
        self.stack = stack
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tag = tag
        self.venv: Path | None = None
        self.processes: list[NovaProcess] = []
        self.api_database = self.cell0_database = self.database = ""

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def conf_for(self, host: str, extra: dict[str, dict[str, str]] | None = None,
                 databases: bool = True) -> Path:
        path = self.workdir / f"{host}.conf"
        path.write_text(render_conf(
            host=host, transport_url=self.stack["rabbitmq"].url,
            api_database=self.api_database if databases else "",
            database=self.database if databases else "",
            placement_url=self.stack["placement"].url, ironic_url=self.stack["ironic"].url,
            state_path=self.workdir / "state", extra=extra))
        return path

    def setup(self) -> None:
        """Build (or reuse) the virtualenv, create and migrate the databases, map the cells."""
        self.venv = venvs.ensure("nova", REQUIREMENTS)
        (self.workdir / "state" / "lock").mkdir(parents=True, exist_ok=True)
        pg = self.stack["postgres"]
        self.api_database = pg.create_database(f"nova_api_{self.tag}")
        self.cell0_database = pg.create_database(f"nova_cell0_{self.tag}")
        self.database = pg.create_database(f"nova_{self.tag}")
        self.stack.save()  # the new databases are dropped with the stack
        conf = self.conf_for("nova-manage")
        manage = [self.bin("nova-manage"), "--config-file", str(conf)]
        for argv, what in (
                (["api_db", "sync"], "nova-manage api_db sync"),
                (["cell_v2", "map_cell0", "--database_connection", self.cell0_database],
                 "nova-manage cell_v2 map_cell0"),
                (["cell_v2", "create_cell", "--name", CELL, "--verbose"],
                 "nova-manage cell_v2 create_cell"),
                (["db", "sync"], "nova-manage db sync")):
            process.run(manage + argv, what, timeout=900)

    def start(self, binary: str, host: str,
              extra: dict[str, dict[str, str]] | None = None) -> NovaProcess:
        """Start ``nova-conductor`` or ``nova-compute`` as ``host`` (a compute without the
        databases' URLs, as deployed: it reaches them through the conductor)."""
        conf = self.conf_for(host, extra, databases=binary != "nova-compute")
        log = self.workdir / f"{host}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen([self.bin(binary), "--config-file", str(conf)],
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
        started = NovaProcess(binary, host, conf, log, proc)
        self.processes.append(started)
        return started

    def stop(self) -> None:
        """End every process started here, with the workers a conductor forked."""
        for started in self.processes:
            if started.proc is not None:
                process.stop(started.pid, grace=10)
                try:
                    started.proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass
