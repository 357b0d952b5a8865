"""Fleet scale beyond this machine (issue 13 item 10): the pure reconcile rules at ``--nodes`` nodes
and ``--daemons`` daemons, with ZooKeeper request costs measured on the harness's ZooKeeper.

Pure part (:func:`hashring.ownership.moves_between`, the rules :func:`computed.fleet.plan.
compute_plan` applies): for one daemon joining and one leaving, how many nodes move. Each move is
claim traffic: the old owner deletes its claim znode (``delete``), the new owner creates one
(``create``, ephemeral) after its watch on the old one fires (``exists`` with a watch). Znodes:
one claim per node plus the members.

Measured part: a ZooKeeper started by the harness; ``--sample`` ephemeral znodes created, then
deleted, with pipelined async requests from one kazoo client (as the claim table does), giving
requests per second; then the directory is filled up to ``--list`` children and listed with one
``get_children``, as ``read_claims`` (status, checks) lists the claims directory: whether the
answer comes (its size is above ZooKeeper's 1 MiB ``jute.maxbuffer`` from 26,215 children on:
Java clients refuse such an answer, kazoo and ZooKeeper 3.8's server do not) and how long it takes.

Handover time estimate = moved nodes x (1 delete + 1 watch event + 1 create) / measured rate, and
the plan's own CPU time is measured on this machine.

Steady state: every daemon's reconcile pass (every second, :data:`computed.fleet.reconciler.TICK`)
reads the group (:func:`computed.fleet.membership.read_group`: two ``get_children`` and one
pipelined ``get`` per member): measured here with ``--daemons`` member znodes, ``--passes``
times, as the time and the client's CPU of one read, and the ZooKeeper reads per second the
fleet's passes make.

    .venv/bin/python -m bench.scale_sim [--nodes 200000] [--daemons 40] [--sample 5000]
        [--list 50000]
"""

from __future__ import annotations

import json
import sys
import time
import uuid as uuidlib

from bench.common import arguments, machine, say, stack_for, workdir_or_tmp
from hashring.ownership import Member, compute_ownership, moves_between


def pure(nodes: list[str], daemons: int) -> dict:
    members = [Member(f"computed-{i:02d}") for i in range(daemons)]
    t0 = time.process_time()
    ownership = compute_ownership(members, nodes, {})
    plan_cpu = time.process_time() - t0
    shares = sorted(len(v) for v in ownership.managed.values())
    joined = members + [Member(f"computed-{daemons:02d}")]
    join = moves_between(members, joined, nodes, {})
    leave = moves_between(members, members[1:], nodes, {})
    return {"plan_cpu_s": plan_cpu, "share_min": shares[0], "share_max": shares[-1],
            "join_moves": len(join), "leave_moves": len(leave),
            "znodes": len(nodes) + daemons}


def measured(stack, sample: int, listed: int, daemons: int = 40, passes: int = 50) -> dict:
    from kazoo.client import KazooClient

    from computed.fleet.membership import read_group
    from computed.fleet.reconciler import TICK
    client = KazooClient(hosts=stack["zookeeper"].hosts, timeout=30)
    client.start(timeout=60)
    root = f"/sim-{uuidlib.uuid4().hex[:6]}"
    try:
        client.ensure_path(root)
        names = [str(uuidlib.uuid4()) for _ in range(sample)]
        t0 = time.monotonic()
        for result in [client.create_async(f"{root}/{n}", b'{"host": "computed-00"}',
                                           ephemeral=True) for n in names]:
            result.get(timeout=120)
        create_rate = sample / (time.monotonic() - t0)
        t0 = time.monotonic()
        for result in [client.delete_async(f"{root}/{n}") for n in names]:
            result.get(timeout=120)
        delete_rate = sample / (time.monotonic() - t0)
        names = [str(uuidlib.uuid4()) for _ in range(listed)]
        for result in [client.create_async(f"{root}/{n}", b'{"host": "computed-00"}',
                                           ephemeral=True) for n in names]:
            result.get(timeout=120)
        t0 = time.monotonic()
        children = client.get_children(root)
        list_s = time.monotonic() - t0
        answer_bytes = sum(len(c) + 4 for c in children)  # jute: a length, then the bytes
        for result in [client.delete_async(f"{root}/{n}") for n in names]:
            result.get(timeout=120)
        members, draining = f"{root}/members", f"{root}/draining"
        client.ensure_path(draining)
        for i in range(daemons):
            client.create(f"{members}/computed-{i:02d}", b'{"weight": 1}', ephemeral=True,
                          makepath=True)
        reads, cpu = [], []
        for _ in range(passes):
            t0, c0 = time.monotonic(), time.process_time()
            view = read_group(client, members, draining)
            reads.append(time.monotonic() - t0)
            cpu.append(time.process_time() - c0)  # this process's threads: kazoo's included
        assert len(view.members) + len(view.ignored) == daemons
        client.delete(root, recursive=True)
    finally:
        client.stop()
        client.close()
    return {"create_per_s": create_rate, "delete_per_s": delete_rate,
            "listed_children": len(children), "get_children_s": list_s,
            "get_children_answer_bytes": answer_bytes,
            "group_read_s_median": sorted(reads)[len(reads) // 2],
            "group_read_cpu_s_median": sorted(cpu)[len(cpu) // 2],
            "group_reads_per_s_fleet": daemons * (daemons + 2) / TICK}


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--daemons", type=int, default=40)
    parser.add_argument("--sample", type=int, default=5000)
    parser.add_argument("--list", type=int, default=50_000,
                        help="children of the directory listed with one get_children")
    parser.add_argument("--passes", type=int, default=50,
                        help="reads of the group, as each reconcile pass makes")
    args = parser.parse_args(argv)
    nodes = [str(uuidlib.uuid4()) for _ in range(args.nodes)]
    result = {"machine": machine(), "nodes": args.nodes, "daemons": args.daemons}
    result["pure"] = pure(nodes, args.daemons)
    say(f"pure: {result['pure']}")
    workdir = workdir_or_tmp(args.workdir, "scale-sim-")
    with stack_for(args, workdir, ["zookeeper"], "sim") as stack:
        result["zookeeper"] = measured(stack, args.sample, args.list, args.daemons, args.passes)
    say(f"zookeeper: {result['zookeeper']}")
    p, z = result["pure"], result["zookeeper"]
    for kind in ("join", "leave"):
        moved = p[f"{kind}_moves"]
        result[f"{kind}_handover_s"] = moved / z["delete_per_s"] + moved / z["create_per_s"]
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
