"""The compute API through the real clients: openstacksdk and python-openstackclient against
``computed-api``, in front of the real stack (Placement, Ironic with fake hardware, ZooKeeper,
RabbitMQ), daemons and a reporter; the API, the daemons, the reporter and the CLI in the test's
process (tests/functional/inprocess.py, tests/cli.py; as tests/functional/test_instances.py
sets up a fleet).
Authentication is noauth2: the token ``USER:PROJECT``.
"""

from __future__ import annotations

import json
import os
import urllib.request
import uuid

import openstack
import pytest
from keystoneauth1 import session as ks_session
from openstack import exceptions as sdk_exc

from computed.runtime import keystone
from computed.testing.process import free_port
from tests import cli
from tests.functional.daemons import (
    Process,
    ironic,
    make_available,
    node_for,
    ownership_now,
    wait_for,
    wait_schedulable,
    zk_client,
)

WORLD_NODES = 3
# Not fetched (fake hardware); a name, not 127.0.0.1: the API refuses loopback image URLs.
IMAGE = "http://images.example/demo.qcow2"
ADMIN = "admin:admin"


class ApiProcess(Process):
    script = "computed-api"


def start_api(stack, world, tmp_path, extra: str, name: str = "api") -> str:
    """computed-api on a free loopback port, on the world's group and database, ``extra``
    configuration after its [api] bind options (auth_strategy and what the test needs); its
    URL once /healthcheck answers. It stops with the world's processes, and runs as they do:
    in the test's process (tests/functional/inprocess.py) unless the test is marked
    ``daemon_processes``."""
    port = free_port()
    database = world.engine.url.render_as_string(hide_password=False)
    api = ApiProcess(stack, tmp_path, name, group=world.group, database=database,
                     extra=f"[api]\nbind_host = 127.0.0.1\nbind_port = {port}\n{extra}",
                     process=world.process).start()
    world.processes.append(api)
    url = f"http://127.0.0.1:{port}"

    def healthy():
        try:
            with urllib.request.urlopen(f"{url}/healthcheck", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False
    wait_for(healthy, 60, f"{name} serving", world.processes)
    return url


def connection(url: str, token: str, version: str | None = None) -> openstack.connection.Connection:
    """openstacksdk as a noauth2 user: the admin_token plugin sends the token to the endpoint."""
    kwargs = {"compute_api_version": version} if version else {}
    return openstack.connection.Connection(
        auth_type="admin_token", auth={"endpoint": f"{url}/v2.1", "token": token},
        **kwargs)


@pytest.fixture
def compute(stack, world, placement, tmp_path):
    """A fleet with free nodes (2 daemons, a reporter) and computed-api in front of it; the
    API's base URL."""
    make_available(stack, world.nodes)
    world.reporter("r1")
    for host in ("c1", "c2"):
        world.daemon(host)
    wait_schedulable(world, placement)
    yield start_api(stack, world, tmp_path, "auth_strategy = noauth2\n[quota]\ninstances = 10\n")


def gold_flavor(admin, world, name=None, **specs):
    flavor = admin.compute.create_flavor(name=name or f"bm-{uuid.uuid4().hex[:6]}", ram=1024,
                                         vcpus=2, disk=10)
    admin.compute.create_flavor_extra_specs(flavor, dict({
        f"resources:{world.rc}": "1", "resources:VCPU": "0", "resources:MEMORY_MB": "0",
        "resources:DISK_GB": "0"}, **specs))
    return flavor


@pytest.fixture
def placement_api(computed_config):
    """A keystoneauth adapter on the stack's Placement, to read what the API wrote there."""
    return keystone.load_adapter(computed_config, "placement")


def allocations(adapter, consumer):
    response = adapter.get(
        f"/allocations/{consumer}", headers={"OpenStack-API-Version": "placement 1.39"})
    return response.json()


def test_servers_through_openstacksdk(stack, world, compute, placement_api):
    admin = connection(compute, ADMIN)
    member = connection(compute, "alice:p1")
    flavor = gold_flavor(admin, world)
    assert admin.compute.get_flavor(flavor.id).extra_specs[f"resources:{world.rc}"] == "1"

    server = member.compute.create_server(name="web-1", flavor_id=flavor.id, image_id=IMAGE,
                                          networks="none", metadata={"role": "web"})
    server = member.compute.wait_for_server(server, status="ACTIVE", wait=180)
    assert (server.name, server.project_id, server.metadata) == ("web-1", "p1", {"role": "web"})
    seen_by_admin = admin.compute.get_server(server.id)
    node = seen_by_admin.hypervisor_hostname
    assert node in world.nodes and seen_by_admin.compute_host in ("c1", "c2")
    body = allocations(placement_api, server.id)
    assert body["allocations"] == {node: {"generation": body["allocations"][node]["generation"],
                                          "resources": {world.rc: 1}}}
    assert (body["project_id"], body["user_id"]) == ("p1", "alice")
    assert ironic(stack, "GET", f"/nodes/{node}")["instance_uuid"] == server.id

    # Another project neither lists nor reads it, nor learns that it exists.
    other = connection(compute, "bob:p2")
    assert [s.id for s in other.compute.servers()] == []
    with pytest.raises(sdk_exc.NotFoundException):
        other.compute.get_server(server.id)
    assert [s.id for s in member.compute.servers()] == [server.id]

    member.compute.stop_server(server)
    member.compute.wait_for_server(server, status="SHUTOFF", wait=120)
    assert ironic(stack, "GET", f"/nodes/{node}")["power_state"] == "power off"
    with pytest.raises(sdk_exc.ConflictException):  # stopped already
        member.compute.stop_server(server)
    member.compute.start_server(server)
    member.compute.wait_for_server(server, status="ACTIVE", wait=120)
    assert ironic(stack, "GET", f"/nodes/{node}")["power_state"] == "power on"
    member.compute.reboot_server(server, "HARD")
    owner = next(p for p in world.processes if p.host == seen_by_admin.compute_host)
    wait_for(lambda: any(r.get("action") == "reboot" and r.get("instance") == server.id
                         for r in owner.records()), 60, "reboot done by the owner",
             world.processes)
    member.compute.wait_for_server(server, status="ACTIVE", wait=120)

    member.compute.delete_server(server)
    member.compute.wait_for_delete(server, wait=120)
    assert allocations(placement_api, server.id)["allocations"] == {}
    wait_for(lambda: ironic(stack, "GET", f"/nodes/{node}")["provision_state"] == "available",
             60, "node cleaned", world.processes)


def test_quotas_by_counting_through_openstacksdk(world, compute, placement_api):
    admin = connection(compute, ADMIN)
    member = connection(compute, "carol:p3")
    flavor = gold_flavor(admin, world)
    admin.compute.update_quota_set(admin.compute.get_quota_set("p3"), instances=1)
    assert admin.compute.get_quota_set("p3").instances == 1
    first = member.compute.create_server(name="q-1", flavor_id=flavor.id, image_id=IMAGE,
                                         networks="none")
    with pytest.raises(sdk_exc.HttpException) as refused:
        member.compute.create_server(name="q-2", flavor_id=flavor.id, image_id=IMAGE,
                                     networks="none")
    assert refused.value.status_code == 403
    assert "Quota exceeded for instances: requested 1, but already used 1 of 1" in \
        str(refused.value)
    assert [s.name for s in member.compute.servers()] == ["q-1"]
    member.compute.wait_for_server(first, status="ACTIVE", wait=180)
    usages = placement_api.get("/usages?project_id=p3", headers={
        "OpenStack-API-Version": "placement 1.9"}).json()["usages"]
    assert usages == {world.rc: 1}
    member.compute.delete_server(first)
    member.compute.wait_for_delete(first, wait=120)


def test_a_build_without_host_is_an_error_server_its_owner_deletes(world, compute,
                                                                  placement_api):
    admin = connection(compute, ADMIN)
    member = connection(compute, "dave:p4")
    # No node has this capability: Placement finds no candidate (nor knows the trait).
    flavor = gold_flavor(admin, world, **{"capabilities:boot_mode": "uefi-nowhere"})
    server = member.compute.create_server(name="nohost", flavor_id=flavor.id, image_id=IMAGE,
                                          networks="none")
    server = member.compute.wait_for_server(server, status="ERROR", failures=[], wait=30)
    assert server.fault["message"].startswith("No valid host was found: ")
    assert allocations(placement_api, server.id)["allocations"] == {}
    member.compute.delete_server(server)
    member.compute.wait_for_delete(server, wait=30)


def openstack_cli(url, token, *args, version="2.61"):
    # Many openstackclient commands build an Identity v3 client first, even when they never
    # call it; noauth2 has no Keystone, so its endpoint is pointed at the API's root (any version
    # document lets the client be built). Commands that do call Keystone (quota show, resolving
    # a project by name) need keystone mode.
    env = dict(os.environ, OS_AUTH_TYPE="admin_token", OS_ENDPOINT=f"{url}/v2.1",
               OS_TOKEN=token, OS_COMPUTE_API_VERSION=version, OS_IDENTITY_API_VERSION="3",
               OS_IDENTITY_ENDPOINT_OVERRIDE=f"{url}/")
    for key in ("OS_CLOUD", "OS_AUTH_URL", "OS_PROJECT_NAME", "OS_USERNAME"):
        env.pop(key, None)
    # The installed script's main in this process (tests/cli.py: a function call where a
    # subprocess costs 1.5 CPU s of imports); it leaves no thread behind.
    result = cli.run("openstack", *args, home=env.get("HOME", "/"), cwd=os.getcwd(), env=env)
    assert result.threads_left == (), result
    return result


def test_the_openstack_cli(world, compute):
    def cli(*args, token=ADMIN):
        result = openstack_cli(compute, token, *args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    name = f"bm-cli-{uuid.uuid4().hex[:6]}"
    cli("flavor", "create", "--ram", "1024", "--vcpus", "2", "--disk", "10",
        "--property", f"resources:{world.rc}=1", "--property", "resources:VCPU=0", name)
    flavors = json.loads(cli("flavor", "list", "-f", "json"))
    assert name in [f["Name"] for f in flavors]
    shown = json.loads(cli("flavor", "show", name, "-f", "json"))
    assert f"resources:{world.rc}" in json.dumps(shown["properties"])

    member = connection(compute, "erin:p5")
    server = member.compute.create_server(name="cli-1", flavor_id=shown["id"], image_id=IMAGE,
                                          networks="none")
    member.compute.wait_for_server(server, status="ACTIVE", wait=180)
    listed = json.loads(cli("server", "list", "--no-name-lookup", "-f", "json",
                            token="erin:p5"))
    assert [(s["ID"], s["Status"]) for s in listed] == [(server.id, "ACTIVE")]
    detail = json.loads(cli("server", "show", server.id, "-f", "json", token="erin:p5"))
    assert detail["name"] == "cli-1" and detail["status"] == "ACTIVE"
    cli("server", "stop", server.id, token="erin:p5")
    member.compute.wait_for_server(server, status="SHUTOFF", wait=120)
    cli("server", "start", server.id, token="erin:p5")
    member.compute.wait_for_server(server, status="ACTIVE", wait=120)
    cli("server", "reboot", "--hard", server.id, token="erin:p5")
    # The API has the server REBOOT from the call on, so ACTIVE after it is the reboot's end;
    # carried out by the instance's owner (its audit log), as the SDK test checks too.
    host = connection(compute, ADMIN).compute.get_server(server.id).compute_host
    owner = next(p for p in world.processes if p.host == host)
    wait_for(lambda: any(r.get("action") == "reboot" and r.get("instance") == server.id
                         for r in owner.records()), 60, "reboot done by the owner",
             world.processes)
    member.compute.wait_for_server(server, status="ACTIVE", wait=120)
    # A project's quotas are read with openstacksdk here: "openstack quota show" resolves the
    # project through Keystone.
    assert connection(compute, ADMIN).compute.get_quota_set("p5").instances == 10
    services = json.loads(cli("compute", "service", "list", "-f", "json"))
    assert {(s["Host"], s["State"], s["Status"]) for s in services} >= \
        {("c1", "up", "enabled"), ("c2", "up", "enabled")}
    cli("server", "delete", "--wait", server.id, token="erin:p5")
    assert json.loads(cli("server", "list", "--no-name-lookup", "-f", "json",
                          token="erin:p5")) == []


def error_body(exc: sdk_exc.HttpException, status: int) -> str:
    """The Compute API error body of a refused request (the fault kind's message)."""
    assert exc.status_code == status, exc
    (kind, body), = exc.response.json().items()
    assert body["code"] == status, body
    return body["message"]


def test_bad_requests_get_compute_errors_and_change_nothing(world, compute, placement_api):
    admin = connection(compute, ADMIN)
    member = connection(compute, "frank:p6")
    flavor = gold_flavor(admin, world)

    def refused(call, status):
        with pytest.raises(sdk_exc.HttpException) as caught:
            call()
        return error_body(caught.value, status)

    # Malformed bodies, sent raw through the SDK's compute adapter.
    assert "Malformed request body" in refused(
        lambda: _raise(member.compute.post("/servers", data=b"{not json",
                                           headers={"Content-Type": "application/json"})),
        400)
    assert "flavorRef" in refused(lambda: _raise(member.compute.post(
        "/servers", json={"server": {"name": "x", "imageRef": IMAGE, "networks": "none"}})),
        400)
    # Unknown flavor, image that is no URL.
    assert "Flavor nope could not be found" in refused(
        lambda: member.compute.create_server(name="x", flavor_id="nope", image_id=IMAGE,
                                             networks="none"), 400)
    assert "not an image URL" in refused(
        lambda: member.compute.create_server(name="x", flavor_id=flavor.id,
                                             image_id="cirros", networks="none"), 400)
    # Bad uuid, unknown server.
    refused(lambda: member.compute.get_server("not-a-uuid"), 404)
    refused(lambda: member.compute.get_server(str(uuid.uuid4())), 404)
    # Bad microversion.
    assert "Minimum is 2.1 and maximum is 2.61" in refused(
        lambda: _raise(member.compute.get("/servers", microversion="2.99")), 406)
    # Members may not write flavors, nor see other projects' servers.
    refused(lambda: member.compute.create_flavor(name="x", ram=1, vcpus=1, disk=1), 403)
    refused(lambda: _raise(member.compute.get("/servers?all_tenants=1")), 403)
    # Unauthenticated: a keystoneauth session without any auth plugin sends no token (the
    # SDK's auth_type "none" sends the token "notused", which noauth2 accepts like any other).
    anonymous = ks_session.Session()
    refused(lambda: _raise(anonymous.get(f"{compute}/v2.1/servers", raise_exc=False)), 401)
    # Nothing changed: no server, no allocation of the project, the one flavor.
    assert list(admin.compute.servers(all_projects=True)) == []
    assert placement_api.get("/usages?project_id=frank", headers={
        "OpenStack-API-Version": "placement 1.9"}).json()["usages"] == {}
    assert [f.id for f in admin.compute.flavors()] == [flavor.id]


def _raise(response):
    """The SDK's raw adapter calls return the response; make a refusal an exception as the
    resource calls do."""
    sdk_exc.raise_from_response(response)
    return response


def test_disabling_a_service_drains_its_daemon(stack, world, compute):
    admin = connection(compute, ADMIN, version="2.53")
    services = {s.host: s for s in admin.compute.services()}
    assert {(h, s.state, s.status, s.binary) for h, s in services.items()} == \
        {("c1", "up", "enabled", "computed"), ("c2", "up", "enabled", "computed")}
    zk = zk_client(stack)
    try:
        # With 3 random nodes the ring gives c1 none about 1 run in 8, and then neither the
        # drain nor the return would show anything: c1 must hold a node before it is disabled.
        node = node_for(stack, world, zk, "c1")
        wait_for(lambda: ownership_now(zk, world.group)[1].get(node) == "c1", 60,
                 f"c1 holds node {node}", world.processes)
        admin.compute.disable_service(services["c1"], disabled_reason="maintenance")
        shown = {s.host: s for s in admin.compute.services()}["c1"]
        assert (shown.status, shown.disabled_reason) == ("disabled", "maintenance")
        # Draining: c1 hands its free nodes to c2 (no instance holds any here).
        wait_for(lambda: set(ownership_now(zk, world.group)[1].values()) == {"c2"}, 60,
                 "c1 drained", world.processes)
        admin.compute.enable_service(services["c1"])
        assert {s.host: s.status for s in admin.compute.services()}["c1"] == "enabled"
        wait_for(lambda: "c1" in set(ownership_now(zk, world.group)[1].values()), 60,
                 "c1 takes nodes again", world.processes)
    finally:
        zk.stop()
        zk.close()
