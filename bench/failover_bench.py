"""Failover as the user sees it (issue 13 item 1): kill -9 a daemon, change one of its nodes at
once, and time until Placement shows the change.

The fleet benchmark (bench/fleet_bench.py) stops the clock at "last node claimed"; an operator
sees something later: the moment Placement tells the truth about a node the dead daemon held.
This benchmark measures that, from outside every process, on this script's wall clock.

Each run, for each ZooKeeper session timeout of ``--sessions``, starts from nothing:

1. ``--nodes`` fresh Ironic nodes (fake-hardware, ``available``, ``power off``: reserved 0), seeded
   as bench/seed.py does (one node through the API, its row copied), with a resource class of
   their own; a fresh computed database (PostgreSQL where the stack has it, else sqlite).
2. One ``computed-reporter`` and 3 ``computed`` daemons as processes
   (:mod:`tests.functional.daemons`), every option at the product's default (read from
   computed's option definitions) except the ZooKeeper session timeout under test (and the
   fleet's group and reporter topic, unique per run). No audit log (off by default).
3. Wait until Placement lists every node's provider as schedulable (``GET
   /resource_providers?resources=CLASS:1``: reserved 0) and ZooKeeper's claims are the rules'
   answer for the 3 daemons (``wait_converged``).
4. Pick a node at random, read its owner from its claim znode, ``time.time()``, SIGKILL the
   owner, and at once ``PUT /v1/nodes/NODE/maintenance`` in Ironic (its notification goes out).
5. Poll Placement every 50 ms (``GET /resource_providers/NODE/inventories``) until the node's
   inventory has reserved = 1. **That time, from just before the SIGKILL, is the figure.**

Beside it, as internal figures: the kill -> the node's claim znode re-created by a survivor (the
znode's ``ctime``, ZooKeeper's wall clock on this machine), the kill -> the victim's member znode
gone (this script's own ZooKeeper watch: the session expired), and the Ironic call's own time.
Recorded with each run: the load average at the kill (``os.getloadavg``) and the seconds from
the daemons' start to the kill (the survivors' last full listing is at most that old, or
``node_refresh_interval`` if that is shorter).

Every wait is bounded: a run whose fleet does not settle in 120 s (``--settle-limit``), or whose
change is not in Placement 120 s after the kill, fails with a line saying so, is cleaned up
(processes killed, its nodes deleted from Ironic) and the next run goes on. Everything started
is stopped at the end, also on Ctrl-C or SIGTERM.

Run from the repository root (starts and stops its own ZooKeeper, RabbitMQ, PostgreSQL where
available, Placement and Ironic; all on 127.0.0.1)::

    .venv/bin/python -m bench.failover_bench [--runs 3] [--sessions 3,10] [--nodes 300]
        [--ensemble] [--write-md]

``--ensemble`` runs ZooKeeper as an ensemble of 3 servers on loopback (the daemons' URL lists
the three) instead of one; the figures are written only without it.

or against a stack from ``tools/services up`` (``--stack-dir .services``; the seeded nodes are
deleted, the providers the runs created are left in its Placement).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import statistics
import sys
import time
import urllib.error
import uuid as uuidlib
from pathlib import Path

from kazoo.exceptions import NoNodeError

from bench.common import (
    MemberWatch,
    arguments,
    command,
    fmt,
    machine,
    machine_facts,
    publish,
    say,
    section_head,
    stack_for,
    workdir_or_tmp,
)
from bench.fleet_bench import negotiated_timeout
from bench.report_bench import Http
from bench.seed import make_template, seed_nodes, unseed_nodes
from computed import db
from computed.conf.opts import list_opts
from computed.fleet.claims import claims_path, read_claims
from computed.fleet.membership import fleet_root
from computed.providers.state import normalise_resource_class
from computed.testing.ironic import request
from tests.functional.daemons import (
    Daemon,
    Reporter,
    dump_logs,
    fleet_database,
    wait_converged,
    zk_client,
)

SECTION = "## Providers: failover as the user sees it (issue 13)"
KEEP = "<!-- failover_bench.py keeps the text below this line when it rewrites the section -->"
SERVICES = ["zookeeper", "rabbitmq", "postgres", "placement", "ironic"]
LIMIT = 120.0       # seconds a run may take to settle (default), and then to show the change
POLL = 0.05         # Placement poll period after the kill
GOAL_MARGIN = 2.0   # the goal: session timeout + 2 s


class RunFailed(Exception):
    """A run that did not converge in time; its message is the line printed."""


def product_defaults() -> dict:
    """The options the test helper writes into a process's config, at the product's defaults."""
    default = {(str(group), opt.dest): opt.default for group, opts in list_opts()
               for opt in opts}
    return {"refresh": default["fleet", "node_refresh_interval"],
            "weight": default["fleet", "weight"],
            "drain_timeout": default["fleet", "drain_timeout"],
            "rehome_grace": default["fleet", "rehome_grace"],
            "call_timeout": default["reporter", "call_timeout"]}


def maintenance(url: str, node: str, attempts: int = 20) -> None:
    """Put ``node`` in maintenance, as a client does: a 409 (the node is locked by a conductor's
    task for a moment) is tried again, on the clock of the measured figure."""
    for attempt in range(attempts):
        try:
            request("PUT", f"{url}/v1/nodes/{node}/maintenance", {"reason": "failover bench"})
            return
        except urllib.error.HTTPError as exc:
            if exc.code != 409 or attempt == attempts - 1:
                raise
            time.sleep(0.1)


# --- one run --------------------------------------------------------------------------------

class Run:
    """One fleet on fresh nodes: set up, kill, measure, clean up."""

    def __init__(self, stack, workdir: Path, args, session: int, number: int, base: str,
                 defaults: dict):
        self.stack, self.args, self.session, self.defaults = stack, args, session, defaults
        self.tag = f"s{session}r{number}"
        self.workdir = workdir / self.tag
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.prefix = f"{base}-{self.tag}"        # names base-sSrN-NNNNN: unseeded with base too
        self.resource_class = f"bench-{self.prefix}"                # Ironic's name
        self.rc = normalise_resource_class(self.resource_class)   # Placement's
        self.group = f"fo{uuidlib.uuid4().hex[:6]}{self.tag}"
        self.http = Http(stack["placement"].url)
        self.processes: list = []
        self.daemons: dict[str, Daemon] = {}
        self.nodes: list[str] = []
        self.killed: tuple = ()
        self.zk = self.watch = None

    def _start(self, cls, host: str):
        d = self.defaults
        process = cls(self.stack, self.workdir, host, session_timeout=self.session,
                      refresh=d["refresh"], weight=d["weight"], drain_timeout=d["drain_timeout"],
                      rehome_grace=d["rehome_grace"], group=self.group, database=self.database)
        # the helper's two test settings back to the product's: call_timeout, no audit log
        text = process.conf.read_text().replace("call_timeout = 10\n",
                                                f"call_timeout = {d['call_timeout']}\n")
        process.conf.write_text(re.sub(r"(?m)^audit_log = .*\n", "", text))
        self.processes.append(process.start())
        return process

    def _alive_or_fail(self, what: str) -> None:
        dead = [p.host for p in self.processes if not p.alive and p not in self.killed]
        if dead:
            raise RunFailed(f"{', '.join(dead)} exited while waiting for {what}; logs in "
                            f"{self.workdir}\n{dump_logs(self.processes)}")

    def schedulable(self) -> int:
        try:
            return len(self.http("GET", f"/resource_providers?resources={self.rc}:1")[
                "resource_providers"])
        except (RuntimeError, OSError):
            return 0

    def setup(self) -> dict:
        url = self.stack["ironic"].url
        t0 = time.monotonic()
        make_template(url, self.prefix, self.resource_class)
        self.nodes = seed_nodes(self.stack, self.args.nodes, prefix=self.prefix,
                                resource_class=self.resource_class, log=lambda _: None)
        if "postgres" in self.stack:
            self.database = self.stack["postgres"].create_database(f"failover_{self.group}")
            self.stack.save()
            db.sync(self.database)
        else:
            self.database = fleet_database(self.workdir)
        seeded = time.monotonic() - t0
        self.zk = zk_client(self.stack)
        self.watch = MemberWatch(self.stack, self.group)
        self._start(Reporter, f"r1-{self.tag}").wait_log("serving topic", timeout=LIMIT)
        self.started = time.time()
        for i in (1, 2, 3):
            host = f"c{i}-{self.tag}"
            self.daemons[host] = self._start(Daemon, host)
        settle = self.args.settle_limit
        deadline = time.monotonic() + settle
        while (n := self.schedulable()) < len(self.nodes):
            self._alive_or_fail("the providers")
            if time.monotonic() > deadline:
                raise RunFailed(f"only {n} of {len(self.nodes)} providers schedulable in "
                                f"Placement {settle:.0f} s after the daemons' start")
            time.sleep(0.5)
        reported = time.time() - self.started
        try:
            wait_converged(self.zk, self.nodes, set(self.daemons), group=self.group,
                           timeout=max(1.0, deadline - time.monotonic()))
        except AssertionError as exc:
            raise RunFailed(f"claims did not converge {settle:.0f} s after the daemons' "
                            f"start: {exc}") from None
        return {"seeded": seeded, "reported": reported, "converged": time.time() - self.started}

    def owner(self, node: str) -> tuple[str | None, float | None]:
        """(host, ctime) of the node's claim znode, or (None, None) while there is none."""
        try:
            data, stat = self.zk.get(f"{claims_path(fleet_root(self.group))}/{node}")
        except NoNodeError:
            return None, None
        return json.loads(data).get("host"), stat.ctime / 1000

    def reserved(self, node: str) -> int | None:
        try:
            inventories = self.http("GET", f"/resource_providers/{node}/inventories")
        except (RuntimeError, OSError):
            return None
        return inventories["inventories"].get(self.rc, {}).get("reserved")

    def failover(self) -> dict:
        # The survivors' last full listing is as old as the time since their start, up to one
        # node_refresh_interval: wait a random part of it, so that the runs sample the whole
        # listing cycle (the 9-24 s came from kills late in the cycle).
        time.sleep(random.uniform(0, self.args.listing_age))
        node = random.choice(self.nodes)
        victim, _ = self.owner(node)
        if victim not in self.daemons:
            raise RunFailed(f"node {node}: claim held by {victim!r}, not one of the daemons")
        held = sum(1 for c in read_claims(self.zk, fleet_root(self.group)).values()
                   if c.host == victim)
        load = os.getloadavg()
        process = self.daemons[victim]
        self.killed = (process,)
        t_kill = time.time()
        process.proc.send_signal(signal.SIGKILL)
        maintenance(self.stack["ironic"].url, node)
        t_put = time.time()
        process.proc.wait(10)
        seen = claimed = None
        deadline = t_kill + LIMIT
        while time.time() < deadline:
            if seen is None and self.reserved(node) == 1:
                seen = time.time()
            if claimed is None:
                host, ctime = self.owner(node)
                if host not in (None, victim):
                    claimed = ctime
            if seen is not None and claimed is not None:
                break
            self._alive_or_fail("the failover")
            time.sleep(POLL)
        gone = self.watch.first(t_kill, lambda members: victim not in members)
        result = {"node": node, "victim": victim, "held": held, "load": load,
                  "since_start": t_kill - self.started, "put": t_put - t_kill,
                  "placement": None if seen is None else seen - t_kill,
                  "claim": None if claimed is None else claimed - t_kill,
                  "detection": None if gone is None else gone - t_kill}
        if seen is None:
            raise RunFailed(f"node {node}: Placement did not show reserved = 1 within "
                            f"{LIMIT:.0f} s of kill -9 {victim} (claim re-created "
                            f"+{fmt(result['claim'])} s, session expired "
                            f"+{fmt(result['detection'])} s)", result)
        return result

    def close(self, log=say) -> None:
        for process in self.processes:
            try:
                process.ensure_stopped()
            except Exception as exc:  # keep stopping the others
                log(f"  stopping {process.host}: {exc}")
        for closing in (self.watch and self.watch.close,
                        self.zk and self.zk.stop, self.zk and self.zk.close):
            if closing:
                try:
                    closing()
                except Exception:
                    pass
        try:
            unseed_nodes(self.stack, self.prefix)
        except Exception as exc:
            log(f"  deleting the run's nodes: {exc}")


def one_run(stack, workdir: Path, args, session: int, number: int, base: str,
            defaults: dict) -> dict:
    """One run, as a result; a failure is a result with ``failed`` set, never an exception."""
    run = Run(stack, workdir, args, session, number, base, defaults)
    label = f"session {session} s, run {number}"
    try:
        setup = run.setup()
        say(f"  {label}: {len(run.nodes)} nodes seeded in {setup['seeded']:.1f} s; all "
            f"schedulable in Placement {setup['reported']:.1f} s, claims converged "
            f"{setup['converged']:.1f} s after the daemons' start")
        result = {"setup": setup, **run.failover()}
        say(f"  {label}: kill -9 {result['victim']} ({result['held']} nodes) + maintenance on "
            f"{result['node']} -> Placement reserved = 1 after {result['placement']:.2f} s "
            f"(claim re-created +{fmt(result['claim'])} s, session expired "
            f"+{fmt(result['detection'])} s, Ironic PUT {result['put']:.2f} s; load "
            f"{result['load'][0]:.2f}; kill {result['since_start']:.1f} s after the daemons' "
            f"start)")
        return result
    except RunFailed as exc:
        say(f"  {label}: FAILED: {exc.args[0]}")
        extra = exc.args[1] if len(exc.args) > 1 else {}
        return {**extra, "failed": exc.args[0].splitlines()[0]}
    except Exception as exc:  # an unexpected error fails this run, not the benchmark
        say(f"  {label}: FAILED: {type(exc).__name__}: {exc}")
        return {"failed": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    finally:
        run.close()


# --- reporting ------------------------------------------------------------------------------

def worst(values) -> float | None:
    values = [v for v in values if v is not None]
    return max(values) if values else None


def median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def table(results: dict[int, list[dict]], negotiated: dict) -> list[str]:
    sessions = sorted(results)
    rows = [("**kill -9 -> maintenance visible in Placement** (reserved = 1)", "placement"),
            ("  internal: kill -9 -> the node's claim re-created by a survivor (ctime)", "claim"),
            ("  internal: kill -9 -> the victim's session expired (member znode gone)",
             "detection"),
            ("  internal: the Ironic maintenance call itself", "put")]
    lines = ["| seconds | " + " | ".join(
        f"session {s} s: median | worst" for s in sessions) + " |",
        "|---|" + "---:|---:|" * len(sessions)]
    for label, key in rows:
        cells = []
        for s in sessions:
            values = [r.get(key) for r in results[s]]
            cells += [fmt(median(values)), fmt(worst(values))]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    goal, runs = [], []
    for s in sessions:
        bound = (negotiated.get(s) or s) + GOAL_MARGIN
        # a run whose change never showed is over the goal too
        over = sum(1 for r in results[s] if r.get("placement") is None or r["placement"] > bound)
        goal += [f"{bound:g}", f"{over} of {len(results[s])} runs over"]
        failed = sum(1 for r in results[s] if "failed" in r)
        runs += [f"{len(results[s])}", f"{failed} failed"]
    lines.append("| goal: session timeout (granted) + 2 s | " + " | ".join(goal) + " |")
    lines.append("| runs | " + " | ".join(runs) + " |")
    return lines


def per_run(results: dict[int, list[dict]]) -> list[str]:
    lines = []
    for s in sorted(results):
        for i, r in enumerate(results[s], 1):
            load = r.get("load")
            head = f"session {s} s, run {i}: "
            if "placement" not in r or r.get("placement") is None:
                lines.append(head + f"FAILED ({r.get('failed', '?')})")
                continue
            lines.append(head + f"{r['placement']:.2f} s (claim +{fmt(r['claim'])}, session "
                         f"expired +{fmt(r['detection'])}); {r['held']} nodes on the victim; "
                         f"load at the kill {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; kill "
                         f"{r['since_start']:.1f} s after the daemons' start")
    return lines


def markdown(args, results: dict, info: dict) -> str:
    d = info["defaults"]
    body = section_head(SECTION, info["command"], "ZooKeeper, RabbitMQ, PostgreSQL (where "
                        "available), Placement and Ironic") + [
        f"Machine: {machine()} (from /proc/cpuinfo); 1-minute load average {info['load']}. "
        f"Each run: {args.nodes} fresh Ironic nodes (fake-hardware, `available`, `power off`: "
        f"reserved 0; seeded by bench/seed.py), a fresh computed database ({info['backend']}), "
        f"one `computed-reporter` and 3 `computed` daemons as processes, every option at the "
        f"product's default (`node_refresh_interval` = {d['refresh']:g} s, `call_timeout` = "
        f"{d['call_timeout']} s, no audit log) but the ZooKeeper session timeout (granted: "
        + ", ".join(f"{s} s asked -> {fmt(info['negotiated'].get(s))} s"
                    for s in sorted(results))
        + "). Once Placement listed every provider as schedulable and the claims had "
        "converged: a node picked at random, its owner (its claim znode) killed with SIGKILL, "
        "then at once `PUT /v1/nodes/NODE/maintenance`. The figure: from `time.time()` just "
        "before the SIGKILL until a poll of Placement (every 50 ms) shows the node's inventory "
        "with reserved = 1, this script's wall clock. Internal figures beside it: the node's "
        "claim znode re-created by a survivor (its ctime), and the victim's member znode gone "
        f"(session expiry, this script's watch). Run took {info['elapsed']:.0f} s.",
        "",
    ] + table(results, info["negotiated"]) + [""] + [f"- {line}" for line in per_run(results)]
    return "\n".join(body + [""])


# --- main -------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--runs", type=int, default=3, help="runs per session timeout")
    parser.add_argument("--sessions", default="3,10",
                        help="ZooKeeper session timeouts to test, seconds, comma separated "
                             "(10 is tooz's default when the URL names none)")
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--listing-age", type=float, default=30.0,
                        help="wait a random 0..N s after convergence before the kill, so the "
                             "survivors' last listing is up to N s old (default 30: the "
                             "default node_refresh_interval)")
    parser.add_argument("--settle-limit", type=float, default=LIMIT,
                        help="seconds the fleet may take from the daemons' start to every "
                             "provider schedulable and claims converged (default 120; a "
                             "cold start of 10,000 nodes takes about 110 s on a quiet 2-core "
                             "machine)")
    parser.add_argument("--ensemble", action="store_true",
                        help="ZooKeeper as an ensemble of 3 servers on loopback")
    args = parser.parse_args(argv)
    sessions = [int(s) for s in args.sessions.split(",") if s]
    # SIGTERM ends the benchmark as Ctrl-C does: every finally below stops what it started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.monotonic()
    loads = [os.getloadavg()[0]]
    defaults = product_defaults()
    workdir = workdir_or_tmp(args.workdir, "failover-bench-")
    base = f"fo{uuidlib.uuid4().hex[:6]}"
    with stack_for(args, workdir, SERVICES, base,
                   zookeeper_servers=3 if args.ensemble else 1) as stack:
        backend = "PostgreSQL" if "postgres" in stack else "sqlite"
        say(f"stack up after {time.monotonic() - began:.0f} s; computed's database: {backend}; "
            f"product defaults used: {defaults}")
        negotiated = {s: negotiated_timeout(stack, s) for s in sessions}
        say(f"negotiated session timeouts: {negotiated}")
        results: dict[int, list[dict]] = {s: [] for s in sessions}
        for s in sessions:
            for number in range(1, args.runs + 1):
                results[s].append(one_run(stack, workdir, args, s, number, base, defaults))
                loads.append(os.getloadavg()[0])
                (workdir / "results.json").write_text(json.dumps(
                    {str(k): v for k, v in results.items()}, indent=1, default=str))
        facts = machine_facts()
        info = {"command": command("bench.failover_bench", argv), "defaults": defaults,
                "negotiated": negotiated, "backend": backend,
                "elapsed": time.monotonic() - began,
                "load": f"{min(loads):.1f} to {max(loads):.1f} between runs"}
        say("")
        say(f"machine: nproc = {facts['nproc']}, {facts['cpu']}; 1-minute load average "
            f"{info['load']} (at each kill: below)")
        say("\n".join(table(results, negotiated)))
        say("\n".join(per_run(results)))
        if args.ensemble:  # this section holds the one-server figures
            say("--ensemble: figures not written to BENCHMARKS.md")
        else:
            publish(args, SECTION, lambda: markdown(args, results, info), KEEP)
        say(f"logs in {workdir}; took {time.monotonic() - began:.0f} s")
        failed = sum(1 for rs in results.values() for r in rs if "failed" in r)
        return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the with blocks and finally clauses have stopped everything
        say("interrupted; every process and service this benchmark started is stopped")
        sys.exit(130)
