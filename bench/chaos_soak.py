"""The long chaos soak: faults drawn from a seed for ``--minutes``, then every invariant checked.

    .venv/bin/python -m bench.chaos_soak --minutes 30 --seed 42 [--daemons 3 --nodes 60]
        [--benchmarks BENCHMARKS.md] [--ensemble]

``--ensemble`` runs ZooKeeper as an ensemble of 3 servers and adds its faults (leader killed,
a follower cut from its peers, quorum lost and regained) to the ones drawn.

Same engine as the short run in the test suite (:mod:`tests.chaos.chaos`): daemons in network
namespaces, a workload through ServerAPI and Ironic, one fault at a time (inject, hold, heal,
measure the time from the heal to convergence). Prints every fault and the invariant results;
with ``--benchmarks`` replaces the "Chaos soak" section of that file with the figures. Exit status
1 if an invariant failed or a fault never recovered. Must run as root (namespaces).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.common import machine_facts, write_section
from tests.chaos.chaos import Chaos

SECTION = "## Chaos soak (issue 8)"
ENSEMBLE_SECTION = "## Chaos soak on a ZooKeeper ensemble (issue 16)"
DESCRIPTION = (
    "Daemons each in a network namespace of their own (tests/chaos/netns.py), the reporter and "
    "the services in the root namespace. Recovery = time from the heal (restart, SIGCONT, link "
    "up, rule removed, drain done) to convergence: claims == ownership rules for the live "
    "members with no orphan, and Placement == Ironic for every node (the workload pauses while "
    "recovery is measured). Forgeries (forged_report, forged_cast, planted_member) are an "
    "attacker's messages on the bus and znodes in the group: each must be refused on the spot "
    "(its own invariant), then the fleet recovers as from any fault.")


def markdown(chaos: Chaos, args, minutes_run: float) -> str:
    res = chaos.results
    summary = chaos.summary()
    load = os.getloadavg()
    facts = machine_facts()
    lines = [ENSEMBLE_SECTION if args.ensemble else SECTION, "",
             (f"`.venv/bin/python -m bench.chaos_soak --minutes {args.minutes:g} "
             f"--seed {args.seed} --daemons {args.daemons} --nodes {args.nodes}"
             f"{'' if args.zk_credentials else ' --zk-credentials='}"
             f"{' --ensemble' if args.ensemble else ''}` on "
             f"{facts['nproc']} cores ({facts['python']}), machine shared with other work (load "
             f"average at the end {load[0]:.1f}); fault phase {minutes_run:.1f} min, session "
             f"timeout {chaos.session} s, rehome_grace {chaos.grace:g} s, ZooKeeper ACLs "
             f"{'on' if args.zk_credentials else 'off'}."), "", DESCRIPTION, "",
             "| fault | injected | recovered |", "|---|---|---|"]
    for kind, (count, ok) in sorted(summary["by_kind"].items()):
        lines.append(f"| {kind} | {count} | {ok} |")
    lines += ["", (f"Recovery over {summary['recovered']} fault(s): p50 {summary['p50']:.1f} s, "
                   f"p95 {summary['p95']:.1f} s, max {summary['max']:.1f} s."), "",
              "Workload: " + ", ".join(f"{k} {v}" for k, v in sorted(res.workload.items())) + ".",
              "", "| invariant | result |", "|---|---|"]
    for name, (ok, detail) in res.checks.items():
        lines.append(f"| {name} | {'PASS' if ok else 'FAIL'}: {detail.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--daemons", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=60)
    parser.add_argument("--session", type=int, default=3)
    parser.add_argument("--grace", type=float, default=3.0)
    parser.add_argument("--zk-credentials", default="computed:chaos-soak",
                        help="the fleet's ZooKeeper credentials (user:password: ACLs on); "
                             "'' runs with ZooKeeper open")
    parser.add_argument("--benchmarks", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--ensemble", action="store_true",
                        help="ZooKeeper as an ensemble of 3, with its faults")
    args = parser.parse_args()
    print(f"chaos soak: seed {args.seed}, {args.minutes:g} min"
          f"{', ZooKeeper ensemble of 3' if args.ensemble else ''}", flush=True)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="chaos-soak-"))
    chaos = Chaos(workdir, args.seed, daemons=args.daemons, nodes=args.nodes,
                  session=args.session, grace=args.grace, zk_credentials=args.zk_credentials,
                  log=lambda text: print(text, flush=True), ensemble=args.ensemble)
    try:
        chaos.setup()
        started = time.monotonic()
        chaos.run_faults(duration=args.minutes * 60)
        minutes_run = (time.monotonic() - started) / 60
        results = chaos.check()
        print(results.report(), flush=True)
        summary = chaos.summary()
        print(f"recovery p50 {summary['p50']:.1f}s p95 {summary['p95']:.1f}s "
              f"max {summary['max']:.1f}s over {summary['recovered']}/{summary['faults']}",
              flush=True)
        if args.benchmarks:
            write_section(args.benchmarks, ENSEMBLE_SECTION if args.ensemble else SECTION,
                          markdown(chaos, args, minutes_run))
        never = summary["recovered"] < summary["faults"]
        return 1 if never or not results.ok else 0
    finally:
        chaos.close()
        print(f"logs in {workdir}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
