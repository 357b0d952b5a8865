"""A claim deleted behind its holder's back (issue 16 item 4): how soon the holder stops acting
on the node, and how soon it holds it again, seen from outside the daemons.

One fleet of 2 ``computed`` daemons (processes, every option at the product's default except a
2 s ZooKeeper session and an audit log) over ``--nodes`` fresh Ironic nodes (and whatever nodes
the stack's Ironic already has: the daemons share out every node they list). Each run picks one
node the first daemon holds, takes ``time.time()``, and deletes its claim znode with a plain
kazoo client (what an operator's ``zkCli.sh delete`` or a buggy tool does). Figures, per run:

* **dropped**: delete -> the holder's audit record ``release`` with ``lost`` for that node
  (written when the daemon stopped acting on it; the audit log's ``t`` is the daemon's wall
  clock, same machine);
* **re-claimed**: delete -> the new claim znode's ``ctime`` (ZooKeeper's wall clock, same
  machine), checked to be the same daemon's;

and over all runs the medians and ranges, with the machine's load average. Every wait is
bounded (30 s); a run that does not finish says so and the next goes on.

Run from the repository root against a stack from ``tools/services up``::

    .venv/bin/python -m bench.claim_loss_bench --stack-dir .services [--runs 10] [--nodes 20]

(without ``--stack-dir`` it starts and stops its own ZooKeeper, RabbitMQ, Placement and Ironic).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from kazoo.client import KazooClient

from bench.common import arguments, median_range, say, stack_for, stop_all, workdir_or_tmp
from computed.fleet.claims import claims_path, read_claims
from computed.fleet.membership import fleet_root
from computed.testing.ironic import enroll_nodes
from computed_ironic import IronicDriver
from tests.functional.daemons import Daemon, fleet_database, wait_converged

SERVICES = ["zookeeper", "rabbitmq", "placement", "ironic"]


def one_run(zk: KazooClient, group: str, holder: Daemon, index: int) -> tuple[float, float]:
    root = fleet_root(group)
    mine = sorted(node for node, record in read_claims(zk, root).items()
                  if record.host == holder.host)
    node = mine[index % len(mine)]
    path = f"{claims_path(root)}/{node}"
    deleted = time.time()
    zk.delete(path)
    deadline = time.monotonic() + 30
    dropped = recreated = None
    while (dropped is None or recreated is None) and time.monotonic() < deadline:
        if dropped is None:
            dropped = next((r["t"] for r in holder.records() if r["event"] == "release"
                            and r.get("lost") and r["node"] == node and r["t"] >= deleted), None)
        if recreated is None:
            stat = zk.exists(path)
            record = read_claims(zk, root).get(node)
            if stat is not None and record is not None and record.host == holder.host:
                recreated = stat.ctime / 1000.0
        time.sleep(0.005)
    if dropped is None or recreated is None:
        raise TimeoutError(f"node {node}: dropped {dropped}, re-claimed {recreated} after 30 s")
    return dropped - deleted, recreated - deleted


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=20)
    args = parser.parse_args(argv)
    work = workdir_or_tmp(args.workdir, "claim-loss-")
    token = uuid.uuid4().hex[:6]
    group = f"loss{token}"
    with stack_for(args, work, SERVICES, f"loss-{token}") as stack:
        enroll_nodes(stack["ironic"].url, args.nodes, resource_class=f"loss-{token}",
                     prefix=f"loss-{token}", workers=1)
        with IronicDriver.for_endpoint(stack["ironic"].url) as ironic:
            nodes = [node.uuid for node in ironic.list_nodes()]  # the daemons share out all
        database = fleet_database(Path(work))
        daemons = [Daemon(stack, work, host, group=group, database=database,
                          session_timeout=2).start() for host in ("c1", "c2")]
        zk = KazooClient(hosts=stack["zookeeper"].hosts)
        zk.start(timeout=15)
        try:
            wait_converged(zk, nodes, {"c1", "c2"}, group=group, timeout=120)
            drops, claims = [], []
            for index in range(args.runs):
                try:
                    dropped, reclaimed = one_run(zk, group, daemons[0], index)
                except TimeoutError as exc:
                    say(f"run {index + 1}: {exc}")
                    continue
                drops.append(dropped)
                claims.append(reclaimed)
                say(f"run {index + 1}: dropped {dropped * 1000:.0f} ms, "
                    f"re-claimed {reclaimed * 1000:.0f} ms")
            ms = [1000 * d for d in drops], [1000 * c for c in claims]
            say(f"{len(drops)}/{args.runs} runs; dropped median {median_range(ms[0], 0)} ms, "
                f"re-claimed median {median_range(ms[1], 0)} ms; "
                f"load average {os.getloadavg()[0]:.2f}")
        finally:
            zk.stop()
            zk.close()
            stop_all(daemons, timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
