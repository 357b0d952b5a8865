"""Instance benchmark (issue 6): builds per minute through the whole path, and the time from a
daemon's death to its instances being manageable again.

Stack: ZooKeeper, RabbitMQ, PostgreSQL (where a server is available; else computed uses sqlite),
Placement, Ironic (fake-hardware, ``[fake] deploy_delay`` 0). ``--nodes`` nodes are seeded
available and powered off (bench/seed.py); a fresh computed database; one ``computed-reporter``
and three ``computed`` daemons as processes (:mod:`tests.functional.daemons`), ZooKeeper session
timeout ``--session`` and ``rehome_grace`` ``--grace``. Before the first run every node must be
schedulable: Placement lists all of them as able to take one unit of the class
(``GET /resource_providers?resources=CLASS:1``: reserved 0, no allocation).

Each of ``--runs`` runs:

1. **builds**: ``--builds`` builds through :class:`computed.instances.rpcapi.ServerAPI` (allocation
   candidates, allocation, instance row, cast; the owning daemon deploys through Ironic's fake
   driver and marks the instance ACTIVE), ``--threads`` client threads calling ``create``; one
   poller reads the instance rows every 0.1 s. Time from the first ``create`` call to the last
   instance done (ACTIVE or ERROR); per-build latency from its own ``create`` call to the poll
   that saw it done. Then every ACTIVE instance must hold exactly one allocation, one unit of the
   class on its own node, and the node in Ironic must be ``active`` with that ``instance_uuid``.
2. **death to manageable**: ``kill -9`` the daemon hosting the most of those instances. (a) time
   from the kill until every one of its instances has a live host in the database (poll every
   0.1 s; also its ``rehome`` audit records), split into detection (this script's own ZooKeeper
   watch sees the victim's member znode go: session expiry) and the rest (grace + adoption);
   (b) ``ServerAPI.action("reboot", uuid)`` on each as soon as (a) holds, until each is ACTIVE
   again with an ``updated_at`` after its cast. The victim is restarted under a new name.
3. **deletes**: ``ServerAPI.action("delete")`` on every instance of the run (same threads), until
   every one is DELETED; then no allocation may remain for any of them.

Run from the repository root (starts and stops its own stack)::

    .venv/bin/python -m bench.instance_bench [--nodes 200] [--builds 50] [--runs 3] [--write-md]

or against a stack from ``tools/services up`` (``--stack-dir .services``; seeded nodes are
deleted at the end).
"""

from __future__ import annotations

import datetime
import os
import statistics
import sys
import threading
import time
import uuid as uuidlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import sqlalchemy as sa

from bench.common import (
    MemberWatch,
    arguments,
    command,
    fmt,
    machine,
    machine_facts,
    median_range,
    placement_adapter,
    publish,
    stack_for,
    stop_all,
    workdir_or_tmp,
)
from bench.seed import make_template, seed_nodes
from computed import db
from computed.db import engine as db_engine
from computed.db import instances as db_instances
from computed.db import models
from computed.fleet.membership import fleet_root
from computed.instances import scheduler
from computed.instances.rpcapi import ComputeAPI, ServerAPI
from computed.placement import allocations
from computed.providers.state import normalise_resource_class
from computed.runtime import rpc
from hashring.ownership import compute_ownership
from tests.functional.daemons import (
    Daemon,
    Reporter,
    bus_conf,
    dump_logs,
    fleet_database,
    ironic,
    ownership_now,
    wait_converged,
    zk_client,
)

SECTION = "## Instances: builds and re-homing (issue 6)"
SERVICES = ["zookeeper", "rabbitmq", "postgres", "placement", "ironic"]
IMAGE = "http://127.0.0.1/images/bench.qcow2"
DONE = {"ACTIVE", "ERROR", "DELETED"}


def say(*args) -> None:
    print(time.strftime("%H:%M:%S"), *args, flush=True)


def pct(values, q) -> float | None:
    values = sorted(values)
    if not values:
        return None
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


# --- the world ------------------------------------------------------------------------------

class World:
    def __init__(self, stack, workdir: Path, args, nodes: list[str], resource_class: str):
        self.stack, self.args, self.workdir = stack, args, workdir
        self.nodes = nodes
        self.resource_class = resource_class
        self.rc = normalise_resource_class(resource_class)
        token = uuidlib.uuid4().hex[:6]
        self.group = f"ib{token}"
        if "postgres" in stack:
            self.database = stack["postgres"].create_database(f"instance_bench_{token}")
            stack.save()
            db.sync(self.database)
            self.backend = "PostgreSQL"
        else:
            self.database = fleet_database(workdir)
            self.backend = "sqlite"
        self.engine = db_engine.engine_from_url(self.database)
        self.table = models.Instance.__table__
        self.processes: list = []
        self.daemons: dict[str, Daemon] = {}
        self.zk = zk_client(stack)
        self.watch = MemberWatch(stack, self.group)
        self.placement = placement_adapter(stack, workdir)
        self.transport = rpc.get_transport(bus_conf(stack), "bench", url=stack["rabbitmq"].url)
        self.api = ServerAPI(self.engine, self.placement, ComputeAPI(self.transport),
                             scheduler.zookeeper_owner(self.zk, fleet_root(self.group)))

    def _start(self, cls, host: str, **kw):
        p = cls(self.stack, self.workdir, host, session_timeout=self.args.session,
                group=self.group, database=self.database, rehome_grace=self.args.grace,
                refresh=self.args.refresh, **kw).start()
        self.processes.append(p)
        return p

    def daemon(self, host: str) -> Daemon:
        d = self._start(Daemon, host)
        self.daemons[host] = d
        return d

    def reporter(self, host: str):
        return self._start(Reporter, host)

    def live_hosts(self) -> set[str]:
        return {h for h, d in self.daemons.items() if d.alive}

    def converge(self, timeout: float = 120) -> float:
        """Wait until exactly the live daemons are members and the claims are the rules'
        answer with the instances' hosts as sticky (``wait_converged`` without instances)."""
        if not db_instances.instance_hosts(self.engine):
            return wait_converged(self.zk, self.nodes, self.live_hosts(), timeout=timeout,
                                  group=self.group)
        started = time.monotonic()
        while True:
            members, claims = ownership_now(self.zk, self.group)
            want = compute_ownership([m.as_ring_member() for m in members], self.nodes,
                                     db_instances.instance_hosts(self.engine)).owners()
            if {m.name for m in members} == self.live_hosts() and claims == want:
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"not converged after {timeout} s\n"
                                   f"{dump_logs(self.processes)}")
            time.sleep(0.2)

    def schedulable(self) -> int:
        resp = self.placement.get(f"/resource_providers?resources={self.rc}:1", headers={
            "OpenStack-API-Version": "placement 1.39"}, raise_exc=False)
        if resp.status_code != 200:
            return 0
        return len(resp.json()["resource_providers"])

    def rows(self, uuids) -> dict[str, sa.Row]:
        with self.engine.connect() as conn:
            return {r.uuid: r for r in conn.execute(
                sa.select(self.table).where(self.table.c.uuid.in_(list(uuids))))}

    def allocations(self, instance_uuid: str) -> dict:
        return allocations.read(self.placement, instance_uuid)

    def close(self) -> None:
        stop_all(self.processes, timeout=20)
        try:
            self.transport.cleanup()
        except Exception:
            pass
        self.watch.close()
        self.zk.stop()
        self.zk.close()
        self.engine.dispose()


def poll_until(world: World, uuids, done, started: dict[str, float], timeout: float,
               what: str) -> dict[str, float]:
    """Poll the rows every 0.1 s until ``done(row)`` holds for each; {uuid: time first seen}."""
    seen: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    pending = set(uuids)
    while pending:
        now = time.time()
        for u, row in world.rows(pending).items():
            if done(row, started.get(u)):
                seen[u] = now
        pending -= seen.keys()
        if not pending:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: {len(pending)} of {len(uuids)} not done after "
                               f"{timeout:g} s\n{dump_logs(world.processes)}")
        time.sleep(0.1)
    return seen


# --- the scenarios --------------------------------------------------------------------------

def builds(world: World, count: int, threads: int) -> dict:
    created: dict[str, float] = {}
    refused = []
    lock = threading.Lock()

    def one(_):
        t0 = time.time()
        try:
            row = world.api.create(world.resource_class, image=IMAGE)
        except scheduler.NoValidHost as exc:
            with lock:
                refused.append(str(exc))
            return
        with lock:
            created[row.uuid] = t0

    load = os.getloadavg()[0]
    free_before = world.schedulable()
    t_first = time.time()
    stop = threading.Event()
    done_at: dict[str, float] = {}

    def poller():  # watch the rows while the creates are still being issued
        while not stop.is_set() or len(done_at) < len(created):
            with lock:
                pending = [u for u in created if u not in done_at]
            if pending:
                now = time.time()
                for u, row in world.rows(pending).items():
                    if row.state in DONE:
                        done_at[u] = now
            if time.time() - t_first > 300:
                return
            time.sleep(0.1)

    watcher = threading.Thread(target=poller, daemon=True)
    watcher.start()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(count)))
    t_created = time.time()
    stop.set()
    watcher.join(320)
    if len(done_at) < len(created):
        raise RuntimeError(f"builds: {len(created) - len(done_at)} not done after 300 s\n"
                           f"{dump_logs(world.processes)}")
    rows = world.rows(created)
    active = [r for r in rows.values() if r.state == "ACTIVE"]
    errors = [r for r in rows.values() if r.state != "ACTIVE"]
    bad_alloc = []
    for r in rows.values():
        want = {r.node_uuid: {world.rc: 1}} if r.state == "ACTIVE" else {}
        if world.allocations(r.uuid) != want:
            bad_alloc.append(r.uuid)
    bad_node = []
    for r in active:
        node = ironic(world.stack, "GET", f"/nodes/{r.node_uuid}")
        if node["provision_state"] != "active" or node["instance_uuid"] != r.uuid:
            bad_node.append(r.uuid)
    shared = len(active) - len({r.node_uuid for r in active})
    t_last = max(done_at.values())
    latencies = [done_at[u] - created[u] for u in created]
    per_host: dict[str, int] = {}
    for r in active:
        per_host[r.host] = per_host.get(r.host, 0) + 1
    result = {
        "uuids": list(created), "count": len(created), "refused": len(refused),
        "active": len(active), "error": len(errors),
        "faults": sorted({r.fault or "" for r in errors})[:3], "refusals": refused,
        "free_before": free_before,
        "elapsed": t_last - t_first, "create_phase": t_created - t_first,
        "per_min": len(active) / (t_last - t_first) * 60,
        "p50": pct(latencies, 0.5), "p95": pct(latencies, 0.95),
        "bad_alloc": len(bad_alloc), "bad_node": len(bad_node), "shared": shared,
        "per_host": per_host, "load": load,
    }
    say(f"  builds: {result['active']}/{count} ACTIVE, {result['error']} ERROR, "
        f"{result['refused']} refused in {result['elapsed']:.2f} s -> "
        f"{result['per_min']:.0f}/min (creates issued in {result['create_phase']:.2f} s); "
        f"latency p50 {fmt(result['p50'])} s p95 {fmt(result['p95'])} s; allocations wrong "
        f"{len(bad_alloc)}, Ironic nodes wrong {len(bad_node)}, shared nodes {shared}; "
        f"by host {per_host}; {free_before} nodes schedulable before"
        + (f"; faults {result['faults']}" if errors else "")
        + (f"; refused: {refused}" if refused else ""))
    return result


def rehome(world: World, uuids: list[str], run: int) -> dict:
    rows = world.rows(uuids)
    live = world.live_hosts()
    counts: dict[str, int] = {}
    for r in rows.values():
        if r.state == "ACTIVE" and r.host in live:
            counts[r.host] = counts.get(r.host, 0) + 1
    victim_host = max(counts, key=lambda h: counts[h])
    theirs = [u for u, r in rows.items() if r.host == victim_host and r.state == "ACTIVE"]
    victim = world.daemons[victim_host]
    load = os.getloadavg()[0]
    t_kill = time.time()
    victim.kill()
    survivors = world.live_hosts()
    rehomed = poll_until(world, theirs, lambda r, _t: r.host in survivors,
                         {}, world.args.session + world.args.grace + 120, "re-homing")
    t_rehomed = max(rehomed.values())
    # (b) cast a reboot to each as soon as all are re-homed; done = ACTIVE, updated after cast
    cast_at: dict[str, float] = {}
    cast_utc: dict[str, datetime.datetime] = {}
    for u in theirs:
        cast_utc[u] = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        cast_at[u] = time.time()
        world.api.action("reboot", u)
    rebooted = poll_until(world, theirs,
                          lambda r, t: r.state == "ACTIVE" and r.updated_at > cast_utc[r.uuid],
                          {}, 120, "reboots")
    t_rebooted = max(rebooted.values())
    gone = world.watch.first(t_kill, lambda members: victim_host not in members)
    audit = [rec for d in world.daemons.values() for rec in d.records()
             if rec.get("event") == "rehome" and rec.get("instance") in set(theirs)
             and rec["t"] >= t_kill]
    reboot_recs = [rec for d in world.daemons.values() for rec in d.records()
                   if rec.get("action") == "reboot" and rec.get("instance") in set(theirs)
                   and rec["t"] >= t_kill]
    new_hosts = {}
    for r in world.rows(theirs).values():
        new_hosts[r.host] = new_hosts.get(r.host, 0) + 1
    result = {
        "victim": victim_host, "instances": len(theirs), "load": load,
        "rehomed": t_rehomed - t_kill,
        "first_rehomed": min(rehomed.values()) - t_kill,
        "rehomed_audit": (max(rec["t"] for rec in audit) - t_kill)
        if len(audit) >= len(theirs) else None,
        "detection": gone - t_kill if gone else None,
        "manageable": t_rebooted - t_kill,
        "reboot": t_rebooted - min(cast_at.values()),
        "reboot_records": len({rec["instance"] for rec in reboot_recs}),
        "new_hosts": new_hosts,
    }
    result["after_detection"] = (result["rehomed"] - result["detection"]
                                 if result["detection"] is not None else None)
    say(f"  kill -9 {victim_host} ({len(theirs)} instances): session expired "
        f"+{fmt(result['detection'])} s; all re-homed +{result['rehomed']:.2f} s (first "
        f"+{result['first_rehomed']:.2f}, audit last +{fmt(result['rehomed_audit'])}); all "
        f"rebooted ACTIVE +{result['manageable']:.2f} s (reboots took {result['reboot']:.2f} s; "
        f"{result['reboot_records']} reboot records by new hosts); new hosts {new_hosts}")
    # restart under a new name: the returning capacity, not the returning host
    new = f"{victim_host.split('-')[0]}-r{run + 1}"
    t0 = time.time()
    world.daemons.pop(victim_host)
    world.daemon(new)
    world.converge()
    result["restart"] = time.time() - t0
    say(f"  started {new}: fleet converged after {result['restart']:.2f} s")
    return result


def deletes(world: World, uuids: list[str], threads: int) -> dict:
    cast_at: dict[str, float] = {}
    lock = threading.Lock()

    def one(u):
        t0 = time.time()
        world.api.action("delete", u)
        with lock:
            cast_at[u] = t0

    t_first = time.time()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, uuids))
    done = poll_until(world, uuids, lambda r, _t: r.state in ("DELETED", "ERROR"), {}, 300,
                      "deletes")
    rows = world.rows(uuids)
    deleted = sum(r.state == "DELETED" for r in rows.values())
    left = sum(1 for u in uuids if world.allocations(u))
    elapsed = max(done.values()) - t_first
    lat = [done[u] - cast_at[u] for u in uuids]
    result = {"count": len(uuids), "deleted": deleted, "error": len(uuids) - deleted,
              "elapsed": elapsed, "per_min": deleted / elapsed * 60,
              "p50": pct(lat, 0.5), "p95": pct(lat, 0.95), "allocations_left": left}
    say(f"  deletes: {deleted}/{len(uuids)} DELETED in {elapsed:.2f} s -> "
        f"{result['per_min']:.0f}/min; latency p50 {fmt(result['p50'])} s p95 "
        f"{fmt(result['p95'])} s; allocations left {left}")
    return result


# --- output ---------------------------------------------------------------------------------

def table(runs: list[dict], args) -> list[str]:
    b = [r["build"] for r in runs]
    h = [r["rehome"] for r in runs]
    d = [r["delete"] for r in runs]
    lines = [
        f"| median (min-max) over {len(runs)} runs | value |",
        "|---|---:|",
        f"| **builds per minute** ({args.builds} builds, {args.threads} client threads, "
        f"first create -> last ACTIVE) | {median_range([x['per_min'] for x in b])} |",
        f"|   wall time for the {args.builds} builds (s) | "
        f"{median_range([x['elapsed'] for x in b])} |",
        f"|   per-build latency p50, create -> ACTIVE (s) | "
        f"{median_range([x['p50'] for x in b])} |",
        f"|   per-build latency p95 (s) | {median_range([x['p95'] for x in b])} |",
        f"|   ACTIVE / ERROR / refused, all runs | {sum(x['active'] for x in b)} / "
        f"{sum(x['error'] for x in b)} / {sum(x['refused'] for x in b)} |",
        f"|   allocations not exactly one unit on the instance's node / Ironic node not "
        f"`active` with the instance / two instances on one node | "
        f"{sum(x['bad_alloc'] for x in b)} / {sum(x['bad_node'] for x in b)} / "
        f"{sum(x['shared'] for x in b)} |",
        f"| **deletes per minute** (same instances, first delete cast -> last DELETED) | "
        f"{median_range([x['per_min'] for x in d])} |",
        f"|   per-delete latency p50 / p95 (s) | {median_range([x['p50'] for x in d])} / "
        f"{median_range([x['p95'] for x in d])} |",
        f"|   DELETED / ERROR / allocations left, all runs | {sum(x['deleted'] for x in d)} / "
        f"{sum(x['error'] for x in d)} / {sum(x['allocations_left'] for x in d)} |",
        f"| **death to re-homed**: kill -9 -> every instance of the victim has a live host "
        f"(s), session {args.session} s, grace {args.grace:g} s | "
        f"{median_range([x['rehomed'] for x in h])} |",
        f"|   detection: kill -9 -> member znode gone (session expired) (s) | "
        f"{median_range([x['detection'] for x in h])} |",
        f"|   member gone -> last instance re-homed (grace + adoption) (s) | "
        f"{median_range([x['after_detection'] for x in h])} |",
        f"|   same, from the adopters' `rehome` audit records (s) | "
        f"{median_range([x['rehomed_audit'] for x in h])} |",
        f"| **death to manageable**: kill -9 -> a reboot cast on each is done, ACTIVE (s) | "
        f"{median_range([x['manageable'] for x in h])} |",
        f"|   reboots alone: first cast -> last ACTIVE (s) | "
        f"{median_range([x['reboot'] for x in h])} |",
        f"|   instances on the victim | {median_range([x['instances'] for x in h])} |",
    ]
    return lines


def computed_default(runs: list[dict]) -> float | None:
    """With the default rehome_grace (120 s) and this session: detection + 120 + the measured
    time after the grace (adoption) + the reboots."""
    vals = []
    for r in runs:
        h = r["rehome"]
        if h["detection"] is None:
            continue
        adoption = h["after_detection"] - r["grace"]
        vals.append(h["detection"] + 120 + adoption + (h["manageable"] - h["rehomed"]))
    return statistics.median(vals) if vals else None


def markdown(args, runs, info) -> str:
    default = computed_default(runs)
    lines = [
        SECTION, "",
        "Command (repository root; starts and stops its own ZooKeeper, RabbitMQ, PostgreSQL, "
        "Placement and Ironic):", "",
        f"    {info['command']}", "",
        f"Machine: {machine()}; "
        f"computed database {info['backend']}; **the machine was shared** (1-minute load average "
        f"{info['load']}). {args.nodes} Ironic nodes (fake-hardware, `deploy_delay` 0, "
        f"available, powered off), seeded by `bench/seed.py`, all schedulable in Placement "
        f"(reserved 0) before the first run; 1 `computed-reporter`, 3 `computed` daemons "
        f"(session timeout {args.session} s, `rehome_grace` {args.grace:g} s, "
        f"`node_refresh_interval` {args.refresh:g} s). Client: `ServerAPI` in this script "
        f"({args.threads} threads for creates and deletes, one poller reading the instance rows "
        f"every 0.1 s). {len(runs)} runs, each: {args.builds} builds, kill -9 of the daemon "
        f"hosting most of them (restarted under a new name afterwards), a reboot of each of "
        f"its instances, delete of all {args.builds}. Run took {info['elapsed']:.0f} s.", "",
    ]
    lines += table(runs, args)
    lines += [
        "",
        "Beside Nova's Ironic driver (quoted from `../shared/notes/anchors.md`, not measured):",
        "",
        "| a dead compute service's instances manageable again | computed | Nova's Ironic "
        "driver (hash ring, Newton to 2023.1) |",
        "|---|---:|---|",
        f"| `rehome_grace` {args.grace:g} s (measured, median) | "
        f"{statistics.median([r['rehome']['manageable'] for r in runs]):.1f} s | "
        "\"Nodes with instances never move: when their compute dies they are unmanageable "
        "(reboot fails) until it returns or an operator edits the DB by hand.\" |",
        f"| `rehome_grace` 120 s, the default (computed: detection + 120 s + the measured "
        f"adoption and reboot) | {fmt(default, 1)} s | same: never, without the service or a "
        f"manual DB edit |",
        "",
    ]
    return "\n".join(lines)


# --- main -----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--builds", type=int, default=50)
    parser.add_argument("--threads", type=int, default=12)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--session", type=int, default=2)
    parser.add_argument("--grace", type=float, default=5.0)
    parser.add_argument("--refresh", type=float, default=5.0, help="node_refresh_interval")
    args = parser.parse_args(argv)
    if args.builds * args.runs > args.nodes:
        # deleted instances free their nodes, but cleaning/reporting may lag: keep headroom
        say(f"note: {args.builds} builds x {args.runs} runs > {args.nodes} nodes; nodes are "
            f"reused after deletes")
    began = time.monotonic()
    loads = [os.getloadavg()[0]]
    workdir = workdir_or_tmp(args.workdir, "instance-bench-")
    prefix = f"ib{uuidlib.uuid4().hex[:6]}"
    with stack_for(args, workdir, SERVICES, prefix, log=say) as stack:
        world = None
        runs: list[dict] = []
        try:
            say(f"stack up after {time.monotonic() - began:.0f} s: "
                f"{', '.join(n for n in SERVICES if n in stack)}")
            rc = f"bench-{prefix}"
            make_template(stack["ironic"].url, prefix, rc)
            nodes = seed_nodes(stack, args.nodes, prefix=prefix, resource_class=rc, log=say)
            world = World(stack, workdir, args, nodes, rc)
            world.reporter("r1")
            for host in ("c1", "c2", "c3"):
                world.daemon(host)
            t0 = time.monotonic()
            world.converge(180)
            deadline = time.monotonic() + 180
            while (n := world.schedulable()) < args.nodes:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {n} of {args.nodes} nodes schedulable\n"
                                       f"{dump_logs(world.processes)}")
                time.sleep(0.5)
            say(f"3 daemons converged, all {args.nodes} nodes schedulable (reserved 0) after "
                f"{time.monotonic() - t0:.1f} s; computed database {world.backend}")
            for number in range(args.runs):
                loads.append(os.getloadavg()[0])
                say(f"run {number + 1}: load {loads[-1]:.1f}")
                # nodes freed by the previous run's deletes must be schedulable again
                deadline = time.monotonic() + 120
                while world.schedulable() < args.builds and time.monotonic() < deadline:
                    time.sleep(0.5)
                result = {"grace": args.grace}
                result["build"] = builds(world, args.builds, args.threads)
                result["rehome"] = rehome(world, result["build"]["uuids"], number)
                result["delete"] = deletes(world, result["build"]["uuids"], args.threads)
                runs.append(result)
            loads.append(os.getloadavg()[0])
            info = {"command": command("bench.instance_bench", argv),
                    "machine": machine_facts(), "backend": world.backend,
                    "elapsed": time.monotonic() - began,
                    "load": f"{min(loads):.1f} to {max(loads):.1f} at the runs' starts and end"}
            say("")
            say(f"machine: {info['machine']}, load {info['load']}, database {world.backend}")
            for line in table(runs, args):
                say(line)
            default = computed_default(runs)
            say(f"death to manageable with the default rehome_grace 120 s (computed: detection + "
                f"120 + adoption + reboots): {fmt(default, 1)} s; Nova: never without the "
                f"service or a DB edit")
            publish(args, SECTION, lambda: markdown(args, runs, info), log=say)
            say(f"logs in {workdir}; took {time.monotonic() - began:.0f} s")
            return 0
        finally:
            if world is not None:
                world.close()


if __name__ == "__main__":
    sys.exit(main())
