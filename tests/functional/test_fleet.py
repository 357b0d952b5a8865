"""The fleet against real ZooKeeper and Ironic. Daemons run in the test's process
(tests/functional/inprocess.py, the in-process session timeout), or as processes of their own
with :data:`SESSION` in the tests marked ``daemon_processes``: those that kill or freeze a
daemon, or restart ZooKeeper under the fleet's short sessions.

Every scenario ends the same way: after convergence, the claims in ZooKeeper are exactly what the
ownership rules give the live members (so every node is claimed by exactly one live daemon), and
the merged audit logs show no action taken outside its claim or after a newer claim on the same
node (:func:`computed.fleet.audit.fencing_violations`).
"""

from __future__ import annotations

import json
import signal
import time
import uuid

import pytest
from tooz import coordination

from computed.fleet.audit import fencing_violations
from computed.fleet.claims import read_claims
from computed.fleet.membership import fleet_root
from computed.testing.ironic import list_node_uuids, request
from hashring.ownership import Member, compute_ownership
from tests import cli
from tests.functional.daemons import (
    IN_PROCESS_SESSION,
    NO_REPORTER,
    Daemon,
    dump_logs,
    fleet_database,
    json_status,
    merged_records,
    ownership_now,
    stop_all,
    wait_converged,
    want_processes,
    zk_client,
)

#: Enough that every share the tests compare is non-empty but for odds they name (a node moves
#: to a fourth daemon, or to a weight of 3 against 1, with probability 1/4: none of 80 moves once
#: in 10^10 runs; one of three daemons gets none of 80 once in 10^13). Every node costs Ironic
#: re-reads by every daemon of every test (the fleet-wide listing announces them: no reporter
#: applies their providers here), so no more than that.
NODES = 80
SESSION = 2  # seconds: the fleet's ZooKeeper session timeout in these tests


@pytest.fixture(scope="module")
def nodes(stack):
    uuids = stack["ironic"].enroll_nodes(NODES, prefix=f"fleet-{uuid.uuid4().hex[:6]}")
    yield uuids
    stack["ironic"].drop_nodes(uuids)


@pytest.fixture
def zk(stack):
    client = zk_client(stack)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def fleet(stack, tmp_path, nodes, request):
    """Start daemons with ``fleet(*hosts)``; all are stopped together at the end of the test
    (:func:`stop_all`: processes killed, in-process daemons asked at once, without the drain,
    so that no survivor takes over a leaver's nodes and re-reads them in the tear-down). Processes
    with :data:`SESSION` when the test is marked ``daemon_processes``, else in the test's
    process."""
    started: list[Daemon] = []
    group = f"g{uuid.uuid4().hex[:8]}"
    database = fleet_database(tmp_path)
    process = want_processes(request)

    def start(*hosts, **kwargs):
        kwargs["extra"] = NO_REPORTER + kwargs.get("extra", "")
        daemons = [Daemon(stack, tmp_path, host, session_timeout=SESSION if process else None,
                          group=group, database=database, process=process, **kwargs).start()
                   for host in hosts]
        started.extend(daemons)
        return daemons

    start.group = group
    start.ironic_url = stack["ironic"].url
    start.all = started
    yield start
    stop_all(started)


def manage(daemon, *args):
    """``computed-manage`` with ``daemon``'s configuration, run in this process (tests/cli.py:
    a function call where a subprocess costs 1-3 s of imports); it leaves no thread behind."""
    result = cli.run("computed-manage", "--config-file", daemon.conf, *args, home=daemon.workdir)
    assert result.threads_left == (), result
    return result


def converge(zk, fleet, nodes, hosts, timeout=60):
    # Ironic may hold other tests' nodes too: the fleet manages all of them.
    every_node = list_node_uuids(fleet.ironic_url)
    assert set(nodes) <= set(every_node)
    try:
        return wait_converged(zk, every_node, set(hosts), timeout=timeout, group=fleet.group)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{dump_logs(fleet.all)}") from None


def assert_fenced(daemons):
    violations = fencing_violations(merged_records(daemons))
    assert violations == [], "\n".join(violations[:20])


def test_three_daemons_share_the_nodes_and_sync_each_once(zk, fleet, nodes):
    daemons = fleet("c1", "c2", "c3")
    converge(zk, fleet, nodes, {"c1", "c2", "c3"})
    claims = read_claims(zk, fleet_root(fleet.group))
    shares = {host: sum(1 for c in claims.values() if c.host == host)
              for host in ("c1", "c2", "c3")}
    assert all(share > 0 for share in shares.values()), shares
    # Each daemon syncs every node it claims, once per claim (nothing changed in Ironic).
    deadline = time.monotonic() + 30
    while True:
        acts = {d.host: [(r["node"], r["claim_epoch"]) for r in d.records()
                         if r["event"] == "act"]
                for d in daemons}
        done = all({(n, c.epoch) for n, c in claims.items() if c.host == host} <= set(acts[host])
                   for host in acts)
        if done:
            break
        assert time.monotonic() < deadline, {h: len(a) for h, a in acts.items()}
        time.sleep(0.2)
    for host, acted in acts.items():
        assert len(acted) == len(set(acted)), f"{host} synced a node twice under one claim"
    assert_fenced(daemons)


@pytest.mark.daemon_processes
def test_kill_9_survivors_take_over_within_session_timeout(zk, fleet, nodes):
    daemons = fleet("c1", "c2", "c3")
    converge(zk, fleet, nodes, {"c1", "c2", "c3"})
    victim = daemons[1]
    victim.kill()
    took = converge(zk, fleet, nodes, {"c1", "c3"})
    # Generous bound on behaviour (not a benchmark): takeover is driven by the session expiry.
    assert took < SESSION + 10, took
    assert_fenced(daemons)


@pytest.mark.daemon_processes
def test_frozen_daemon_does_not_act_after_it_resumes(stack, zk, fleet, nodes):
    daemons = fleet("c1", "c2", "c3")
    converge(zk, fleet, nodes, {"c1", "c2", "c3"})
    frozen = daemons[2]
    _, claims = ownership_now(zk, fleet.group)
    its_nodes = [node for node, host in claims.items() if host == frozen.host]
    frozen.signal(signal.SIGSTOP)
    try:
        converge(zk, fleet, nodes, {"c1", "c2"})
        # Change its former nodes in Ironic while it sleeps: on waking, it sees changes to nodes
        # it still believes it holds, and must not act on them.
        for node in its_nodes[:10]:
            request("PATCH", f"{stack['ironic'].url}/v1/nodes/{node}",
                     [{"op": "add", "path": "/extra/touched", "value": "yes"}])
            request("PUT", f"{stack['ironic'].url}/v1/nodes/{node}/maintenance",
                     {"reason": "fleet test"})
        resumed_at = time.time()
    finally:
        frozen.signal(signal.SIGCONT)
    converge(zk, fleet, nodes, {"c1", "c2", "c3"})
    stale = [r for r in frozen.records() if r["event"] == "act" and r["t"] >= resumed_at
             and r["node"] in its_nodes and
             r["claim_epoch"] in {c["claim_epoch"] for c in frozen.records()
                                  if c["event"] == "claim" and c["t"] < resumed_at}]
    assert stale == []
    assert_fenced(daemons)
    for node in its_nodes[:10]:
        request("DELETE", f"{stack['ironic'].url}/v1/nodes/{node}/maintenance")


def test_scale_out_moves_only_the_newcomers_share(zk, fleet, nodes):
    daemons = fleet("c1", "c2", "c3")
    converge(zk, fleet, nodes, {"c1", "c2", "c3"})
    _, before = ownership_now(zk, fleet.group)
    joined_at = time.time()
    daemons += fleet("c4")
    converge(zk, fleet, nodes, {"c1", "c2", "c3", "c4"})
    _, after = ownership_now(zk, fleet.group)
    moved = {node for node in after if before[node] != after[node]}
    assert moved and all(after[node] == "c4" for node in moved)
    # Nodes that did not move were never released: no pause for them.
    released = {r["node"] for d in daemons[:3] for r in d.records()
                if r["event"] == "release" and r["t"] >= joined_at}
    assert released == moved
    assert_fenced(daemons)


def test_graceful_stop_hands_nodes_over_before_leaving(zk, fleet, nodes):
    daemons = fleet("c1", "c2", "c3")
    converge(zk, fleet, nodes, {"c1", "c2", "c3"})
    leaving = daemons[0]
    assert leaving.stop() == 0
    # Its nodes were taken over without waiting for a session to expire: it released them.
    records = leaving.records()
    assert {r["event"] for r in records} >= {"join", "release", "leave"}
    converge(zk, fleet, nodes, {"c2", "c3"}, timeout=10)
    assert_fenced(daemons)


def test_drain_moves_free_nodes_away_and_undrain_brings_them_back(zk, fleet, nodes):
    daemons = fleet("c1", "c2", "c3")
    converge(zk, fleet, nodes, {"c1", "c2", "c3"})
    status = json_status(daemons[0])
    total = len(list_node_uuids(fleet.ironic_url))
    assert status["summary"] == {"nodes": total, "claimed": total, "unclaimed": 0,
                                 "claims_by_non_members": 0, "ignored": 0}
    typo = manage(daemons[0], "fleet", "drain", "nosuchhost")
    assert typo.returncode == 1 and typo.stdout == ""
    assert typo.stderr.strip().splitlines() == [
        f"computed-manage: error: nosuchhost is not a member of group {fleet.group} "
        "(members: c1, c2, c3): nothing to drain"]
    assert json_status(daemons[0])["summary"]["unclaimed"] == 0
    drain = manage(daemons[0], "fleet", "drain", "C2")
    assert drain.returncode == 0, drain.stderr
    converge(zk, fleet, nodes, {"c1", "c2", "c3"})
    status = json_status(daemons[0])
    by_host = {m["host"]: m for m in status["members"]}
    assert by_host["c2"]["draining"] is True and by_host["c2"]["nodes"] == 0
    assert by_host["c1"]["nodes"] + by_host["c3"]["nodes"] == total
    undrain = manage(daemons[0], "fleet", "undrain", "c2")
    assert undrain.returncode == 0, undrain.stderr
    converge(zk, fleet, nodes, {"c1", "c2", "c3"})
    assert json_status(daemons[0])["members"][1]["nodes"] > 0
    assert_fenced(daemons)


@pytest.mark.daemon_processes
def test_zookeeper_restart_converges_again(stack, zk, fleet, nodes):
    daemons = fleet("c1", "c2", "c3")
    converge(zk, fleet, nodes, {"c1", "c2", "c3"})
    stack["zookeeper"].restart()
    stack.save()
    converge(zk, fleet, nodes, {"c1", "c2", "c3"}, timeout=90)
    assert all(d.alive for d in daemons), dump_logs(daemons)
    assert_fenced(daemons)


def test_weights_shift_the_share(zk, fleet, nodes):
    fleet("c1")
    fleet("c2", weight=3)
    converge(zk, fleet, nodes, {"c1", "c2"})
    members, claims = ownership_now(zk, fleet.group)
    every_node = list_node_uuids(fleet.ironic_url)
    # converge() held the claims to the rules for the weights the daemons published; these are
    # the configured ones, and the claims are the rules' answer for them exactly.
    assert {m.name: m.weight for m in members} == {"c1": 1, "c2": 3}
    weighted = compute_ownership([Member("c1", 1), Member("c2", 3)], every_node, {}).owners()
    assert claims == weighted
    # The weight moved nodes, all of them to c2. Exact, where counting c2's share of random
    # uuids is not ("more than 2x c1's" failed in the suite, 98 vs 52; "more than 1.5x" fails
    # once in 26,000 runs). Each node moves with probability 1/4: of 80, none once in 10^10.
    even = compute_ownership([Member("c1"), Member("c2")], every_node, {}).owners()
    moved = [node for node in every_node if even[node] != weighted[node]]
    assert moved and all(weighted[node] == "c2" for node in moved), (len(moved), len(every_node))


def test_fleet_status_lists_the_members_of_a_custom_tooz_namespace(stack, tmp_path):
    # tooz keeps a group under the backend URL's ?namespace= (default "tooz"); fleet status must
    # read the group where the daemons joined it, not under a namespace of its own. The member
    # here is nobody's victim: it gets the in-process session, as a 2 s one expired under load
    # (an empty member list, seen at load 15).
    group = f"g{uuid.uuid4().hex[:8]}"
    zk = stack["zookeeper"].url
    url = f"{zk}?timeout={IN_PROCESS_SESSION}&namespace=custom-{group}"
    member = coordination.get_coordinator(url, b"c1")
    member.start()
    try:
        member.create_group(group.encode()).get()
        member.join_group(group.encode(), capabilities={"host": "c1", "weight": 1}).get()
        conf = tmp_path / "manage.conf"
        conf.write_text(stack.computed_conf().replace(f"backend_url = {zk}?timeout=2",
                                                      f"backend_url = {url}\ngroup = {group}"))
        result = cli.run("computed-manage", "--config-file", conf, "fleet", "status", "--json",
                         home=tmp_path)
        assert result.returncode == 0 and result.threads_left == (), result
        assert [m["host"] for m in json.loads(result.stdout)["members"]] == ["c1"]
    finally:
        member.stop()
