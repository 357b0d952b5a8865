"""The compute API in keystone mode, against a real Keystone (issue 15: "Keystone mode is tested
against a real Keystone ... a member of one project, a member of another and an admin, with real
tokens").

``computed-api`` (in the test's process) with ``[api] auth_strategy = keystone``:
keystonemiddleware's ``auth_token`` validates every token against the harness's Keystone
(:mod:`computed.testing.keystone`), with the admin as its service user. openstacksdk authenticates
each person against Keystone with a password and talks to the API directly (the compute endpoint
given, not looked up in the catalog).
"""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid

import openstack
import pytest
from openstack import exceptions as sdk_exc

from computed.testing.keystone import ADMIN, MEMBER_A, MEMBER_B, PEOPLE
from tests.functional.daemons import make_available, wait_schedulable
from tests.functional.test_api import IMAGE, gold_flavor, start_api

WORLD_NODES = 2


def serve_keystone_api(stack, world, placement, tmp_path, keystone_service):
    """A fleet with free nodes and computed-api in keystone mode in front of it; its URL
    (a generator for fixtures: the API stops with the world's processes)."""
    make_available(stack, world.nodes)
    world.reporter("r1")
    world.daemon("c1")
    wait_schedulable(world, placement)
    ks = keystone_service
    yield start_api(stack, world, tmp_path, (
        "auth_strategy = keystone\n"
        f"[keystone_authtoken]\nwww_authenticate_uri = {ks.auth_url}\n"
        f"auth_url = {ks.auth_url}\nauth_type = password\nusername = {ADMIN}\n"
        f"password = {ks.password(ADMIN)}\nproject_name = {PEOPLE[ADMIN][0]}\n"
        "user_domain_id = default\nproject_domain_id = default\n"))


@pytest.fixture
def compute(stack, world, placement, tmp_path, keystone_service):
    """A fleet with free nodes and computed-api in keystone mode in front of it; its URL."""
    yield from serve_keystone_api(stack, world, placement, tmp_path, keystone_service)


def connection(keystone, url, who):
    """openstacksdk as ``who``, a password user of the harness's Keystone."""
    project, _role = PEOPLE[who]
    return openstack.connection.Connection(
        auth_type="password",
        auth={"auth_url": keystone.auth_url, "username": who,
              "password": keystone.password(who), "project_name": project,
              "user_domain_id": "default", "project_domain_id": "default"},
        compute_endpoint_override=f"{url}/v2.1")


def status_without_token(url, token=None):
    request = urllib.request.Request(f"{url}/v2.1/servers")
    if token:
        request.add_header("X-Auth-Token", token)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, None
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_keystone_mode_projects_see_their_own_and_admin_sees_all(world, compute,
                                                                 keystone_service):
    ks = keystone_service
    status, body = status_without_token(compute)
    assert status == 401 and b"unauthorized" in body.lower()
    assert status_without_token(compute, token=uuid.uuid4().hex)[0] == 401

    admin = connection(ks, compute, ADMIN)
    member_a = connection(ks, compute, MEMBER_A)
    member_b = connection(ks, compute, MEMBER_B)
    flavor = gold_flavor(admin, world)
    server = member_a.compute.create_server(name="a-1", flavor_id=flavor.id, image_id=IMAGE,
                                            networks="none")
    server = member_a.compute.wait_for_server(server, status="ACTIVE", wait=180)
    assert server.project_id == ks.project_id(MEMBER_A)
    assert [s.id for s in member_a.compute.servers()] == [server.id]

    # The member of project B neither lists nor reads A's server, nor learns it exists.
    assert [s.id for s in member_b.compute.servers()] == []
    with pytest.raises(sdk_exc.NotFoundException):
        member_b.compute.get_server(server.id)
    # A member cannot ask for every project's servers; the admin can.
    with pytest.raises(sdk_exc.ForbiddenException):
        list(member_b.compute.servers(all_projects=True))
    everyone = {s.id: s.project_id for s in admin.compute.servers(all_projects=True)}
    assert everyone.get(server.id) == ks.project_id(MEMBER_A)
    assert server.id not in [s.id for s in admin.compute.servers()]  # admin's own project

    member_a.compute.delete_server(server)
    member_a.compute.wait_for_delete(server, wait=120)
