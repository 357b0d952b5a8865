"""Providers in Placement: daemons and reporters (in the test's process; processes of their own
only where a test kills one: the daemons of the failover test, the reporter of the outage test)
against real Ironic, Placement, RabbitMQ and ZooKeeper (and PostgreSQL for computed's database
where there is one).

Each test enrolls its own nodes (with a resource class of its own) and checks only their
providers: Ironic and Placement are shared by the whole session.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid

import pytest
from kazoo.client import KazooClient

from computed.fleet.claims import claims_path
from computed.fleet.membership import fleet_root
from computed.runtime import keystone, rpc
from computed.testing.ironic import list_node_uuids
from tests import database
from tests.functional.daemons import (
    bus_conf,
    ironic,
    make_available,
    seen,
    wait_converged,
    wait_for,
    zk_client,
)

#: Each test's world (conftest ``world``): 8 made schedulable and some left reserved for the
#: first test, 6 toggled and some untouched for the outage test, a share for each of three
#: daemons. Every node costs a create, a delete, a provider in Placement and its reports; the
#: world's default of 24 (this module's NODES, which nothing read) gave the tests that play a
#: daemon 22 nodes they never look at.
WORLD_NODES = 12


@pytest.fixture
def placement_adapter(computed_config):
    """A keystoneauth Adapter for Placement, for the allocations the tests make themselves."""
    return keystone.load_adapter(computed_config, "placement")


def providers(placement, nodes):
    return {node: seen(placement, node) for node in nodes}


def test_nodes_appear_with_inventory_traits_and_follow_maintenance(stack, world, placement):
    ready = world.nodes[:8]
    make_available(stack, ready)
    ironic(stack, "PUT", f"/nodes/{ready[0]}/traits",
           {"traits": ["CUSTOM_FAST", "HW_CPU_X86_AVX2"]})
    world.reporter("r1")
    world.daemon("c1"), world.daemon("c2"), world.daemon("c3")

    def all_reported():
        got = providers(placement, world.nodes)
        return got if all(p is not None for p in got.values()) else None

    got = wait_for(all_reported, 90, "every node reported", world.processes)
    for node, provider in got.items():
        assert provider.resource_class == world.rc and provider.name == node
        assert provider.reserved == (0 if node in ready else 1), node
    assert got[ready[0]].traits == ("CUSTOM_FAST", "HW_CPU_X86_AVX2")
    view = placement.read(ready[1])
    assert list(view.inventories) == [world.rc]
    assert _inventory_fields(view.inventories[world.rc])

    node = ready[1]
    ironic(stack, "PUT", f"/nodes/{node}/maintenance", {"reason": "test"})
    wait_for(lambda: seen(placement, node).reserved == 1, 30, "maintenance on in Placement",
             world.processes)
    ironic(stack, "DELETE", f"/nodes/{node}/maintenance")
    wait_for(lambda: seen(placement, node).reserved == 0, 30, "maintenance off in Placement",
             world.processes)


def _inventory_fields(inventory):
    # Placement may echo more fields than we set; the ones we set must match.
    return all(inventory[key] == value for key, value in {
        "total": 1, "reserved": 0, "min_unit": 1, "max_unit": 1, "step_size": 1,
        "allocation_ratio": 1.0}.items())


def test_deleted_node_disappears_but_one_with_an_allocation_is_kept(stack, world, placement,
                                                                    placement_adapter):
    gone, allocated = world.nodes[:2]
    make_available(stack, [allocated])  # a reserved node has no capacity to allocate
    world.reporter("r1")
    world.daemon("c1"), world.daemon("c2")
    wait_for(lambda: seen(placement, gone) and seen(placement, allocated) and
             seen(placement, allocated).reserved == 0, 90, "reported", world.processes)
    _allocate(placement_adapter, allocated, world.rc)
    for node in (gone, allocated):
        ironic(stack, "DELETE", f"/nodes/{node}")
        world.nodes.remove(node)
    wait_for(lambda: seen(placement, gone) is None, 60, "provider of a deleted node deleted",
             world.processes)
    time.sleep(3)  # several sync cycles: the allocated one must survive them
    assert seen(placement, allocated) is not None
    assert placement.has_allocations(allocated)


def _allocate(adapter, node, rc):
    consumer = str(uuid.uuid4())
    response = adapter.put(
        f"/allocations/{consumer}", json={
            "allocations": {node: {"resources": {rc: 1}}}, "consumer_generation": None,
            "project_id": str(uuid.uuid4()), "user_id": str(uuid.uuid4()),
            "consumer_type": "INSTANCE"},
        headers={"OpenStack-API-Version": "placement 1.39"}, raise_exc=False)
    assert response.status_code == 204, response.text
    return consumer


@pytest.mark.daemon_processes  # it kills a daemon (its reporter runs in the test's process)
def test_provider_keeps_uuid_and_allocation_through_failover(stack, world, placement,
                                                             placement_adapter):
    node = world.nodes[0]
    make_available(stack, [node])
    world.reporter("r1", process=False)
    daemons = [world.daemon("c1"), world.daemon("c2"), world.daemon("c3")]
    wait_for(lambda: all(seen(placement, n) for n in world.nodes) and
             seen(placement, node).reserved == 0, 90, "reported", world.processes)
    consumer = _allocate(placement_adapter, node, world.rc)
    before = placement.read(node)
    zk = KazooClient(hosts=stack["zookeeper"].hosts)
    zk.start(timeout=15)
    try:
        # Every node reported may come before the last daemon joined: the node's claim may
        # then still move (absent mid-handover), or be gone from the daemon killed below.
        wait_converged(zk, list_node_uuids(stack["ironic"].url), {d.host for d in daemons},
                       group=world.group)
        owner = json.loads(zk.get(f"{claims_path(fleet_root(world.group))}/{node}")[0])["host"]
        next(d for d in daemons if d.host == owner).kill()
        # The new owner reports the node: a maintenance change gets through under its epoch.
        ironic(stack, "PUT", f"/nodes/{node}/maintenance", {"reason": "after failover"})
        wait_for(lambda: seen(placement, node).reserved == 1, 60, "new owner reports",
                 world.processes)
        new_owner = json.loads(zk.get(f"{claims_path(fleet_root(world.group))}/{node}")[0])
        assert new_owner["host"] != owner
    finally:
        zk.stop()
        zk.close()
    after = placement.read(node)
    assert after.uuid == before.uuid
    allocations = placement_adapter.get(
        f"/allocations/{consumer}", headers={"OpenStack-API-Version": "placement 1.39"}).json()
    assert node in allocations["allocations"]


@pytest.mark.daemon_processes  # it kills the reporter (the rest run in the test's process)
def test_reporter_killed_and_placement_restarted_then_everything_converges(
        stack, world, placement):
    toggled = world.nodes[:6]
    make_available(stack, toggled)
    reporter = world.reporter("r1")
    world.daemon("c1", process=False), world.daemon("c2", process=False)
    wait_for(lambda: all(seen(placement, n) for n in world.nodes) and
             all(seen(placement, n).reserved == 0 for n in toggled), 90, "reported",
             world.processes)
    reporter.kill()
    for node in toggled:
        ironic(stack, "PUT", f"/nodes/{node}/maintenance", {"reason": "while down"})
    stack["placement"].restart()
    stack.save()
    placement.forget()
    time.sleep(2)  # the daemons keep their reports while nobody answers
    assert all(seen(placement, n).reserved == 0 for n in toggled)
    world.reporter("r2", process=False)
    wait_for(lambda: all(seen(placement, n).reserved == 1 for n in toggled), 90,
             "reports applied after the outage", world.processes)


@contextlib.contextmanager
def playing_a_daemon(stack, world, node):
    """The test plays a daemon: it holds the claim on ``node`` as host "tester" and talks to
    the reporters directly. Yields (RPC client to the reporters, the claim's epoch)."""
    zk = KazooClient(hosts=stack["zookeeper"].hosts)
    zk.start(timeout=15)
    transport = rpc.get_transport(bus_conf(stack), "test", url=stack["rabbitmq"].url)
    try:
        zk.ensure_path(claims_path(fleet_root(world.group)))
        _, stat = zk.create(f"{claims_path(fleet_root(world.group))}/{node}",
                            json.dumps({"host": "tester", "member_epoch": 0}).encode(),
                            ephemeral=True, include_data=True)
        yield rpc.get_client(transport, f"reporter-{world.group}", timeout=30), stat.czxid
    finally:
        transport.cleanup()
        zk.stop()
        zk.close()


def test_duplicate_reordered_fenced_and_malformed_reports(stack, world, placement,
                                                          computed_config):
    """The test plays a daemon: it holds a claim itself and talks to the reporter directly."""
    reporter = world.reporter("r1")
    reporter.wait_log("serving topic")
    node = world.nodes[0]
    with playing_a_daemon(stack, world, node) as (client, epoch):

        def send(seq, reserved, epoch=epoch):
            state = {"uuid": node, "name": node, "resource_class": world.rc,
                     "reserved": reserved, "traits": []}
            return wait_for(lambda: _call(client, [{"uuid": node, "epoch": epoch, "seq": seq,
                                                    "host": "tester", "state": state}]),
                            60, "reporter answers", [reporter])

        assert send(10, 1) == [[node, 10, "applied"]]
        assert send(10, 1) == [[node, 10, "stale"]]     # duplicate
        assert send(9, 0) == [[node, 9, "stale"]]       # reordered: older than applied
        assert seen(placement, node).reserved == 1
        assert send(11, 0, epoch=epoch - 1) == [[node, 11, "fenced"]]  # not the claim's epoch
        assert seen(placement, node).reserved == 1
        assert _call(client, "not a list") == []                        # malformed: dropped
        assert _call(client, [{"uuid": node, "epoch": "x"}]) == []
        assert send(12, 0) == [[node, 12, "applied"]]   # the worker survived all of that
        assert seen(placement, node).reserved == 0


def test_forged_reports_are_fenced_or_invalid_and_honest_ones_still_apply(stack, world,
                                                                          placement):
    """Issue 16 item 8: someone on the bus who read the claim's epoch from ZooKeeper sends a
    report for the node under another host's name, then one with a seq far in the future."""
    reporter = world.reporter("r1")
    reporter.wait_log("serving topic")
    node = world.nodes[1]
    with playing_a_daemon(stack, world, node) as (client, epoch):
        now_ms = int(time.time() * 1000)

        def send(seq, reserved, host="tester"):
            state = {"uuid": node, "name": node, "resource_class": world.rc,
                     "reserved": reserved, "traits": []}
            return wait_for(lambda: _call(client, [{"uuid": node, "claim_epoch": epoch,
                                                    "seq": seq, "host": host,
                                                    "state": state}]),
                            60, "reporter answers", [reporter])

        assert send(now_ms, 1) == [[node, now_ms, "applied"]]
        assert seen(placement, node).reserved == 1
        # The right claim epoch under another host's name: fenced, Placement unchanged.
        assert send(now_ms + 1, 0, host="intruder") == [[node, now_ms + 1, "fenced"]]
        assert seen(placement, node).reserved == 1
        assert db_row(world, node)[:2] == (epoch, now_ms)
        # A seq no honest sender can have reached: invalid, and it orders nothing.
        assert send(2**62, 0) == [[node, 2**62, "invalid"]]
        assert seen(placement, node).reserved == 1
        assert db_row(world, node)[:2] == (epoch, now_ms)
        assert send(now_ms + 2, 0) == [[node, now_ms + 2, "applied"]]  # the honest one
        assert seen(placement, node).reserved == 0


def _call(client, reports):
    try:
        return client.call({}, "apply_reports", reports=reports)
    except Exception:  # the reporter is still starting: no consumer on the topic yet
        return None


def test_steady_state_sends_nothing_and_writes_nothing(stack, world, placement):
    make_available(stack, world.nodes[:4])
    world.reporter("r1")
    daemons = [world.daemon("c1", refresh=1.0), world.daemon("c2", refresh=1.0)]
    wait_for(lambda: all(seen(placement, n) for n in world.nodes) and
             all(seen(placement, n).reserved == 0 for n in world.nodes[:4]), 90, "reported",
             world.processes)
    # Every node reported may come before c2 joined: its share would then move (and be
    # synced) inside the quiet window.
    zk = zk_client(stack)
    try:
        wait_converged(zk, list_node_uuids(stack["ironic"].url), {"c1", "c2"},
                       group=world.group)
    finally:
        zk.stop()
        zk.close()
    time.sleep(2)  # let the last confirmations land

    def snapshot():
        acts = sum(1 for d in daemons for r in d.records() if r["event"] == "act")
        rows = {n: db_row(world, n) for n in world.nodes}
        return acts, rows

    before = snapshot()
    time.sleep(4)  # four full listings of Ironic by each daemon
    after = snapshot()
    assert after[0] == before[0], "a daemon synced (and so reported) an unchanged node"
    assert after[1] == before[1], "a provider row was written with nothing changing"
    # And the path is alive: one real change still gets through.
    ironic(stack, "PUT", f"/nodes/{world.nodes[0]}/maintenance", {"reason": "wake up"})
    wait_for(lambda: seen(placement, world.nodes[0]).reserved == 1, 30, "change reported",
             world.processes)


def db_row(world, node):
    row = database.get_provider(world.engine, node)
    return None if row is None else (row.claim_epoch, row.seq, row.state)
