"""The capacity and usage views through the real clients against ``computed-api`` (in the test's
process; issue 24 item 13): ``openstack hypervisor list/show``, ``hypervisor stats show``, ``usage
list``, ``availability zone list`` and openstacksdk's hypervisors and usage, as operators and
Horizon read them; and what a server's owner changes with ``openstack server set`` (name,
properties, tags) and an admin's ``--state``."""

from __future__ import annotations

import datetime
import json

from tests.functional.daemons import ironic
from tests.functional.test_api import (  # noqa: F401 (fixtures)
    ADMIN,
    IMAGE,
    compute,
    connection,
    gold_flavor,
    openstack_cli,
)

WORLD_NODES = 3


def test_hypervisor_usage_and_zone_views(stack, world, compute):  # noqa: F811
    def cli(*args, token=ADMIN):
        result = openstack_cli(compute, token, *args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    admin = connection(compute, ADMIN, "2.61")
    flavor = gold_flavor(admin, world)
    member = connection(compute, "erin:p7", "2.61")
    server = member.compute.create_server(name="cap-1", flavor_id=flavor.id, image_id=IMAGE,
                                          networks="none")
    member.compute.wait_for_server(server, status="ACTIVE", wait=180)
    node = admin.compute.get_server(server.id).hypervisor_hostname

    # openstacksdk: each node a hypervisor, the server's node running it.
    hypervisors = {h.name: h for h in admin.compute.hypervisors(details=True)}
    # Every node of the world is a hypervisor; the fleet also reports any node an earlier test
    # on the same stack left in Ironic (daemons claim every node Ironic has), each of which must
    # be a node Ironic has.
    assert set(world.nodes) <= set(hypervisors)
    in_ironic = {n["uuid"] for n in ironic(stack, "GET", "/nodes?limit=1000")["nodes"]}
    assert set(hypervisors) <= in_ironic
    assert hypervisors[node].running_vms == 1 and hypervisors[node].hypervisor_type == "ironic"
    assert {h.state for h in hypervisors.values()} == {"up"}

    # The CLI's views.
    listed = json.loads(cli("hypervisor", "list", "-f", "json"))
    assert {h["Hypervisor Hostname"] for h in listed} == set(hypervisors)
    assert {h["State"] for h in listed} == {"up"}
    shown = json.loads(cli("hypervisor", "show", node, "-f", "json"))
    assert (shown["hypervisor_hostname"], shown["hypervisor_type"], shown["running_vms"],
            shown["state"], shown["status"]) == (node, "ironic", 1, "up", "enabled")
    assert shown["service_host"] in {"c1", "c2"}
    stats = json.loads(cli("hypervisor", "stats", "show", "-f", "json"))
    assert (stats["count"], stats["running_vms"]) == (len(hypervisors), 1)
    zones = json.loads(cli("availability", "zone", "list", "--compute", "-f", "json"))
    assert [(z["Zone Name"], z["Zone Status"]) for z in zones] == [("nova", "available")]

    # Usage: the server counts from its creation; the project reads its own.
    start = (datetime.datetime.utcnow() - datetime.timedelta(hours=1)).strftime(
        "%Y-%m-%d")
    usages = json.loads(cli("usage", "list", "--start", start, "-f", "json"))
    (mine,) = [u for u in usages if u["Project"] == "p7"]
    # -f json shows the servers themselves; a running server counts to the period's end (the
    # CLI's default: a day from now), as Nova's.
    assert [s["instance_id"] for s in mine["Servers"]] == [server.id]
    assert float(mine["RAM MB-Hours"]) > 0
    usage = member.compute.get_usage("p7", start=datetime.datetime.utcnow() -
                                     datetime.timedelta(hours=1))
    assert [s["instance_id"] for s in usage.server_usages] == [server.id]
    assert usage.server_usages[0]["memory_mb"] == 1024

    # What the owner changes with "openstack server set", and an admin's --state.
    cli("server", "set", "--name", "cap-2", "--property", "role=db", "--tag", "blue",
        server.id, token="erin:p7")
    detail = json.loads(cli("server", "show", server.id, "-f", "json", token="erin:p7"))
    assert (detail["name"], detail["properties"], detail["tags"]) == \
        ("cap-2", {"role": "db"}, ["blue"])
    cli("server", "unset", "--property", "role", "--tag", "blue", server.id, token="erin:p7")
    detail = json.loads(cli("server", "show", server.id, "-f", "json", token="erin:p7"))
    assert (detail["properties"], detail["tags"]) == ({}, [])
    cli("server", "set", "--auto-approve", "--state", "error", server.id)
    assert member.compute.get_server(server.id).status == "ERROR"
    cli("server", "set", "--auto-approve", "--state", "active", server.id)
    assert member.compute.get_server(server.id).status == "ACTIVE"
    cli("server", "delete", "--wait", server.id, token="erin:p7")
