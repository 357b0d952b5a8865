"""A failed build is retried on another node, then given up (issue 15 item 5).

Daemons and a reporter in the test's process, the real Placement and Ironic. A *bad* node is
one Ironic refuses to deploy: its ``instance_info`` asks for a trait the node does not have
(what a stale ``instance_info`` can leave behind), so Ironic's own validation fails the deploy
with a reason naming the node. Clearing the node after the failed attempt wipes
``instance_info``: the node is good again afterwards, which is also what a retry should never
need.
"""

from __future__ import annotations

import random

import pytest

from computed.fleet.membership import fleet_root
from computed.instances import retries, scheduler
from computed.instances.rpcapi import ComputeAPI, ServerAPI
from computed.runtime import keystone
from tests.functional.daemons import (
    instance_bus,
    ironic,
    make_available,
    wait_schedulable,
)

WORLD_NODES = 3
IMAGE = "http://127.0.0.1/images/demo.qcow2"


def make_bad(stack, node):
    ironic(stack, "PATCH", f"/nodes/{node}", [
        {"op": "add", "path": "/instance_info/traits", "value": ["CUSTOM_NOT_ON_THIS_NODE"]}])


class BadFirst(random.Random):
    """A scheduling order that tries the bad nodes first (the scheduler shuffles candidates)."""

    def __init__(self, bad):
        super().__init__()
        self.bad = set(bad)

    def shuffle(self, x):
        # The scheduler shuffles host states (a node's uuid in .uuid), or node uuids.
        x.sort(key=lambda host: str(getattr(host, "uuid", host)) not in self.bad)


@pytest.fixture
def fleet(stack, world, placement, computed_config):
    make_available(stack, world.nodes)
    world.reporter("r1")
    for host in ("c1", "c2"):
        world.daemon(host)
    wait_schedulable(world, placement)
    zk, transport = instance_bus(stack)
    world.placement_adapter = keystone.load_adapter(computed_config, "placement")
    world.owner_of = scheduler.zookeeper_owner(zk, fleet_root(world.group))
    world.compute = ComputeAPI(transport)
    world.api = ServerAPI(world.engine, world.placement_adapter, world.compute, world.owner_of)
    yield world
    transport.cleanup()
    zk.stop()
    zk.close()


def consumer_allocations(world, instance_uuid):
    response = world.placement_adapter.get(f"/allocations/{instance_uuid}", headers={
        "OpenStack-API-Version": "placement 1.39"})
    return response.json()["allocations"]


def test_a_build_that_fails_on_one_node_ends_active_on_another(stack, fleet):
    world = fleet
    bad = world.nodes[0]
    make_bad(stack, bad)
    row = scheduler.schedule(world.placement_adapter, world.engine, world.resource_class,
                             image=IMAGE, owner_of=world.owner_of, rand=BadFirst([bad]))
    assert row.node_uuid == bad
    world.compute.build_instance(row.host, row.uuid)
    row = world.api.wait(row.uuid, timeout=120)
    assert row.state == "ACTIVE", row.fault
    assert row.node_uuid != bad
    (attempt,) = retries.attempts(row.fault)
    assert attempt.node == bad and "CUSTOM_NOT_ON_THIS_NODE" in attempt.reason
    node = ironic(stack, "GET", f"/nodes/{row.node_uuid}")
    assert node["provision_state"] == "active" and node["instance_uuid"] == row.uuid
    assert ironic(stack, "GET", f"/nodes/{bad}")["instance_uuid"] is None
    assert list(consumer_allocations(world, row.uuid)) == [row.node_uuid]


def test_a_build_that_fails_everywhere_ends_in_error_listing_each_attempt(stack, fleet):
    world = fleet
    for node in world.nodes:
        make_bad(stack, node)
    row = world.api.create(world.resource_class, image=IMAGE)
    row = world.api.wait(row.uuid, timeout=180)
    assert row.state == "ERROR" and row.node_uuid is None
    attempts = retries.attempts(row.fault)
    assert sorted(a.node for a in attempts) == sorted(world.nodes), row.fault
    assert all("CUSTOM_NOT_ON_THIS_NODE" in a.reason for a in attempts)
    assert row.fault.splitlines()[-1] == "build given up: max_attempts 3 reached"
    assert consumer_allocations(world, row.uuid) == {}
    for node in world.nodes:
        assert ironic(stack, "GET", f"/nodes/{node}")["instance_uuid"] is None
