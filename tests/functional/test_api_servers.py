"""Servers through the real clients on the real stack (PostgreSQL, Placement, Ironic with fake
hardware, daemons): what issue 23 found answering 500 on PostgreSQL (NUL characters, an action
racing a delete) and Nova's behaviours of issue 24 (a regular expression for ``name``, sorting,
``os-stop: {}``, the empty network sub-resources, ``binary=nova-compute``, several servers in
one request, all or none). The fleet is test_api.py's ``compute`` fixture."""

from __future__ import annotations

import threading
import urllib.parse

import pytest
from openstack import exceptions as sdk_exc

from tests.functional.test_api import ADMIN, IMAGE, compute, connection, gold_flavor  # noqa: F401

WORLD_NODES = 3


def _status(response) -> int:
    return response.status_code


def test_hostile_values_and_races_answer_4xx_on_postgresql(world, compute):  # noqa: F811
    admin = connection(compute, ADMIN)
    member = connection(compute, "nina:p7")
    flavor = gold_flavor(admin, world)

    def raw(method, path, **kwargs):
        return getattr(member.compute, method)(path, raise_exc=False, **kwargs)

    for query in ("marker=%00", "name=we%00b", "name=%28", "sort_key=bogus",
                  "sort_dir=sideways", "all_tenants=maybe", "flavor=%00", "image=x%00"):
        response = raw("get", f"/servers/detail?{query}")
        assert _status(response) in (400, 403), (query, response.text)
        assert "computeFault" not in response.text
    for field, value in (("flavorRef", "go\x00ld"), ("imageRef", "http://images.example/\x00"),
                         ("imageRef", "http://169.254.169.254/latest/meta-data/"),
                         ("imageRef", "file:///etc/shadow"), ("availability_zone", "nova:c1")):
        body = {"server": {"name": "x", "flavorRef": flavor.id, "imageRef": IMAGE,
                           "networks": "none", field: value}}
        response = raw("post", "/servers", json=body)
        assert _status(response) in (400, 403), (field, response.text)
    assert list(admin.compute.servers(all_projects=True)) == []

    server = member.compute.create_server(name="race-1", flavor_id=flavor.id, image_id=IMAGE,
                                          networks="none")
    server = member.compute.wait_for_server(server, status="ACTIVE", wait=180)
    # A delete and a reboot at the same moment: each is done or a 409, never a 500.
    barrier = threading.Barrier(2)
    answers = {}

    def send(name, method, path, body=None):
        barrier.wait()
        answers[name] = getattr(member.compute, method)(path, json=body, raise_exc=False)
    threads = [threading.Thread(target=send, args=("delete", "delete", f"/servers/{server.id}")),
               threading.Thread(target=send, args=("reboot", "post",
                                                   f"/servers/{server.id}/action",
                                                   {"reboot": {"type": "SOFT"}}))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _status(answers["delete"]) == 204, answers["delete"].text
    assert _status(answers["reboot"]) in (202, 409), answers["reboot"].text
    member.compute.wait_for_delete(server, wait=120)


def test_novas_listing_actions_and_multiple_create(world, compute):  # noqa: F811
    admin = connection(compute, ADMIN)
    member = connection(compute, "olga:p8", version="2.61")
    flavor = gold_flavor(admin, world)

    # Two servers in one request, named as Nova names them.
    made = member.compute.post("/servers", json={"server": {
        "name": "web", "flavorRef": flavor.id, "imageRef": IMAGE, "networks": "none",
        "min_count": 2, "max_count": 2, "adminPass": "s3cret", "OS-DCF:diskConfig": "AUTO",
        "accessIPv4": "192.0.2.7"}})
    assert made.status_code == 202, made.text
    assert "adminPass" not in made.json()["server"]  # accepted, never answered
    servers = {s.name: s for s in member.compute.servers()}
    assert sorted(servers) == ["web-1", "web-2"]
    for server in servers.values():
        member.compute.wait_for_server(server, status="ACTIVE", wait=180)

    def names(**query):
        path = "/servers?" + urllib.parse.urlencode(query)
        response = member.compute.get(path)
        assert response.status_code == 200, response.text
        return [s["name"] for s in response.json()["servers"]]
    assert sorted(names(name="^web-[12]$")) == ["web-1", "web-2"]
    assert names(name="-2$") == ["web-2"]
    assert names(sort_key="display_name", sort_dir="asc") == ["web-1", "web-2"]
    assert names(sort_key="display_name", sort_dir="desc", limit=1) == ["web-2"]
    assert sorted(names(flavor=flavor.id)) == ["web-1", "web-2"]
    assert names(image="http://images.example/other.qcow2") == []
    assert [s.name for s in member.compute.servers(name="web-1")] == ["web-1"]

    web1 = servers["web-1"]
    # Another project: 404, as if it did not exist.
    with pytest.raises(sdk_exc.NotFoundException):
        connection(compute, "bob:p2").compute.get_server(web1.id)
    # The network sub-resources of a server without networks are empty.
    for suffix, document in (("ips", {"addresses": {}}),
                             ("os-security-groups", {"security_groups": []}),
                             ("os-interface", {"interfaceAttachments": []})):
        response = member.compute.get(f"/servers/{web1.id}/{suffix}")
        assert (response.status_code, response.json()) == (200, document)
    # os-stop and os-start with {} (Tempest's body).
    assert member.compute.post(f"/servers/{web1.id}/action",
                               json={"os-stop": {}}).status_code == 202
    member.compute.wait_for_server(web1, status="SHUTOFF", wait=120)
    assert member.compute.post(f"/servers/{web1.id}/action",
                               json={"os-start": {}}).status_code == 202
    member.compute.wait_for_server(web1, status="ACTIVE", wait=120)

    # The daemons are nova-compute to tools that ask for it.
    found = list(admin.compute.services(binary="nova-compute"))
    assert found and {s.binary for s in found} == {"nova-compute"}

    # Three nodes, two taken: two more in one request find one host, so none is built.
    made = member.compute.post("/servers", json={"server": {
        "name": "db", "flavorRef": flavor.id, "imageRef": IMAGE, "networks": "none",
        "min_count": 2, "return_reservation_id": True}})
    assert made.status_code == 202 and made.json()["reservation_id"].startswith("r-")
    # Placed after the 202 (computed/api/pending.py), as Nova schedules after its API answered.
    failed = [member.compute.wait_for_server(s, status="ERROR", failures=[], wait=120)
              for s in member.compute.servers() if s.name.startswith("db-")]
    assert sorted(s.name for s in failed) == ["db-1", "db-2"]
    assert {s.status for s in failed} == {"ERROR"}
    assert all("No valid host was found" in (s.fault or {}).get("message", "") for s in failed)
    for server in [*failed, *servers.values()]:
        member.compute.delete_server(server)
    for server in servers.values():
        member.compute.wait_for_delete(server, wait=120)

