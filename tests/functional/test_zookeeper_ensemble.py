"""The fleet on a ZooKeeper ensemble (3 servers on loopback, :class:`Ensemble`), under load.

The daemons' backend URL lists the three servers. While faults hit the ensemble, a load thread
toggles maintenance on the world's nodes and a sampler lists their providers in Placement. Each
test ends with the same checks: claims == the ownership rules for the live members (every node
claimed exactly once), no action outside its claim in the merged audit logs, no provider ever
missing once seen, and Placement == Ironic (reserved follows maintenance) for every node.

* the leader killed: a new one is elected, the fleet keeps its claims; then a daemon killed with
  -9 while the ensemble has quorum is failed over (a change to one of its nodes reaches
  Placement through its new owner; the time is printed, not asserted);
* a follower the daemons are connected to cut from its peers: it stops serving, its clients move
  to the other servers; a daemon started meanwhile starts although the cut server is the first
  of its URL (it asks the servers in turn for the session timeout bounds);
* quorum lost (2 of 3 stopped) and regained: no daemon acts while there is no quorum past its
  lease, all resume after.

Needs root for the partition (nftables); the rest runs anywhere the harness does.

The faults hit ZooKeeper's servers, not the daemons: the reporter and the daemons run in the
test's process (tests/functional/inprocess.py), with the short :data:`SESSION` all the same (the
quorum test is about leases running out, and the ensemble is healthy when they start: their first
connection, bounded by the session, is made before any fault), but for the daemon the failover
kills with -9, a process of its own (``c1``).
"""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

from computed.fleet.audit import fencing_violations
from computed.fleet.claims import read_claims
from computed.fleet.membership import fleet_root
from computed.testing.ironic import list_node_uuids
from computed.testing.stack import Stack
from computed.testing.zookeeper import Ensemble
from tests.functional.daemons import (
    dump_logs,
    ironic,
    make_available,
    merged_records,
    node_for,
    seen,
    wait_converged,
    wait_for,
    zk_client,
)

WORLD_NODES = 12
SESSION = 3


@pytest.fixture(scope="module")
def stack(stack, tmp_path_factory):
    """The session's services with a 3-server ensemble in place of its ZooKeeper."""
    workdir = tmp_path_factory.mktemp("ensemble")
    ensemble = Ensemble(workdir)
    try:
        ensemble.start()
        yield Stack(workdir, {**stack.services, "zookeeper": ensemble})
    finally:
        ensemble.stop()


@pytest.fixture
def ensemble(stack):
    """The ensemble, healed and whole again after each test, whatever happened in it."""
    service = stack["zookeeper"]
    yield service
    service.heal()
    for index, server in enumerate(service.info["servers"]):
        if not server.get("pid"):
            service.start_server(index)
    wait_for(service.ready, 60, "ensemble whole again")


@pytest.fixture
def zk(stack):
    client = zk_client(stack)
    yield client
    client.stop()
    client.close()


class Load:
    """Maintenance toggled on random nodes every ~0.3 s (Ironic errors tolerated; nodes in
    ``spared`` left alone) and Placement sampled every 0.5 s: a provider missing is recorded."""

    def __init__(self, stack, world, placement):
        self.stack, self.world, self.placement = stack, world, placement
        self.stop = threading.Event()
        self.toggles = 0
        self.missing: list[str] = []
        self.spared: set[str] = set()
        self.threads = [threading.Thread(target=self._toggle, daemon=True),
                        threading.Thread(target=self._sample, daemon=True)]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)

    def _toggle(self) -> None:
        rng = random.Random(os.getpid())
        while not self.stop.wait(0.3):
            node = rng.choice(self.world.nodes)
            if node in self.spared:
                continue
            try:
                if ironic(self.stack, "GET", f"/nodes/{node}")["maintenance"]:
                    ironic(self.stack, "DELETE", f"/nodes/{node}/maintenance")
                else:
                    ironic(self.stack, "PUT", f"/nodes/{node}/maintenance", {"reason": "load"})
                self.toggles += 1
            except Exception:  # noqa: BLE001 - the load goes on; the end state is what counts
                pass

    def _sample(self) -> None:
        while not self.stop.wait(0.5):
            for node in self.world.nodes:
                if seen(self.placement, node) is None:
                    self.missing.append(node)


def ironic_matches_placement(stack, world, placement) -> list[str]:
    """Nodes whose provider's reserved does not follow the node's maintenance."""
    wrong = []
    for node in world.nodes:
        provider = seen(placement, node)
        want = 1 if ironic(stack, "GET", f"/nodes/{node}")["maintenance"] else 0
        if provider is None or provider.reserved != want:
            wrong.append(node)
    return wrong


def start_fleet(stack, world, placement, hosts=("c1", "c2", "c3"), processes=()):
    """The reporter and the daemons of ``hosts``, in the test's process but those of
    ``processes`` (which the test kills); once every node is reported."""
    make_available(stack, world.nodes)
    world.reporter("r1", session_timeout=SESSION)
    daemons = [world.daemon(host, session_timeout=SESSION, process=host in processes)
               for host in hosts]
    wait_for(lambda: all(seen(placement, n) and seen(placement, n).reserved == 0
                         for n in world.nodes), 120, "nodes reported", world.processes)
    return daemons


def converged(stack, zk, world, hosts, timeout=90) -> float:
    try:
        return wait_converged(zk, list_node_uuids(stack["ironic"].url), set(hosts),
                              timeout=timeout, group=world.group)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{dump_logs(world.processes)}") from None


def final_checks(stack, zk, world, placement, daemons, load, hosts) -> None:
    converged(stack, zk, world, hosts)
    wait_for(lambda: not ironic_matches_placement(stack, world, placement), 60,
             "Placement == Ironic", world.processes)
    violations = fencing_violations(merged_records(daemons))
    assert violations == [], "\n".join(violations[:20])
    assert load.missing == [], f"providers missing while their node existed: {load.missing}"
    print(f"load: {load.toggles} maintenance toggles")


def owner_of(zk, world, node) -> str:
    return read_claims(zk, fleet_root(world.group))[node].host


def failover(stack, zk, world, placement, load, victim, node) -> float:
    """Kill ``victim`` (a process) with -9 and change ``node``, which it holds (the load leaves
    it alone); the seconds until Placement shows the change."""
    assert owner_of(zk, world, node) == victim.host
    load.spared.add(node)
    # Settled first: Placement shows what Ironic has (a toggle by the load may be in flight).
    wait_for(lambda: node not in ironic_matches_placement(stack, world, placement), 60,
             "the victim's node settled before the kill", world.processes)
    want = 0 if ironic(stack, "GET", f"/nodes/{node}")["maintenance"] else 1
    victim.kill()
    killed = time.monotonic()
    if want:
        ironic(stack, "PUT", f"/nodes/{node}/maintenance", {"reason": "failover"})
    else:
        ironic(stack, "DELETE", f"/nodes/{node}/maintenance")
    wait_for(lambda: getattr(seen(placement, node), "reserved", None) == want, 60,
             "the victim's node changed in Placement", world.processes)
    took = time.monotonic() - killed
    assert owner_of(zk, world, node) != victim.host
    return took


def test_leader_killed_then_a_daemon_fails_over(stack, world, placement, ensemble, zk):
    daemons = start_fleet(stack, world, placement, processes={"c1"})
    victim = daemons[0]
    converged(stack, zk, world, {"c1", "c2", "c3"})
    # The victim's node: one the ring gives c1 (of 12 random nodes it gets none once in 130
    # runs; one is then enrolled for it), chosen before the load, whose sampler would count a
    # node enrolled later as a provider missing until it is reported.
    node = node_for(stack, world, zk, "c1")
    converged(stack, zk, world, {"c1", "c2", "c3"})
    wait_for(lambda: seen(placement, node), 60, "the victim's node reported", world.processes)
    with Load(stack, world, placement) as load:
        time.sleep(2)
        old_leader = ensemble.leader()
        ensemble.kill(old_leader)
        wait_for(lambda: ensemble.leader() is not None, 60, "a new leader", world.processes)
        print(f"leader {old_leader + 1} killed; new leader {ensemble.leader() + 1}")
        converged(stack, zk, world, {"c1", "c2", "c3"})
        took = failover(stack, zk, world, placement, load, victim, node)
        print(f"failover of c1 on 2 of 3 servers (kill -9 -> Placement): {took:.1f}s, "
              f"session {SESSION}s, load average {os.getloadavg()[0]:.1f}")
        ensemble.start_server(old_leader)
    final_checks(stack, zk, world, placement, daemons, load, {"c2", "c3"})


def test_follower_cut_from_its_peers_its_clients_move(stack, world, placement, ensemble, zk):
    if os.geteuid() != 0:
        pytest.skip("partitions need root (nftables)")
    daemons = start_fleet(stack, world, placement)
    converged(stack, zk, world, {"c1", "c2", "c3"})
    with Load(stack, world, placement) as load:
        time.sleep(2)
        follower = max(ensemble.followers(), key=ensemble.connections)
        print(f"cutting follower {follower + 1} ({ensemble.connections(follower)} clients)")
        ensemble.partition(follower)
        wait_for(lambda: ensemble.modes()[follower] is None, 30, "the cut server stops serving",
                 world.processes)
        wait_for(lambda: ensemble.connections(follower) == 0, 30, "its clients gone")
        converged(stack, zk, world, {"c1", "c2", "c3"})
        # A daemon that starts now asks the servers in the URL's order for the session timeout
        # bounds; the cut one answers "not currently serving requests".
        first = ensemble.info["servers"][follower]["port"]
        url = "zookeeper://" + ",".join(
            [f"127.0.0.1:{first}"] + [f"127.0.0.1:{s['port']}" for s in
                                      ensemble.info["servers"] if s["port"] != first])
        daemons.append(world.daemon("c4", session_timeout=SESSION, zookeeper_url=url))
        converged(stack, zk, world, {"c1", "c2", "c3", "c4"})
        ensemble.heal()
        wait_for(ensemble.ready, 60, "the cut server back in the quorum")
    final_checks(stack, zk, world, placement, daemons, load, {"c1", "c2", "c3", "c4"})


def test_quorum_lost_and_regained(stack, world, placement, ensemble, zk):
    daemons = start_fleet(stack, world, placement)
    converged(stack, zk, world, {"c1", "c2", "c3"})
    with Load(stack, world, placement) as load:
        time.sleep(2)
        leader = ensemble.leader()
        follower = ensemble.followers()[0]
        ensemble.stop_server(follower)
        ensemble.stop_server(leader)
        lost = time.time()
        wait_for(lambda: not ensemble.has_quorum(), 30, "quorum lost")
        time.sleep(SESSION * 2)  # changes keep coming while nobody may act on them
        regained = time.time()
        ensemble.start_server(leader)
        wait_for(ensemble.has_quorum, 60, "quorum regained")
        print(f"no quorum for {regained - lost:.1f}s")
        ensemble.start_server(follower)
    # Nobody acted once its lease (2/3 of the session) had run out with no quorum behind it.
    late = [r for r in merged_records(daemons) if r["event"] == "act" and
            lost + SESSION < r["t"] < regained]
    assert late == [], late[:5]
    final_checks(stack, zk, world, placement, daemons, load, {"c1", "c2", "c3"})
