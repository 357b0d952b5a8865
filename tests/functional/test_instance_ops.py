"""Instances end to end in-process (no daemon): computed.instances.scheduler,
computed.instances.lifecycle and the Ironic driver's operations against the real Ironic,
Placement and ZooKeeper (and PostgreSQL for computed's database where the stack has one).

Each test gets nodes of its own resource class, made available in Ironic, reported to
Placement with PlacementClient.apply(provider_from_node(...)), and claimed in ZooKeeper by a
pretend daemon (a claim znode with host and member epoch, as ClaimTable writes it), so that
scheduling reads the owner the way it does in production.

A failed deploy is made real by giving the node ``instance_info.traits`` it does not have:
Ironic refuses to deploy it ("Cannot specify instance traits that are not also set on the
node"), and the build must unwind.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from kazoo.client import KazooClient

from computed import db
from computed.db import engine as db_engine
from computed.db import instances as db_instances
from computed.db import models
from computed.fleet.claims import claims_path
from computed.fleet.membership import fleet_root
from computed.instances import lifecycle, scheduler
from computed.placement import allocations
from computed.placement.client import PlacementClient
from computed.providers.state import normalise_resource_class, provider_from_node
from computed.runtime import keystone
from computed_ironic import IronicDriver
from tests import cli
from tests.functional.daemons import ironic, make_available

HOST, EPOCH = "test-host", 42


@pytest.fixture
def world(stack, computed_config, tmp_path):
    token = uuid.uuid4().hex[:6]
    if "postgres" in stack:
        url = stack["postgres"].create_database(f"inst_{token}")
        stack.save()
    else:
        url = f"sqlite:///{tmp_path / 'computed.sqlite'}"
    db.sync(url)
    engine = db_engine.engine_from_url(url)
    adapter = keystone.load_adapter(computed_config, "placement")
    driver = IronicDriver.for_endpoint(stack["ironic"].url)
    zk = KazooClient(hosts=stack["zookeeper"].hosts)
    zk.start(timeout=15)
    group = f"inst{token}"
    root = fleet_root(group)

    class World:
        placement = adapter
        providers = PlacementClient(adapter)
        owner = lifecycle.Owner(engine, driver, adapter, HOST, EPOCH, deploy_timeout=60,
                               power_timeout=30)
        owner_of = staticmethod(scheduler.zookeeper_owner(zk, root))
        nodes: list[str] = []
        coordination_group = group

        def __init__(self):
            self.engine = engine
            self.driver = driver

        def make_nodes(self, count, name="gold"):
            """``count`` available nodes of class ``name-token``, reported and claimed."""
            resource_class = f"{name}-{token}"
            made = stack["ironic"].enroll_nodes(count, resource_class=resource_class,
                                                prefix=f"inst-{name}-{token}")
            self.nodes += made
            make_available(stack, made)
            for node in made:
                self.report(node)
                assert self.providers.get(node).reserved == 0
                zk.create(f"{claims_path(root)}/{node}", json.dumps(
                    {"host": HOST, "member_epoch": EPOCH}).encode(), makepath=True)
            return normalise_resource_class(resource_class), made

        def report(self, node):
            """What the owning daemon's reporter does: the node's provider as Ironic says."""
            state = provider_from_node(driver.get_node(node))
            self.providers.forget(node)
            self.providers.apply(state)

        def schedule(self, rc, **kwargs):
            return scheduler.schedule(adapter, engine, rc, owner_of=self.owner_of, **kwargs)

    world = World()
    yield world
    for row in db_instances.live_instances(engine):
        allocations.remove(adapter, row.uuid)
    for node in world.nodes:
        try:
            driver.clear_instance(node, timeout=60)
        except Exception:  # best effort: drop_nodes below removes the nodes anyway
            pass
        world.providers.delete(node)
    stack["ironic"].drop_nodes(world.nodes)
    zk.delete(root, recursive=True)
    zk.stop()
    zk.close()
    driver.close()
    engine.dispose()


def node_of(stack, node):
    return ironic(stack, "GET", f"/nodes/{node}")


def test_build_reboot_stop_start_delete(stack, world):
    rc, nodes = world.make_nodes(2)
    row = world.schedule(rc, image="http://images.example.org/ubuntu.qcow2")
    assert row.state == models.BUILDING and row.node_uuid in nodes
    assert (row.host, row.member_epoch) == (HOST, EPOCH)
    assert allocations.read(world.placement, row.uuid) == {row.node_uuid: {rc: 1}}

    started = time.monotonic()
    row = lifecycle.build(world.owner, row.uuid)
    build_seconds = time.monotonic() - started
    assert row.state == models.ACTIVE, row.fault
    node = node_of(stack, row.node_uuid)
    assert (node["provision_state"], node["instance_uuid"]) == ("active", row.uuid)
    assert node["instance_info"]["image_source"] == "http://images.example.org/ubuntu.qcow2"
    print(f"\ninstance.build through the real Ironic (fake driver): {build_seconds:.2f} s")

    assert lifecycle.reboot(world.owner, row.uuid).state == models.ACTIVE
    assert lifecycle.stop(world.owner, row.uuid).state == models.STOPPED
    assert node_of(stack, row.node_uuid)["power_state"] == "power off"
    assert lifecycle.start(world.owner, row.uuid).state == models.ACTIVE
    assert node_of(stack, row.node_uuid)["power_state"] == "power on"

    row = lifecycle.delete(world.owner, row.uuid)
    assert row.state == models.DELETED
    node = node_of(stack, row.node_uuid)
    assert (node["provision_state"], node["instance_uuid"], node["instance_info"]) == (
        "available", None, {})
    assert allocations.read(world.placement, row.uuid) == {}
    assert lifecycle.delete(world.owner, row.uuid).state == models.DELETED  # idempotent


def test_failed_deploy_unwinds_and_frees_the_node(stack, world):
    rc, [node] = world.make_nodes(1, "fail")
    ironic(stack, "PATCH", f"/nodes/{node}", [
        {"op": "add", "path": "/instance_info/traits", "value": ["CUSTOM_NOT_ON_NODE"]}])
    row = lifecycle.build(world.owner, world.schedule(rc).uuid)
    assert row.state == models.ERROR
    assert "missing traits CUSTOM_NOT_ON_NODE" in row.fault
    assert row.node_uuid is None
    state = node_of(stack, node)
    assert (state["provision_state"], state["instance_uuid"], state["instance_info"]) == (
        "available", None, {})
    assert allocations.read(world.placement, row.uuid) == {}
    # the node is free again: the next build gets it and succeeds
    again = lifecycle.build(world.owner, world.schedule(rc).uuid)
    assert (again.state, again.node_uuid) == (models.ACTIVE, node)
    # an ERROR instance deletes cleanly
    assert lifecycle.delete(world.owner, row.uuid).state == models.DELETED


def test_two_builds_racing_for_the_last_node_never_share_it(stack, world):
    rc, [node] = world.make_nodes(1, "race")
    for _ in range(3):
        barrier = threading.Barrier(2)
        results = []

        def build(barrier=barrier, results=results):
            barrier.wait(timeout=10)
            try:
                results.append(world.schedule(rc))
            except scheduler.NoValidHost as exc:
                results.append(exc)
        threads = [threading.Thread(target=build, args=(barrier, results)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        rows = [r for r in results if isinstance(r, db_instances.InstanceRow)]
        assert len(results) == 2 and len(rows) == 1, results
        assert rows[0].node_uuid == node
        loser = next(r for r in results if not isinstance(r, db_instances.InstanceRow))
        assert isinstance(loser, scheduler.NoValidHost)
        usage = world.placement.get(f"/resource_providers/{node}/allocations", headers={
            "OpenStack-API-Version": "placement 1.39"}).json()["allocations"]
        assert list(usage) == [rows[0].uuid]
        assert lifecycle.delete(world.owner, rows[0].uuid).state == models.DELETED


def test_resume_after_the_daemon_died_mid_build_and_mid_delete(stack, world):
    rc, nodes = world.make_nodes(2, "resume")
    # died after Ironic deployed, before ACTIVE was written
    first = world.schedule(rc)
    world.driver.deploy(first.node_uuid, first.uuid, None, timeout=60)
    assert lifecycle.resume(world.owner, first.uuid).state == models.ACTIVE
    # died before deploying at all
    second = world.schedule(rc)
    assert lifecycle.resume(world.owner, second.uuid).state == models.ACTIVE
    assert node_of(stack, second.node_uuid)["instance_uuid"] == second.uuid
    # died after DELETING was written
    db_instances.set_instance_state(world.engine, first.uuid, models.DELETING,
                                    expect_host=HOST, expect_member_epoch=EPOCH)
    assert lifecycle.resume(world.owner, first.uuid).state == models.DELETED
    assert node_of(stack, first.node_uuid)["provision_state"] == "available"
    assert allocations.read(world.placement, first.uuid) == {}


def manage(stack, world, tmp_path, *args):
    conf = tmp_path / "manage.conf"
    database = world.engine.url.render_as_string(hide_password=False)
    conf.write_text(stack.computed_conf(host=HOST, database=database) +
                    f"\n[coordination]\ngroup = {world.coordination_group}\n")
    # In this process (tests/cli.py: a function call where a subprocess costs 1-3 s of
    # imports); it leaves no thread behind.
    result = cli.run("computed-manage", "--config-file", conf, "server", *args, home=tmp_path)
    assert result.threads_left == (), result
    return result


def test_computed_manage_server(stack, world, tmp_path):
    rc, [node] = world.make_nodes(1, "cli")
    bad = manage(stack, world, tmp_path, "create", "--resource-class", "no-such-class")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1, bad.stderr
    assert "No such resource class CUSTOM_NO_SUCH_CLASS" in bad.stderr
    bad = manage(stack, world, tmp_path, "show", "not-a-uuid")
    assert (bad.returncode, bad.stderr.strip()) == (1, "computed-manage: error: not a uuid: "
                                                       "'not-a-uuid'")
    created = manage(stack, world, tmp_path, "create", "--resource-class", rc,
                     "--image", "http://img")
    assert created.returncode == 0, created.stderr
    instance_uuid = created.stdout.split()[1].rstrip(":")
    # the build was cast to HOST (no daemon listens here); act as that daemon
    assert lifecycle.build(world.owner, instance_uuid).state == models.ACTIVE
    shown = json.loads(manage(stack, world, tmp_path, "show", instance_uuid, "--json").stdout)
    assert (shown["state"], shown["node_uuid"], shown["host"]) == ("ACTIVE", node, HOST)
    listed = json.loads(manage(stack, world, tmp_path, "list", "--json").stdout)
    assert [doc["uuid"] for doc in listed] == [instance_uuid]
    reboot = manage(stack, world, tmp_path, "reboot", instance_uuid)
    assert reboot.returncode == 0 and f"reboot sent to {HOST}" in reboot.stdout
    missing = manage(stack, world, tmp_path, "delete", str(uuid.uuid4()))
    assert missing.returncode == 1 and "not found" in missing.stderr
