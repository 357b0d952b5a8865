"""The chaos engine shared by the short runs (``tests/chaos/test_chaos*.py``) and the soak
(``bench/chaos_soak.py``).

A run owns a private stack (ZooKeeper, a *private* RabbitMQ so that restarting it touches nobody
else, or the shared broker in a virtual host of its own for a run that never restarts it,
PostgreSQL when a server is available else sqlite, Placement, Ironic), a network of
namespaces (:mod:`tests.chaos.netns`: one per daemon, the controller behind a bridge), a reporter
(in the root namespace, a controller process), daemons, and three threads:

* the **workload**: instances created and deleted through :class:`ServerAPI`, nodes toggled in
  and out of maintenance, traits changed, nodes enrolled and removed (paused while the run waits
  for recovery after each fault, so that convergence is a fixed target);
* the **sampler**: lists Placement's providers every ``SAMPLE_INTERVAL``; a provider seen once
  and later missing while Ironic still has its node is a violation;
* the **injector** (the main thread): faults drawn by ``random.Random(seed)``, one at a time:
  inject, hold, heal, then measure the time from the heal to convergence (claims == the ownership
  rules for the live members with every sticky node's host live, and Placement == Ironic).

After the last fault the invariants are checked from evidence (:meth:`Chaos.check`).

Forgeries (:data:`FORGERIES`) are faults an attacker causes: reports published to the reporters
(wrong host, stale claim epoch, ``seq = 2**62``, oversize, garbage), instance casts with a member
epoch not the target's, znodes planted in the fleet's group. Each is checked on the spot (refused,
nothing done, nothing frozen, the planted entries reported and never on the ring); what went
wrong is one more invariant. With ``zk_credentials`` the fleet runs with ZooKeeper ACLs, the
planting is an insider's (the fleet's own credentials) and an anonymous client must be refused.

With ``ensemble=True`` ZooKeeper is an ensemble of 3 (:class:`computed.testing.zookeeper.Ensemble`,
every server forwarded to the controller address, the daemons' URL listing all three) and the
faults drawn include :data:`ENSEMBLE_KINDS` (leader killed, the follower with the most clients
cut from its peers, quorum lost by stopping 2 of 3) instead of restarting the whole of ZooKeeper.

With ``in_process=True`` the daemons and the reporter run in the test's process
(:mod:`tests.functional.inprocess`, in the root namespace, on the services' loopback addresses)
instead of as processes in namespaces: for a run whose faults are all :data:`IN_PROCESS_KINDS`,
which kill, freeze or cut none of them (:meth:`Chaos.run_faults` refuses any other kind then).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import threading
import time
import traceback
import urllib.request
import uuid as uuidlib
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from oslo_config import cfg
from prometheus_client.parser import text_string_to_metric_families
from tooz import utils as tooz_utils

from computed import conf as computed_conf
from computed import db
from computed.db import engine as db_engine
from computed.db import instances as db_instances
from computed.db import models
from computed.db import providers as db_providers
from computed.fleet.audit import fencing_violations
from computed.fleet.claims import ClaimRecord, read_claims
from computed.fleet.membership import fleet_root
from computed.instances import rpcapi, scheduler
from computed.instances.rpcapi import ComputeAPI, ServerAPI
from computed.providers.report import API_VERSION, Outcome
from computed.providers.state import normalise_resource_class, provider_from_node
from computed.runtime import keystone, rpc
from computed.testing import postgres
from computed.testing.ironic import Ironic, enroll_nodes, request
from computed.testing.placement import Placement
from computed.testing.postgres import PostgreSQL
from computed.testing.rabbitmq import RabbitMQ
from computed.testing.stack import Stack, together
from computed.testing.zookeeper import Ensemble, ZooKeeper
from computed_ironic.convert import LIST_FIELDS, node_from_api
from hashring.ownership import compute_ownership
from tests.chaos import netns
from tests.functional.daemons import (
    BIN,
    Daemon,
    Reporter,
    make_available,
    ownership_now,
    stop_all,
    wait_for,
)

IMAGE = "http://127.0.0.1/images/chaos.qcow2"  # never fetched: fake deploy
SAMPLE_INTERVAL = 2.0
# The promise is "manageable within rehome_grace + session timeout"; measured here from the last
# heal (a frozen or partitioned daemon must first notice and rejoin), on a loaded 2-core machine,
# node refreshes (1 s) and process wake-ups add to it. The report says whether the strict bound
# was met; the check fails past bound + this slack.
MANAGEABLE_SLACK = 10.0
PLACEMENT_VERSION = {"OpenStack-API-Version": "placement 1.39"}
KINDS = ("kill_daemon", "kill_reporter", "freeze_daemon", "partition_zookeeper",
         "partition_all", "restart_zookeeper", "restart_rabbitmq", "restart_placement",
         "restart_ironic", "add_daemon", "drain_daemon")
# An attacker on the bus or in ZooKeeper (issue 16 items 7, 8, 9): forged reports to the reporter,
# forged instance casts to a daemon, members planted in the group (see the _fault_* methods).
FORGERIES = ("forged_report", "forged_cast", "planted_member")
KINDS += FORGERIES
# Where the reporters listen (tests.functional.daemons.Process writes it into every config).
REPORTER_TOPIC = "reporter-{group}"
# The instance states forged casts are sent for: nothing in progress that could change them.
SETTLED = (models.ACTIVE, models.STOPPED, models.ERROR)
# Each daemon's metrics endpoint, on its own address in its own namespace.
METRICS_PORT = 9181
# The fleet's [fleet] resume_interval (the product's default is 60 s): how soon a daemon resumes
# an instance left in a transitional state with nothing working on it (a build the fence stopped
# while ZooKeeper was out of reach, a lost cast). The check "no build lost or stuck" waits a
# resume interval and 30 s for that, and runs after a fault on an ensemble lost quorum often
# waited most of the 60 s (18.6-19.1 s of checks at seed 12345, against 0.5 s for the rest).
# 10 s: resumes run six times as often under the faults, and a stuck build still fails the check.
RESUME_INTERVAL = 10.0
# The fleet and the checking client both run with it.
FLEET_EXTRA = f"[fleet]\nresume_interval = {RESUME_INTERVAL}\n"
# How long a forgery's effect (or its refusal) may take to show before it counts as missing.
FORGERY_WAIT = 20.0
# Faults of a run on a ZooKeeper ensemble (``Chaos(ensemble=True)``), drawn besides KINDS (less
# restart_zookeeper: all servers at once is what zk_lose_quorum does by halves).
ENSEMBLE_KINDS = ("zk_kill_leader", "zk_partition_follower", "zk_lose_quorum")
# Faults that kill, freeze, cut or signal neither a daemon nor the reporter, nor read a daemon's
# metrics endpoint (which lives on its namespace's address): a run that draws only these may run
# them in the test's process (``Chaos(in_process=True)``).
IN_PROCESS_KINDS = ENSEMBLE_KINDS + ("restart_rabbitmq", "restart_placement", "restart_ironic",
                                     "add_daemon")


def start_stack(workdir: Path, ensemble: bool = False, private_rabbitmq: bool = True) -> Stack:
    """ZooKeeper (one server, or an ensemble of 3), RabbitMQ (a private broker, which a fault may
    restart; else the shared one if it answers, in a virtual host of the run's own), PostgreSQL
    (if available), Placement, Ironic. In two waves, each wave's services started at once
    (:func:`computed.testing.stack.together`, as ``Stack.up`` does): ZooKeeper, RabbitMQ and
    PostgreSQL, then Placement (its database is PostgreSQL's) and Ironic (it notifies on the
    broker). Started one after the other they took 18.7-35.1 s at load 9-17, the broker's and
    Ironic's start (6-16 s and 10-11 s) most of it."""
    stack = Stack(Path(workdir))
    stack.workdir.mkdir(parents=True, exist_ok=True)

    def wave(services: dict) -> None:
        stack.services.update(services)
        try:
            together([service.start for service in services.values()])
        finally:
            stack.save()

    try:
        first = {"zookeeper": Ensemble(stack.workdir) if ensemble else ZooKeeper(stack.workdir),
                 "rabbitmq": RabbitMQ(stack.workdir,
                                      info={"private": True} if private_rabbitmq else None)}
        if postgres.available():
            first["postgres"] = PostgreSQL(stack.workdir)
        wave(first)
        wave({"placement": Placement(stack.workdir, info={
                  "database": stack["postgres"].create_database(
                      f"placement_{stack['postgres'].info['database']}")}
                  if "postgres" in stack else None),
              "ironic": Ironic(stack.workdir, transport_url=stack["rabbitmq"].url)})
    except BaseException:
        stack.down()
        raise
    return stack


@dataclass
class Fault:
    kind: str
    target: str
    injected: float          # seconds since the run started
    healed: float = 0.0
    recovery: float | None = None   # seconds from heal to convergence; None: never converged
    note: str = ""
    placement_only: bool = False    # never converged only because Placement != Ironic

    def line(self) -> str:
        rec = "NOT RECOVERED" if self.recovery is None else f"recovered in {self.recovery:.1f}s"
        return (f"  t={self.injected:6.1f}s  {self.kind:<20} {self.target:<10} "
                f"healed t={self.healed:6.1f}s  {rec}{'  ' + self.note if self.note else ''}")


@dataclass
class Results:
    seed: int
    faults: list[Fault] = field(default_factory=list)
    checks: dict[str, tuple[bool, str]] = field(default_factory=dict)
    workload: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.checks[name] = (ok, detail)

    @property
    def ok(self) -> bool:
        return all(ok for ok, _ in self.checks.values())

    def report(self) -> str:
        lines = [f"chaos run seed={self.seed}: {len(self.faults)} fault(s)"]
        lines += [f.line() for f in self.faults]
        lines.append("workload: " + ", ".join(f"{k}={v}" for k, v in sorted(self.workload.items())))
        lines.append("timings: " + ", ".join(f"{k}={v:.1f}s" for k, v in self.timings.items()))
        lines.append("invariants:")
        for name, (ok, detail) in self.checks.items():
            lines.append(f"  [{'PASS' if ok else 'FAIL'}] {name}" + (f": {detail}" if detail
                                                                     else ""))
        return "\n".join(lines)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


class NetDaemon(Daemon):
    """A daemon in its own namespace, talking to the controller address only."""

    def __init__(self, host_ns: netns.Host, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ns = host_ns
        self.conf.write_text(self.conf.read_text().replace("127.0.0.1", host_ns.network.controller)
                             + f"[metrics]\nbind_host = {host_ns.address}\nport = {METRICS_PORT}\n")
        self.metrics = f"http://{host_ns.address}:{METRICS_PORT}/metrics"

    def start(self) -> NetDaemon:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.ns.argv([str(BIN / self.script), "--config-file",
                                                       str(self.conf)]),
                                         stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        return self


class Chaos:
    def __init__(self, workdir: Path, seed: int, daemons: int = 3, nodes: int = 40,
                 session: int = 3, grace: float = 3.0, log=print, zk_credentials: str = "",
                 ensemble: bool = False, in_process: bool = False, private_rabbitmq: bool = True):
        """``zk_credentials`` ("user:password"): the fleet's ZooKeeper credentials (digest ACLs on
        every znode it creates); empty: ZooKeeper open to anyone, as without credentials.
        ``ensemble``: ZooKeeper as an ensemble of 3, with :data:`ENSEMBLE_KINDS` among the
        faults. ``in_process``: the daemons and the reporter run in the test's process, for a
        run of :data:`IN_PROCESS_KINDS` only. ``private_rabbitmq``: a broker of the run's own,
        which ``restart_rabbitmq`` restarts; false for a run that never restarts it (its faults
        named without that kind, or none): the shared broker then, if one answers, in a virtual
        host of the run's own (a private broker's start is 6-16 s of an Erlang VM booting)."""
        self.workdir = Path(workdir)
        self.seed = seed
        self.rng = random.Random(seed)
        self.workload_rng = random.Random(seed * 7919 + 1)
        self.n_daemons = daemons
        self.n_nodes = nodes
        self.session = session
        self.grace = grace
        self.log = log
        self.ensemble = ensemble
        self.in_process = in_process
        self.private_rabbitmq = private_rabbitmq
        self.kinds = [k for k in KINDS if k != "restart_zookeeper"] + list(ENSEMBLE_KINDS) \
            if ensemble else list(KINDS)
        self.results = Results(seed)
        # {provider uuid: (generation, reserved by class, traits)} as last read in full: a
        # provider whose generation the listing still shows is not read again (every change to
        # its inventories or traits bumps it), so a check costs one listing plus the providers
        # that changed (at 300 nodes, 3 GETs a node made a check take seconds, which then showed
        # as recovery time).
        self._provider_reads: dict[str, tuple[int, dict, tuple]] = {}
        self.t0 = time.monotonic()
        self.stack: Stack | None = None
        self.network: netns.Network | None = None
        self.daemons: dict[str, Daemon] = {}         # every daemon ever started, by host
        self.live: set[str] = set()                  # hosts that should be members
        self.retired: set[str] = set()
        self.reporter: Reporter | None = None
        self.token = uuidlib.uuid4().hex[:6]
        self.group = f"chaos{self.token}"
        self.resource_class = f"chaos-{self.token}"
        self.rc = normalise_resource_class(self.resource_class)
        self.removed_nodes: set[str] = set()
        self.created: list[str] = []
        self.provider_violations: list[str] = []
        self.known_stuck: set[str] = set()
        self._seen_providers: set[str] = set()
        self._stop = threading.Event()
        self._pause = threading.Event()
        self._paused = threading.Event()
        self._threads: list[threading.Thread] = []
        self._next_host = 0
        self._lock = threading.Lock()
        self.zk_credentials = zk_credentials
        self.daemon_extra: dict[str, str] = {}       # more config for one daemon, by host
        # Forgeries: what the workload leaves alone while one runs, and what went wrong.
        self.protected: set[str] = set()             # node and instance uuids
        self.forgery_violations: list[str] = []
        self.forgeries: dict[str, int] = {}          # messages sent, by what they forged

    # --- setup and teardown ----------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic() - self.t0

    def say(self, text: str) -> None:
        self.log(f"[{self.now():7.1f}s] {text}")

    def setup(self) -> None:
        self.setup_services()
        self.setup_fleet()

    def setup_services(self) -> None:
        """The stack, the network, the database, this run's nodes and its own clients."""
        reason = netns.available()
        if reason:
            raise netns.NetnsUnavailable(reason)
        removed = netns.cleanup_stale()
        if removed:
            self.say(f"removed leftovers of a previous run: {', '.join(removed)}")
        started = time.monotonic()
        self.stack = start_stack(self.workdir / "stack", ensemble=self.ensemble,
                                 private_rabbitmq=self.private_rabbitmq)
        self.results.timings["stack_up"] = time.monotonic() - started
        ports = {name: self.stack[name].info["port"] for name in
                 ("zookeeper", "rabbitmq", "placement", "ironic", "postgres")
                 if name in self.stack and not (name == "zookeeper" and self.ensemble)}
        if self.ensemble:  # every server forwarded; "zookeeper*" ports are what cuts cut
            ports.update({f"zookeeper{s['id']}": s["port"]
                          for s in self.stack["zookeeper"].info["servers"]})
        self.network = netns.Network(self.workdir)
        self.network.setup(ports)
        if "postgres" in self.stack:
            self.database = self.stack["postgres"].create_database(f"chaos_{self.token}")
            db.sync(self.database)
        else:
            self.database = f"sqlite:///{self.workdir / 'computed.sqlite'}"
            db.sync(self.database)
        self.engine = db_engine.engine_from_url(self.database)
        conf_path = self.workdir / "client.conf"
        conf_path.write_text(self.stack.computed_conf(
            host="chaos-client", database=self.database,
            extra=FLEET_EXTRA))
        self.conf = cfg.ConfigOpts()
        computed_conf.register_opts(self.conf)
        self.conf(["--config-file", str(conf_path)], project="computed")
        self.placement = keystone.load_adapter(self.conf, "placement")
        self.zk = KazooClient(hosts=self.stack["zookeeper"].hosts, timeout=10,
                              auth_data=[("digest", self.zk_credentials)]
                              if self.zk_credentials else None)
        self.zk.start(timeout=30)
        self.transport = rpc.get_transport(self.conf, "test", url=self.stack["rabbitmq"].url)
        self.api = ServerAPI(self.engine, self.placement, ComputeAPI(self.transport),
                             scheduler.zookeeper_owner(self.zk, fleet_root(self.group)))
        started = time.monotonic()
        self.nodes = self._enroll_run_nodes()
        for node in self.nodes[:3]:
            self._ironic("PUT", f"/nodes/{node}/traits", {"traits": ["CUSTOM_CHAOS"]})
        self.results.timings["setup"] = time.monotonic() - started

    def _enroll_run_nodes(self) -> list[str]:
        """The run's ``n_nodes`` nodes, named ``chaos-TOKEN-00000`` on: the first three quarters
        available and powered off (schedulable), the rest enrolled. One of each kind is made
        through the API (the available one taken through manage, provide and power off), the
        others are copies of its row in Ironic's database (:meth:`Ironic.copy_node`): every
        node as Ironic itself wrote it, where taking 30 nodes through their states one request
        and poll at a time took 10-33 s at load 9-17. The copies are made before any daemon
        runs: no notification is missed, the daemons' first listings find them."""
        ironic = self.stack["ironic"]
        available = self.n_nodes * 3 // 4
        nodes: list[str] = []
        for first, last, schedulable in ((0, available, True),
                                         (available, self.n_nodes, False)):
            if first == last:
                continue
            names = [f"chaos-{self.token}-{index:05d}" for index in range(first, last)]
            template = enroll_nodes(self.ironic_url, 1, resource_class=self.resource_class,
                                    workers=1, name=names[0])[0]
            if schedulable:
                make_available(self.stack, [template])
                # The power-off's task may still hold the node's lock: a copy made then would
                # be locked by a conductor for good.
                wait_for(lambda node=template: self._ironic(
                    "GET", f"/nodes/{node}?fields=reservation")["reservation"] is None,
                    30, f"node {template} unlocked")
            nodes += [template, *ironic.copy_node(template, names[1:])]
        return nodes

    @property
    def zookeeper_url(self) -> str:
        """The fleet's backend URL (with its credentials, if any)."""
        url = self.stack["zookeeper"].url
        if self.zk_credentials:
            url = url.replace("zookeeper://", f"zookeeper://{self.zk_credentials}@")
        return url

    def setup_fleet(self) -> None:
        """The reporter and the daemons, up to the first convergence."""
        started = time.monotonic()
        self.reporter = Reporter(self.stack, self.workdir, "rep1", group=self.group,
                                 database=self.database, zookeeper_url=self.zookeeper_url,
                                 process=not self.in_process).start()
        for _ in range(self.n_daemons):
            self._start_daemon(self._new_host())
        self.say(f"seed {self.seed}: {len(self.nodes)} nodes, daemons {sorted(self.live)}, "
                 f"session {self.session}s, rehome_grace {self.grace}s, group {self.group}"
                 + (", ZooKeeper ensemble of 3" if self.ensemble else ""))
        took = self.wait_converged(180, placement_too=True)
        if took is None:
            raise AssertionError("the fleet never converged before any fault\n" + self.tails())
        self.results.timings["setup"] += time.monotonic() - started

    @property
    def ironic_url(self) -> str:
        return self.stack["ironic"].url

    def _ironic(self, method: str, path: str, body=None):
        return request(method, f"{self.ironic_url}/v1{path}", body, timeout=10, attempts=3)

    def ironic(self, method: str, path: str, body=None):
        """One request to this run's Ironic (``path`` under /v1), for tests."""
        return self._ironic(method, path, body)

    def _new_host(self) -> str:
        self._next_host += 1
        return f"c{self._next_host}"

    def _start_daemon(self, host: str) -> Daemon:
        daemon = self.daemons.get(host)
        if daemon is None:
            kw = dict(session_timeout=self.session, group=self.group, database=self.database,
                      rehome_grace=self.grace, drain_timeout=15,
                      zookeeper_url=self.zookeeper_url,
                      extra=FLEET_EXTRA + self.daemon_extra.get(host, ""))
            daemon = Daemon(self.stack, self.workdir, host, process=False, **kw) \
                if self.in_process else \
                NetDaemon(self.network.host(host), self.stack, self.workdir, host, **kw)
            self.daemons[host] = daemon
        daemon.start()
        self.live.add(host)
        return daemon

    def close(self) -> None:
        started = time.monotonic()
        try:
            self._close()
        finally:
            self.say(f"closed in {time.monotonic() - started:.1f}s (daemons, network, stack)")

    def _close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        procs = [p for p in [*self.daemons.values(), self.reporter] if p is not None]
        for proc in procs:
            if proc.proc is not None:
                with contextlib.suppress(OSError):  # already gone
                    proc.proc.send_signal(signal.SIGCONT)
        try:
            # Processes killed, in-process services stopped together; fails naming what one
            # of those left running, once the rest is cleaned.
            stop_all(procs)
        finally:
            self._close_clients_and_stack()

    def _close_clients_and_stack(self) -> None:
        for closer in (lambda: self.transport.cleanup(), lambda: self.zk.stop(),
                       lambda: self.zk.close(), lambda: self.engine.dispose()):
            with contextlib.suppress(Exception):  # best effort: the rest must still be cleaned
                closer()
        if self.network is not None:
            self.network.close()
        if self.stack is not None:
            self.stack.down()  # every service at once

    def tails(self) -> str:
        procs = [*self.daemons.values()] + ([self.reporter] if self.reporter else [])
        return "\n".join(f"--- {p.host}\n" + p.log.read_text(errors="replace")[-2500:]
                         for p in procs if p.log.exists())

    # --- state as the services have it ----------------------------------------------------

    def ironic_nodes(self) -> dict[str, dict]:
        """Every node of this run's resource class, from a fresh listing (detailed fields)."""
        out: dict[str, dict] = {}
        marker = ""
        while True:
            query = f"fields={','.join(LIST_FIELDS)}&limit=1000" + (
                f"&marker={marker}" if marker else "")
            page = self._ironic("GET", f"/nodes?{query}")["nodes"]
            out.update({n["uuid"]: n for n in page})
            if len(page) < 1000:
                return out
            marker = page[-1]["uuid"]

    def expected_claims(self, ironic: dict[str, dict]) -> tuple[list, dict, dict]:
        members, claims = ownership_now(self.zk, self.group)
        nodes = set(ironic) | db_providers.provider_uuids(self.engine)
        ownership = compute_ownership([m.as_ring_member() for m in members], nodes,
                                      db_instances.instance_hosts(self.engine))
        return members, claims, ownership

    def claims_converged(self) -> str | None:
        """None when converged, else why not."""
        try:
            ironic = self.ironic_nodes()
            members, claims, ownership = self.expected_claims(ironic)
        except Exception as exc:  # noqa: BLE001 - a service is still coming back
            return f"cannot read state: {exc!r}"[:200]
        names = {m.name for m in members}
        if names != self.live:
            return f"members {sorted(names)} want {sorted(self.live)}"
        if ownership.orphans:
            return f"{len(ownership.orphans)} orphaned instance node(s)"
        want = ownership.owners()
        if claims != want:
            wrong = [n for n in set(want) | set(claims) if want.get(n) != claims.get(n)]
            return f"{len(wrong)} claim(s) differ from the rules"
        return None

    def placement_state(self, uuid: str) -> tuple | None:
        """``(name, {resource class: reserved}, traits)`` of a provider, read in full."""
        rp = self.placement.get(f"/resource_providers/{uuid}", headers=PLACEMENT_VERSION,
                                raise_exc=False)
        if rp.status_code == 404:
            return None
        rp.raise_for_status()
        contents = self.provider_contents(uuid)
        return None if contents is None else (rp.json()["name"], contents[1], contents[2])

    def provider_contents(self, uuid: str) -> tuple[int | None, dict, tuple] | None:
        """``(generation, {resource class: reserved}, traits)`` of a provider, None when it is
        gone. The generation is None when the two answers came from different generations (a
        write fell between them): they are then not one state to remember."""
        base = f"/resource_providers/{uuid}"
        inv = self.placement.get(base + "/inventories", headers=PLACEMENT_VERSION,
                                 raise_exc=False)
        traits = self.placement.get(base + "/traits", headers=PLACEMENT_VERSION,
                                    raise_exc=False)
        if inv.status_code == 404 or traits.status_code == 404:
            return None
        inv.raise_for_status()
        traits.raise_for_status()
        generation = inv.json()["resource_provider_generation"]
        if generation != traits.json()["resource_provider_generation"]:
            generation = None
        return (generation,
                {rc: i["reserved"] for rc, i in inv.json()["inventories"].items()},
                tuple(sorted(traits.json()["traits"])))

    def provider_listing(self) -> dict[str, tuple[str, int]]:
        """``{uuid: (name, generation)}`` of every provider, in one request."""
        resp = self.placement.get("/resource_providers", headers=PLACEMENT_VERSION,
                                  raise_exc=False)
        resp.raise_for_status()
        return {rp["uuid"]: (rp["name"], rp["generation"])
                for rp in resp.json()["resource_providers"]}

    def listed_state(self, uuid: str, listing: dict[str, tuple[str, int]]) -> tuple | None:
        """:meth:`placement_state` of a provider in ``listing``, read again only when its
        generation changed since the last read."""
        if uuid not in listing:
            return None
        name, generation = listing[uuid]
        known = self._provider_reads.get(uuid)
        if known is not None and known[0] == generation:
            return (name, known[1], known[2])
        contents = self.provider_contents(uuid)
        if contents is None:
            return None
        generation, reserved, names = contents
        # The listing's generation is not needed to match: a change since the listing is read
        # now, and the next check lists it again.
        if generation is not None:
            self._provider_reads[uuid] = (generation, reserved, names)
        return (name, reserved, names)

    def placement_mismatches(self, ironic: dict[str, dict] | None = None) -> list[str]:
        """Nodes whose provider differs from what provider_from_node says; providers left for
        nodes Ironic no longer has (and no allocation keeps)."""
        ironic = self.ironic_nodes() if ironic is None else ironic
        listing = self.provider_listing()
        for deleted in set(self._provider_reads) - set(listing):
            del self._provider_reads[deleted]  # a provider made again starts its generations anew
        wrong = []
        for uuid, record in ironic.items():
            want = provider_from_node(node_from_api(record))
            got = self.listed_state(uuid, listing)
            expected = None if want is None else (want.name, {want.resource_class: want.reserved},
                                                  want.traits)
            if got != expected:
                wrong.append(f"{uuid}: placement {got} != ironic {expected}")
        for uuid in set(listing) - set(ironic):
            if not self.allocations_of(uuid):
                wrong.append(f"{uuid}: provider of a node Ironic no longer has, no allocation")
        return wrong

    def all_providers(self) -> set[str]:
        return set(self.provider_listing())

    def allocations_of(self, provider: str) -> dict:
        resp = self.placement.get(f"/resource_providers/{provider}/allocations",
                                  headers=PLACEMENT_VERSION, raise_exc=False)
        resp.raise_for_status()
        return resp.json()["allocations"]

    def wait_converged(self, timeout: float, placement_too: bool = True,
                       placement_timeout: float = 60.0) -> float | None:
        """Seconds until the claims converge and then (``placement_too``) Placement matches
        Ironic; None after ``timeout`` for the claims or ``placement_timeout`` more for
        Placement (``self.last_mismatch`` then says what differed)."""
        started = time.monotonic()
        why: str | None = ""
        self.last_mismatch = ""
        while time.monotonic() - started < timeout:
            why = self.claims_converged()
            if why is None:
                break
            time.sleep(0.5)
        if why is not None:
            self.say(f"claims not converged after {timeout:.0f}s: {why}")
            return None
        if not placement_too:
            return time.monotonic() - started
        deadline = time.monotonic() + placement_timeout
        while True:
            try:
                wrong = self.placement_mismatches()
            except Exception as exc:  # noqa: BLE001 - a service is still coming back
                wrong = [repr(exc)[:200]]
            # A provider already found stuck (see known_stuck) is left to the final check, so
            # that one stuck provider does not make every later fault wait in vain.
            wrong = [w for w in wrong if w.split(":")[0] not in self.known_stuck]
            if not wrong:
                return time.monotonic() - started
            if time.monotonic() > deadline:
                self.known_stuck |= {w.split(":")[0] for w in wrong}
                self.last_mismatch = f"{len(wrong)} provider(s) differ: {wrong[0]}"
                self.say(f"Placement != Ironic {placement_timeout:.0f}s after the claims "
                         f"converged: {self.last_mismatch}")
                return None
            time.sleep(1.0)

    # --- workload and sampler ---------------------------------------------------------------

    def start_threads(self) -> None:
        for target in (self._workload, self._sampler):
            thread = threading.Thread(target=self._guard(target), name=target.__name__,
                                      daemon=True)
            thread.start()
            self._threads.append(thread)

    def _guard(self, target):
        def run():
            try:
                target()
            except Exception:  # noqa: BLE001
                self.say(f"thread {target.__name__} died:\n{traceback.format_exc()}")
        return run

    def _count(self, what: str) -> None:
        with self._lock:
            self.results.workload[what] = self.results.workload.get(what, 0) + 1

    def _workload(self) -> None:
        rng = self.workload_rng
        ops = [("create", 4), ("delete", 3), ("maintenance", 3), ("traits", 1), ("enroll", 1),
               ("remove", 1)]
        names = [name for name, _ in ops]
        weights = [w for _, w in ops]
        while not self._stop.is_set():
            if self._pause.is_set():
                self._paused.set()
                time.sleep(0.2)
                continue
            self._paused.clear()
            op = rng.choices(names, weights)[0]
            try:
                getattr(self, f"_op_{op}")(rng)
                self._count(op)
            except Exception as exc:  # noqa: BLE001 - services come and go: count, go on
                self._count(f"{op}_failed:{type(exc).__name__}")
            self._stop.wait(rng.uniform(0.3, 1.2))
        self._paused.set()

    def pause_workload(self) -> None:
        self._pause.set()
        self._paused.wait(30)

    def resume_workload(self) -> None:
        self._pause.clear()

    def _op_create(self, rng) -> None:
        traits = ["CUSTOM_CHAOS"] if rng.random() < 0.1 else []
        uuid = str(uuidlib.UUID(int=rng.getrandbits(128), version=4))
        with self._lock:
            self.created.append(uuid)
        try:
            self.api.create(self.resource_class, traits=traits, image=IMAGE, instance_uuid=uuid)
        except Exception:
            # Scheduling failed before the row was written (no host, Placement down): no
            # instance to account for. A row written before the failure (the cast failed:
            # RabbitMQ down) stays accounted for: the owner must resume its build.
            try:
                exists = db_instances.get_instance(self.engine, uuid) is not None
            except Exception:  # noqa: BLE001 - keep it: the final check looks again
                exists = True
            if not exists:
                with self._lock:
                    self.created.remove(uuid)
            raise

    def _op_delete(self, rng) -> None:
        rows = [r for r in db_instances.live_instances(self.engine)
                if r.state in (models.ACTIVE, models.ERROR, models.STOPPED)
                and r.uuid not in self.protected]
        if not rows:
            return
        self.api.action("delete", rng.choice(rows).uuid)  # NoHost (an orphan): counted

    def _free_nodes(self) -> list[str]:
        hosting = set(db_instances.instance_hosts(self.engine))
        return [n for n in self.nodes if n not in self.removed_nodes and n not in hosting
                and n not in self.protected]

    def _op_maintenance(self, rng) -> None:
        node = rng.choice([n for n in self.nodes if n not in self.removed_nodes])
        if node in self.protected:
            return
        if rng.random() < 0.5:
            self._ironic("PUT", f"/nodes/{node}/maintenance", {"reason": "chaos"})
        else:
            self._ironic("DELETE", f"/nodes/{node}/maintenance")

    def _op_traits(self, rng) -> None:
        node = rng.choice([n for n in self.nodes if n not in self.removed_nodes])
        if node in self.protected:
            return
        traits = rng.sample(["CUSTOM_CHAOS", "CUSTOM_FAST", "HW_CPU_X86_AVX2"], rng.randint(0, 2))
        self._ironic("PUT", f"/nodes/{node}/traits", {"traits": traits})

    def _op_enroll(self, rng) -> None:
        if len(self.nodes) - len(self.removed_nodes) >= self.n_nodes + 10:
            return
        new = enroll_nodes(self.ironic_url, 1, resource_class=self.resource_class,
                           prefix=f"chaos-{self.token}-{rng.getrandbits(24):06x}", workers=1)
        with self._lock:
            self.nodes += new

    def _op_remove(self, rng) -> None:
        free = self._free_nodes()
        if len(self.nodes) - len(self.removed_nodes) <= self.n_nodes - 10 or not free:
            return
        node = rng.choice(free)
        record = self._ironic("GET", f"/nodes/{node}")
        if record.get("instance_uuid") or record["provision_state"] not in (
                "enroll", "manageable", "available"):
            return
        with self._lock:
            self.removed_nodes.add(node)  # before: the provider may vanish at once
        try:
            self._ironic("DELETE", f"/nodes/{node}")
        except Exception:
            with self._lock:
                self.removed_nodes.discard(node)
            raise

    def _sampler(self) -> None:
        """Remember every provider seen; one that disappears while its node exists in Ironic
        (checked right then, again if Ironic cannot answer) is a violation."""
        suspects: dict[str, float] = {}
        while not self._stop.is_set():
            try:
                now = self.all_providers()
            except Exception:  # noqa: BLE001 - Placement restarting
                self._stop.wait(SAMPLE_INTERVAL)
                continue
            with self._lock:
                missing = self._seen_providers - now
                self._seen_providers |= now
            for uuid in missing:
                suspects.setdefault(uuid, self.now())
            for uuid in list(suspects):
                if uuid in now:  # it came back: still a gap in the record
                    pass
                try:
                    resp = self._ironic("GET", f"/nodes/{uuid}?fields=uuid")
                except Exception as exc:  # noqa: BLE001
                    if "404" in str(exc):
                        suspects.pop(uuid)
                        with self._lock:
                            self._seen_providers.discard(uuid)
                    continue  # Ironic down: ask again next time
                if resp.get("uuid") == uuid:
                    self.provider_violations.append(
                        f"provider {uuid} missing from Placement at t={suspects[uuid]:.1f}s "
                        f"while Ironic still has the node")
                    self.say(f"VIOLATION: provider {uuid} deleted while its node exists")
                suspects.pop(uuid)
                with self._lock:
                    self._seen_providers.discard(uuid)
            self._stop.wait(SAMPLE_INTERVAL)

    # --- faults -----------------------------------------------------------------------------

    def live_daemons(self) -> list[str]:
        return sorted(self.live)

    def pick_fault(self) -> str:
        kinds = list(self.kinds)
        if len(self.live) <= 2:
            kinds = [k for k in kinds if k != "drain_daemon"]
        if len(self.live) >= self.n_daemons + 1:
            kinds = [k for k in kinds if k != "add_daemon"]
        return self.rng.choice(kinds)

    def inject(self, kind: str) -> Fault:
        rng = self.rng
        hold = self.session + rng.uniform(1.0, 3.0)
        target = rng.choice(self.live_daemons()) if kind.endswith("daemon") and \
            kind != "add_daemon" or kind.startswith("partition") else ""
        fault = Fault(kind, target or kind.split("_", 1)[1], self.now())
        self.say(f"FAULT {kind} {fault.target} (hold {hold:.1f}s)")
        if kind == "kill_daemon":
            self.daemons[target].kill()
            self.live.discard(target)
            time.sleep(hold)
            self._start_daemon(target)
        elif kind == "kill_reporter":
            self.reporter.kill()
            time.sleep(hold)
            self.reporter.start()
        elif kind == "freeze_daemon":
            self.daemons[target].signal(signal.SIGSTOP)
            time.sleep(hold)
            self.daemons[target].signal(signal.SIGCONT)
        elif kind in ("partition_zookeeper", "partition_all"):
            host = self.network.hosts[target]
            host.cut_zookeeper() if kind == "partition_zookeeper" else host.link_down()
            time.sleep(hold)
            host.heal()
        elif kind.startswith("restart_"):
            service = self.stack[kind.split("_", 1)[1]]
            service.stop()
            time.sleep(rng.uniform(0.5, 2.0))
            service.start()
            self.stack.save()
        elif kind == "add_daemon":
            fault.target = self._new_host()
            self._start_daemon(fault.target)
        elif kind in ENSEMBLE_KINDS:
            self._ensemble_fault(kind, fault, hold)
        elif kind == "drain_daemon":
            self.manage("fleet", "drain", target)
            fault.note = "drained, then stopped (SIGTERM) and retired"
            time.sleep(hold)
            self.daemons[target].stop(60)
            self.live.discard(target)
            self.retired.add(target)
            self.manage("fleet", "undrain", target)
        elif kind in FORGERIES:
            fault.note = getattr(self, f"_fault_{kind}")(hold)
        fault.healed = self.now()
        return fault

    def _ensemble_fault(self, kind: str, fault: Fault, hold: float) -> None:
        """One of ENSEMBLE_KINDS: a server of the ensemble killed, cut from its peers, or two of
        three stopped; healed after ``hold`` (the server back, the cut undone)."""
        ensemble = self.stack["zookeeper"]
        if kind == "zk_kill_leader":
            leader = ensemble.leader()
            if leader is None:
                fault.note = "no leader to kill"
                return
            fault.target = f"zookeeper-{leader + 1} (leader)"
            ensemble.kill(leader)
            time.sleep(hold)
            ensemble.start_server(leader)
        elif kind == "zk_partition_follower":
            followers = ensemble.followers()
            if not followers:
                fault.note = "no follower to cut"
                return
            # The follower serving the most clients: the daemons on it must move.
            cut = max(followers, key=ensemble.connections)
            fault.target = f"zookeeper-{cut + 1} ({ensemble.connections(cut)} clients)"
            ensemble.partition(cut)
            time.sleep(hold)
            ensemble.heal()
        elif kind == "zk_lose_quorum":
            leader = ensemble.leader()
            down = [i for i in ensemble.followers()[:1]] + ([leader] if leader is not None else [])
            fault.target = "zookeeper-" + "+".join(str(i + 1) for i in down)
            for index in down:
                ensemble.stop_server(index)
            time.sleep(hold)
            for index in down:
                ensemble.start_server(index)
        self.stack.save()

    def manage(self, *args: str) -> str:
        """Run computed-manage with the reporter's configuration; its output. In this process
        (:func:`tests.cli.run`: the console script's main, as a shell would run it, its output
        captured), from the injector's thread (the main one): a subprocess spent 1-3 s
        importing, 4.9-6.6 s at load 16-20, twice per drain_daemon and once per
        planted_member."""
        from tests import cli
        result = cli.run("computed-manage", "--config-file", self.reporter.conf, *args,
                         home=self.workdir)
        if result.returncode != 0:
            raise AssertionError(f"computed-manage {' '.join(args)}: {result.stderr}")
        return result.stdout

    # --- forgeries: an attacker on the bus or in ZooKeeper, under the running workload --------
    #
    # Each sends what an attacker would, checks right away that nothing of it was taken (a
    # violation is kept in self.forgery_violations, which check() reports), and leaves nothing
    # behind: the fleet must then converge as after any fault.

    def _forgery_failed(self, text: str) -> None:
        self.forgery_violations.append(f"t={self.now():.1f}s {text}")
        self.say(f"VIOLATION: {text}")

    def _forged(self, what: str, count: int = 1) -> None:
        with self._lock:
            self.forgeries[what] = self.forgeries.get(what, 0) + count

    def _protect(self, uuids: set[str]) -> None:
        with self._lock:
            self.protected |= uuids

    def _unprotect(self) -> None:
        with self._lock:
            self.protected = set()

    def _fault_forged_report(self, hold: float) -> str:
        """Reports an attacker publishes to the reporters: from the wrong host, with a stale or
        future claim epoch, ``seq = 2**62``, over every size limit, of garbage types. None may
        be applied (each answered fenced, invalid or, past the batch limit, failed), the
        reporter logs no traceback, and a real change of each node afterwards still reaches
        Placement (no provider frozen)."""
        ironic = self.ironic_nodes()
        records = read_claims(self.zk, fleet_root(self.group))
        candidates = sorted(n for n, r in records.items() if n in ironic and r.host in self.live
                            and n not in self.removed_nodes)
        if not candidates:
            return "no claimed node to forge reports for"
        picks = self.rng.sample(candidates, min(2, len(candidates)))
        self._protect(set(picks))
        try:
            states = {}
            for node in picks:
                want = provider_from_node(node_from_api(ironic[node]))
                states[node] = want.to_dict() if want is not None else {
                    "uuid": node, "name": node, "resource_class": self.rc, "reserved": 0,
                    "traits": []}
            messages = forged_report_calls({n: records[n] for n in picks}, states,
                                           sorted(self.live), int(time.time() * 1000),
                                           self.conf.reporter.max_reports_per_call)
            log_from = self.reporter.log.stat().st_size if self.reporter.log.exists() else 0
            client = rpc.get_client(self.transport, REPORTER_TOPIC.format(group=self.group),
                                    version=API_VERSION).prepare(timeout=60)
            for what, arguments in messages:
                self._forged(what)
                try:
                    answers = client.call({}, "apply_reports", **arguments)
                except Exception as exc:  # noqa: BLE001 - an error is a finding, not a crash
                    self._forgery_failed(f"forged report ({what}): the call failed: "
                                         f"{exc!r}"[:300])
                    continue
                taken = [a for a in answers or () if not (isinstance(a, list) and len(a) == 3
                                                           and a[2] in REFUSED)]
                if taken:
                    self._forgery_failed(f"forged report ({what}) not refused: {taken[:2]}")
            new_log = self.reporter.log.read_bytes()[log_from:].decode(errors="replace")
            if "Traceback" in new_log:
                self._forgery_failed("the reporter logged a traceback for a forged report: "
                                     + new_log[new_log.index("Traceback"):][:300])
            # A real change afterwards must still reach Placement.
            for node in picks:
                traits = [] if "CUSTOM_CHAOS" in ironic[node].get("traits", []) \
                    else ["CUSTOM_CHAOS"]
                self._ironic("PUT", f"/nodes/{node}/traits", {"traits": traits})
            frozen = self._wait_placement_matches(picks, FORGERY_WAIT + hold)
            for node, why in frozen.items():
                self._forgery_failed(f"provider {node} frozen after forged reports: a real "
                                     f"change never reached Placement ({why})")
        finally:
            self._unprotect()
        return f"{len(messages)} forged calls on {len(picks)} node(s), none applied" \
            if not self.forgery_violations else "see the forgery violations"

    def _wait_placement_matches(self, nodes: list[str], timeout: float) -> dict[str, str]:
        """Wait until the providers of ``nodes`` are what Ironic says; {node: how not} left."""
        deadline = time.monotonic() + timeout
        while True:
            left = {}
            for node in nodes:
                try:
                    want = provider_from_node(node_from_api(self._ironic("GET",
                                                                         f"/nodes/{node}")))
                    got = self.placement_state(node)
                except Exception as exc:  # noqa: BLE001 - ask again
                    left[node] = repr(exc)[:120]
                    continue
                expected = None if want is None else (
                    want.name, {want.resource_class: want.reserved}, want.traits)
                if got != expected:
                    left[node] = f"placement {got} != ironic {expected}"
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.5)

    def _fault_forged_cast(self, hold: float) -> str:
        """Instance casts (delete, stop, reboot) to a settled instance's daemon (ACTIVE, STOPPED
        or ERROR) carrying a member epoch that is not the daemon's (an old one, a future one,
        garbage): each refused in one line of that daemon's log, and nothing done to the
        instance nor its node."""
        members = {m.name: m.member_epoch for m in ownership_now(self.zk, self.group)[0]}
        rows = [r for r in db_instances.live_instances(self.engine)
                if r.state in SETTLED and r.host in members and r.node_uuid]
        if not rows:
            return "no settled instance on a live member to forge casts for"
        picks = self.rng.sample(rows, min(2, len(rows)))
        self._protect({r.uuid for r in picks} | {r.node_uuid for r in picks})
        try:
            picks = [r for r in (db_instances.get_instance(self.engine, p.uuid) for p in picks)
                     if r is not None and r.state in SETTLED]  # as protected
            before = {r.uuid: self._ironic("GET", f"/nodes/{r.node_uuid}") for r in picks}
            expected: dict[str, list[str]] = {}
            for row in picks:
                current = members[row.host]
                client = rpc.get_client(self.transport, rpcapi.TOPIC, server=row.host,
                                        version=rpcapi.VERSION)
                for method, epoch in (("delete_instance", current - 1),
                                      ("stop_instance", current + 1_000_000),
                                      ("reboot_instance", 1)):
                    client.cast({}, method, instance_uuid=row.uuid, member_epoch=epoch)
                    expected.setdefault(row.host, []).append(
                        f"refusing {method} of instance {row.uuid}: sent for member epoch "
                        f"{epoch}")
                for garbage in ("0", True, [current]):
                    client.cast({}, "delete_instance", instance_uuid=row.uuid,
                                member_epoch=garbage)
                    expected[row.host].append(f"dropping delete_instance of instance {row.uuid}: "
                                              f"member epoch")
                self._forged("instance casts", 6)
            deadline = time.monotonic() + FORGERY_WAIT
            missing = expected
            while missing and time.monotonic() < deadline:
                time.sleep(0.5)
                missing = {host: [line for line in lines if line not in self.daemons[host].log
                                  .read_text(errors="replace")]
                           for host, lines in expected.items()}
                missing = {host: lines for host, lines in missing.items() if lines}
            for host, lines in missing.items():
                self._forgery_failed(f"{host} did not refuse {len(lines)} forged cast(s) in its "
                                     f"log: {lines[0]}")
            time.sleep(hold)  # time for anything wrongly queued to show
            for row in picks:
                now = db_instances.get_instance(self.engine, row.uuid)
                node = self._ironic("GET", f"/nodes/{row.node_uuid}")
                was = before[row.uuid]
                changed = [key for key in ("provision_state", "power_state", "instance_uuid")
                           if node.get(key) != was.get(key)]
                if now is None or now.state != row.state or now.host != row.host or changed:
                    self._forgery_failed(
                        f"forged casts acted on instance {row.uuid}: state "
                        f"{None if now is None else now.state} on "
                        f"{None if now is None else now.host}, node {row.node_uuid} changed "
                        f"{changed}")
        finally:
            self._unprotect()
        return f"6 forged casts to each of {len(picks)} instance(s)"

    def _fault_planted_member(self, hold: float) -> str:
        """A persistent znode planted in the group (capabilities a daemon would write, a big
        weight) and a live (ephemeral) one with garbage data: neither is on the ring (no claim
        names them, claims == rules for the live members), ``fleet status`` and every daemon's
        gauge computed_fleet_group_entries_ignored report them; then they are removed and the
        gauge goes back to 0. With credentials, they are planted as the fleet (an insider), and
        an anonymous client must be refused."""
        group_path = f"/tooz/{self.group}"
        planted = {f"planted-{self.token}": (tooz_utils.dumps(
                       {"host": f"planted-{self.token}", "weight": 1000}), False),
                   f"garbage-{self.token}": (b"\x93\xffnot capabilities\x00", True)}
        notes = []
        if self.zk_credentials:
            notes.append(self._anonymous_refused(group_path))
        for name, (data, ephemeral) in planted.items():
            self.zk.create(f"{group_path}/{name}", data, ephemeral=ephemeral)
        self._forged("planted members", len(planted))
        try:
            deadline = time.monotonic() + max(hold, 3.0)
            while time.monotonic() < deadline:
                claims = read_claims(self.zk, fleet_root(self.group))
                taken = sorted({r.host for r in claims.values()} & set(planted))
                if taken:
                    self._forgery_failed(f"planted member(s) {taken} hold claims")
                    break
                time.sleep(0.5)
            status = json.loads(self.manage("fleet", "status", "--json"))
            listed = {entry["name"] for entry in status["ignored"]}
            members = {m["host"] for m in status["members"]}
            if not set(planted) <= listed or members & set(planted):
                self._forgery_failed(f"fleet status: ignored {sorted(listed)}, members "
                                     f"{sorted(members)}; planted {sorted(planted)}")
            self._check_ignored_gauge(len(planted))
        finally:
            for name in planted:
                with contextlib.suppress(Exception):  # gone already: fine
                    self.zk.delete(f"{group_path}/{name}")
        self._check_ignored_gauge(0)
        return " ".join([f"planted {', '.join(sorted(planted))}", *notes])

    def _anonymous_refused(self, group_path: str) -> str:
        anonymous = KazooClient(hosts=self.stack["zookeeper"].hosts, timeout=10)
        anonymous.start(timeout=30)
        try:
            anonymous.create(f"{group_path}/anonymous-{self.token}", b"")
        except NoAuthError:
            return "(an anonymous client was refused)"
        finally:
            anonymous.stop()
            anonymous.close()
        with contextlib.suppress(Exception):
            self.zk.delete(f"{group_path}/anonymous-{self.token}")
        self._forgery_failed(f"an anonymous client planted a member in {group_path}")
        return "(an anonymous client planted one!)"

    def _check_ignored_gauge(self, count: int) -> None:
        """Every live daemon's computed_fleet_group_entries_ignored becomes ``count``."""
        deadline = time.monotonic() + FORGERY_WAIT
        wrong: dict[str, object] = {}
        while time.monotonic() < deadline:
            wrong = {}
            for host in sorted(self.live):
                value = metric(self.daemons[host].metrics, "computed_fleet_group_entries_ignored")
                if value != count:
                    wrong[host] = value
            if not wrong:
                return
            time.sleep(0.5)
        self._forgery_failed(f"computed_fleet_group_entries_ignored is not {count}: {wrong}")

    def run_faults(self, count: int | None = None, duration: float = 90.0,
                   recovery_timeout: float = 60.0, kinds: list[str] | None = None) -> None:
        """Inject faults (``count`` of them, or until ``duration`` seconds passed); ``kinds``
        gives the sequence of fault kinds instead of drawing them."""
        if self.in_process:
            wrong = sorted(set(kinds or self.kinds) - set(IN_PROCESS_KINDS))
            if wrong:
                raise ValueError(f"chaos group {self.group}: faults {wrong} need the daemons "
                                 f"and the reporter as processes (in_process=False)")
        if not self.private_rabbitmq and "restart_rabbitmq" in (kinds or self.kinds):
            raise ValueError(f"chaos group {self.group}: restart_rabbitmq needs a broker of the "
                             f"run's own (private_rabbitmq=True)")
        self.start_threads()
        started = time.monotonic()
        try:
            self._inject_faults(count, duration, recovery_timeout, kinds, started)
        finally:
            self.results.timings["faults"] = time.monotonic() - started

    def _inject_faults(self, count: int | None, duration: float, recovery_timeout: float,
                       kinds: list[str] | None, started: float) -> None:
        injected = 0
        while (count is None or injected < count) and time.monotonic() - started < duration:
            self._stop.wait(self.rng.uniform(1.0, 4.0))  # workload runs between faults
            fault = self.inject(kinds[injected % len(kinds)] if kinds else self.pick_fault())
            injected += 1
            self.pause_workload()
            healed_at = self.faults_stopped = time.monotonic()
            took = self.wait_converged(recovery_timeout)
            fault.recovery = None if took is None else time.monotonic() - healed_at
            if took is None and self.last_mismatch:
                fault.note = f"claims converged, Placement did not: {self.last_mismatch}"
                fault.placement_only = True
            self.results.faults.append(fault)
            self.say(fault.line().strip())
            self.resume_workload()

    # --- invariants -------------------------------------------------------------------------

    def check(self) -> Results:
        started = time.monotonic()
        try:
            return self._check()
        finally:
            self.results.timings["checks"] = time.monotonic() - started

    def _check(self) -> Results:
        res = self.results
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        stopped = getattr(self, "faults_stopped", time.monotonic())  # the last heal
        bound = self.grace + self.session

        # Every instance manageable: its host a live member.
        def unmanageable() -> list[str]:
            members = {m.name for m in ownership_now(self.zk, self.group)[0]}
            return [f"{r.uuid} ({r.state}) on {r.host}"
                    for r in db_instances.live_instances(self.engine) if r.host not in members]
        deadline = stopped + bound + MANAGEABLE_SLACK
        while unmanageable() and time.monotonic() < deadline:
            time.sleep(0.2)
        bad = unmanageable()
        took = time.monotonic() - stopped
        verdict = "met" if took <= bound else "exceeded (node refreshes and load add to it)"
        res.check("every instance manageable (host is a live member)", not bad,
                  f"{len(bad)} not: {bad[:3]}" if bad else
                  f"all, {took:.1f}s after the last fault healed (bound rehome_grace+session = "
                  f"{bound:.0f}s: {verdict})")

        # Convergence: claims == rules for the live members, Placement == Ironic.
        self.say("checks: convergence")
        took = self.wait_converged(180, placement_too=False)
        res.check("claims == ownership rules for the live members, no orphan", took is not None,
                  self.claims_converged() or f"converged {took:.1f}s after the checks began")

        # No build lost or stuck: nothing transitional after a resume interval.
        self.say("checks: builds settled")
        def transitional():
            return [f"{r.uuid} {r.state} on {r.host}"
                    for r in db_instances.live_instances(self.engine)
                    if r.state in models.TRANSITIONAL_STATES]
        deadline = time.monotonic() + self.conf.fleet.resume_interval + 30
        while transitional() and time.monotonic() < deadline:
            time.sleep(1)
        stuck = transitional()
        lost = [u for u in self.created if db_instances.get_instance(self.engine, u) is None]
        res.check("no build lost or stuck (no transitional state after a resume interval)",
                  not stuck and not lost,
                  f"stuck {stuck[:5]}, lost {lost[:5]}" if stuck or lost else
                  f"{len(self.created)} instance(s) created, all settled")
        rows = [db_instances.get_instance(self.engine, u) for u in self.created]
        states: dict[str, int] = {}
        for row in rows:
            if row is not None:
                states[row.state] = states.get(row.state, 0) + 1
        res.check("instance states after the run (informational)", True, json.dumps(states))
        errors = [f"{r.uuid}: {r.fault}" for r in rows if r is not None and r.state == models.ERROR]
        if errors:
            res.check("instances in ERROR (informational)", True, "; ".join(errors[:3]))

        # Placement matches Ironic exactly (every node, the known stuck ones included), once the
        # last reports landed: the builds that settled just now changed their nodes too (a
        # build resumed during the wait above went active 0.1 s before the listing, its
        # report still on the way: "Placement != Ironic" for a provider a second from right).
        self.wait_converged(60, placement_timeout=60)
        self.say("checks: Placement == Ironic")
        self.known_stuck = set()
        ironic = self.ironic_nodes()
        self._provider_reads.clear()  # the verdict reads every provider in full
        wrong = self.placement_mismatches(ironic)
        res.check("Placement == Ironic for every node (class, reserved, traits)", not wrong,
                  f"{len(wrong)} differ: {wrong[:3]}" if wrong else f"{len(ironic)} nodes")

        # No provider of an existing node deleted (sampled all along).
        res.check("no provider of an existing node deleted", not self.provider_violations,
                  "; ".join(self.provider_violations[:3]) or
                  f"{len(self._seen_providers)} providers tracked every {SAMPLE_INTERVAL:.0f}s")

        # No allocation lost, none left over.
        self.say("checks: allocations")
        live = {r.uuid: r for r in db_instances.live_instances(self.engine)}
        problems = []
        consumers: dict[str, dict] = {}
        for provider in self.all_providers():
            for consumer, alloc in self.allocations_of(provider).items():
                consumers.setdefault(consumer, {})[provider] = alloc["resources"]
        for uuid, row in live.items():
            if row.node_uuid and row.state != models.ERROR:
                want = {row.node_uuid: {self.rc: 1}}
                if consumers.get(uuid) != want:
                    problems.append(f"instance {uuid} {row.state}: allocations "
                                    f"{consumers.get(uuid)} want {want}")
        for consumer, allocs in consumers.items():
            row = live.get(consumer)
            if row is None or set(allocs) != {row.node_uuid}:
                where = "gone" if row is None else f"{row.state} on {row.node_uuid}"
                problems.append(f"allocation of consumer {consumer} on {sorted(allocs)}: "
                                f"instance {where}")
        res.check("no allocation lost, none without a live instance", not problems,
                  f"{len(problems)}: {problems[:3]}" if problems else
                  f"{len(consumers)} allocation(s) == {len(live)} live instance(s)' nodes")

        # Fencing: from the merged audit logs of every daemon that ever ran.
        records = sorted((r for d in self.daemons.values() for r in d.records()),
                         key=lambda r: r["t"])
        violations = fencing_violations(records)
        acts = sum(1 for r in records if r["event"] == "act")
        res.check("no fencing violation in the merged audit logs", not violations,
                  f"{len(violations)}: {violations[:3]}" if violations else
                  f"{len(records)} records, {acts} actions")
        self.check_forgeries()
        return res

    def check_forgeries(self) -> None:
        """The invariant of the forged messages and planted members (when any ran)."""
        if not self.forgeries:
            return
        sent = (f"{sum(self.forgeries.values())} forged message(s) or znode(s) of "
                f"{len(self.forgeries)} kind(s)")
        self.results.check("no forged report or cast taken, no planted member on the ring",
                           not self.forgery_violations,
                           "; ".join(self.forgery_violations[:3]) if self.forgery_violations
                           else f"all refused: {sent}")

    def summary(self) -> dict:
        rec = [f.recovery for f in self.results.faults if f.recovery is not None]
        by_kind: dict[str, list[int]] = {}
        for f in self.results.faults:
            entry = by_kind.setdefault(f.kind, [0, 0])
            entry[0] += 1
            entry[1] += f.recovery is not None
        return {"faults": len(self.results.faults), "recovered": len(rec), "by_kind": by_kind,
                "p50": percentile(rec, 0.5), "p95": percentile(rec, 0.95),
                "max": max(rec) if rec else float("nan"),
                "mean": statistics.mean(rec) if rec else float("nan")}


#: The answers a forged report may get: never applied, stale nor kept (those mean it passed the
#: fence).
REFUSED = frozenset({Outcome.FENCED.value, Outcome.INVALID.value, Outcome.FAILED.value})


def forged_report_calls(claims: dict[str, ClaimRecord], states: dict[str, dict],
                        hosts: list[str], now_ms: int, max_reports: int) -> list[tuple[str, dict]]:
    """(what it forges, the arguments of one ``apply_reports`` call) for each forgery of the
    claimed nodes ``claims`` (their provider states ``states``), ``hosts`` the live daemons.
    Every report either names a host or claim epoch the claim does not have, or breaks the
    wire format or a limit: none is what the claim's holder would send (pure)."""
    calls: list[tuple[str, dict]] = []
    first = None
    for node, record in claims.items():
        forged = {**states[node], "name": f"forged-{node[:8]}", "traits": ["CUSTOM_FORGED"]}
        base = {"uuid": node, "claim_epoch": record.epoch, "seq": now_ms, "host": record.host,
                "state": forged}
        other = next((h for h in hosts if h != record.host), "intruder")
        first = first or (node, base, forged, other)
        calls += [
            ("another member as host", {"reports": [{**base, "host": other}]}),
            ("an unknown host", {"reports": [{**base, "host": "intruder"}]}),
            ("a delete from another member", {"reports": [{**base, "host": other,
                                                            "state": None}]}),
            ("a stale claim epoch", {"reports": [{**base, "claim_epoch": record.epoch - 1}]}),
            ("a future claim epoch", {"reports": [{**base, "claim_epoch": record.epoch + 1}]}),
            ("claim_epoch and epoch disagree", {"reports": [{**base,
                                                             "epoch": record.epoch - 1}]}),
            ("seq 2**62", {"reports": [{**base, "seq": 2**62}]}),
            ("seq 2**64", {"reports": [{**base, "seq": 2**64}]}),
            ("3000 traits", {"reports": [{**base, "state": {
                **forged, "traits": [f"CUSTOM_T{i}" for i in range(3000)]}}]}),
            ("a 100 kB field", {"reports": [{**base, "state": {**forged, "name": "x" * 100_000}}]}),
        ]
    if first is None:
        return calls
    node, base, forged, other = first
    calls += [
        (f"{max_reports + 20} reports in one call", {"reports": [
            {**base, "host": "intruder", "seq": now_ms + i} for i in range(max_reports + 20)]}),
        ("reports not a list", {"reports": "garbage"}),
        ("reports null", {"reports": None}),
        ("garbage items", {"reports": [1, None, "x", [], {"uuid": 5}, {"uuid": node}, True, 1.5]}),
        ("wrong field types", {"reports": [
            {**base, "claim_epoch": True}, {**base, "seq": "1"}, {**base, "seq": -1},
            {**base, "state": [1]}, {**base, "uuid": node.replace("-", "")},
            {**base, "state": {**forged, "reserved": "lots"}},
            {**base, "state": {**forged, "uuid": str(uuidlib.uuid4())}},
            {**base, "state": {**forged, "resource_class": 7}},
            {**base, "surprise": 1}]}),
        ("deep nesting", {"reports": [{**base, "state": {"a": {"b": {"c": {"d": 1}}}}}]}),
        ("an unknown argument", {"reports": [], "sneaky": 1}),
    ]
    return calls


def metric(url: str, name: str) -> float | None:
    """One unlabelled sample of a Prometheus endpoint; None when it cannot be read."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and not sample.labels:
                return sample.value
    return None


# --- the suite's short runs (tests/chaos/test_chaos*.py) --------------------------------------

def chaos_seed() -> int:
    """The seed of a short run in the suite (``COMPUTED_CHAOS_SEED``, else drawn), printed; the
    test is skipped where network namespaces are unavailable."""
    import pytest
    reason = netns.available()
    if reason:
        pytest.skip(f"network namespaces unavailable here: {reason}")
    seed = int(os.environ.get("COMPUTED_CHAOS_SEED") or random.SystemRandom().randrange(10**6))
    print(f"chaos seed {seed} (COMPUTED_CHAOS_SEED={seed} reproduces the fault sequence)")
    return seed


def run_and_check(chaos: Chaos, seed: int, count: int, duration: float,
                  kinds: list[str] | None = None) -> None:
    """Set ``chaos`` up, inject ``count`` faults (of ``kinds`` in order, else drawn), check
    every invariant; fails naming the seed when a fault never recovered or an invariant broke.
    The run is closed whatever happens."""
    try:
        chaos.setup()
        chaos.run_faults(count=count, duration=duration, kinds=kinds)  # recovery waits count too
        results = chaos.check()
        print(results.report())
        failed = {name: detail for name, (ok, detail) in results.checks.items() if not ok}
        # A fault "recovers" when claims converge and Placement matches Ironic again.
        never = [f.line() for f in results.faults if f.recovery is None]
        assert not never, f"seed {seed}: faults never recovered: {never}\n" \
                          f"{results.report()}\n{chaos.tails()}"
        assert not failed, f"seed {seed}: invariants failed: {failed}\n{results.report()}"
    finally:
        chaos.close()
