"""A node's capabilities reach Placement as traits, and follow the node (issue 15 item 3).

A daemon and a reporter in the test's process against the real Ironic and Placement. Listings
are rare (``node_refresh_interval = 600``): what reaches Placement after the first listing came
by Ironic's update event.
"""

from __future__ import annotations

import time

from computed.providers.capabilities import capability_trait, parse_capability_trait
from tests.functional.daemons import ironic, seen, wait_for
from tests.functional.test_api import ADMIN, IMAGE, compute, connection, gold_flavor  # noqa: F401

WORLD_NODES = 3
RARE = 600


def set_capabilities(stack, node, capabilities):
    ironic(stack, "PATCH", f"/nodes/{node}",
           [{"op": "add", "path": "/properties/capabilities", "value": capabilities}])


def capabilities_seen(placement, node):
    """The capabilities Placement's traits of ``node`` stand for, or None (no provider)."""
    provider = seen(placement, node)
    if provider is None:
        return None
    pairs = (parse_capability_trait(trait) for trait in provider.traits)
    return dict(pair for pair in pairs if pair is not None)


def test_capabilities_become_traits_and_follow_changes(stack, world, placement):
    node, other, bad = world.nodes
    set_capabilities(stack, node, "boot_mode:uefi,Disk Label:GPT")
    world.reporter("r1")
    daemon = world.daemon("c1", refresh=RARE)
    wait_for(lambda: capabilities_seen(placement, node) == {"boot_mode": "uefi",
                                                             "Disk Label": "GPT"},
             90, "the capabilities as traits", world.processes)
    traits = seen(placement, node).traits
    assert "CUSTOM_CAP_BOOT_MODE__UEFI" in traits
    assert capability_trait("Disk Label", "GPT") in traits
    wait_for(lambda: seen(placement, other) is not None and seen(placement, bad) is not None,
             60, "the other nodes reported", world.processes)

    # Changed by the event alone: the old traits are gone.
    set_capabilities(stack, node, "boot_mode:bios")
    wait_for(lambda: capabilities_seen(placement, node) == {"boot_mode": "bios"}, 30,
             "the changed capabilities", world.processes)
    assert "CUSTOM_CAP_BOOT_MODE__UEFI" not in seen(placement, node).traits

    # A malformed string fails that node alone: its provider keeps what it had, the others
    # still follow their changes.
    set_capabilities(stack, bad, "boot_mode:uefi,just-a-word")
    set_capabilities(stack, other, "secure_boot:true")
    wait_for(lambda: capabilities_seen(placement, other) == {"secure_boot": "true"}, 30,
             "the other node's capabilities", world.processes)
    # Its change was read and refused (the daemon says so, in its own time: not necessarily
    # before the other node's change is in Placement), and nothing of it is reported.
    daemon.wait_log(f"provider {bad}: field 'capabilities'", timeout=30)
    time.sleep(2)  # a few sync passes, for a wrong report of it to reach Placement
    assert capabilities_seen(placement, bad) == {}

    # Removed: no capability trait left.
    ironic(stack, "PATCH", f"/nodes/{node}",
           [{"op": "remove", "path": "/properties/capabilities"}])
    wait_for(lambda: capabilities_seen(placement, node) == {}, 30, "capabilities removed",
             world.processes)


def test_a_flavors_capability_lands_on_the_node_that_has_it(stack, world, placement,
                                                            compute):  # noqa: F811
    """End to end: Ironic's capabilities -> traits in Placement -> a flavor's
    ``capabilities:boot_mode=uefi`` -> the server on the one node that has it."""
    uefi = world.nodes[1]
    for node in world.nodes:
        set_capabilities(stack, node, "boot_mode:uefi" if node == uefi else "boot_mode:bios")
    wait_for(lambda: all(capabilities_seen(placement, node) == {
        "boot_mode": "uefi" if node == uefi else "bios"} for node in world.nodes), 60,
        "every node's capability in Placement", world.processes)
    admin = connection(compute, ADMIN)
    member = connection(compute, "alice:p1")
    flavor = gold_flavor(admin, world, **{"capabilities:boot_mode": "uefi"})
    server = member.compute.create_server(name="uefi-1", flavor_id=flavor.id, image_id=IMAGE,
                                          networks="none")
    server = member.compute.wait_for_server(server, status="ACTIVE", wait=180)
    assert admin.compute.get_server(server.id).hypervisor_hostname == uefi
    member.compute.delete_server(server)
    member.compute.wait_for_delete(server, wait=120)
