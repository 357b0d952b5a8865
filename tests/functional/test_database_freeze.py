"""computed's database frozen (SIGSTOP) for longer than the ZooKeeper session, while the fleet
works (issue 22 item 3).

The fleet's database is a PostgreSQL cluster of this test's own (the stack's shared server
serves Placement and other tests: freezing it would freeze them). Two daemons and a reporter
use it; every process of the cluster is stopped with SIGSTOP while a third daemon starts, and stays
stopped for twice the session timeout after it joined (the join asks for nodes to move, and the
daemons plan the handover from the instances' hosts, read from the database), while a node goes
into maintenance (its report has to be applied by the reporter, which records it in the frozen
database). On eventlet, a daemon blocked in psycopg2 stopped its whole process, ZooKeeper pings
included.

What must hold, read from ZooKeeper and Placement while frozen and after SIGCONT:

* no daemon loses its ZooKeeper session: c1 and c2 stay members throughout, and every node
  claim they keep keeps its claim epoch (a lost session would delete and re-create it);
* no claim moves beyond what the join asks: a node that changed hands went to c3, and only
  nodes the ring gives c3 changed hands;
* everything catches up after SIGCONT: the fleet converges on the three daemons and the
  maintenance change reaches Placement.

The daemons and the reporter run in the test's process (tests/functional/inprocess.py): what is
frozen is the database, not them, and a query that waits on it blocks only its own thread
(psycopg2 lets go of the interpreter lock while it waits), as in a process of its own. They keep
the short :data:`SESSION`, which the freeze must outlast; their first connections to ZooKeeper
are made before the freeze (c3's during it, to a ZooKeeper that is not frozen).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from computed import db
from computed.fleet.claims import read_claims
from computed.fleet.membership import fleet_root
from computed.testing.postgres import PostgreSQL
from hashring.ownership import Member
from tests.functional.daemons import (
    Daemon,
    Reporter,
    dump_logs,
    expected_ownership,
    ironic,
    node_for,
    ownership_now,
    seen,
    stop_all,
    wait_converged,
    wait_for,
    zk_client,
)

WORLD_NODES = 12
SESSION = 3
FROZEN = 2 * SESSION


def _cluster_pids(cluster: PostgreSQL) -> list[int]:
    """runuser, the postmaster, then every process the postmaster forked (backends, writers):
    each backend calls setsid(), so the cluster is no one process group."""
    pids, queue = [], [cluster.pid]
    while queue:
        pid = queue.pop(0)
        pids.append(pid)
        try:
            children = (Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
        except OSError:
            continue
        queue.extend(int(child) for child in children)
    return pids


def _freeze(cluster: PostgreSQL, signum: int) -> list[int]:
    """Send ``signum`` to every process of the cluster, parents first (a stopped postmaster
    forks no new backend); the pids it reached."""
    pids = _cluster_pids(cluster)
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass
    return pids


def test_a_frozen_database_costs_no_session_and_moves_no_claim(stack, world, placement,
                                                               tmp_path):
    cluster = PostgreSQL(tmp_path / "frozen-postgres", {"private": True})
    cluster.start()
    processes = []
    client = zk_client(stack)
    try:
        database = cluster.url
        db.sync(database)
        kw = dict(group=world.group, database=database, session_timeout=SESSION,
                  process=False)
        processes += [Daemon(stack, tmp_path, host, **kw).start() for host in ("c1", "c2")]
        processes.append(Reporter(stack, tmp_path, "r1", **kw).start())
        wait_converged(client, _every_node(stack), {"c1", "c2"}, group=world.group)
        wait_for(lambda: all(seen(placement, n) for n in world.nodes), 120,
                 "every node reported", processes)
        # A node c1 keeps after c3 joins (chosen on the ring of the three): its maintenance
        # change is reported, and must be applied, while the database is frozen.
        node = node_for(stack, world, client, "c1",
                        ring_members=[Member("c1"), Member("c2"), Member("c3")])
        every_node = _every_node(stack)  # fixed from here on: nothing is enrolled or deleted
        wait_converged(client, every_node, {"c1", "c2"}, group=world.group)
        wait_for(lambda: seen(placement, node), 120, "the node c1 keeps reported", processes)
        before = read_claims(client, fleet_root(world.group))

        frozen = _freeze(cluster, signal.SIGSTOP)
        assert len(frozen) > 3, f"the cluster's processes were not found: {frozen}"
        try:
            processes.append(Daemon(stack, tmp_path, "c3", **kw).start())
            ironic(stack, "PUT", f"/nodes/{node}/maintenance", {"reason": "while frozen"})
            # The freeze lasts FROZEN seconds from the moment c3 is a member: from then on c1
            # and c2 plan the handover, which reads the instances' hosts from the database.
            joined_at = None
            deadline = time.monotonic() + 60
            while joined_at is None or time.monotonic() - joined_at < FROZEN:
                members, _ = ownership_now(client, world.group)
                names = {m.name for m in members}
                assert {"c1", "c2"} <= names, f"a daemon lost its session: members {names}"
                _assert_only_asked_moves(client, world, every_node, before)
                if joined_at is None and "c3" in names:
                    joined_at = time.monotonic()
                assert time.monotonic() < deadline, f"c3 never joined\n{dump_logs(processes)}"
                time.sleep(0.2)
        finally:
            _freeze(cluster, signal.SIGCONT)

        wait_converged(client, every_node, {"c1", "c2", "c3"}, timeout=120, group=world.group)
        _assert_only_asked_moves(client, world, every_node, before)
        wait_for(lambda: seen(placement, node) and seen(placement, node).reserved == 1, 120,
                 "the maintenance change in Placement after SIGCONT", processes)
        assert all(p.alive for p in processes), dump_logs(processes)
    finally:
        try:
            stop_all(processes)  # fails naming what an in-process service left running
        finally:
            client.stop()
            client.close()
            cluster.stop()


def _every_node(stack) -> list[str]:
    """Every node Ironic has: the daemons claim them all, this test's and any an earlier test
    on the same stack left behind."""
    return [node["uuid"] for node in ironic(stack, "GET", "/nodes?limit=1000")["nodes"]]


def _assert_only_asked_moves(client, world, every_node, before) -> None:
    """Every claim held before is still held under the same epoch, or now held by c3 on a node
    the ring of c1, c2, c3 gives c3."""
    members, _ = ownership_now(client, world.group)
    now = read_claims(client, fleet_root(world.group))
    wanted = expected_ownership(members, every_node) if any(
        m.name == "c3" for m in members) else {}
    for node, record in before.items():
        current = now.get(node)
        if current is not None and current.epoch == record.epoch:
            continue
        if current is None:
            # Released by its holder for c3 (a handover in progress), never by a lost session.
            assert wanted.get(node) == "c3", f"{node} lost its claim ({record.host})"
            continue
        assert current.host == "c3" and wanted.get(node) == "c3", \
            f"{node} moved from {record.host} to {current.host}, which the join did not ask"
