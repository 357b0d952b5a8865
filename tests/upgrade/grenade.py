"""The upgrade test (grenade for computed): a live fleet upgraded from the previous release to
this tree one process at a time, with a tenant and Ironic busy all along (issue 25 item 5).

    .venv/bin/python -m tests.upgrade.grenade [--previous REF] [--nodes 30] [--instances 4]
                                              [--churn 4] [--pins previous|auto] [--workdir DIR]

``tools/run-upgrade-test`` runs it (and ``tox -e grenade``); it is not in tools/run-tests.

Set-up: the harness's services (ZooKeeper, RabbitMQ, PostgreSQL where available, Placement,
Ironic with fake hardware, :mod:`computed.testing.stack`); the previous release (``--previous``,
default :data:`computed.version.PREVIOUS_RELEASE`) installed from this clone's history in a
virtualenv of its own (:mod:`computed.testing.releases`), this tree from the running
interpreter's environment (main's ``.venv``). ``--nodes`` nodes of a *tenant* class and
``--toggled`` of a *toggled* class, all available and powered off; the database made by the
previous release's ``computed-manage db sync``; then, on the previous release, 2 reporters, 3
daemons and computed-api (noauth2), a flavor of the tenant class and ``--instances`` servers
built through openstacksdk: the *pets*, never deleted, which must stay manageable to the end.

Three threads run from then to the end:

* the **tenant** (openstacksdk against computed-api, as a project member): keeps ``--churn``
  more servers, and every ``--interval`` seconds builds, deletes (not a pet), stops, starts or
  reboots one, and now and then lists them all; every accepted action must reach its outcome
  within ``--action-timeout`` (:class:`~tests.upgrade.invariants.Ledger`); every answer is
  counted, a 5xx is a violation (:class:`~tests.upgrade.invariants.Answers`);
* **Ironic**: toggles maintenance on the toggled class's nodes (no tenant build can land on
  them, so a toggle never fails a build by itself);
* **truth**: every second, Ironic's nodes against Placement's offers
  (:func:`~tests.upgrade.invariants.wrong_providers`); no provider may stay wrong longer than
  ``--events-bound`` (:class:`~tests.upgrade.invariants.Staleness`).

The steps, in the runbook's order (docs/upgrades.md), each timed with the load beside it: soak
on the previous release; database expand (this tree's ``computed-manage db sync``); each
reporter (the next once it serves its topic); each daemon, one at a time (SIGTERM: it drains),
the fleet converging after each, with one daemon rolled back to the previous release and
upgraded again mid-way; computed-api;
``computed-manage db online_data_migrations``; with ``--pins previous`` (the default) the new
processes run pinned by ``[upgrade_levels]`` to what the previous release serves and the pins
are lifted by restarting each (``--pins auto``: no pin, the runbook's default, no such step);
``db sync --contract``; soak on this tree. After each step this tree's ``computed-status upgrade
check`` runs (its exit status is reported, not judged: it warns while releases are mixed).

At the end: every accepted action is done, a power action (reboot, or start) on every live
server succeeds, every pet is live, no 5xx, no provider wrong for longer than the bound, and the
merged audit logs of every daemon (both releases) show no fencing violation
(:func:`computed.fleet.audit.fencing_violations`). Exit status: 0 when every invariant held, 1
when one did not (each named), 2 when the set-up failed. Logs and audit files stay in the work
directory.

Threads: the main thread runs the steps; the tenant, ironic and truth threads feed the
invariants' objects (each locked) and read ``step`` (a str, replaced whole) to label what they
record.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid as uuidlib
from pathlib import Path
from types import FrameType

import openstack
import sqlalchemy as sa
from keystoneauth1 import exceptions as ksa_exc
from openstack import exceptions as sdk_exc

from bench.common import placement_adapter
from bench.seed import make_template, seed_nodes
from computed.fleet import audit
from computed.providers.state import normalise_resource_class
from computed.testing import postgres, releases
from computed.testing.ironic import list_nodes, request
from computed.testing.process import free_port
from computed.testing.stack import Stack
from computed.version import PREVIOUS_RELEASE
from hashring.ownership import compute_ownership
from tests.functional.daemons import BIN, Process, ownership_now, zk_client
from tests.upgrade.invariants import Answers, Ledger, Staleness, wrong_providers

#: The release this tree upgrades from, as the tree records it (0.1.0 is commit 8ac1967).
PREVIOUS = PREVIOUS_RELEASE.commit
#: What 0.1.0 serves on each RPC interface: the new processes are pinned to it until the end.
PINS = "[upgrade_levels]\nreports = 1.1\ninstances = 1.1\n"
#: Never fetched (fake hardware); not on loopback: computed-api refuses loopback image URLs.
IMAGE = "http://images.example/grenade.qcow2"
ADMIN = "admin:admin"
TENANT = "tenant:grenade"
SERVICES = ["zookeeper", "rabbitmq", "postgres", "placement", "ironic"]
REPORTERS = ("r1", "r2")
DAEMONS = ("c1", "c2", "c3")


def say(text: str) -> None:
    print(time.strftime("%H:%M:%S"), text, flush=True)


def load() -> float:
    return os.getloadavg()[0]


@dataclasses.dataclass(frozen=True)
class Release:
    name: str
    bin: Path


class FleetProcess(Process):
    """A computed process of one release (its console scripts' folder); its host keeps one
    config, log and audit file whichever release runs it."""

    def __init__(self, release: Release, script: str, *args, **kwargs):
        self.release = release
        self.script = script
        super().__init__(*args, **kwargs)

    def start(self) -> FleetProcess:
        #: Where this run's lines begin in the host's log (the releases before it wrote above).
        self.log_offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as out:
            out.write(f"=== grenade: {self.script} of {self.release.name} starts\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [str(self.release.bin / self.script), "--config-file", str(self.conf)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self


class Grenade:
    def __init__(self, stack: Stack, workdir: Path, args: argparse.Namespace, old: Release,
                 new: Release):
        self.stack, self.workdir, self.args = stack, workdir, args
        self.old, self.new = old, new
        token = uuidlib.uuid4().hex[:6]
        self.token = token
        self.group = f"g{token}"
        self.tenant_class = f"gold-{token}"
        self.toggled_class = f"silver-{token}"
        if "postgres" in stack:
            self.database = stack["postgres"].create_database(f"grenade_{token}")
            stack.save()
        else:
            self.database = f"sqlite:///{workdir / 'computed.sqlite'}"
        self.engine = sa.create_engine(self.database)
        self.api_port = free_port()
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        self.processes: dict[str, FleetProcess] = {}
        self.step = "set-up"
        self.timings: list[dict] = []
        self.checks: list[tuple[str, int, str]] = []
        self.ledger = Ledger()
        self.answers = Answers()
        self.staleness = Staleness()
        self.stop = threading.Event()
        self.tenant_stop = threading.Event()
        self.pets: set[str] = set()
        self.final_power = 0
        self.slowest_look = 0.0
        self.thread_errors: list[str] = []
        self.tenant_nodes: list[str] = []
        self.toggled_nodes: list[str] = []
        self.servers: dict[str, str] = {}  # id -> last status seen
        self.servers_lock = threading.Lock()
        self.zk = None
        self.placement = None

    # --- processes ------------------------------------------------------------------------

    def _extra(self, host: str, release: Release, pinned: bool) -> str:
        extra = ""
        if host == "api":
            extra += (f"[api]\nbind_host = 127.0.0.1\nbind_port = {self.api_port}\n"
                      f"auth_strategy = noauth2\n[quota]\ninstances = -1\n")
        if release is self.new and pinned and self.args.pins == "previous":
            extra += PINS
        return extra

    def start(self, host: str, release: Release, pinned: bool = True) -> FleetProcess:
        script = ("computed-api" if host == "api" else
                  "computed-reporter" if host in REPORTERS else "computed")
        process = FleetProcess(release, script, self.stack, self.workdir, host,
                               group=self.group, database=self.database,
                               session_timeout=self.args.session, refresh=self.args.refresh,
                               rehome_grace=self.args.grace,
                               extra=self._extra(host, release, pinned)).start()
        self.processes[host] = process
        return process

    def replace(self, host: str, release: Release, pinned: bool = True) -> None:
        """Stop ``host``'s process (SIGTERM: a daemon drains first) and start ``release``'s."""
        old = self.processes[host]
        code = old.stop(timeout=90)
        if code != 0:
            raise StepFailed(f"{host} ({old.release.name}) exited {code} when stopped; "
                             f"log {old.log}")
        self.start(host, release, pinned)
        self.wait_started(host)

    def wait_started(self, host: str, timeout: float = 120) -> None:
        process = self.processes[host]
        if host == "api":
            self.wait(lambda: api_serving(self.api_url), timeout, "computed-api serving",
                      [process])
        elif host in REPORTERS:
            # Both releases log this line once the reporter consumes its topic (no endpoint
            # says so in both); the next reporter waits for it, or no replica serves for the
            # time a start takes (45 s at load 38: the providers stayed wrong that long).
            self.wait(lambda: "serving topic" in process.log.read_text(
                errors="replace")[process.log_offset:], timeout,
                f"reporter {host} serving", [process])
        # A daemon's readiness is the fleet converging, which the caller waits for.

    def wait(self, check, timeout: float, what: str, processes=()) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            for process in processes:
                if not process.alive:
                    raise StepFailed(f"{what}: {process.host} ({process.release.name}) exited "
                                     f"{process.proc.returncode}:\n{tail(process.log)}")
            if time.monotonic() > deadline:
                raise StepFailed(f"{what}: not after {timeout:.0f} s\n" + "\n".join(
                    f"--- {p.host}\n{tail(p.log)}" for p in processes))
            time.sleep(0.5)

    def instance_hosts(self) -> dict[str, str]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT node_uuid, host FROM instances WHERE state != 'DELETED' "
                "AND node_uuid IS NOT NULL AND host IS NOT NULL"))
            return {row.node_uuid: row.host for row in rows}

    def converged(self) -> bool:
        members, claims = ownership_now(self.zk, self.group)
        live = {h for h in DAEMONS if self.processes.get(h) and self.processes[h].alive}
        if {m.name for m in members} != live:
            return False
        nodes = self.tenant_nodes + self.toggled_nodes
        want = compute_ownership([m.as_ring_member() for m in members], nodes,
                                 self.instance_hosts()).owners()
        return claims == want

    def wait_converged(self, timeout: float = 180) -> None:
        daemons = [self.processes[h] for h in DAEMONS]
        self.wait(self.converged, timeout, "the fleet converged", daemons)

    # --- the steps ------------------------------------------------------------------------

    def run_step(self, name: str, action) -> None:
        self.step = name
        began, load_before = time.monotonic(), load()
        say(f"step {name}: load {load_before:.1f}")
        action()
        took = time.monotonic() - began
        check = self.upgrade_check()
        self.timings.append({"step": name, "seconds": took, "load": load_before,
                             "check": check})
        say(f"step {name}: done in {took:.1f} s; computed-status upgrade check exit {check}")

    def upgrade_check(self) -> int:
        conf = self.workdir / "status.conf"
        conf.write_text(self.stack.computed_conf(host="grenade", database=self.database).replace(
            "backend_url = ", f"group = {self.group}\nbackend_url = ", 1))
        proc = subprocess.run([str(self.new.bin / "computed-status"), "--config-file", str(conf),
                               "upgrade", "check"], capture_output=True, text=True, timeout=120)
        output = proc.stdout + proc.stderr
        self.checks.append((self.step, proc.returncode, output))
        (self.workdir / f"status-{len(self.checks):02d}.txt").write_text(
            f"after {self.step}: exit {proc.returncode}\n{output}")
        # The one-line results that are not a success, as they end (before the table).
        for line in output.splitlines():
            if ": Warning: " in line or ": Failure: " in line:
                say(f"  upgrade check: {line.strip()}")
        return proc.returncode

    def soak(self) -> None:
        time.sleep(self.args.soak)

    def manage(self, release: Release, *command: str) -> str:
        """``computed-manage`` of ``release`` on this fleet's database; its output."""
        conf = self.workdir / f"manage-{release.name.split()[0]}.conf"
        conf.write_text(self.stack.computed_conf(host="grenade", database=self.database))
        proc = subprocess.run([str(release.bin / "computed-manage"), "--config-file", str(conf),
                               *command], capture_output=True, text=True, timeout=600)
        output = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0:
            raise StepFailed(f"computed-manage {' '.join(command)} of {release.name} exited "
                             f"{proc.returncode}: {output}")
        return output

    def db_sync(self, release: Release) -> None:
        self.manage(release, "db", "sync")

    def online_migrations(self) -> None:
        output = self.manage(self.new, "db", "online_data_migrations")
        say("  " + "\n  ".join(output.splitlines()[-6:]))

    def upgrade_daemon(self, host: str, release: Release) -> None:
        self.replace(host, release)
        self.wait_converged()

    def lift_pins(self) -> None:
        for host in (*REPORTERS, *DAEMONS, "api"):
            self.replace(host, self.new, pinned=False)
            if host in DAEMONS:
                self.wait_converged()

    def steps(self) -> list[tuple[str, object]]:
        new, old = self.new, self.old
        return [
            ("soak on the previous release", self.soak),
            ("database expand (db sync of main)", lambda: self.db_sync(new)),
            ("soak, previous code on the new schema", self.soak),
            *[(f"reporter {h} to main", lambda h=h: self.replace(h, new)) for h in REPORTERS],
            ("daemon c1 to main", lambda: self.upgrade_daemon("c1", new)),
            ("daemon c2 to main", lambda: self.upgrade_daemon("c2", new)),
            ("daemon c2 back to the previous release", lambda: self.upgrade_daemon("c2", old)),
            ("daemon c2 to main again", lambda: self.upgrade_daemon("c2", new)),
            ("daemon c3 to main", lambda: self.upgrade_daemon("c3", new)),
            ("computed-api to main", lambda: self.replace("api", new)),
            ("online data migrations", self.online_migrations),
            *([("pins lifted (every process restarted with auto)", self.lift_pins)]
              if self.args.pins == "previous" else []),
            ("contractions (db sync --contract)",
             lambda: self.manage(new, "db", "sync", "--contract")),
            ("soak on main", self.soak),
        ]

    # --- set-up ---------------------------------------------------------------------------

    def set_up(self) -> None:
        # The template each prefix's nodes are copied from: available and powered off.
        make_template(self.stack["ironic"].url, f"t{self.token}", self.tenant_class)
        make_template(self.stack["ironic"].url, f"m{self.token}", self.toggled_class)
        self.tenant_nodes = seed_nodes(self.stack, self.args.nodes, prefix=f"t{self.token}",
                                       resource_class=self.tenant_class, log=say)
        self.toggled_nodes = seed_nodes(self.stack, self.args.toggled,
                                        prefix=f"m{self.token}",
                                        resource_class=self.toggled_class, log=say)
        self.db_sync(self.old)
        self.zk = zk_client(self.stack)
        self.placement = placement_adapter(self.stack, self.workdir)
        for host in REPORTERS:
            self.start(host, self.old)
        for host in DAEMONS:
            self.start(host, self.old)
        self.start("api", self.old)
        self.wait_started("api")
        self.wait_converged()
        everything = set(self.tenant_nodes) | set(self.toggled_nodes)
        self.wait(lambda: self.offered() >= everything, 180,
                  "every node offered by Placement", list(self.processes.values()))
        admin = connection(self.api_url, ADMIN)
        flavor = admin.compute.create_flavor(name=f"bm-{self.token}", ram=1024, vcpus=2,
                                             disk=10)
        admin.compute.create_flavor_extra_specs(flavor, {
            f"resources:{normalise_resource_class(self.tenant_class)}": "1",
            "resources:VCPU": "0", "resources:MEMORY_MB": "0", "resources:DISK_GB": "0"})
        self.flavor = flavor.id
        tenant = connection(self.api_url, TENANT)
        for _ in range(self.args.instances):
            self.act(tenant, "create", None)
        self.pets = set(self.servers)
        self.wait(lambda: (self.follow(tenant), not self.ledger.pending())[1], 300,
                  f"{self.args.instances} servers ACTIVE on the previous release",
                  list(self.processes.values()))
        failed = self.ledger.summary()["failed"]
        if failed or len(self.pets) != self.args.instances:
            raise StepFailed(f"the servers of the previous release: {failed}")

    def offered(self) -> set[str]:
        found = set()
        for rc in (self.tenant_class, self.toggled_class):
            response = self.placement.get(
                f"/resource_providers?resources={normalise_resource_class(rc)}:1",
                headers={"OpenStack-API-Version": "placement 1.39"}, raise_exc=False)
            if response.status_code == 400 and "Invalid resource class" in response.text:
                continue  # no provider of that class reported yet: Placement does not know it
            if response.status_code != 200:
                raise StepFailed(f"Placement answered {response.status_code} listing the "
                                 f"providers of {rc}: {response.text[:200]}")
            found |= {p["uuid"] for p in response.json()["resource_providers"]}
        return found

    def allocated(self, nodes: set[str]) -> set[str]:
        held = set()
        for node in nodes:
            response = self.placement.get(f"/resource_providers/{node}/allocations",
                                          raise_exc=False)
            if response.status_code == 200 and response.json().get("allocations"):
                held.add(node)
        return held

    # --- the threads ----------------------------------------------------------------------

    def guarded(self, name: str, body) -> threading.Thread:
        def run() -> None:
            try:
                body()
            except Exception:
                self.thread_errors.append(f"{name} thread: {traceback.format_exc()}")
                say(f"{name} thread failed:\n{traceback.format_exc()}")
        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        return thread

    def truth(self) -> None:
        ours = set(self.tenant_nodes) | set(self.toggled_nodes)
        fields = "uuid,maintenance,power_state,provision_state,instance_uuid"
        while not self.stop.wait(1.0):
            began = time.monotonic()
            nodes = [n for n in list_nodes(self.stack["ironic"].url, fields)
                     if n["uuid"] in ours]
            offered = self.offered()
            # Only the nodes that look wrong are asked about allocations (a build in flight).
            suspects = wrong_providers(nodes, offered, set())
            wrong = wrong_providers(nodes, offered, self.allocated(suspects))
            self.staleness.observe(time.time(), wrong, self.step)
            # How long one look took: an episode's length is known to within that much.
            self.slowest_look = max(self.slowest_look, time.monotonic() - began)

    def ironic_changes(self) -> None:
        url = self.stack["ironic"].url
        rng = random.Random(self.token)
        in_maintenance: dict[str, float] = {}
        while not self.stop.wait(self.args.interval * 2):
            now = time.monotonic()
            for node, since in list(in_maintenance.items()):
                if now - since > 5:
                    request("DELETE", f"{url}/v1/nodes/{node}/maintenance")
                    in_maintenance.pop(node)
            free = [n for n in self.toggled_nodes if n not in in_maintenance]
            if free and len(in_maintenance) < max(1, len(self.toggled_nodes) // 2):
                node = rng.choice(free)
                request("PUT", f"{url}/v1/nodes/{node}/maintenance",
                        {"reason": f"grenade: {self.step}"})
                in_maintenance[node] = now
        for node in in_maintenance:
            request("DELETE", f"{url}/v1/nodes/{node}/maintenance")

    def tenant(self) -> None:
        conn = connection(self.api_url, TENANT)
        rng = random.Random(self.token[::-1])
        rounds = 0
        while not self.tenant_stop.wait(self.args.interval):
            rounds += 1
            self.follow(conn)
            if rounds % 5 == 0:  # the listing reads every row, whichever release wrote it
                self.call("GET /servers/detail", lambda: list(conn.compute.servers()))
            with self.servers_lock:
                live = {s: st for s, st in self.servers.items() if st is not None}
            idle = [s for s, st in live.items() if not self.ledger.busy(s)]
            if len(live) < self.args.instances + self.args.churn:
                self.act(conn, "create", None)
            elif idle:
                server = rng.choice(idle)
                status = live[server]
                # The pets, built on the previous release, are never deleted: they must stay
                # manageable through every step.
                delete = [] if server in self.pets else ["delete"]
                choices = ["reboot", "stop", *delete] if status == "ACTIVE" else \
                    ["start", *delete] if status == "SHUTOFF" else delete
                if choices:
                    self.act(conn, rng.choice(choices), server)

    def follow(self, conn) -> None:
        """Look at every server with an open action, and expire the late ones."""
        for server in sorted({a.server for a in self.ledger.pending()}):
            shown = self.call(f"GET /servers/{server}",
                              lambda server=server: conn.compute.get_server(server),
                              expect_404=True)
            if shown is Unreachable:
                continue
            status = None if shown is None else shown.status
            task = None if shown is None else shown.task_state
            with self.servers_lock:
                self.servers[server] = status
            self.ledger.observe(server, status, task, time.time())
        self.ledger.expire(time.time())

    def act(self, conn, action: str, server: str | None) -> None:
        calls = {
            "create": lambda: conn.compute.create_server(
                name=f"g-{uuidlib.uuid4().hex[:6]}", flavor_id=self.flavor, image_id=IMAGE,
                networks="none"),
            "delete": lambda: conn.compute.delete_server(server),
            "stop": lambda: conn.compute.stop_server(server),
            "start": lambda: conn.compute.start_server(server),
            "reboot": lambda: conn.compute.reboot_server(server, "HARD"),
        }
        result = self.call(f"{action} {server or 'server'}", calls[action])
        if result is Unreachable or result is Refused:
            return
        if action == "create":
            server = result.id
        with self.servers_lock:
            self.servers[server] = "BUILD" if action == "create" else self.servers[server]
        self.ledger.accepted(server, action, time.time(), self.args.action_timeout, self.step)

    def call(self, what: str, request_call, expect_404: bool = False):
        try:
            result = request_call()
        except sdk_exc.HttpException as exc:
            status = exc.status_code or 0
            self.answers.answered(status, what, self.step)
            if status == 404 and expect_404:
                return None
            if status >= 500:
                say(f"  5xx: {status} on {what} during {self.step}: {exc}")
            return Refused
        except (ksa_exc.ConnectFailure, ksa_exc.ConnectTimeout):
            self.answers.refused(self.step)
            return Unreachable
        self.answers.answered(200, what, self.step)
        return result

    # --- the end --------------------------------------------------------------------------

    def finish(self) -> None:
        """Every open action done (or past its deadline), then a reboot of every live server."""
        conn = connection(self.api_url, TENANT)
        self.tenant_stop.set()
        self.tenant_thread.join(60)
        deadline = time.monotonic() + self.args.action_timeout
        while self.ledger.pending() and time.monotonic() < deadline:
            self.follow(conn)
            time.sleep(1)
        self.follow(conn)
        with self.servers_lock:
            live = [s for s, st in self.servers.items() if st in ("ACTIVE", "SHUTOFF")]
        missing = self.pets - set(live)
        if missing:
            self.thread_errors.append(f"pets not ACTIVE or SHUTOFF at the end: {sorted(missing)}")
        for server in live:
            status = self.servers[server]
            self.act(conn, "reboot" if status == "ACTIVE" else "start", server)
        deadline = time.monotonic() + self.args.action_timeout
        while self.ledger.pending() and time.monotonic() < deadline:
            self.follow(conn)
            time.sleep(1)
        self.follow(conn)
        self.final_power = len(live)

    def verdict(self) -> list[str]:
        problems = list(self.thread_errors)
        ledger = self.ledger.summary()
        problems += ledger["failed"]
        problems += [f"not done by the end: {a.action} of server {a.server} (asked during "
                     f"{a.step})" for a in self.ledger.pending()]
        answers = self.answers.summary()
        problems += [f"API answered {e}" for e in answers["server_errors"]]
        for episode in self.staleness.over(self.args.events_bound):
            problems.append(f"provider of node {episode.node} wrong for "
                            f"{episode.length(time.time()):.1f} s (from {episode.step}), "
                            f"longer than the events bound {self.args.events_bound:g} s")
        records = [r for h in DAEMONS for r in self.processes[h].records()]
        records.sort(key=lambda r: r["t"])
        self.fencing = audit.fencing_violations(records)
        self.audit_records = len(records)
        problems += self.fencing
        return problems

    def report(self, problems: list[str]) -> None:
        ledger = self.ledger.summary()
        answers = self.answers.summary()
        longest = self.staleness.longest()
        stale = self.staleness.longest_by_step()
        say("")
        say("| step | seconds | load (1 min) at start | tenant actions asked | slowest of them "
            "done (s) | longest wrong provider begun (s) | API connections refused | "
            "computed-status exit |")
        say("|---|---:|---:|---:|---:|---:|---:|---:|")
        for row in self.timings:
            step = row["step"]
            say(f"| {step} | {row['seconds']:.1f} | {row['load']:.1f} | "
                f"{ledger['asked_by_step'].get(step, 0)} | "
                f"{ledger['slowest_by_step'].get(step, 0):.1f} | {stale.get(step, 0):.1f} | "
                f"{answers['unreachable_by_step'].get(step, 0)} | {row['check']} |")
        say("")
        say(f"actions accepted {dict(ledger['accepted'])}, done {dict(ledger['done'])}, "
            f"lost or failed {len(ledger['failed'])}, slowest "
            f"{ledger['slowest'] or 0:.1f} s; final power actions on {self.final_power} servers")
        say(f"API answers {answers['by_class']} (other than 2xx: {answers['not_ok']}), 5xx "
            f"{len(answers['server_errors'])}, connections refused {answers['unreachable']}")
        episodes = self.staleness.episodes()
        (self.workdir / "wrong-providers.json").write_text(json.dumps(
            [dataclasses.asdict(e) for e in episodes], indent=1))
        say(f"providers: {len(episodes)} wrong episodes (in {self.workdir}/"
            f"wrong-providers.json; one look at Ironic and Placement took up to "
            f"{self.slowest_look:.1f} s), longest "
            + (f"{longest.length(time.time()):.1f} s (node {longest.node}, {longest.step})"
               if longest else "none") + f"; bound {self.args.events_bound:g} s")
        say(f"audit: {self.audit_records} records from {len(DAEMONS)} daemons, "
            f"{len(self.fencing)} fencing violations")
        say(f"computed-status upgrade check outputs: {self.workdir}/status-*.txt")
        if problems:
            say(f"FAILED: {len(problems)} problems")
            for problem in problems:
                say(f"  - {problem}")
        else:
            say("PASSED: every invariant held")

    def close(self) -> None:
        self.stop.set()
        for process in self.processes.values():
            try:
                if process.alive:
                    process.stop(timeout=30)
            except Exception:
                pass
            process.ensure_stopped()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
        self.engine.dispose()


class StepFailed(Exception):
    """A step could not be carried out (a process exited, a wait ran out)."""


class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


Unreachable = _Marker("Unreachable")
Refused = _Marker("Refused")


def tail(log: Path, lines: int = 20) -> str:
    if not log.exists():
        return "(no log)"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def api_serving(url: str) -> bool:
    import urllib.request
    try:
        with urllib.request.urlopen(f"{url}/healthcheck", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def connection(url: str, token: str) -> openstack.connection.Connection:
    """openstacksdk as a noauth2 user (the token is ``USER:PROJECT``)."""
    return openstack.connection.Connection(
        auth_type="admin_token", auth={"endpoint": f"{url}/v2.1", "token": token})


def _terminated(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--previous", default=PREVIOUS,
                        help="the release to upgrade from: a tag or commit of this clone")
    parser.add_argument("--workdir", type=Path, help="logs and services (default: a tmp dir)")
    parser.add_argument("--nodes", type=int, default=30, help="nodes the tenant builds on")
    parser.add_argument("--toggled", type=int, default=6,
                        help="nodes whose maintenance Ironic toggles")
    parser.add_argument("--instances", type=int, default=4,
                        help="servers built on the previous release and kept to the end")
    parser.add_argument("--churn", type=int, default=4,
                        help="more servers, built and deleted all along")
    parser.add_argument("--interval", type=float, default=1.0,
                        help="seconds between two tenant actions")
    parser.add_argument("--soak", type=float, default=20.0,
                        help="seconds of the soak steps")
    parser.add_argument("--action-timeout", type=float, default=240.0)
    parser.add_argument("--events-bound", type=float,
                        help="seconds a provider may stay wrong (default: --refresh + 20: a "
                             "change the event stream missed is in the next listing, plus "
                             "[ironic] heartbeat_interval and max_event_lag, 5 s each, plus "
                             "[reporter] call_timeout, 10 s, for the report's way to Placement)")
    parser.add_argument("--pins", choices=("previous", "auto"), default="previous",
                        help="previous: the new processes pinned by [upgrade_levels] to what "
                             "the previous release serves, the pins lifted at the end by a "
                             "restart of each; auto: no pin set, the senders follow their peers "
                             "(the runbook's default)")
    parser.add_argument("--session", type=int, default=4, help="ZooKeeper session timeout")
    parser.add_argument("--refresh", type=float, default=10.0,
                        help="[fleet] node_refresh_interval")
    parser.add_argument("--grace", type=float, default=120.0, help="[fleet] rehome_grace")
    args = parser.parse_args(argv)
    if args.events_bound is None:
        args.events_bound = args.refresh + 20
    if args.instances + args.churn >= args.nodes:
        parser.error(f"--instances {args.instances} + --churn {args.churn} must be below "
                     f"--nodes {args.nodes}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    signal.signal(signal.SIGTERM, _terminated)
    began = time.monotonic()
    workdir = Path(args.workdir or f"/tmp/grenade-{uuidlib.uuid4().hex[:6]}")
    workdir.mkdir(parents=True, exist_ok=True)
    say(f"work directory {workdir}; load {load():.1f}")
    try:
        venv = releases.ensure(args.previous)
    except Exception as exc:
        say(f"set-up failed: the previous release {args.previous}: {exc}")
        return 2
    old = Release(f"previous ({args.previous[:12]})", venv / "bin")
    new = Release("main", BIN)
    say(f"previous release in {venv} ({time.monotonic() - began:.0f} s); starting "
        f"{', '.join(SERVICES)}" + ("" if postgres.available() else " (no PostgreSQL)"))
    stack = Stack.up(workdir / "stack", SERVICES)
    grenade = None
    try:
        grenade = Grenade(stack, workdir, args, old, new)
        try:
            set_up_began = time.monotonic()
            grenade.set_up()
            grenade.tenant_thread = grenade.guarded("tenant", grenade.tenant)
            threads = [grenade.guarded("ironic", grenade.ironic_changes),
                       grenade.guarded("truth", grenade.truth)]
            grenade.timings.append({"step": "set-up",
                                    "seconds": time.monotonic() - set_up_began,
                                    "load": load(), "check": "-"})
        except Exception as exc:
            say(f"set-up failed: {exc}")
            traceback.print_exc()
            return 2
        problems = []
        try:
            for name, action in grenade.steps():
                grenade.run_step(name, action)
        except StepFailed as exc:
            problems.append(f"step {grenade.step!r} failed: {exc}")
        grenade.step = "the end"
        grenade.finish()
        grenade.stop.set()
        for thread in threads:
            thread.join(30)
        problems += grenade.verdict()
        grenade.report(problems)
        say(f"took {time.monotonic() - began:.0f} s; logs in {workdir}")
        return 1 if problems else 0
    finally:
        if grenade is not None:
            grenade.close()
        stack.down()


if __name__ == "__main__":
    sys.exit(main())
