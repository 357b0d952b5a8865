"""Placement tells the truth about every node through failovers, filters and quiet periods.

The paths of issue 13, tried from the outside: daemons and a reporter against the real Ironic,
Placement, RabbitMQ and ZooKeeper, in the test's process (tests/functional/inprocess.py) but the
daemons of the failover test, which kills one of them: processes of their own (the test is
marked ``daemon_processes``; its reporter, never killed, runs in the test's process). Listings
are made rare on purpose (``node_refresh_interval = 600``) so that whatever reaches Placement
reached it through an event or a claim change, not through the next full listing.

Each test was seen failing before its fix (issue 13 items 1, 2, 5 and 6).
"""

from __future__ import annotations

import json
import time

import pytest
from kazoo.exceptions import NoNodeError

from computed.fleet.claims import claims_path
from computed.fleet.membership import fleet_root
from computed.testing.ironic import list_node_uuids
from tests.functional.daemons import (
    ironic,
    make_available,
    seen,
    wait_converged,
    wait_for,
    zk_client,
)

WORLD_NODES = 9
RARE = 600  # node_refresh_interval: no full listing happens during a test


def claim_host(client, world, node):
    """The host holding ``node``'s claim, or None."""
    path = f"{claims_path(fleet_root(world.group))}/{node}"
    try:
        # one read: an exists() then a get() lost the race with the release they wait for
        data, _ = client.get(path)
    except NoNodeError:
        return None
    return json.loads(data)["host"]


def all_reported(placement, world, nodes, reserved=None):
    def check():
        got = {node: seen(placement, node) for node in nodes}
        if any(p is None for p in got.values()):
            return None
        if reserved is not None and any(p.reserved != reserved for p in got.values()):
            return None
        return got
    return check


@pytest.mark.daemon_processes  # it kills the daemon that holds the node, whichever it is
def test_a_change_made_during_a_failover_reaches_placement_without_a_listing(
        stack, world, placement):
    make_available(stack, world.nodes)
    world.reporter("r1", process=False)
    daemons = {h: world.daemon(h, session_timeout=3, refresh=RARE) for h in ("c1", "c2", "c3")}
    wait_for(all_reported(placement, world, world.nodes, reserved=0), 90, "every node reported",
             world.processes)
    client = zk_client(stack)
    try:
        # Every node reported may come before the last daemon joined: the node's claim may
        # then still move (None mid-handover), or be gone from the daemon killed below.
        wait_converged(client, list_node_uuids(stack["ironic"].url), set(daemons),
                       group=world.group)
        node = world.nodes[0]
        owner = claim_host(client, world, node)
        daemons[owner].kill()
        ironic(stack, "PUT", f"/nodes/{node}/maintenance", {"reason": "during failover"})
        wait_for(lambda: seen(placement, node).reserved == 1, 60,
                 "the change made during the failover in Placement", world.processes)
        assert claim_host(client, world, node) not in (None, owner)
    finally:
        client.stop()
        client.close()


def _shard(stack, nodes, shard):
    for node in nodes:
        ironic(stack, "PATCH", f"/nodes/{node}",
               [{"op": "add", "path": "/shard", "value": shard}])


def test_a_node_moved_to_another_shard_keeps_its_provider(stack, world, placement):
    shard = f"s-{world.group}"
    _shard(stack, world.nodes, shard)
    world.reporter("r1")
    world.daemon("c1", extra=f"[ironic]\nshard = {shard}\n")
    world.daemon("c2", extra=f"[ironic]\nshard = {shard}\n")
    wait_for(all_reported(placement, world, world.nodes), 90, "every node reported",
             world.processes)
    moved = world.nodes[0]
    _shard(stack, [moved], f"other-{world.group}")
    client = zk_client(stack)
    try:
        # The fleet lets the node go (it is another fleet's now) ...
        wait_for(lambda: claim_host(client, world, moved) is None, 60,
                 "the moved node released", world.processes)
    finally:
        client.stop()
        client.close()
    time.sleep(3)  # several sync passes (node_refresh_interval = 1 s)
    # ... and leaves its provider alone: the node still exists in Ironic.
    assert seen(placement, moved) is not None
    assert all(seen(placement, node) is not None for node in world.nodes[1:])


def test_an_empty_listing_deletes_only_what_ironic_confirms_gone(stack, world, placement):
    shard = f"s-{world.group}"
    _shard(stack, world.nodes, shard)
    world.reporter("r1")
    first = [world.daemon(h, extra=f"[ironic]\nshard = {shard}\n") for h in ("c1", "c2")]
    wait_for(all_reported(placement, world, world.nodes), 90, "every node reported",
             world.processes)
    for daemon in first:
        daemon.stop()
    # A typo in the shard: Ironic answers 200 with no node at all. One node is really deleted.
    deleted = world.nodes.pop()
    ironic(stack, "DELETE", f"/nodes/{deleted}")
    for host in ("c3", "c4"):
        world.daemon(host, extra=f"[ironic]\nshard = {shard}-typo\n")
    wait_for(lambda: seen(placement, deleted) is None, 60,
             "the provider of the node Ironic deleted removed", world.processes)
    time.sleep(3)  # several sync passes
    assert all(seen(placement, node) is not None for node in world.nodes)


def test_changes_reach_placement_by_events_alone(stack, world, placement):
    """With listings every 10 minutes, each kind of node change reaches Placement by its event."""
    make_available(stack, world.nodes)
    world.reporter("r1")
    world.daemon("c1", refresh=RARE)
    world.daemon("c2", refresh=RARE)
    wait_for(all_reported(placement, world, world.nodes, reserved=0), 90, "every node reported",
             world.processes)
    node, other, third = world.nodes[:3]

    def reaches(check, what):
        wait_for(check, 30, what, world.processes)

    ironic(stack, "PUT", f"/nodes/{node}/maintenance", {"reason": "events only"})
    reaches(lambda: seen(placement, node).reserved == 1, "maintenance on")
    ironic(stack, "DELETE", f"/nodes/{node}/maintenance")
    reaches(lambda: seen(placement, node).reserved == 0, "maintenance off")

    ironic(stack, "PUT", f"/nodes/{other}/states/provision", {"target": "manage"})
    reaches(lambda: seen(placement, other).reserved == 1, "provision state manageable")

    ironic(stack, "PUT", f"/nodes/{node}/traits/CUSTOM_EVENTS_ONLY")
    reaches(lambda: "CUSTOM_EVENTS_ONLY" in seen(placement, node).traits, "trait added")

    rc = f"{world.resource_class}-b"
    ironic(stack, "PATCH", f"/nodes/{third}",
           [{"op": "replace", "path": "/resource_class", "value": rc}])
    reaches(lambda: seen(placement, third).resource_class == f"{world.rc}_B",
            "resource class changed")

    created = ironic(stack, "POST", "/nodes", {"driver": "fake-hardware",
                                               "name": f"evt-{world.group}",
                                               "resource_class": world.resource_class})["uuid"]
    world.nodes.append(created)
    reaches(lambda: seen(placement, created) is not None, "enrolled node reported")

    ironic(stack, "DELETE", f"/nodes/{created}")
    world.nodes.remove(created)
    reaches(lambda: seen(placement, created) is None, "deleted node's provider removed")


def _plant_trait(stack, node, trait):
    """Write a trait Ironic's API would refuse straight into its database (what an older Ironic
    or a hand edit can leave behind)."""
    import sqlite3
    path = stack["ironic"].workdir / "ironic" / "ironic.sqlite"
    with sqlite3.connect(path, timeout=30) as connection:
        (node_id,) = connection.execute("SELECT id FROM nodes WHERE uuid = ?", (node,)).fetchone()
        connection.execute("INSERT INTO node_traits (node_id, trait, version, created_at) "
                           "VALUES (?, ?, '1.0', CURRENT_TIMESTAMP)", (node_id, trait))


def test_one_bad_node_does_not_stop_the_others(stack, world, placement):
    bad = sorted(world.nodes)[0]  # claimed and synced first
    _plant_trait(stack, bad, "not a trait")
    world.reporter("r1")
    world.daemon("c1")
    others = [node for node in world.nodes if node != bad]
    wait_for(all_reported(placement, world, others), 90, "every other node reported",
             world.processes)
    assert seen(placement, bad) is None
