"""Providers benchmark (issue 5): cold start, steady state and event latency at 10,000 nodes.

Runs real ``computed`` daemons and ``computed-reporter`` workers as separate processes
(:mod:`tests.functional.daemons`) against the harness's ZooKeeper, RabbitMQ, PostgreSQL, Placement
(on PostgreSQL) and Ironic (sqlite), with ``--nodes`` Ironic nodes seeded by copying rows
(bench/seed.py), and measures, per run:

1. **raw rate**: how fast the same Placement accepts the same writes without computed, in the same
   run, just before the cold start: ``computed.placement.client.PlacementClient.apply`` over
   ``--raw`` fresh provider states (random uuids, same resource class / trait / reserved mix as
   the nodes) from ``reporters x workers`` threads (the reporters' parallelism), and the bare
   requests (POST provider + PUT inventory [+ PUT traits]) over ``--raw // 2`` more, with
   Placement's CPU seconds per provider over the bare requests. Those providers are deleted
   before the cold start.
2. **cold start**: a fresh PostgreSQL database for computed, ``--reporters`` reporters started and
   serving, then 3 daemons started; time from the daemons' start until computed's ``providers``
   table holds every node applied with its expected state (the reporter commits that row in the
   transaction that wrote Placement: ``max(updated_at)`` is the last Placement write). Polled once
   a second with one ``count(*)``; then cross-checked in Placement: ``GET
   /resource_providers?resources=<RC>:1`` must list exactly the nodes with reserved 0, and a sample
   of providers is read in full (inventory, traits). Placement's request log over the cold
   start gives its requests per provider (issue 13 item 9: the reporter creates new providers,
   then sets their inventories with one ``POST /reshaper`` per batch); the cold start rate is
   compared with the bare rate of the same run.
3. **steady state**: the cold-start reporters are stopped (their final outcome counters are the
   cold start's), fresh ones started; then ``--cycles`` node_refresh_interval cycles with nothing
   changing in Ironic. Quietness evidence over that window: the new reporters' outcome counters
   (logged when they stop: every report they received), Placement's own database (sum of the
   providers' generations: every inventory or trait write bumps it; inserted/updated/deleted row
   counters of its tables), computed's ``providers`` rows updated, and the bytes RabbitMQ
   received on the vhost's connections (``rabbitmqctl list_connections``). The daemon does not
   expose its cycle time: the dominant cost of a cycle, one listing of every node through
   ``computed_ironic`` with the daemon's fields, is timed instead.
4. **events**: maintenance on, then off, on ``--events`` random reserved-0 nodes, one API call
   every ``--spacing`` s; per change, from the Ironic API call returning until Placement shows
   the new reserved value (a thread per pending change polls that provider's inventory every
   20 ms), and until the reporter's ``providers`` row shows it (its ``updated_at``).

CPU seconds used by each process (daemons, reporters, Placement and Ironic each with every process
under it: Placement's workers with ``--placement-workers N``, Ironic's) are recorded over the cold
start and the steady window, to show where the time goes; over the cold start, Placement's also
per process (whether its workers shared the work). PostgreSQL is not counted (a shared server).

Run from the repository root (starts and stops its own services)::

    .venv/bin/python -m bench.report_bench [--nodes 10000] [--runs 3] [--write-md]

or against a stack started with ``tools/services up`` (``--stack-dir .services``; the seeded
nodes are deleted at the end, the providers the runs created are left in its Placement).
"""

from __future__ import annotations

import ast
import calendar
import collections
import datetime
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid as uuidlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import requests
import sqlalchemy as sa

from bench.common import (
    arguments,
    command,
    fmt,
    machine,
    median_range,
    placement_adapter,
    publish,
    say,
    stack_for,
    workdir_or_tmp,
)
from bench.seed import _connect, ironic_db, make_template, seed_nodes
from computed import db
from computed.db.providers import UNAPPLIED
from computed.placement.client import PlacementClient
from computed.providers.state import ProviderState, normalise_resource_class
from computed.testing.ironic import list_nodes, request
from computed_ironic.driver import IronicDriver
from tests.functional.daemons import Daemon, Reporter, dump_logs

SECTION = "## Providers: cold start, steady state, events (issue 5)"
KEEP = "<!-- report_bench.py keeps the text below this line when it rewrites the section -->"
TRAITS = ("CUSTOM_BENCH_FAST", "HW_CPU_X86_AVX2")
PLACEMENT_HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39",
                     "Accept": "application/json"}
SESSION_TIMEOUT = 10  # ZooKeeper session of the daemons (the product's default)
CALL_TIMEOUT = 120    # [reporter] call_timeout: the product default (the test helper sets 10)


# --- the node population --------------------------------------------------------------------

def has_traits(index: int) -> bool:
    return index % 50 == 1        # 2 % of the nodes


def in_maintenance(index: int) -> bool:
    return index % 100 == 2       # 1 % of the nodes: reserved 1


def index_of(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


def named_nodes(url: str, prefix: str) -> dict[str, dict]:
    """name -> node (the fields that make reserved), every ``prefix-*`` node the API lists."""
    fields = "uuid,name,resource_class,provision_state,power_state,maintenance,instance_uuid"
    return {n["name"]: n for n in list_nodes(url, fields, timeout=120)
            if (n.get("name") or "").startswith(prefix)}


def seed(stack, count: int, prefix: str, resource_class: str) -> dict[str, str]:
    """Seed ``count`` nodes, put traits and maintenance on some through the API; name -> uuid,
    after checking through the API that every node is what its index says."""
    url = stack["ironic"].url
    t0 = time.monotonic()
    make_template(url, prefix, resource_class)
    seed_nodes(stack, count, prefix=prefix, resource_class=resource_class, log=say)
    nodes = {name: n["uuid"] for name, n in named_nodes(url, f"{prefix}-").items()}
    for name, node in sorted(nodes.items()):
        i = index_of(name)
        if has_traits(i):
            request("PUT", f"{url}/v1/nodes/{node}/traits", {"traits": list(TRAITS)})
        if in_maintenance(i):
            request("PUT", f"{url}/v1/nodes/{node}/maintenance", {"reason": "bench"})
    verify_nodes(url, prefix, count, resource_class)
    say(f"seeded and checked {count} nodes in {time.monotonic() - t0:.1f} s "
        f"({sum(has_traits(index_of(n)) for n in nodes)} with traits, "
        f"{sum(in_maintenance(index_of(n)) for n in nodes)} in maintenance)")
    return nodes


def verify_nodes(url: str, prefix: str, count: int, resource_class: str) -> dict[str, str]:
    listed = named_nodes(url, f"{prefix}-")
    bad = []
    for name, n in listed.items():
        want = in_maintenance(index_of(name))
        if (n["provision_state"] != "available" or n["power_state"] != "power off"
                or n["instance_uuid"] is not None or bool(n["maintenance"]) != want
                or n["resource_class"] != resource_class):
            bad.append(n)
    if len(listed) != count or bad:
        raise RuntimeError(f"Ironic lists {len(listed)} {prefix}-* nodes ({count} wanted), "
                           f"{len(bad)} not as seeded, e.g. {bad[:2]}")
    return {name: n["uuid"] for name, n in listed.items()}


def rotate(stack, prefix: str, count: int, resource_class: str) -> dict[str, str]:
    """Give every ``prefix-*`` node a new uuid and resource class (one sqlite transaction): the
    next run then starts with no provider in Placement for its nodes, as a first start would."""
    conn = _connect(ironic_db(stack))
    try:
        rows = conn.execute("SELECT id FROM nodes WHERE name LIKE ?", (f"{prefix}-%",)).fetchall()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("UPDATE nodes SET uuid = ?, resource_class = ? WHERE id = ?",
                         [(str(uuidlib.uuid4()), resource_class, r[0]) for r in rows])
        conn.execute("COMMIT")
    finally:
        conn.close()
    return verify_nodes(stack["ironic"].url, prefix, count, resource_class)


def expected_state(name: str, node: str, rc: str) -> dict:
    i = index_of(name)
    return {"uuid": node, "name": node, "resource_class": rc,
            "reserved": 1 if in_maintenance(i) else 0,
            "traits": sorted(TRAITS) if has_traits(i) else []}


# --- Placement without computed -------------------------------------------------------------

def placement_client(stack, workdir: Path) -> PlacementClient:
    return PlacementClient(placement_adapter(stack, workdir))


class Http:
    """A requests session per thread for bare Placement calls."""

    def __init__(self, url: str):
        self.url = url
        self._local = threading.local()

    def __call__(self, method: str, path: str, body=None, ok=(200, 204)) -> dict:
        s = getattr(self._local, "s", None)
        if s is None:
            s = self._local.s = requests.Session()
            s.headers.update(PLACEMENT_HEADERS)
        resp = s.request(method, self.url + path, json=body, timeout=60)
        if resp.status_code not in ok:
            raise RuntimeError(f"{method} {path}: {resp.status_code} {resp.text[:300]}")
        return resp.json() if resp.content else {}


def raw_rate(stack, workdir: Path, rc: str, count: int, threads: int) -> dict:
    """Providers/s of PlacementClient.apply and of the bare requests, same mix as the nodes."""
    http = Http(stack["placement"].url)
    states = [ProviderState(uuid=u, name=u, resource_class=rc,
                            reserved=1 if in_maintenance(i) else 0,
                            traits=TRAITS if has_traits(i) else ())
              for i, u in enumerate(str(uuidlib.uuid4()) for _ in range(count))]
    client = placement_client(stack, workdir)
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(client.apply, states))
    apply_s = time.monotonic() - t0
    requests_per = client.request_count / count

    bare = [(str(uuidlib.uuid4()), i) for i in range(count // 2)]

    def write(item):
        u, i = item
        gen = http("POST", "/resource_providers", {"uuid": u, "name": u})["generation"]
        inv = {rc: {"total": 1, "reserved": 1 if in_maintenance(i) else 0, "min_unit": 1,
                    "max_unit": 1, "step_size": 1, "allocation_ratio": 1.0}}
        gen = http("PUT", f"/resource_providers/{u}/inventories",
                   {"resource_provider_generation": gen, "inventories": inv})[
            "resource_provider_generation"]
        if has_traits(i):
            http("PUT", f"/resource_providers/{u}/traits",
                 {"resource_provider_generation": gen, "traits": list(TRAITS)})

    placement_pids = {"placement": service_pids(stack).get("placement", [])}
    cpu0 = cpu_snapshot(placement_pids)
    t0 = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(write, bare))
    bare_s = time.monotonic() - t0
    bare_cpu = cpu_delta(cpu0, cpu_snapshot(placement_pids))["placement"]

    t0 = time.monotonic()
    gone = [s.uuid for s in states] + [u for u, _ in bare]
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda u: http("DELETE", f"/resource_providers/{u}", ok=(204,)), gone))
    delete_s = time.monotonic() - t0
    out = {"apply_rate": count / apply_s, "apply_s": apply_s, "requests_per": requests_per,
           "bare_rate": len(bare) / bare_s, "bare_s": bare_s, "count": count,
           "bare_count": len(bare), "delete_rate": len(gone) / delete_s,
           "bare_placement_cpu_ms": 1000 * bare_cpu / len(bare),
           "load": (load0, os.getloadavg()[0])}
    say(f"  raw: PlacementClient.apply {count} providers in {apply_s:.1f} s = "
        f"{out['apply_rate']:.0f}/s ({requests_per:.2f} requests each); bare requests "
        f"{len(bare)} in {bare_s:.1f} s = {out['bare_rate']:.0f}/s; {len(gone)} deleted at "
        f"{out['delete_rate']:.0f}/s ({threads} threads); Placement CPU per bare provider "
        f"{out['bare_placement_cpu_ms']:.1f} ms; load {load0:.1f} at the start, "
        f"{out['load'][1]:.1f} at the end")
    return out


# --- evidence ---------------------------------------------------------------------------------

def utc_epoch(naive) -> float:
    return calendar.timegm(naive.timetuple()) + naive.microsecond / 1e6


def applied(engine) -> tuple[int, float | None, float | None]:
    with engine.connect() as conn:
        n, first, last = conn.execute(sa.text(
            "SELECT count(*), min(updated_at), max(updated_at) FROM providers "
            "WHERE deleted = false AND claim_epoch <> :u"), {"u": UNAPPLIED}).one()
    return n, first and utc_epoch(first), last and utc_epoch(last)


def applied_states(engine) -> dict[str, dict]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT uuid, state FROM providers WHERE deleted = false "
                                    "AND claim_epoch <> :u"), {"u": UNAPPLIED}).all()
    return {u: json.loads(s) for u, s in rows}


def provider_rows(engine) -> tuple[int, float | None, int]:
    with engine.connect() as conn:
        n, last, seq = conn.execute(sa.text(
            "SELECT count(*), max(updated_at), coalesce(sum(seq), 0) FROM providers")).one()
    return n, last and utc_epoch(last), int(seq)


def placement_db_counters(engine) -> dict:
    """Providers and their generations (every write bumps one), and the row counters of
    Placement's tables."""
    with engine.connect() as conn:
        n, gens = conn.execute(sa.text(
            "SELECT count(*), coalesce(sum(generation), 0) FROM resource_providers")).one()
        tup = conn.execute(sa.text(
            "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) "
            "FROM pg_stat_user_tables")).scalar()
    return {"providers": n, "generations": int(gens), "row_writes": int(tup)}


def rabbit_bytes(stack) -> tuple[int, int] | None:
    """(bytes, frames) RabbitMQ received on the stack's vhost's connections, or None."""
    rabbit = stack["rabbitmq"]
    vhost = rabbit.info.get("vhost") or "/"
    try:
        out = subprocess.run(rabbit.ctl() + ["list_connections", "-q", "--no-table-headers",
                                              "vhost", "recv_oct", "recv_cnt"],
                             capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    octets = frames = 0
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0] == vhost:
            octets += int(parts[1])
            frames += int(parts[2])
    return octets, frames


def queue_messages(stack, queue: str) -> str:
    rabbit = stack["rabbitmq"]
    vhost = rabbit.info.get("vhost") or "/"
    try:
        out = subprocess.run(rabbit.ctl() + ["list_queues", "-p", vhost, "-q",
                                              "--no-table-headers", "name", "messages",
                                              "consumers"],
                             capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return "; ".join(line.replace("\t", " ") for line in out.splitlines()
                     if line.split("\t")[0] == queue) or "-"


def placement_requests(stack, t_from: float, t_to: float) -> dict[str, int]:
    """Requests Placement logged between two wall-clock times, by method and path kind."""
    counts: collections.Counter[str] = collections.Counter()
    with open(stack["placement"].log, errors="replace") as log:
        for line in log:
            if "placement.requestlog" not in line:
                continue
            try:
                t = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f").timestamp()
            except ValueError:
                continue
            if not t_from <= t <= t_to:
                continue
            match = re.search(r'"(GET|POST|PUT|DELETE) (/[^" ?]*)', line)
            if match:
                kind = re.sub(r"/[0-9a-f-]{36}", "/{uuid}", match.group(2))
                counts[f"{match.group(1)} {kind}"] += 1
    return dict(counts)


def service_pids(stack) -> dict[str, list[int]]:
    """Placement's and Ironic's processes, each with every process under it (Placement's
    worker processes, Ironic's), as found now: what :func:`cpu_snapshot` adds up."""
    out = {}
    for name in ("placement", "ironic"):
        pid = stack[name].pid
        if pid and psutil.pid_exists(pid):
            proc = psutil.Process(pid)
            out[name] = [pid] + [c.pid for c in proc.children(recursive=True)]
    return out


def cpu_snapshot(groups: dict[str, list[int]]) -> dict[str, float]:
    out = {}
    for name, pids in groups.items():
        total = 0.0
        for pid in pids:
            try:
                t = psutil.Process(pid).cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        out[name] = total
    return out


def by_process(pids: list[int]) -> dict[str, list[int]]:
    """One group per process of ``pids`` (keyed by PID): how a service's CPU was shared among
    its processes (Placement's server and its workers)."""
    return {str(pid): [pid] for pid in pids}


def cpu_delta(before: dict, after: dict) -> dict[str, float]:
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in before}


def final_counts(process) -> dict | None:
    text = process.log.read_text(errors="replace")
    found = re.findall(r"computed-reporter stopped; reports: (\{.*?\})", text)
    return ast.literal_eval(found[-1]) if found else None


def listing_time(url: str) -> tuple[float, int]:
    driver = IronicDriver.for_endpoint(url)
    try:
        t0 = time.monotonic()
        nodes = driver.list_nodes()
        return time.monotonic() - t0, len(nodes)
    finally:
        driver.close()


# --- one run ----------------------------------------------------------------------------------

class Run:
    def __init__(self, stack, workdir: Path, args, number: int, nodes: dict[str, str], rc: str):
        self.stack, self.args, self.number = stack, args, number
        self.workdir = workdir / f"run{number}"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.nodes = nodes                      # name -> uuid
        self.rc = normalise_resource_class(rc)
        self.group = f"rb{uuidlib.uuid4().hex[:6]}r{number}"
        self.database = stack["postgres"].create_database(f"report_bench_{self.group}")
        stack.save()
        db.sync(self.database)
        self.engine = sa.create_engine(self.database)
        self.placement_engine = sa.create_engine(stack["placement"].info["database"])
        self.processes: list = []
        self.daemons: list = []
        self.expected = {u: expected_state(n, u, self.rc) for n, u in nodes.items()}
        self.http = Http(stack["placement"].url)

    def extra(self) -> str:
        return f"workers = {self.args.workers}\nbatch_size = {self.args.batch_size}\n"

    def start(self, cls, host: str):
        p = cls(self.stack, self.workdir, host, session_timeout=SESSION_TIMEOUT,
                refresh=self.args.refresh, group=self.group, database=self.database,
                extra=self.extra())
        p.conf.write_text(p.conf.read_text().replace("call_timeout = 10\n",
                                                     f"call_timeout = {CALL_TIMEOUT}\n"))
        p.start()
        self.processes.append(p)
        return p

    def reporters(self, tag: str) -> list:
        ps = [self.start(Reporter, f"r{i}{tag}") for i in range(1, self.args.reporters + 1)]
        for p in ps:
            p.wait_log("serving topic", timeout=120)
        return ps

    def stop_reporters(self, ps) -> dict:
        for p in ps:
            p.signal(signal.SIGTERM)
        counts: dict = {}
        for p in ps:
            p.proc.wait(60)
            found = final_counts(p)
            for k, v in ({"no final counts in the log": 1} if found is None else found).items():
                counts[k] = counts.get(k, 0) + v if isinstance(v, int) else v
        return counts

    def daemon_rss_mb(self) -> dict[str, float]:
        """Each live daemon's resident memory now (MB), by host."""
        out = {}
        for d in self.daemons:
            try:
                out[d.host] = psutil.Process(d.proc.pid).memory_info().rss / 2**20
            except psutil.Error:
                pass
        return out

    def groups(self) -> dict[str, list[int]]:
        g = {"daemons": [d.proc.pid for d in self.daemons],
             "reporters": [p.proc.pid for p in self.processes
                           if isinstance(p, Reporter) and p.alive]}
        g.update(service_pids(self.stack))
        return g

    # -- phases

    def cold_start(self) -> dict:
        reporters = self.reporters("c")
        groups_before = None
        load0 = os.getloadavg()[0]
        t0 = time.time()
        self.daemons = [self.start(Daemon, f"c{i}") for i in range(1, self.args.daemons + 1)]
        groups = self.groups()
        groups_before = cpu_snapshot(groups)
        placement_before = cpu_snapshot(by_process(groups.get("placement", [])))
        deadline = time.monotonic() + self.args.timeout
        n_expected = len(self.expected)
        loads = [load0]
        while True:
            n, first, last = applied(self.engine)
            if n >= n_expected:
                states = applied_states(self.engine)
                wrong = [u for u, s in self.expected.items() if states.get(u) != s]
                if not wrong:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"cold start: {n} of {n_expected} providers applied after "
                                     f"{self.args.timeout} s\n{dump_logs(self.processes)}")
            if any(not p.alive for p in self.processes):
                raise AssertionError(f"a process died\n{dump_logs(self.processes)}")
            loads.append(os.getloadavg()[0])
            time.sleep(1.0)
        t_seen = time.time()
        cpu = cpu_delta(groups_before, cpu_snapshot(groups))
        placement_split = cpu_delta(placement_before, cpu_snapshot(by_process(
            groups.get("placement", []))))
        records = [r for d in self.daemons for r in d.records()]
        joins = [r["t"] for r in records if r["event"] == "join"]
        claims = [r["t"] for r in records if r["event"] == "claim"]
        out = {"seconds": last - t0, "rate": n_expected / (last - t0),
               "first_applied": first - t0, "seen": t_seen - t0,
               "first_join": min(joins) - t0 if joins else None,
               "last_claim": max(claims) - t0 if claims else None,
               "claims": len(claims), "cpu": cpu, "wall": t_seen - t0,
               "placement_cpu_by_process": placement_split,
               "load": (min(loads), max(loads))}
        out["requests"] = placement_requests(self.stack, t0, last)
        out["requests_per"] = sum(out["requests"].values()) / n_expected
        out["placement"] = self.check_placement()
        out["counts"] = self.stop_reporters(reporters)
        say(f"  cold start: {n_expected} providers applied {out['seconds']:.1f} s after the "
            f"daemons' start = {out['rate']:.0f} providers/s (first joined "
            f"+{fmt(out['first_join'])} s, last claim +{fmt(out['last_claim'])} s, first provider "
            f"applied +{out['first_applied']:.1f} s); Placement requests per provider "
            f"{out['requests_per']:.2f} {out['requests']}; reporters' outcomes {out['counts']}; "
            f"CPU s {_cpu(cpu)}{_split(placement_split)}; "
            f"load {out['load'][0]:.1f}-{out['load'][1]:.1f}; Placement check: "
            f"{out['placement']}")
        return out

    def check_placement(self) -> str:
        free = self.http("GET", f"/resource_providers?resources={self.rc}:1")["resource_providers"]
        want_free = {u for u, s in self.expected.items() if s["reserved"] == 0}
        got_free = {p["uuid"] for p in free}
        if got_free != want_free:
            raise AssertionError(f"Placement lists {len(got_free)} providers with a free "
                                 f"{self.rc}, {len(want_free)} expected "
                                 f"({len(got_free - want_free)} extra, "
                                 f"{len(want_free - got_free)} missing)")
        client = placement_client(self.stack, self.workdir)
        names = sorted(self.nodes)
        sample = ([n for n in names if has_traits(index_of(n))][:10]
                  + [n for n in names if in_maintenance(index_of(n))][:10]
                  + random.sample(names, 30))
        for name in sample:
            u = self.nodes[name]
            got = client.get(u)
            if got is None or got.to_dict() != self.expected[u]:
                raise AssertionError(f"provider {u} in Placement: {got}, expected "
                                     f"{self.expected[u]}")
        return (f"{len(got_free)} providers with {self.rc} free = the {len(want_free)} "
                f"reserved-0 nodes; {len(sample)} read in full, all as expected")

    def steady(self) -> dict:
        reporters = self.reporters("s")
        time.sleep(2)
        groups = self.groups()
        c0, p0, r0 = cpu_snapshot(groups), placement_db_counters(self.placement_engine), \
            provider_rows(self.engine)
        b0 = rabbit_bytes(self.stack)
        load0 = os.getloadavg()[0]
        t0 = time.time()
        window = self.args.cycles * self.args.refresh + 1
        time.sleep(window)
        t1 = time.time()
        time.sleep(2)  # let PostgreSQL's statistics catch up with the last second
        c1, p1, r1 = cpu_snapshot(groups), placement_db_counters(self.placement_engine), \
            provider_rows(self.engine)
        b1 = rabbit_bytes(self.stack)
        queue = queue_messages(self.stack, f"reporter-{self.group}")
        counts = self.stop_reporters(reporters)
        listings = [listing_time(self.stack["ironic"].url) for _ in range(3)]
        out = {"window": t1 - t0, "cycles": self.args.cycles, "reports": counts,
               "messages": sum(v for v in counts.values() if isinstance(v, int)),
               "placement_generations": p1["generations"] - p0["generations"],
               "placement_providers": p1["providers"] - p0["providers"],
               "placement_row_writes": p1["row_writes"] - p0["row_writes"],
               "rows_updated": (r1[0] - r0[0], r1[2] - r0[2]),
               "last_row_update_before_window": (r1[1] or 0) < t0,
               "rabbit_bytes": None if b0 is None or b1 is None else (b1[0] - b0[0],
                                                                      b1[1] - b0[1]),
               "queue": queue, "cpu": cpu_delta(c0, c1),
               "listing": statistics.median(t for t, _ in listings),
               "listed": listings[0][1], "load": (load0, os.getloadavg()[0])}
        say(f"  steady: {out['window']:.0f} s = {self.args.cycles} cycles of "
            f"{self.args.refresh:g} s: reports received by the reporters {counts or '{}'}; "
            f"Placement generations +{out['placement_generations']}, providers "
            f"+{out['placement_providers']}, row writes in its database "
            f"+{out['placement_row_writes']}; computed providers rows (count, sum seq) delta "
            f"{out['rows_updated']}, last update before window: "
            f"{out['last_row_update_before_window']}; RabbitMQ received (bytes, frames) on the "
            f"vhost {out['rabbit_bytes']}; topic queue {queue}; CPU s {_cpu(out['cpu'])}; "
            f"one listing of {out['listed']} nodes via computed_ironic {out['listing']:.2f} s "
            f"(median of 3)")
        return out

    def events(self) -> dict:
        reporters = self.reporters("e")
        url = self.stack["ironic"].url
        free = [n for n in sorted(self.nodes) if not in_maintenance(index_of(n))]
        chosen = [self.nodes[n] for n in random.sample(free, self.args.events)]
        results: list[dict] = []
        lock = threading.Lock()
        pending_db: dict[str, tuple[int, float, dict]] = {}
        stop = threading.Event()

        def watch_placement(node: str, want: int, t_api: float, change: dict) -> None:
            s = requests.Session()
            s.headers.update(PLACEMENT_HEADERS)
            deadline = time.time() + 60
            while time.time() < deadline:
                r = s.get(f"{self.http.url}/resource_providers/{node}/inventories", timeout=30)
                if r.status_code == 200 and \
                        r.json()["inventories"].get(self.rc, {}).get("reserved") == want:
                    change["placement"] = time.time() - t_api
                    return
                time.sleep(0.02)

        def watch_db() -> None:
            while not stop.is_set() or pending_db:
                with lock:
                    items = dict(pending_db)
                if items:
                    with self.engine.connect() as conn:
                        rows = conn.execute(sa.text(
                            "SELECT uuid, state, updated_at FROM providers WHERE uuid IN "
                            "(" + ",".join(f"'{u}'" for u in items) + ")")).all()
                    for u, state, updated in rows:
                        want, t_api, change = items[u]
                        if state and json.loads(state)["reserved"] == want:
                            change["row"] = utc_epoch(updated) - t_api
                            with lock:
                                pending_db.pop(u, None)
                time.sleep(0.02)

        db_thread = threading.Thread(target=watch_db, daemon=True)
        db_thread.start()
        threads = []
        load0 = os.getloadavg()[0]
        for on in (True, False):
            for node in chosen:
                t_call = time.time()
                if on:
                    request("PUT", f"{url}/v1/nodes/{node}/maintenance", {"reason": "bench"})
                else:
                    request("DELETE", f"{url}/v1/nodes/{node}/maintenance")
                t_api = time.time()
                change = {"node": node, "on": on, "api": t_api - t_call}
                results.append(change)
                want = 1 if on else 0
                with lock:
                    pending_db[node] = (want, t_api, change)
                t = threading.Thread(target=watch_placement, args=(node, want, t_api, change),
                                     daemon=True)
                t.start()
                threads.append(t)
                time.sleep(max(0.0, self.args.spacing - (time.time() - t_call)))
            for t in threads:
                t.join(70)
        stop.set()
        db_thread.join(70)
        counts = self.stop_reporters(reporters)
        lat = sorted(c["placement"] for c in results if "placement" in c)
        rows = sorted(c["row"] for c in results if "row" in c)
        out = {"changes": len(results), "seen": len(lat), "counts": counts,
               "p50": _pct(lat, 50), "p95": _pct(lat, 95), "max": lat[-1] if lat else None,
               "row_p50": _pct(rows, 50), "row_p95": _pct(rows, 95),
               "row_max": rows[-1] if rows else None,
               "api_p50": _pct(sorted(c["api"] for c in results), 50),
               "load": (load0, os.getloadavg()[0])}
        say(f"  events: {len(results)} maintenance changes, {len(lat)} seen in Placement: "
            f"p50 {fmt(out['p50'], 3)} s, p95 {fmt(out['p95'], 3)} s, max {fmt(out['max'], 3)} s "
            f"(providers row: p50 {fmt(out['row_p50'], 3)}, p95 {fmt(out['row_p95'], 3)}, max "
            f"{fmt(out['row_max'], 3)}); Ironic API call itself p50 {fmt(out['api_p50'], 3)} s; "
            f"reporters' outcomes {counts}")
        return out

    def close(self) -> None:
        for p in self.processes:
            try:
                p.ensure_stopped()
            except Exception as exc:  # keep stopping the others
                say(f"stopping {p.host}: {exc}")
        self.engine.dispose()
        self.placement_engine.dispose()


# --- reporting --------------------------------------------------------------------------------

def _pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    k = max(0, min(len(values) - 1, int(round(p / 100 * len(values) + 0.5)) - 1))
    return values[k]


def _cpu(cpu: dict) -> str:
    return ", ".join(f"{k} {v:.0f}" for k, v in cpu.items())


def _split(placement: dict[str, float]) -> str:
    """Placement's CPU s per process, when it ran in more than one (its workers')."""
    if len(placement) < 2:
        return ""
    return " (placement by process: " + ", ".join(
        f"{pid} {v:.0f}" for pid, v in placement.items()) + ")"


def med(values, digits: int = 1) -> str:
    """median_range, but a single run's figure alone."""
    values = [v for v in values if v is not None]
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return median_range(values, digits)


def table(runs: list[dict], args) -> list[str]:
    cold = [r["cold"] for r in runs]
    steady = [r["steady"] for r in runs if r.get("steady")]
    events = [r["events"] for r in runs if r.get("events")]
    raw = [r["raw"] for r in runs]
    n = args.nodes
    lines = ["| figure | median (min-max) | runs |", "|---|---:|---:|"]

    def row(label, values, digits=1):
        counted = len([v for v in values if v is not None])
        lines.append(f"| {label} | {med(values, digits)} | {counted} |")

    row(f"raw: `PlacementClient.apply`, {raw[0]['count']:,} new providers, "
        f"{args.reporters * args.workers} threads (providers/s)", [r["apply_rate"] for r in raw], 0)
    row(f"raw: bare POST provider + PUT inventory (+ PUT traits), {raw[0]['bare_count']:,} "
        f"providers, same threads (providers/s)", [r["bare_rate"] for r in raw], 0)
    row(f"**cold start**: daemons started -> all {n:,} providers applied, right reserved (s)",
        [c["seconds"] for c in cold])
    row("  cold start rate (providers/s)", [c["rate"] for c in cold], 0)
    row("  cold start rate / raw apply rate", [c["rate"] / r["apply_rate"]
                                               for c, r in zip(cold, raw)], 2)
    row("  **cold start rate / bare rate** (issue 13 item 9: >= 1.0)",
        [c["rate"] / r["bare_rate"] for c, r in zip(cold, raw)], 2)
    row("  rate from the first provider applied to the last (providers/s)",
        [(n - 1) / (c["seconds"] - c["first_applied"]) for c in cold], 0)
    row("  Placement requests per provider during the cold start",
        [c.get("requests_per") for c in cold], 2)
    row("  Placement CPU per provider, bare requests (ms)",
        [r.get("bare_placement_cpu_ms") for r in raw], 1)
    row("  Placement CPU per provider, cold start (ms)",
        [1000 * c["cpu"]["placement"] / n if c["cpu"].get("placement") else None
         for c in cold], 1)
    row("  daemons started -> first join record (s)", [c["first_join"] for c in cold])
    row("  daemons started -> last claim record (s)", [c["last_claim"] for c in cold])
    row("  daemons started -> first provider applied (s)", [c["first_applied"] for c in cold])
    for key in ("daemons", "reporters", "placement", "ironic"):
        row(f"  CPU seconds during the cold start: {key}", [c["cpu"].get(key) for c in cold], 0)
    if steady:
        row(f"**steady state**: window ({steady[0]['cycles']} cycles of {args.refresh:g} s) (s)",
            [s["window"] for s in steady], 0)
        row("  reports received by the reporters (messages' reports)",
            [s["messages"] for s in steady], 0)
        row("  Placement writes (sum of provider generations, delta)",
            [s["placement_generations"] for s in steady], 0)
        row("  rows inserted/updated/deleted in Placement's database",
            [s["placement_row_writes"] for s in steady], 0)
        row("  computed `providers` rows changed (sum of seq, delta)",
            [s["rows_updated"][1] for s in steady], 0)
        row("  bytes RabbitMQ received on the vhost's connections",
            [s["rabbit_bytes"][0] if s["rabbit_bytes"] else None for s in steady], 0)
        row(f"  one listing of {steady[0]['listed']:,} nodes through computed_ironic (s)",
            [s["listing"] for s in steady], 2)
        for key in ("daemons", "reporters", "placement", "ironic"):
            row(f"  CPU seconds over the window: {key}", [s["cpu"].get(key) for s in steady], 0)
    if events:
        ch = events[0]["changes"]
        row(f"**events**: maintenance on/off ({ch} changes) -> Placement shows it, p50 (s)",
            [e["p50"] for e in events], 3)
        row("  p95 (s)", [e["p95"] for e in events], 3)
        row("  max (s)", [e["max"] for e in events], 3)
        row("  -> reporter's providers row, p50 (s)", [e["row_p50"] for e in events], 3)
        row("  -> reporter's providers row, p95 (s)", [e["row_p95"] for e in events], 3)
        row("  the Ironic API call itself, p50 (s)", [e["api_p50"] for e in events], 3)
    rss = [max(r["rss_mb"].values()) for r in runs if r.get("rss_mb")]
    if rss:
        row("largest daemon RSS at the run's end (MB)", rss, 1)
    return lines


def served(args) -> str:
    """How the stack's Placement was served, in words."""
    workers = getattr(args, "placement_workers", None) or 1
    if workers == 1:
        return "one process, a thread per request"
    return f"{workers} worker processes on one socket, a thread per request in each"


def markdown(args, runs: list[dict], info: dict) -> str:
    body = [
        SECTION,
        "",
        "Command (repository root; starts and stops its own ZooKeeper, RabbitMQ, PostgreSQL, "
        "Placement and Ironic):",
        "",
        f"    {info['command']}",
        "",
        f"Machine: {machine()} (from /proc/cpuinfo). Placement {info['placement']} on the stack's "
        f"PostgreSQL ({served(args)}: computed/testing/bin/wsgi_serve.py), "
        f"Ironic on sqlite (API and conductor in one process). {args.nodes:,} Ironic nodes "
        f"(fake-hardware, `available`, `power off`, no instance: reserved 0), seeded by copying "
        f"the row of one node made through the API (bench/seed.py), of which "
        f"{info['traits']} with 2 traits and {info['maint']} in maintenance (reserved 1), all "
        f"checked through `GET /v1/nodes`. {args.daemons} `computed` daemons and {args.reporters} "
        f"`computed-reporter` processes (`[reporter] workers = {args.workers}`, `batch_size = "
        f"{args.batch_size}`, `call_timeout = {CALL_TIMEOUT}`; `[fleet] node_refresh_interval = "
        f"{args.refresh:g}`; ZooKeeper session {SESSION_TIMEOUT} s; computed's database: a fresh "
        f"PostgreSQL database per run). Each run gives every node a new uuid and resource class "
        f"first, so each cold start begins with none of its providers in Placement. "
        f"**The machine was shared** with other sessions' work: 1-minute load average "
        f"{info['load']} on 2 cores. {len(runs)} run(s); {info['elapsed']:.0f} s in all.",
        "",
    ] + table(runs, args) + ["", info["notes"], ""]
    return "\n".join(body)


def notes(runs: list[dict]) -> str:
    raw = [r["raw"] for r in runs]
    text = [f"Raw `PlacementClient.apply` makes {raw[0]['requests_per']:.2f} requests per new "
            f"provider (read, create, inventory, traits on 2 %)."]
    for i, r in enumerate(runs):
        c = r["cold"]
        text.append(f"Run {i + 1}: cold start {c['seconds']:.1f} s ({c['rate']:.0f}/s, raw "
                    f"{r['raw']['apply_rate']:.0f}/s), reporters' outcomes {c['counts']}, load "
                    f"{c['load'][0]:.1f}-{c['load'][1]:.1f}.")
    return " ".join(text)


# --- main -------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3, help="cold starts")
    parser.add_argument("--detail-runs", type=int, default=1,
                        help="how many of the runs (the first ones) also measure the steady "
                             "state and events")
    parser.add_argument("--daemons", type=int, default=3)
    parser.add_argument("--reporters", type=int, default=2)
    parser.add_argument("--workers", type=int, default=4, help="[reporter] workers")
    parser.add_argument("--batch-size", type=int, default=100, help="[reporter] batch_size")
    parser.add_argument("--refresh", type=float, default=10.0, help="node_refresh_interval")
    parser.add_argument("--raw", type=int, default=1000, help="providers of the raw rate")
    parser.add_argument("--cycles", type=int, default=3, help="refresh cycles of steady state")
    parser.add_argument("--events", type=int, default=50, help="nodes toggled (on, then off)")
    parser.add_argument("--spacing", type=float, default=0.2)
    parser.add_argument("--timeout", type=float, default=600, help="cold start limit, s")
    args = parser.parse_args(argv)
    began = time.monotonic()
    loads = [os.getloadavg()[0]]
    workdir = workdir_or_tmp(args.workdir, "report-bench-")
    prefix = f"rb{uuidlib.uuid4().hex[:6]}"
    services = ["zookeeper", "rabbitmq", "postgres", "placement", "ironic"]
    with stack_for(args, workdir, services, prefix) as stack:
        runs: list[dict] = []
        current: Run | None = None
        try:
            if "postgres" not in stack:
                raise SystemExit("this benchmark needs PostgreSQL (Placement and computed on it)")
            say(f"stack up after {time.monotonic() - began:.0f} s")
            rc = f"bench-{prefix}-0"
            nodes = seed(stack, args.nodes, prefix, rc)
            for number in range(args.runs):
                if number:
                    rc = f"bench-{prefix}-{number}"
                    nodes = rotate(stack, prefix, args.nodes, rc)
                say(f"run {number + 1}: {len(nodes)} nodes, resource class {rc}, load "
                    f"{os.getloadavg()[0]:.1f}")
                loads.append(os.getloadavg()[0])
                current = Run(stack, workdir, args, number, nodes, rc)
                result = {"raw": raw_rate(stack, current.workdir, current.rc, args.raw,
                                          args.reporters * args.workers)}
                result["cold"] = current.cold_start()
                if number < args.detail_runs:
                    result["steady"] = current.steady()
                    result["events"] = current.events()
                result["rss_mb"] = current.daemon_rss_mb()
                say(f"  daemons' RSS (MB): "
                    f"{ {h: round(v, 1) for h, v in result['rss_mb'].items()} }")
                loads.append(os.getloadavg()[0])
                runs.append(result)
                current.close()
                current = None
            info = {"command": command("bench.report_bench", argv),
                    "placement": "16.0.0", "elapsed": time.monotonic() - began,
                    "traits": sum(has_traits(i) for i in range(args.nodes)),
                    "maint": sum(in_maintenance(i) for i in range(args.nodes)),
                    "load": f"{min(loads):.1f} to {max(loads):.1f} at the runs' starts and ends"}
            info["notes"] = notes(runs)
            say("")
            say("\n".join(table(runs, args)))
            say("")
            say(info["notes"])
            (workdir / "results.json").write_text(json.dumps(runs, indent=1, default=str))
            publish(args, SECTION, lambda: markdown(args, runs, info), KEEP)
            say(f"logs in {workdir}")
            return 0
        finally:
            # what was measured survives a failed run
            (workdir / "results.json").write_text(json.dumps(runs, indent=1, default=str))
            if current is not None:
                current.close()


if __name__ == "__main__":
    sys.exit(main())
