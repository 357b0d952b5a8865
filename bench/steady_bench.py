"""Steady-state cost benchmark (issue 13 item 7): what computed costs Ironic when nothing changes.

Runs real ``computed`` daemons and ``computed-reporter`` workers as separate processes against the
harness's ZooKeeper, RabbitMQ, PostgreSQL, Placement and Ironic, with ``--nodes`` Ironic nodes
seeded as bench/seed.py does (bench/report_bench.py's population), and measures, in one run:

1. **baseline**: Ironic's CPU seconds (its process and children, from /proc through psutil) over
   ``--baseline`` seconds with no daemon and no reporter running: what Ironic costs on its own
   (its periodic tasks: power sync, ...).
2. **cold start**: ``--daemons`` daemons and ``--reporters`` reporters started; done when every
   node's provider is applied with its expected state (bench/report_bench.py's check); each
   daemon's RSS then. With ``--raw N``, just before it, Placement's rate without computed over N
   fresh providers (bench/report_bench.py's raw rate: ``PlacementClient.apply`` and the bare
   requests), the anchor of the cold start's rate.
3. **steady window**: after ``--settle`` seconds, ``--window`` seconds during which nothing
   changes in Ironic: CPU seconds of each daemon, each reporter, Ironic and Placement; Placement
   writes (sum of provider generations, rows written in Placement's database); reports received
   by fresh reporters (their outcome counters); the full listings the daemons logged.
4. **events** (``--events N``, off by default): N nodes put in maintenance and back through
   Ironic's API, each timed until Placement shows it (bench/report_bench.py's events phase).

Ironic's CPU caused by computed = Ironic's CPU over the window minus its baseline rate times the
window. Shares are of one core (CPU seconds / wall seconds). Placement's CPU is its server's and
every worker process's under it (``--placement-workers N``, bench/common.py: N processes serve
Placement, as uwsgi does; 1 by default).

Run from the repository root (starts and stops its own services)::

    .venv/bin/python -m bench.steady_bench [--nodes 10000] [--window 600]
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid as uuidlib
from urllib import parse

from bench.common import arguments, command, machine, say, stack_for, workdir_or_tmp
from bench.report_bench import (
    Run,
    cpu_snapshot,
    placement_db_counters,
    raw_rate,
    seed,
    service_pids,
)
from tests.functional.daemons import Daemon

LISTING_LOG = re.compile(r"listed (\d+) nodes")


def ironic_listings(stack, offset: int) -> int:
    """Full listings computed started since byte ``offset`` of Ironic's log (first pages of
    ``GET /v1/nodes`` with computed's fields; Ironic logs the query string %-encoded)."""
    with open(stack["ironic"].log, "rb") as log:
        log.seek(offset)
        text = parse.unquote(log.read().decode(errors="replace"))
    return sum(1 for line in text.splitlines()
               if "GET /v1/nodes?" in line and "fields=uuid,name,resource_class" in line
               and "marker=" not in line)


class SteadyRun(Run):
    """bench.report_bench's run, with ``--extra`` in every process's configuration."""

    def extra(self) -> str:
        return super().extra() + self.args.extra + "\n"


def per_process(run: Run) -> dict[str, list[int]]:
    """One group per process: each daemon, each live reporter, Ironic, Placement."""
    groups = {f"daemon {d.host}": [d.proc.pid] for d in run.daemons}
    groups.update({f"reporter {p.host}": [p.proc.pid] for p in run.processes
                   if not isinstance(p, Daemon) and p.alive})
    groups.update(service_pids(run.stack))
    return groups


def listings_logged(run: Run) -> dict[str, int]:
    """Lines each daemon logged about a full listing so far (0 where the daemon logs none)."""
    return {d.host: len(LISTING_LOG.findall(d.log.read_text(errors="replace")))
            for d in run.daemons}


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--daemons", type=int, default=3)
    parser.add_argument("--reporters", type=int, default=2)
    parser.add_argument("--workers", type=int, default=4, help="[reporter] workers")
    parser.add_argument("--batch-size", type=int, default=100, help="[reporter] batch_size")
    parser.add_argument("--refresh", type=float, default=30.0,
                        help="[fleet] node_refresh_interval (the product default: 30)")
    parser.add_argument("--extra", default="", help="more daemon configuration (ini text)")
    parser.add_argument("--baseline", type=float, default=120.0, help="seconds, no daemon")
    parser.add_argument("--settle", type=float, default=30.0,
                        help="seconds between the cold start's end and the window")
    parser.add_argument("--window", type=float, default=600.0, help="steady window, seconds")
    parser.add_argument("--timeout", type=float, default=1800, help="cold start limit, s")
    parser.add_argument("--events", type=int, default=0,
                        help="after the window: nodes put in maintenance and back, each timed "
                             "until Placement shows it (bench.report_bench's events)")
    parser.add_argument("--spacing", type=float, default=0.2, help="seconds between events")
    parser.add_argument("--raw", type=int, default=0,
                        help="before the cold start, Placement's rate without computed over this "
                             "many providers (bench.report_bench's raw rate; 0: not measured)")
    parser.add_argument("--ironic-power-sync", type=int, default=None, metavar="SECONDS",
                        help="Ironic's [conductor] sync_power_state_interval (default: Ironic's, "
                             "120; 0: none). Ironic's one conductor here syncs the power state "
                             "of every node, about a core at 50,000 nodes, on the same cores "
                             "as computed; a large cloud's conductors run on hosts of their own")
    args = parser.parse_args(argv)
    if args.ironic_power_sync is not None and args.ironic_power_sync < 0:
        parser.error(f"--ironic-power-sync {args.ironic_power_sync}: seconds >= 0 (0: none)")
    args.extra = args.extra.replace("\\n", "\n")
    began = time.monotonic()
    workdir = workdir_or_tmp(args.workdir, "steady-bench-")
    prefix = f"sb{uuidlib.uuid4().hex[:6]}"
    services = ["zookeeper", "rabbitmq", "postgres", "placement", "ironic"]
    result: dict = {"command": command("bench.steady_bench", argv), "machine": machine(),
                    "placement_workers": args.placement_workers or 1}
    with stack_for(args, workdir, services, prefix) as stack:
        run = None
        try:
            rc = f"bench-{prefix}-0"
            nodes = seed(stack, args.nodes, prefix, rc)
            run = SteadyRun(stack, workdir, args, 0, nodes, rc)

            say(f"baseline: {args.baseline:.0f} s with no daemon")
            groups = service_pids(stack)
            c0, l0, t0 = cpu_snapshot(groups), os.getloadavg()[0], time.monotonic()
            time.sleep(args.baseline)
            c1, t1 = cpu_snapshot(groups), time.monotonic()
            base = {k: (c1[k] - c0[k]) / (t1 - t0) for k in c0}
            result["baseline"] = {"seconds": t1 - t0, "cores": base,
                                  "load": (l0, os.getloadavg()[0])}
            say(f"  baseline cores: {base}")

            if args.raw:
                result["raw"] = raw_rate(stack, run.workdir, run.rc, args.raw,
                                         args.reporters * args.workers)
            cold = run.cold_start()
            result["cold"] = {k: v for k, v in cold.items() if k != "cpu"}
            result["cold"]["cpu"] = cold["cpu"]
            result["rss_mb_after_cold_start"] = run.daemon_rss_mb()
            say(f"  daemons' RSS after the cold start (MB): "
                f"{ {h: round(v, 1) for h, v in result['rss_mb_after_cold_start'].items()} }")

            reporters = run.reporters("s")
            time.sleep(args.settle)
            groups = per_process(run)
            listed0 = listings_logged(run)
            ironic_log = stack["ironic"].log.stat().st_size
            p0 = placement_db_counters(run.placement_engine)
            c0, l0, t0 = cpu_snapshot(groups), os.getloadavg()[0], time.monotonic()
            loads = [l0]
            while time.monotonic() - t0 < args.window:
                time.sleep(min(10.0, args.window - (time.monotonic() - t0)))
                loads.append(os.getloadavg()[0])
            c1, t1 = cpu_snapshot(groups), time.monotonic()
            time.sleep(2)  # PostgreSQL's statistics catch up
            p1 = placement_db_counters(run.placement_engine)
            listed1 = listings_logged(run)
            full_listings = ironic_listings(stack, ironic_log)
            counts = run.stop_reporters(reporters)
            window = t1 - t0
            cpu = {k: c1[k] - c0[k] for k in c0}
            caused = cpu["ironic"] - base["ironic"] * window
            result["steady"] = {
                "window": window, "cpu": cpu,
                "cores": {k: v / window for k, v in cpu.items()},
                "ironic_caused_cores": caused / window,
                "placement_generations": p1["generations"] - p0["generations"],
                "placement_row_writes": p1["row_writes"] - p0["row_writes"],
                "reports": counts,
                "messages": sum(v for v in counts.values() if isinstance(v, int)),
                "listings": {h: listed1[h] - listed0.get(h, 0) for h in listed1},
                "ironic_listings": full_listings,
                "rss_mb": run.daemon_rss_mb(),
                "load": (min(loads), max(loads))}
            s = result["steady"]
            say(f"steady window {window:.0f} s: Ironic caused {100 * s['ironic_caused_cores']:.1f} "
                f"% of a core (baseline {100 * base['ironic']:.1f} %); "
                + ", ".join(f"{k} {100 * v:.2f} %" for k, v in s["cores"].items())
                + f"; Placement generations +{s['placement_generations']}, rows written "
                f"+{s['placement_row_writes']}; reports {counts}; listings {s['listings']} "
                f"({full_listings} in Ironic's log); "
                f"RSS MB {s['rss_mb']}; load {s['load'][0]:.1f}-{s['load'][1]:.1f}")
            if args.events:
                result["events"] = run.events()
                result["rss_mb_after_events"] = run.daemon_rss_mb()
            result["elapsed"] = time.monotonic() - began
            (workdir / "steady.json").write_text(json.dumps(result, indent=1, default=str))
            print(json.dumps(result, indent=1, default=str))
            say(f"logs in {workdir}")
            return 0
        finally:
            (workdir / "steady.json").write_text(json.dumps(result, indent=1, default=str))
            if run is not None:
                run.close()


if __name__ == "__main__":
    sys.exit(main())
