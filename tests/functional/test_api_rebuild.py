"""Rebuild through openstacksdk against the real stack (issue 24: Tempest's rebuild tests were
answered "no such action"): the server goes to REBUILD, Ironic redeploys its node (the same
node, the same instance) with the new image and a new config drive carrying the new key and
user data, and the server is ACTIVE again with the new image; a server rebuilt while stopped is
SHUTOFF again, its node powered off. A computed-api pinned to ``[upgrade_levels] instances =
1.1`` (what it sends while a daemon of the release before runs) refuses the rebuild with a 409
and changes nothing. The fleet is test_api.py's ``compute`` fixture (2 daemons, a reporter,
computed-api, fake hardware)."""

from __future__ import annotations

import base64

import pytest
from openstack import exceptions as sdk_exc

from tests.functional.daemons import ironic
from tests.functional.test_api import (  # noqa: F401 - the fixture
    ADMIN,
    IMAGE,
    compute,
    connection,
    gold_flavor,
    start_api,
)

WORLD_NODES = 2
NEW_IMAGE = "http://images.example/rebuilt.qcow2"
FIELDS = "instance_uuid,instance_info,provision_state,power_state,provision_updated_at"


def node_of(url, server_id):
    return connection(url, ADMIN).compute.get_server(server_id).hypervisor_hostname


def test_rebuild_redeploys_the_node_with_the_new_image_key_and_user_data(stack, world,
                                                                          compute):  # noqa: F811
    member = connection(compute, "carol:p9", "2.61")
    flavor = gold_flavor(connection(compute, ADMIN), world)
    old_key = member.compute.create_keypair(name="old-key").public_key
    new_key = member.compute.create_keypair(name="new-key").public_key
    server = member.compute.create_server(
        name="before", flavor_id=flavor.id, image_id=IMAGE, networks="none",
        key_name="old-key", user_data=base64.b64encode(b"#cloud-config\n").decode())
    server = member.compute.wait_for_server(server, status="ACTIVE", wait=180)
    node = node_of(compute, server.id)
    before = ironic(stack, "GET", f"/nodes/{node}?fields={FIELDS}")
    assert before["instance_info"]["image_source"] == IMAGE
    assert before["instance_info"]["configdrive"]["meta_data"]["public_keys"] == \
        {"old-key": old_key}

    user_data = "#!/bin/sh\necho rebuilt > /etc/motd\n"
    rebuilt = member.compute.rebuild_server(
        server, NEW_IMAGE, name="after", admin_password="rebuildPassw0rd",
        metadata={"rebuild": "server"}, key_name="new-key",
        user_data=base64.b64encode(user_data.encode()).decode())
    assert (rebuilt.id, rebuilt.status, rebuilt.name, rebuilt.image.id) == \
        (server.id, "REBUILD", "after", NEW_IMAGE)
    assert rebuilt.admin_password is None  # never answered (enable_instance_password off)

    server = member.compute.wait_for_server(server, status="ACTIVE", wait=180)
    assert (server.name, server.image.id, server.metadata, server.key_name) == \
        ("after", NEW_IMAGE, {"rebuild": "server"}, "new-key")
    assert server.task_state is None
    assert node_of(compute, server.id) == node  # rebuilt in place
    after = ironic(stack, "GET", f"/nodes/{node}?fields={FIELDS}")
    assert (after["instance_uuid"], after["provision_state"]) == (server.id, "active")
    # Ironic redeployed it: a provision state change since, with the new image and drive.
    assert after["provision_updated_at"] != before["provision_updated_at"]
    info = after["instance_info"]
    assert (info["image_source"], info["preserve_ephemeral"]) == (NEW_IMAGE, False)
    drive = info["configdrive"]
    assert drive["meta_data"]["public_keys"] == {"new-key": new_key}
    assert (drive["meta_data"]["name"], drive["meta_data"]["meta"]) == \
        ("after", {"rebuild": "server"})
    assert drive["user_data"] == user_data

    # Rebuilt while stopped: stopped again, the node powered off after its redeploy (fake
    # hardware's deploy leaves the power as it was; that the daemon powers a real node off
    # after Ironic booted it is tests/unit/instance/test_rebuild.py's).
    member.compute.stop_server(server)
    member.compute.wait_for_server(server, status="SHUTOFF", wait=120)
    stopped = ironic(stack, "GET", f"/nodes/{node}?fields={FIELDS}")
    rebuilt = member.compute.rebuild_server(server, IMAGE, preserve_ephemeral=True)
    assert rebuilt.status == "REBUILD"
    server = member.compute.wait_for_server(server, status="SHUTOFF", wait=180)
    assert (server.image.id, server.task_state) == (IMAGE, None)
    again = ironic(stack, "GET", f"/nodes/{node}?fields={FIELDS}")
    assert again["provision_updated_at"] != stopped["provision_updated_at"]
    assert (again["instance_info"]["image_source"], again["instance_info"]["preserve_ephemeral"],
            again["power_state"], again["provision_state"]) == \
        (IMAGE, True, "power off", "active")

    # An unknown server: Nova's 404 (the 409s are the unit tests', without a race).
    with pytest.raises(sdk_exc.NotFoundException):
        member.compute.rebuild_server("00000000-0000-0000-0000-00000000dead", NEW_IMAGE)
    member.compute.delete_server(server)


def test_an_api_pinned_below_1_2_refuses_the_rebuild(stack, world, compute, tmp_path):  # noqa: F811
    member = connection(compute, "dave:p8")
    flavor = gold_flavor(connection(compute, ADMIN), world)
    server = member.compute.create_server(name="pinned", flavor_id=flavor.id, image_id=IMAGE,
                                          networks="none")
    server = member.compute.wait_for_server(server, status="ACTIVE", wait=180)
    node = node_of(compute, server.id)
    before = ironic(stack, "GET", f"/nodes/{node}?fields={FIELDS}")

    url = start_api(stack, world, tmp_path,
                    "auth_strategy = noauth2\n[upgrade_levels]\ninstances = 1.1\n",
                    name="api-pinned")

    with pytest.raises(sdk_exc.ConflictException) as exc:
        connection(url, "dave:p8").compute.rebuild_server(server, NEW_IMAGE)
    assert "upgraded" in str(exc.value) and "1.2" in str(exc.value)
    # The other actions still go through it, at 1.1.
    connection(url, "dave:p8").compute.reboot_server(server, "HARD")
    server = member.compute.wait_for_server(server, status="ACTIVE", wait=120)
    assert server.image.id == IMAGE
    after = ironic(stack, "GET", f"/nodes/{node}?fields={FIELDS}")
    assert after["instance_info"]["image_source"] == IMAGE
    assert after["provision_updated_at"] == before["provision_updated_at"]  # not redeployed
    member.compute.delete_server(server)
