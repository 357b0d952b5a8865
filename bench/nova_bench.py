"""Nova's own Ironic driver against computed, side by side (issue 27 item 1): the same figures for
both, measured from outside, in one run on the same services.

What an operator deciding between the two would run: Nova 34.0.0 (PyPI ``nova``, its own cached
virtualenv: :mod:`computed.testing.nova`), one ``nova-conductor`` and ``--nova-computes``
``nova-compute`` services with ``compute_driver = ironic.IronicDriver`` (API and cell databases on
the stack's PostgreSQL, cells mapped with ``nova-manage``, Placement and Ironic without Keystone,
every other option Nova's default), against ``--daemons`` ``computed`` daemons and
``--reporters`` ``computed-reporter`` processes at the product's defaults (``--session``: the
ZooKeeper session timeout, tooz's 10 s unless given). Both use the one stack this benchmark starts
(ZooKeeper, RabbitMQ, PostgreSQL, Placement, Ironic with fake hardware), one system after the other
(the order alternates between runs), each on a fresh set of ``N`` nodes (``available``,
``power off``, a resource class of its own; seeded by bench/seed.py), the other system's nodes
deleted from Ironic and its providers from Placement before it starts.

Per system, node count and run, on this script's wall clock:

1. **cold start**: the helpers started first and waited for (the conductor's service row; the
   reporters serving their topic); the clock starts as the node managers start (the computes; the
   daemons); done when ``GET /resource_providers?resources=RC:1`` (polled every second) lists
   every node; the first provider's time beside it.
2. **steady state**: after ``--settle`` s, ``--window`` s with no change in Ironic and no request
   from this script: CPU seconds of the compute side (Nova: conductor with its workers and the
   computes; computed: daemons and reporters) as a share of one core, and the requests
   Placement's and Ironic's access logs recorded in the window, per minute.
3. **events**: maintenance on for ``--events`` random nodes, one ``PUT`` every ``--spacing`` s;
   per node, from the ``PUT`` returning until its provider's inventory has reserved = total
   (polled with a backoff from 20 ms to 1 s); p50 and p95. ``--event-limit`` bounds the wait.
4. **failover**: another random node; its manager (Nova: ``compute_nodes.host``; computed: the
   node's claim znode) killed with SIGKILL, then at once maintenance on that node; until Placement
   shows it reserved (``--failover-limit``). Beside it: when the killed service was seen gone
   (Nova: its last heartbeat + ``service_down_time`` 60 s; computed: its ZooKeeper member znode
   gone).

The 1-minute load average is sampled through every phase and printed with the figures. A phase
that does not finish in its limit says so and the system's remaining phases at that node count
are skipped (10,000 nodes: Nova's cold start may not end within ``--cold-limit``). Everything
started is stopped at the end, also on Ctrl-C or SIGTERM. Never part of tools/run-tests.

Run from the repository root::

    .venv/bin/python -m bench.nova_bench --nodes 300,3000 [--runs 1] [--window 300]
        [--settle 60] [--events 20] [--write-md]
"""

from __future__ import annotations

import datetime
import json
import os
import random
import signal
import sys
import threading
import time
import uuid as uuidlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import sqlalchemy as sa
from kazoo.exceptions import NoNodeError

from bench import sidebyside
from bench.common import (
    MemberWatch,
    arguments,
    command,
    machine,
    publish,
    say,
    section_head,
    stack_for,
    workdir_or_tmp,
)
from bench.failover_bench import maintenance, product_defaults
from bench.report_bench import Http, cpu_snapshot
from bench.seed import make_template, seed_nodes, unseed_nodes
from computed import db
from computed.fleet.claims import claims_path
from computed.fleet.membership import fleet_root
from computed.providers.state import normalise_resource_class
from computed.testing.nova import Nova
from tests.functional.daemons import Daemon, Reporter, dump_logs, zk_client

SECTION = "## Against Nova's own Ironic driver, side by side (issue 27 item 1)"
KEEP = "<!-- nova_bench.py keeps the text below this line when it rewrites the section -->"
SERVICES = ["zookeeper", "rabbitmq", "postgres", "placement", "ironic"]
NOVA_SERVICE_DOWN_TIME = 60.0  # Nova's [DEFAULT] service_down_time default, left as it is
POLL_FIRST, POLL_MAX = 0.02, 1.0


class PhaseFailed(Exception):
    """A phase that did not finish; its message is the line printed."""


# --- the two systems ------------------------------------------------------------------------

class Side:
    """One system's processes on one node set. Subclasses say how they start and who owns a node."""

    name = ""

    def __init__(self, stack, workdir: Path, args, tag: str, unique: str):
        self.stack, self.args, self.tag, self.unique = stack, args, tag, unique
        self.workdir = workdir / f"{self.name}-{tag}"
        self.workdir.mkdir(parents=True, exist_ok=True)

    def prepare(self) -> None:
        """Everything before the clock: databases and the helper processes, up and ready."""

    def start(self) -> None:
        """Start the node managers (the clock of the cold start is running)."""

    def pids(self) -> list[int]:
        """The compute side's processes now (children included)."""
        raise NotImplementedError

    def dead(self, spared=()) -> list[str]:
        """The names of processes that exited, but ``spared``."""
        raise NotImplementedError

    def owner(self, node: str):
        """The process that manages ``node`` now (killable), or None."""
        raise NotImplementedError

    def gone_after(self, victim, t_kill: float) -> float | None:
        """Seconds from the kill until the system saw the victim gone, or None."""
        return None

    def logs(self) -> str:
        return f"logs in {self.workdir}"

    def close(self) -> None:
        raise NotImplementedError


def with_children(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            out += [pid] + [c.pid for c in psutil.Process(pid).children(recursive=True)]
        except psutil.Error:
            pass
    return out


class NovaSide(Side):
    name = "nova"

    def __init__(self, *args):
        super().__init__(*args)
        self.nova = Nova(self.stack, self.workdir, self.unique)
        self.engine = None
        self.computes: list = []

    def prepare(self) -> None:
        self.nova.setup()
        self.engine = sa.create_engine(self.nova.database)
        self.conductor = self.nova.start("nova-conductor", f"conductor-{self.tag}")
        deadline = time.monotonic() + 300
        while not self._service_row("nova-conductor", self.conductor.host):
            if not self.conductor.alive or time.monotonic() > deadline:
                raise PhaseFailed(f"nova-conductor did not register its service "
                                  f"({self.conductor.log})")
            time.sleep(1)

    def _service_row(self, binary: str, host: str):
        with self.engine.connect() as conn:
            return conn.execute(sa.text(
                "SELECT last_seen_up, updated_at, created_at FROM services WHERE \"binary\" = :b "
                "AND host = :h AND deleted = 0"), {"b": binary, "h": host}).first()

    def start(self) -> None:
        self.computes = [self.nova.start("nova-compute", f"compute{i}-{self.tag}")
                         for i in range(1, self.args.nova_computes + 1)]

    def pids(self) -> list[int]:
        return with_children([p.pid for p in self.nova.processes if p.alive])

    def dead(self, spared=()) -> list[str]:
        return [p.host for p in self.nova.processes if not p.alive and p not in spared]

    def owner(self, node: str):
        with self.engine.connect() as conn:
            host = conn.execute(sa.text(
                "SELECT host FROM compute_nodes WHERE hypervisor_hostname = :n AND deleted = 0"),
                {"n": node}).scalar()
        return next((p for p in self.computes if p.host == host), None)

    def gone_after(self, victim, t_kill: float) -> float | None:
        row = self._service_row("nova-compute", victim.host)
        seen = row and next((t for t in row if t is not None), None)
        if seen is None:
            return None
        last = seen.replace(tzinfo=datetime.timezone.utc).timestamp()  # Nova stores UTC
        return last + NOVA_SERVICE_DOWN_TIME - t_kill

    def logs(self) -> str:
        tails = []
        for p in self.nova.processes:
            lines = p.log.read_text(errors="replace").splitlines() if p.log.exists() else []
            tails.append(f"--- {p.host} ({p.log})\n" + "\n".join(lines[-15:]))
        return "\n".join(tails)

    def close(self) -> None:
        self.nova.stop()
        if self.engine is not None:
            self.engine.dispose()


class ComputedSide(Side):
    name = "computed"

    def __init__(self, *args):
        super().__init__(*args)
        self.processes: list = []
        self.daemons: list = []
        self.zk = self.watch = None

    def prepare(self) -> None:
        self.group = self.unique
        self.database = self.stack["postgres"].create_database(f"nova_bench_{self.group}")
        self.stack.save()
        db.sync(self.database)
        self.defaults = product_defaults()
        self.zk = zk_client(self.stack)
        self.watch = MemberWatch(self.stack, self.group)
        reporters = [self._start(Reporter, f"r{i}-{self.tag}")
                     for i in range(1, self.args.reporters + 1)]
        for reporter in reporters:
            reporter.wait_log("serving topic", timeout=300)

    def _start(self, cls, host: str):
        d = self.defaults
        p = cls(self.stack, self.workdir, host, session_timeout=self.args.session,
                refresh=d["refresh"], weight=d["weight"], drain_timeout=d["drain_timeout"],
                rehome_grace=d["rehome_grace"], group=self.group, database=self.database)
        # the test helper's two test settings back to the product's: call_timeout, no audit log
        text = p.conf.read_text().replace("call_timeout = 10\n",
                                          f"call_timeout = {d['call_timeout']}\n")
        p.conf.write_text("\n".join(line for line in text.splitlines()
                                    if not line.startswith("audit_log = ")) + "\n")
        self.processes.append(p.start())
        return p

    def start(self) -> None:
        self.daemons = [self._start(Daemon, f"c{i}-{self.tag}")
                        for i in range(1, self.args.daemons + 1)]

    def pids(self) -> list[int]:
        return with_children([p.proc.pid for p in self.processes if p.alive])

    def dead(self, spared=()) -> list[str]:
        return [p.host for p in self.processes if not p.alive and p not in spared]

    def owner(self, node: str):
        try:
            data, _ = self.zk.get(f"{claims_path(fleet_root(self.group))}/{node}")
        except NoNodeError:
            return None
        host = json.loads(data).get("host")
        return next((d for d in self.daemons if d.host == host), None)

    def gone_after(self, victim, t_kill: float) -> float | None:
        gone = self.watch.first(t_kill, lambda members: victim.host not in members)
        return None if gone is None else gone - t_kill

    def logs(self) -> str:
        return dump_logs(self.processes)

    def close(self) -> None:
        for p in self.processes:
            try:
                p.ensure_stopped()
            except Exception as exc:  # keep stopping the others
                say(f"  stopping {p.host}: {exc}")
        for closing in (self.watch and self.watch.close, self.zk and self.zk.stop,
                        self.zk and self.zk.close):
            try:
                if closing:
                    closing()
            except Exception:
                pass


SIDES = {"nova": NovaSide, "computed": ComputedSide}


# --- the phases -----------------------------------------------------------------------------

class Phases:
    """The four measurements of one system on one node set."""

    def __init__(self, stack, side: Side, nodes: list[str], rc: str, args):
        self.stack, self.side, self.nodes, self.rc, self.args = stack, side, nodes, rc, args
        self.http = Http(stack["placement"].url)
        self.loads: dict[str, list[float]] = {}
        self.killed: tuple = ()
        self.unfinished: dict = {}  # how far a cold start that hit its limit got

    def load(self, phase: str) -> None:
        self.loads.setdefault(phase, []).append(os.getloadavg()[0])

    def alive_or_fail(self, what: str) -> None:
        dead = self.side.dead(self.killed)
        if dead:
            raise PhaseFailed(f"{self.side.name}: {', '.join(dead)} exited during {what}\n"
                              f"{self.side.logs()}")

    def schedulable(self) -> int:
        try:
            return len(self.http("GET", f"/resource_providers?resources={self.rc}:1")[
                "resource_providers"])
        except (RuntimeError, OSError):
            return 0

    def inventories(self, node: str) -> dict | None:
        try:
            return self.http("GET", f"/resource_providers/{node}/inventories",
                             ok=(200,))["inventories"]
        except (RuntimeError, OSError):
            return None

    def cold_start(self) -> dict:
        self.load("cold")
        t0 = time.time()
        self.side.start()
        first = None
        deadline = t0 + self.args.cold_limit
        while (n := self.schedulable()) < len(self.nodes):
            if n and first is None:
                first = time.time() - t0
            self.alive_or_fail("the cold start")
            if time.time() > deadline:
                self.unfinished = {"cold_over": self.args.cold_limit, "cold_count": n,
                                   "first": first}
                raise PhaseFailed(f"{self.side.name}: only {n} of {len(self.nodes)} providers "
                                  f"schedulable {self.args.cold_limit:.0f} s after the start")
            self.load("cold")
            time.sleep(1.0)
        done = time.time() - t0
        self.load("cold")
        return {"cold": done, "first": done if first is None else first}

    def steady(self) -> dict:
        time.sleep(self.args.settle)
        self.alive_or_fail("the settling")
        pids = self.side.pids()
        self.load("steady")
        c0, t0, w0 = cpu_snapshot({"side": pids}), time.monotonic(), time.time()
        while (left := self.args.window - (time.monotonic() - t0)) > 0:
            time.sleep(min(10.0, left))
            self.load("steady")
        c1, window, w1 = cpu_snapshot({"side": pids}), time.monotonic() - t0, time.time()
        self.alive_or_fail("the steady window")
        placement = count_log(self.stack["placement"].log, "placement.requestlog", w0, w1)
        ironic = count_log(self.stack["ironic"].log, "ironic.api", w0, w1)
        return {"cpu": (c1["side"] - c0["side"]) / window,
                "placement_rpm": sidebyside.per_minute(sum(placement.values()), window),
                "ironic_rpm": sidebyside.per_minute(sum(ironic.values()), window),
                "window": window, "placement_requests": dict(placement),
                "ironic_requests": dict(ironic)}

    def wait_reserved(self, node: str, since: float, limit: float, out: dict) -> None:
        """Poll ``node``'s inventory until it is reserved; its seconds since ``since`` in
        ``out[node]``."""
        pause = POLL_FIRST
        while time.time() < since + limit:
            inventories = self.inventories(node)
            if inventories is not None and sidebyside.reserved_changed(inventories, self.rc):
                out[node] = time.time() - since
                return
            time.sleep(pause)
            pause = min(POLL_MAX, pause * 1.5)

    def events(self, chosen: list[str]) -> dict:
        url = self.stack["ironic"].url
        seen: dict[str, float] = {}
        threads = []
        self.load("events")
        for node in chosen:
            t_call = time.time()
            maintenance(url, node)
            t_api = time.time()
            thread = threading.Thread(target=self.wait_reserved,
                                      args=(node, t_api, self.args.event_limit, seen),
                                      daemon=True)
            thread.start()
            threads.append(thread)
            time.sleep(max(0.0, self.args.spacing - (time.time() - t_call)))
        while any(t.is_alive() for t in threads):
            self.alive_or_fail("the events")
            self.load("events")
            for t in threads:
                t.join(timeout=5)
        self.load("events")
        return {"events": sorted(seen.values()), "events_missed": len(chosen) - len(seen)}

    def failover(self, node: str) -> dict:
        victim = self.side.owner(node)
        if victim is None:
            raise PhaseFailed(f"{self.side.name}: node {node} has no manager to kill")
        self.load("failover")
        self.killed = (victim,)
        t_kill = time.time()
        victim.proc.send_signal(signal.SIGKILL)
        maintenance(self.stack["ironic"].url, node)
        victim.proc.wait(10)
        out: dict[str, float] = {}
        waiter = threading.Thread(target=self.wait_reserved,
                                  args=(node, t_kill, self.args.failover_limit, out),
                                  daemon=True)
        waiter.start()
        while waiter.is_alive():
            self.alive_or_fail("the failover")
            self.load("failover")
            waiter.join(timeout=5)
        self.load("failover")
        return {"failover": out.get(node), "down": self.side.gone_after(victim, t_kill),
                "victim": victim.host}

    def figures(self) -> dict:
        return {phase: (min(v), max(v)) for phase, v in self.loads.items()}


def count_log(path: Path, marker: str, t_from: float, t_to: float):
    with open(path, errors="replace") as log:
        return sidebyside.count_requests(log, marker, t_from, t_to)


def delete_providers(http: Http, nodes: list[str]) -> None:
    """Remove a phase's providers from Placement, so that the next system starts on a Placement
    holding none of them (a provider already gone is fine)."""
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda u: http("DELETE", f"/resource_providers/{u}", ok=(204, 404)),
                      nodes))


def one_phase(stack, workdir: Path, args, system: str, count: int, run: int, base: str,
              result: dict) -> dict:
    """One system on a fresh node set: every figure it reached, ``failed`` naming what did not.
    ``result`` is filled in as the phases end, so that a run stopped half-way keeps what was
    measured."""
    tag = f"{system[0]}{count}r{run}"
    prefix = f"{base}-{tag}"
    resource_class = f"bench-{prefix}"
    rc = normalise_resource_class(resource_class)
    url = stack["ironic"].url
    result.update(system=system, nodes=count, run=run)
    began = time.monotonic()
    side = SIDES[system](stack, workdir, args, tag, f"{base}{tag}")
    phases = None
    nodes: list[str] = []
    try:
        make_template(url, prefix, resource_class)
        nodes = seed_nodes(stack, count, prefix=prefix, resource_class=resource_class, log=say)
        side.prepare()
        phases = Phases(stack, side, nodes, rc, args)
        result.update(phases.cold_start())
        say(f"  {system} {count} run {run}: cold start {result['cold']:.1f} s (first provider "
            f"{result['first']:.1f} s); load {os.getloadavg()[0]:.1f}")
        result.update(phases.steady())
        say(f"  {system} {count} run {run}: steady {result['window']:.0f} s: CPU "
            f"{100 * result['cpu']:.1f} % of a core; Placement {result['placement_rpm']:.1f}/min "
            f"{result['placement_requests']}; Ironic {result['ironic_rpm']:.1f}/min "
            f"{result['ironic_requests']}")
        sample = random.sample(nodes, min(args.events, len(nodes) - 1))
        result.update(phases.events(sample))
        say(f"  {system} {count} run {run}: events: {len(result['events'])} of {len(sample)} "
            f"seen, p50 {sidebyside.percentile(result['events'], 50)}, p95 "
            f"{sidebyside.percentile(result['events'], 95)}")
        result.update(phases.failover(random.choice(sorted(set(nodes) - set(sample)))))
        say(f"  {system} {count} run {run}: kill -9 {result['victim']} -> change in Placement "
            f"after {result['failover']} s (seen gone after {result['down']} s)")
    except PhaseFailed as exc:
        say(f"  {system} {count} run {run}: FAILED: {exc}")
        result["failed"] = str(exc).splitlines()[0]
        if phases is not None:
            result.update(phases.unfinished)
    except (KeyboardInterrupt, SystemExit):
        result["failed"] = "stopped before its end (Ctrl-C or SIGTERM)"
        raise
    except Exception as exc:  # an unexpected error fails this phase, not the benchmark
        say(f"  {system} {count} run {run}: FAILED: {type(exc).__name__}: {exc}")
        result["failed"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        if phases is not None:
            result["loads"] = phases.figures()
        result["elapsed"] = time.monotonic() - began
        try:
            side.close()
        except Exception as exc:
            say(f"  closing {system}: {exc}")
        try:
            unseed_nodes(stack, prefix)
            delete_providers(Http(stack["placement"].url), nodes)
        except Exception as exc:
            say(f"  deleting {prefix}'s nodes and providers: {exc}")
    return result


# --- reporting ------------------------------------------------------------------------------

def combined(results: list[dict]) -> dict[int, dict[str, dict]]:
    out: dict[int, dict[str, dict]] = {}
    for count in sorted({r["nodes"] for r in results}):
        out[count] = {system: sidebyside.combine([r for r in results if r["nodes"] == count
                                                  and r["system"] == system])
                      for system in SIDES}
    return out


def notes(results: list[dict]) -> list[str]:
    lines = []
    for r in results:
        head = f"{r['system']}, {r['nodes']:,} nodes, run {r['run']}: "
        loads = "; ".join(f"{p} {lo:.1f}-{hi:.1f}" for p, (lo, hi) in
                          (r.get("loads") or {}).items())
        parts = [f"{k} {r[k]:.2f}" for k in ("cold", "first", "failover", "down")
                 if r.get(k) is not None]
        if r.get("cpu") is not None:
            parts.append(f"CPU {100 * r['cpu']:.1f} %")
        if r.get("placement_requests") is not None:
            parts.append(f"Placement requests in the window {r['placement_requests']}")
            parts.append(f"Ironic requests {r['ironic_requests']}")
        if r.get("failed"):
            parts.append(f"FAILED: {r['failed']}")
        if r.get("note"):  # said of a result by hand (e.g. figures recovered from the run's log)
            parts.append(r["note"])
        lines.append(head + "; ".join(parts) + f"; loads {loads}")
    return lines


SETTINGS = ("nova_computes", "daemons", "reporters", "session", "window", "settle", "events")


def load_range(results: list[dict]) -> str:
    """"low-high" of the 1-minute load over every phase of ``results``, "not kept" without."""
    seen = [v for r in results for pair in (r.get("loads") or {}).values() for v in pair]
    return f"{min(seen):.1f}-{max(seen):.1f}" if seen else "(not kept)"


def markdown(results: list[dict], info: dict) -> str:
    """The section of BENCHMARKS.md, from the results and the settings they were taken with."""
    s = results[0]["settings"]
    body = section_head(SECTION, info["command"], "ZooKeeper, RabbitMQ, PostgreSQL, Placement "
                        "and Ironic, and Nova's conductor and computes") + [
        f"Machine: {machine()}; the 1-minute load average went {load_range(results)} over "
        f"the phases (each phase's range in the table; on 2 cores, above 2 means something "
        f"waited for a core). Nova 34.0.0: 1 `nova-conductor` and "
        f"{s['nova_computes']} `nova-compute` (`ironic.IronicDriver`), Nova's defaults "
        f"(`update_resources_interval` 0: the 60 s periodic pass; `service_down_time` 60 s). "
        f"computed: {s['daemons']} daemons and {s['reporters']} reporters at the product's "
        f"defaults, ZooKeeper session {s['session']} s. Steady window {s['window']:.0f} s after "
        f"{s['settle']:.0f} s settling; {s['events']} maintenance changes per system and run; "
        f"one kill per run. Commit {info['commit']}; the phases took "
        f"{sum(r.get('elapsed', 0) for r in results):.0f} s in all.",
        "",
    ] + sidebyside.table(combined(results)) + [""] + [f"- {line}" for line in notes(results)]
    return "\n".join(body + [""])


def commit() -> str:
    import subprocess
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def report_saved(args) -> int:
    """The table (and with --write-md the section) of the results.json files of earlier runs,
    e.g. one stopped before its end, or one per node count."""
    results: list[dict] = []
    for path in args.from_results:
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            say(f"--from-results {path}: cannot read it: {exc}")
            return 2
        if not isinstance(saved, list) or not saved or not all(
                isinstance(r, dict) and {"system", "nodes", "settings"} <= set(r)
                for r in saved):
            say(f"--from-results {path}: not a nova_bench results.json")
            return 2
        results += saved
    commands = list(dict.fromkeys(r.get("command", "?") for r in results))
    info = {"command": "\n    ".join(commands),
            "commit": ", ".join(dict.fromkeys(r.get("commit", "?") for r in results))}
    say("\n".join(sidebyside.table(combined(results))))
    say("\n".join(notes(results)))
    publish(args, SECTION, lambda: markdown(results, info), KEEP)
    return 0


# --- main -------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--nodes", default="300",
                        help="node counts, comma separated (e.g. 300,3000,10000)")
    parser.add_argument("--runs", type=int, default=1, help="runs per node count")
    parser.add_argument("--systems", default="nova,computed",
                        help="which systems to run (both for the comparison)")
    parser.add_argument("--nova-computes", type=int, default=2)
    parser.add_argument("--daemons", type=int, default=3)
    parser.add_argument("--reporters", type=int, default=2)
    parser.add_argument("--session", type=int, default=10,
                        help="computed's ZooKeeper session timeout, s (tooz's default: 10)")
    parser.add_argument("--settle", type=float, default=60.0,
                        help="seconds between the cold start's end and the steady window")
    parser.add_argument("--window", type=float, default=300.0, help="steady window, s")
    parser.add_argument("--events", type=int, default=20, help="maintenance changes per system")
    parser.add_argument("--spacing", type=float, default=0.5, help="seconds between changes")
    parser.add_argument("--cold-limit", type=float, default=1800.0, help="s")
    parser.add_argument("--event-limit", type=float, default=900.0, help="s per change")
    parser.add_argument("--failover-limit", type=float, default=1200.0, help="s")
    parser.add_argument("--from-results", type=Path, nargs="+",
                        help="print (and with --write-md write) the table of the results.json "
                             "files earlier runs left (one stopped before its end, one per node "
                             "count); runs nothing")
    args = parser.parse_args(argv)
    if args.from_results:
        return report_saved(args)
    try:
        counts = [int(n) for n in args.nodes.split(",") if n]
        systems = [s for s in args.systems.split(",") if s]
    except ValueError:
        parser.error(f"--nodes: a comma-separated list of numbers, got {args.nodes!r}")
    unknown = set(systems) - set(SIDES)
    if unknown or not systems:
        parser.error(f"--systems: {', '.join(sorted(unknown)) or 'none'}: known are "
                     f"{', '.join(SIDES)}")
    if any(n < 2 for n in counts) or args.runs < 1 or args.window <= 0:
        parser.error("--nodes must be >= 2 each, --runs >= 1 and --window > 0")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.monotonic()
    workdir = workdir_or_tmp(args.workdir, "nova-bench-")
    base = f"nb{uuidlib.uuid4().hex[:6]}"
    results: list[dict] = []
    stamp = {"command": command("bench.nova_bench", argv), "commit": commit(),
             "settings": {k: getattr(args, k) for k in SETTINGS}}
    with stack_for(args, workdir, SERVICES, base) as stack:
        if "postgres" not in stack:
            raise SystemExit("this benchmark needs PostgreSQL (Nova's databases, computed's)")
        say(f"stack up after {time.monotonic() - began:.0f} s; load {os.getloadavg()[0]:.1f}")
        try:
            for count in counts:
                for run in range(1, args.runs + 1):
                    order = systems if run % 2 else list(reversed(systems))
                    for system in order:
                        # in the list before it is measured: a stop keeps its figures so far
                        results.append(dict(stamp))
                        one_phase(stack, workdir, args, system, count, run, base, results[-1])
                        (workdir / "results.json").write_text(json.dumps(results, indent=1))
        finally:
            (workdir / "results.json").write_text(json.dumps(
                [r for r in results if "system" in r], indent=1))
    info = {"command": stamp["command"], "commit": stamp["commit"]}
    say("")
    say(f"machine: {machine()}")
    say("\n".join(sidebyside.table(combined(results))))
    say("\n".join(notes(results)))
    if set(systems) == set(SIDES):
        publish(args, SECTION, lambda: markdown(results, info), KEEP)
    say(f"logs in {workdir}; took {time.monotonic() - began:.0f} s")
    return 1 if any(r.get("failed") for r in results) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the with blocks and finally clauses have stopped everything
        say("interrupted; every process and service this benchmark started is stopped")
        sys.exit(130)
