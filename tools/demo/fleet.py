"""The local fleet: the real services, schedulable fake nodes, computed's processes, and the I/O
the screen needs.

:class:`LocalFleet` brings up a :class:`computed.testing.stack.Stack` with Glance (without
Keystone; Ironic reads it with ``[glance] auth_type = none``), uploads the image ``demo`` to it,
enrolls fake-hardware nodes brought to ``available`` and powered off through Ironic's own state
machine (a node with no power state is reported reserved, and nothing could be scheduled on it),
writes one ``WORKDIR/computed.conf`` that ``computed-manage`` uses as is plus a small file per
process for what differs (host, port), and starts the reporter, the compute API
(``computed-api`` in noauth2 mode on a free loopback port, reading that Glance: no Keystone runs
here) and the daemons; once the API answers it has the flavor ``bm.demo``
(:mod:`tools.demo.catalog`), so that a newcomer's ``openstack server create --image demo
--flavor bm.demo`` works as the screen shows it. Every process it
starts runs in a session of its own (the terminal's Ctrl-C and hang-up reach only the run, which
stops them itself) and is recorded in the run's lock file at once (:mod:`tools.demo.lock`), so
that even a run killed with SIGKILL leaves a record the next run cleans up.

:meth:`LocalFleet.down` stops what was started, computed's processes first (while the services
they talk to are still there), each step even when an earlier one failed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kazoo.client import KazooClient

from bench.seed import make_template, seed_nodes
from computed import db
from computed.db import engine as db_engine
from computed.db import instances as db_instances
from computed.db import providers as db_providers
from computed.fleet.claims import read_claims
from computed.fleet.membership import fleet_root, read_members
from computed.providers.state import normalise_resource_class
from computed.testing.ironic import request
from computed.testing.process import free_port
from computed.testing.stack import DEFAULT, ORDER, Stack
from tools.demo import catalog, view
from tools.demo.lock import RunLock

BIN = Path(sys.executable).parent
# computed's default group: the shared computed.conf needs no [coordination] group.
GROUP = "computed"
PREFIX = "demo"
RESOURCE_CLASS = "baremetal-demo"
#: [fleet] rehome_grace unless ``--rehome-grace`` says otherwise: long enough to watch the wait.
REHOME_GRACE = 30.0
DRAIN_TIMEOUT = 10
# How long quitting waits for computed's processes to leave by themselves before SIGKILL.
STOP_GRACE = 5.0
#: The local run stops processes all the time (k, t, q, a crashed run's leftovers): with
#: oslo.messaging's default heartbeat_rate each stop of a message server, and the cleanup of a
#: transport that made calls, waits out the rabbit driver's idle poll (up to 5 s: q waited 5 s
#: for the reporter, then killed it). 120 bounds each wait by 0.25 s, for 0.3 % of a core per
#: idle process instead of 0.04 % (docs/operations.md, "Stop a daemon"; the tests set the same).
MESSAGING = ("# Quick stops here (docs/operations.md); production keeps the default.\n"
             "[oslo_messaging_rabbit]\nheartbeat_rate = 120\n")
PLACEMENT_HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39",
                     "Accept": "application/json"}


@dataclass(frozen=True)
class Kind:
    """A computed console script the local run starts: the option (``[section] option``) of
    the port that serves its ``/metrics``, and what else its own config says in that section."""

    script: str
    port_section: str
    port_option: str
    settings: str = ""


DAEMON = Kind("computed", "metrics", "port")
REPORTER = Kind("computed-reporter", "metrics", "reporter_port")
# The API serves /metrics on its own port; no Keystone runs here, hence noauth2 (docs/api.md).
API = Kind("computed-api", "api", "bind_port",
           "bind_host = 127.0.0.1\nauth_strategy = noauth2\n")
# One process of each of these runs next to the daemons.
SINGLETONS = (("reporter-1", REPORTER), ("api-1", API))


class Child:
    """One computed process of the local run: own session, own log, its own small config."""

    def __init__(self, name: str, kind: Kind, workdir: Path, shared_conf: Path):
        self.name = name
        self.kind = kind
        self.port = free_port()
        self.conf = workdir / f"{name}.conf"
        self.log = workdir / f"{name}.log"
        self.audit = workdir / f"{name}.audit"
        self.conf.write_text(
            f"# {name}: what differs from computed.conf for this process\n"
            f"[DEFAULT]\nhost = {name}\n"
            f"[fleet]\naudit_log = {self.audit}\n"
            f"[{kind.port_section}]\n{kind.port_option} = {self.port}\n{kind.settings}")
        self.argv = [str(BIN / kind.script), "--config-file", str(shared_conf),
                     "--config-file", str(self.conf)]
        self.proc: subprocess.Popen | None = None
        self.sent: str | None = None

    def start(self) -> Child:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    @property
    def url(self) -> str:
        """Where the process serves HTTP: its metrics, and the API's requests."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics(self) -> str:
        return f"{self.url}/metrics"

    def signal(self, signum: signal.Signals) -> None:
        """Signal the process's group (it is the leader of its own session)."""
        if self.running:
            self.sent = signum.name
            try:
                os.killpg(self.proc.pid, signum)
            except ProcessLookupError:
                pass

    def wait(self, timeout: float) -> bool:
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True


def placement_get(url: str) -> dict | None:
    """A Placement document, or None when Placement does not answer it."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=PLACEMENT_HEADERS),
                                    timeout=5) as resp:
            return json.load(resp)
    except (OSError, ValueError, urllib.error.HTTPError):
        return None


class LocalFleet:
    def __init__(self, workdir: Path, node_count: int, daemon_count: int, lock: RunLock,
                 say: Callable[[str], None], rehome_grace: float = REHOME_GRACE):
        self.workdir = Path(workdir).resolve()
        self.rehome_grace = rehome_grace
        self.node_count = node_count
        self.daemon_count = daemon_count
        self.lock = lock
        self.say = say
        self.stack: Stack | None = None
        self.children: list[Child] = []
        self.nodes: list[str] = []
        self.events: list[str] = []
        self.next_daemon = 1
        self.zk: KazooClient | None = None
        self.engine = None
        self.services: list[str] = []
        self.watched: str | None = None
        self.seen_members: set[str] = set()
        self.gone_since: dict[str, float] = {}
        self.image: dict | None = None
        self.flavor: dict | None = None

    @property
    def conf(self) -> Path:
        return self.workdir / "computed.conf"

    @property
    def manage(self) -> str:
        """The command prefix for computed-manage against this fleet."""
        return f"{BIN / 'computed-manage'} --config-file {self.conf}"

    def log(self, text: str) -> None:
        self.events.append(f"{time.strftime('%H:%M:%S')} {text}")
        del self.events[:-8]

    # --- up -------------------------------------------------------------------------------

    def up(self) -> None:
        self._forget_previous_run()
        self.say("starting ZooKeeper, RabbitMQ, PostgreSQL, Glance, Placement, Ironic ...")
        self.stack = Stack.up(self.workdir, (*DEFAULT, "glance"))
        for name, service in self.stack.services.items():
            if service.pid:
                self.lock.record(name, service.pid)
        self.services = [f"{name} {service.url}" for name, service in
                         self.stack.services.items()]
        self.say("\n".join(self.stack.status()))
        self.image = catalog.ensure_image(self.stack["glance"])
        self.say(f"Glance: image {catalog.IMAGE_NAME} {self.image['id']} (public, active)")
        self.say(f"enrolling {self.node_count} fake-hardware nodes (available, powered off) ...")
        ironic = self.stack["ironic"].url
        # The template every seeded node is a copy of: moved to available and powered off
        # through Ironic's API, so every node is schedulable (reserved 0 in Placement).
        make_template(ironic, PREFIX, RESOURCE_CLASS)
        self.nodes = seed_nodes(self.stack, self.node_count, prefix=PREFIX,
                                resource_class=RESOURCE_CLASS, log=self.say)
        if "postgres" in self.stack:
            database = self.stack["postgres"].create_database(f"demo_{os.getpid()}")
            self.stack.save()
        else:
            database = f"sqlite:///{self.workdir / 'computed.sqlite'}"
        db.sync(database)
        self.engine = db_engine.engine_from_url(database)
        self.conf.write_text(
            "# The local fleet's configuration, shared by every process of tools/run-local and\n"
            "# usable as is by computed-manage; each process adds its own small file\n"
            "# (host, metrics port) after this one.\n" +
            self.stack.computed_conf(database=database, extra=(
                f"[fleet]\nnode_refresh_interval = 10\ndrain_timeout = {DRAIN_TIMEOUT}\n"
                f"rehome_grace = {self.rehome_grace:g}\n" + MESSAGING)))
        self.zk = KazooClient(hosts=self.stack["zookeeper"].hosts, timeout=10)
        self.zk.start(timeout=15)
        for name, kind in SINGLETONS:
            self._start(Child(name, kind, self.workdir, self.conf))
        for _ in range(self.daemon_count):
            self.add()
        api = next(c for c in self.children if c.kind is API)
        catalog.wait_for_api(f"{api.url}/v2.1", lambda: api.running, api.log)
        self.flavor = catalog.ensure_flavor(f"{api.url}/v2.1", RESOURCE_CLASS, api.log)
        self.say(f"compute API: flavor {catalog.FLAVOR_NAME} {self.flavor['id']} "
                 f"(one {RESOURCE_CLASS} node)")

    def _forget_previous_run(self) -> None:
        """Remove the data an earlier run left in the work directory (its services are stopped by
        then): every run starts from empty services, as its nodes and database are new."""
        for name in ORDER:
            shutil.rmtree(self.workdir / name, ignore_errors=True)
        (self.workdir / "computed.sqlite").unlink(missing_ok=True)
        for pattern in ("computed-*.audit", "computed-*.log", "computed-*.conf", "reporter-*",
                        "api-*"):
            for path in self.workdir.glob(pattern):
                path.unlink()

    def _start(self, child: Child) -> Child:
        self.children.append(child.start())
        self.lock.record(child.name, child.proc.pid)
        return child

    # --- the keys ---------------------------------------------------------------------------

    def daemons(self) -> list[Child]:
        return [c for c in self.children if c.kind is DAEMON]

    def running_daemons(self) -> list[Child]:
        return [c for c in self.daemons() if c.running and not c.sent]

    def add(self) -> None:
        name = f"computed-{self.next_daemon}"
        self.next_daemon += 1
        self._start(Child(name, DAEMON, self.workdir, self.conf))
        self.log(f"started {name}")

    def kill(self) -> None:
        # A daemon hosting an instance when there is one: its re-homing is the thing to watch.
        hosting = {row.host for row in db_instances.live_instances(self.engine)}
        candidates = [d for d in self.running_daemons() if d.name in hosting] or \
            self.running_daemons()
        if candidates:
            victim = random.choice(candidates)
            victim.signal(signal.SIGKILL)
            self.log(f"killed {victim.name} with SIGKILL: its free nodes move when its "
                     f"ZooKeeper session expires, its instances' nodes after "
                     f"{self.rehome_grace:g} s more")

    def terminate(self) -> None:
        if self.running_daemons():
            leaving = random.choice(self.running_daemons())
            leaving.signal(signal.SIGTERM)
            self.log(f"sent SIGTERM to {leaving.name}: it drains its nodes to its peers, "
                     f"then stops")

    def maintenance(self) -> None:
        node = self.watched or random.choice(self.nodes)
        self.watched = node
        url = f"{self.stack['ironic'].url}/v1/nodes/{node}"
        if request("GET", url)["maintenance"]:
            request("DELETE", f"{url}/maintenance")
            self.log(f"maintenance off on {node[:8]}: its provider becomes free again")
        else:
            request("PUT", f"{url}/maintenance", {"reason": "tools/run-local"})
            self.log(f"maintenance on on {node[:8]}: its provider becomes reserved")

    # --- what the screen shows --------------------------------------------------------------

    def snapshot(self) -> view.Snapshot:
        members = read_members(self.zk, f"/tooz/{GROUP}", f"{fleet_root(GROUP)}/draining")
        claims = read_claims(self.zk, fleet_root(GROUP))
        by_name = {m.name: m for m in members}
        now = time.monotonic()
        for name in self.seen_members - set(by_name):
            self.gone_since.setdefault(name, now)
        for name in by_name:
            self.gone_since.pop(name, None)
        self.seen_members = set(by_name)
        per_host: dict[str, int] = {}
        for record in claims.values():
            per_host[record.host] = per_host.get(record.host, 0) + 1
        ours = {c.name for c in self.children}
        processes = []
        for child in self.children:
            member = by_name.get(child.name)
            processes.append(view.ProcessRow(
                child.name, view.daemon_state(child.running, child.returncode, child.sent,
                                              member) if child.kind is DAEMON else
                ("running" if child.running else f"exited {child.returncode}"),
                member.member_epoch if member else None,
                per_host.get(child.name) if child.kind is DAEMON else None, child.metrics))
        outsiders = [view.ProcessRow(m.name, "draining" if m.draining else "member",
                                     m.member_epoch, per_host.get(m.name, 0))
                     for m in members if m.name not in ours]
        instances = db_instances.live_instances(self.engine)
        states: dict[str, int] = {}
        for row in instances:
            states[row.state] = states.get(row.state, 0) + 1
        unclaimed = [n for n in self.nodes if n not in claims]
        waiting = view.waiting_for_rehome(
            unclaimed, {r.node_uuid: r.host for r in instances if r.node_uuid and r.host},
            by_name, self.gone_since, now, self.rehome_grace)
        placement = self.stack["placement"].url
        rc = normalise_resource_class(RESOURCE_CLASS)
        listed = placement_get(f"{placement}/resource_providers")
        free = placement_get(f"{placement}/resource_providers?resources={rc}:1")
        watched = None
        if self.watched:
            try:
                node = request("GET", f"{self.stack['ironic'].url}/v1/nodes/{self.watched}")
            except OSError:  # urllib's errors: Ironic busy; the next refresh asks again
                node = None
            inventory = placement_get(
                f"{placement}/resource_providers/{self.watched}/inventories") or {}
            reserved = inventory.get("inventories", {}).get(rc, {}).get("reserved")
            watched = view.Watched(self.watched, None if node is None else
                                   bool(node["maintenance"]), reserved)
        return view.Snapshot(
            node_count=len(self.nodes), manage=self.manage, workdir=str(self.workdir),
            services=self.services, processes=processes, outsiders=outsiders,
            claimed=len(self.nodes) - len(unclaimed), unclaimed=len(unclaimed),
            waiting=waiting, rehome_grace=self.rehome_grace,
            applied=len(db_providers.provider_uuids(self.engine)),
            providers=None if listed is None or free is None else
            len(listed["resource_providers"]),
            free=None if free is None else len(free["resource_providers"]),
            instances=states, watched=watched, events=list(self.events),
            clock=time.strftime("%H:%M:%S"), api=self.api,
            glance=self.stack["glance"].url if "glance" in self.stack else None,
            image=None if self.image is None else self.image["id"],
            flavor=None if self.flavor is None else self.flavor["name"])

    @property
    def api(self) -> str | None:
        """The compute API's base URL (``computed-api`` in noauth2 mode)."""
        return next((c.url for c in self.children if c.kind is API), None)

    # --- down -------------------------------------------------------------------------------

    def down(self) -> None:
        """Stop everything this fleet started; a failing step does not skip the next ones."""
        steps = [("computed's processes", self._stop_children),
                 ("the ZooKeeper client", lambda: self.zk and self.zk.stop()),
                 ("the database engine", lambda: self.engine and self.engine.dispose()),
                 ("the services", lambda: self.stack and self.stack.down())]
        for what, step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - the next steps must run regardless
                self.say(f"tools/run-local: stopping {what} failed: {exc}")

    def _stop_children(self) -> None:
        for child in self.children:
            child.signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for child in self.children:
            if not child.wait(max(0.0, deadline - time.monotonic())):
                child.signal(signal.SIGKILL)
                child.wait(10)
