"""Instances through the whole product: daemons and a reporter, builds scheduled through the real
Placement, deployed by the owning daemon through the real Ironic. The daemons run in the test's
process (tests/functional/inprocess.py) but in the re-homing test, which kills the busiest of
them: there they are processes of their own with :data:`SESSION` (the test is marked
``daemon_processes``), and the reporter, never killed, runs in the test's process.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from computed.fleet.membership import fleet_root
from computed.instances import scheduler
from computed.instances.rpcapi import ComputeAPI, ServerAPI
from computed.runtime import keystone
from tests import cli
from tests.functional.daemons import (
    instance_bus,
    ironic,
    make_available,
    wait_for,
    wait_schedulable,
)

WORLD_NODES = 8
SESSION = 2
GRACE = 3.0
IMAGE = "http://127.0.0.1/images/demo.qcow2"


@pytest.fixture
def fleet(stack, world, placement, computed_config):
    """World nodes available, a reporter and 3 daemons, providers schedulable; a ServerAPI."""
    make_available(stack, world.nodes)
    world.reporter("r1", process=False)
    for host in ("c1", "c2", "c3"):
        # The short session only where a daemon is killed; in the test's process tooz's
        # default (tests/functional/daemons.py: a 2 s one may time out the first connection).
        world.daemon(host, session_timeout=SESSION if world.process else None,
                     rehome_grace=GRACE)
    wait_schedulable(world, placement)
    zk, transport = instance_bus(stack)
    api = ServerAPI(world.engine, keystone.load_adapter(computed_config, "placement"),
                    ComputeAPI(transport), scheduler.zookeeper_owner(zk, fleet_root(world.group)))
    world.api = api
    yield world
    transport.cleanup()
    zk.stop()
    zk.close()


def build(world, count):
    """``count`` concurrent builds; the rows once every build finished (ACTIVE or ERROR)."""
    def one(_):
        try:
            row = world.api.create(world.resource_class, image=IMAGE)
        except scheduler.NoValidHost:
            return None
        return world.api.wait(row.uuid, timeout=120)
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


def manage(world, *args):
    """``computed-manage server ...`` in this process (tests/cli.py: a function call where a
    subprocess costs 1-3 s of imports); it leaves no thread behind."""
    daemon = world.processes[1]  # any daemon's config names the database and the group
    result = cli.run("computed-manage", "--config-file", daemon.conf, "server", *args,
                     home=daemon.workdir)
    assert result.threads_left == (), result
    return result


def allocations(world, instance_uuid):
    """{provider: {"resources": ...}} of a consumer (generations left out)."""
    response = world.api._placement.get(f"/allocations/{instance_uuid}", headers={
        "OpenStack-API-Version": "placement 1.39"})
    return {rp: {"resources": alloc["resources"]}
            for rp, alloc in response.json()["allocations"].items()}


def test_build_operate_delete_through_the_daemons(stack, fleet, placement):
    world = fleet
    rows = build(world, 3)
    assert [r.state for r in rows] == ["ACTIVE"] * 3, [r.fault for r in rows]
    assert len({r.node_uuid for r in rows}) == 3 and len({r.host for r in rows}) >= 1
    for row in rows:
        node = ironic(stack, "GET", f"/nodes/{row.node_uuid}")
        assert node["provision_state"] == "active" and node["instance_uuid"] == row.uuid
        assert allocations(world, row.uuid) == {row.node_uuid: {"resources": {world.rc: 1}}}
        # The owning daemon ran the build under its claim on the node.
        owner = next(p for p in world.processes if p.host == row.host)
        assert any(r["event"] == "act" and r.get("action") == "build" and
                   r["node"] == row.node_uuid for r in owner.records())

    created = manage(world, "create", "--resource-class", world.resource_class, "--image",
                     IMAGE, "--wait")
    assert created.returncode == 0, created.stderr

    target = rows[0]
    for action, state in (("stop", "STOPPED"), ("start", "ACTIVE"), ("reboot", "ACTIVE")):
        result = manage(world, action, target.uuid)
        assert result.returncode == 0, result.stderr
        wait_for(lambda state=state: world.api.get(target.uuid).state == state, 60,
                 f"{action} done", world.processes)
    assert ironic(stack, "GET", f"/nodes/{target.node_uuid}")["power_state"] == "power on"

    result = manage(world, "delete", target.uuid)
    assert result.returncode == 0, result.stderr
    wait_for(lambda: world.api.get(target.uuid).state == "DELETED", 60, "deleted",
             world.processes)
    assert ironic(stack, "GET", f"/nodes/{target.node_uuid}")["provision_state"] == "available"
    assert allocations(world, target.uuid) == {}
    shown = json.loads(manage(world, "show", target.uuid, "--json").stdout)
    assert shown["state"] == "DELETED"


def test_concurrent_builds_never_share_a_node(fleet):
    world = fleet
    rows = build(world, WORLD_NODES + 3)
    landed = [r for r in rows if r is not None]
    assert len(landed) == WORLD_NODES, "every node taken once, the extra builds refused"
    active = [r for r in landed if r.state == "ACTIVE"]
    assert len({r.node_uuid for r in active}) == len(active)
    for row in landed:
        expected = {row.node_uuid: {"resources": {world.rc: 1}}} if row.state == "ACTIVE" else {}
        assert allocations(world, row.uuid) == expected, row


@pytest.mark.daemon_processes  # it kills a daemon
def test_instances_of_a_dead_daemon_are_rehomed_and_stay_rehomed(stack, fleet):
    world = fleet
    rows = build(world, 6)
    assert all(r.state == "ACTIVE" for r in rows), [r.fault for r in rows]
    victim_host = max({r.host for r in rows}, key=lambda h: sum(r.host == h for r in rows))
    theirs = [r for r in rows if r.host == victim_host]
    victim = next(p for p in world.processes if p.host == victim_host)
    victim.kill()
    # After the session timeout and the grace, a live daemon adopts each instance.
    wait_for(lambda: all(world.api.get(r.uuid).host not in (victim_host, None) for r in theirs),
             SESSION + GRACE + 60, "instances re-homed", world.processes)
    for row in theirs:
        result = manage(world, "reboot", row.uuid)
        assert result.returncode == 0, result.stderr
    wait_for(lambda: all(world.api.get(r.uuid).state == "ACTIVE" for r in theirs) and
             all(any(rec.get("action") == "reboot" and rec.get("instance") == r.uuid
                     for p in world.processes for rec in p.records()) for r in theirs),
             60, "re-homed instances rebooted by their new hosts", world.processes)
    adopters = {r.uuid: world.api.get(r.uuid).host for r in theirs}
    # The dead daemon comes back under its old name: it must not take them back.
    restarted_at = time.time()
    returned = world.daemon(victim_host, session_timeout=SESSION, rehome_grace=GRACE)
    wait_for(lambda: any(r["event"] == "join" and r["t"] > restarted_at
                         for r in returned.records()), 60, "returned daemon joined",
             world.processes)
    time.sleep(GRACE + 2)
    assert {r.uuid: world.api.get(r.uuid).host for r in theirs} == adopters
    their_nodes = {r.node_uuid for r in theirs}
    assert not [rec for rec in returned.records() if rec["t"] > restarted_at and
                rec["event"] in ("claim", "act") and rec.get("node") in their_nodes]
