"""Private flavors, the default quotas and the cores quota, locks and security groups through
openstacksdk against ``computed-api`` (in the test's process) on the real stack (PostgreSQL where
the harness has it): what Tempest's FlavorsAdminTestJSON, FlavorsAccessTestJSON,
QuotaClassesAdminTestJSON, QuotasAdminNegativeTest and ServerActionsTest expect (issue 24)."""

from __future__ import annotations

import uuid

import pytest
from openstack import exceptions as sdk_exc

from tests.functional.test_api import (  # noqa: F401 (fixtures)
    ADMIN,
    IMAGE,
    compute,
    connection,
    gold_flavor,
)

WORLD_NODES = 2


def private_flavor(admin, world):
    flavor = admin.compute.create_flavor(name=f"bm-private-{uuid.uuid4().hex[:6]}", ram=1024,
                                         vcpus=2, disk=10, is_public=False)
    admin.compute.create_flavor_extra_specs(flavor, {
        f"resources:{world.rc}": "1", "resources:VCPU": "0", "resources:MEMORY_MB": "0",
        "resources:DISK_GB": "0"})
    return flavor


def build(conn, flavor, name="web"):
    return conn.compute.create_server(name=name, flavor_id=flavor.id, image_id=IMAGE,
                                      networks="none")


def test_a_private_flavor_builds_only_for_the_projects_on_its_list(world, compute):  # noqa: F811
    admin = connection(compute, ADMIN)
    alice, bob = connection(compute, "alice:p1"), connection(compute, "bob:p2")
    flavor = private_flavor(admin, world)
    assert flavor.is_public is False
    assert flavor.id not in [f.id for f in alice.compute.flavors()]
    with pytest.raises(sdk_exc.BadRequestException):
        build(alice, flavor)

    admin.compute.flavor_add_tenant_access(flavor, "p1")
    assert admin.compute.get_flavor_access(flavor) == [
        {"flavor_id": flavor.id, "tenant_id": "p1"}]
    assert flavor.id in [f.id for f in alice.compute.flavors()]
    assert flavor.id not in [f.id for f in bob.compute.flavors()]
    server = alice.compute.wait_for_server(build(alice, flavor), status="ACTIVE", wait=180)
    with pytest.raises(sdk_exc.BadRequestException):
        build(bob, flavor)

    admin.compute.flavor_remove_tenant_access(flavor, "p1")
    assert flavor.id not in [f.id for f in alice.compute.flavors()]
    # The server built from it stays (its flavor copy), as in Nova.
    assert alice.compute.get_server(server.id).status == "ACTIVE"
    alice.compute.delete_server(server)
    alice.compute.wait_for_delete(server, wait=120)


def test_default_quotas_and_cores_refuse_a_build(world, compute):  # noqa: F811
    admin = connection(compute, ADMIN)
    alice = connection(compute, "alice:p1")
    flavor = gold_flavor(admin, world)  # 2 vcpus, 1024 MB
    admin.compute.update_quota_class_set("default", cores=3)
    try:
        assert admin.compute.get_quota_class_set("default").cores == 3
        assert admin.compute.get_quota_set("p1").cores == 3
        first = alice.compute.wait_for_server(build(alice, flavor), status="ACTIVE", wait=180)
        with pytest.raises(sdk_exc.ForbiddenException) as refused:
            build(alice, flavor, "second")
        assert "cores" in str(refused.value)
        assert [s.id for s in alice.compute.servers()] == [first.id]
        # The project's own limit wins over the default class.
        admin.compute.update_quota_set("p1", cores=4)
        second = alice.compute.wait_for_server(build(alice, flavor, "second"),
                                               status="ACTIVE", wait=180)
        for server in (first, second):
            alice.compute.delete_server(server)
            alice.compute.wait_for_delete(server, wait=120)
    finally:
        admin.compute.update_quota_class_set("default", cores=-1)


def test_a_locked_server_is_not_stopped_and_its_group_can_go(world, compute):  # noqa: F811
    admin = connection(compute, ADMIN)
    alice = connection(compute, "alice:p1", version="2.9")
    flavor = gold_flavor(admin, world)
    server = alice.compute.wait_for_server(build(alice, flavor), status="ACTIVE", wait=180)
    alice.compute.lock_server(server)
    assert alice.compute.get_server(server.id).is_locked is True
    with pytest.raises(sdk_exc.ConflictException):
        alice.compute.stop_server(server)
    alice.compute.unlock_server(server)
    alice.compute.stop_server(server)
    alice.compute.wait_for_server(server, status="SHUTOFF", wait=180)

    assert alice.compute.get_server(server.id).security_groups == [{"name": "default"}]
    alice.compute.remove_security_group_from_server(server, {"name": "default"})
    assert not alice.compute.get_server(server.id).security_groups
    alice.compute.delete_server(server)
    alice.compute.wait_for_delete(server, wait=120)
