"""Servers built from Glance images (issue 24 item 12), against a real Glance: the harness's
(:mod:`computed.testing.glance`, without Keystone: its file store in its work dir) beside the
stack, and ``computed-api`` in noauth2 with ``[glance] auth_type = none``. openstacksdk builds a
server from an uploaded image's id; Ironic's node holds the id as its image source (Ironic
fetches from Glance itself); a queued image, another project's private one and a Glance that is
down are refused with nothing changed."""

from __future__ import annotations

import uuid

import pytest
from openstack import exceptions as sdk_exc

from computed.testing.keystone import ADMIN as KS_ADMIN
from computed.testing.keystone import MEMBER_A, MEMBER_B
from tests.functional.daemons import ironic, make_available, wait_schedulable
from tests.functional.test_api import ADMIN, connection, error_body, gold_flavor, start_api
from tests.functional.test_api_keystone import serve_keystone_api

WORLD_NODES = 2


@pytest.fixture
def compute(stack, world, placement, tmp_path, glance_service):
    make_available(stack, world.nodes)
    world.reporter("r1")
    world.daemon("c1")
    wait_schedulable(world, placement)
    yield start_api(stack, world, tmp_path, (
        "auth_strategy = noauth2\n"
        f"[glance]\nauth_type = none\nendpoint_override = {glance_service.url}\n"))


def test_a_server_from_a_glance_image_reaches_ironic_as_its_image_source(
        stack, world, compute, glance_service):
    image = glance_service.upload(f"demo-{uuid.uuid4().hex[:6]}", owner="p1",
                                  visibility="private")
    assert image["status"] == "active"
    assert (glance_service.workdir / "glance" / "images" / image["id"]).exists()
    admin = connection(compute, ADMIN)
    member = connection(compute, "alice:p1")
    flavor = gold_flavor(admin, world)

    # Refused, nothing made: unknown, not active, another project's private image.
    queued = glance_service.create("queued", owner="p1")
    for who, image_id, message in (
            (member, str(uuid.uuid4()), "could not be found"),
            (member, queued["id"], "is not active"),
            (connection(compute, "bob:p2"), image["id"], "could not be found")):
        with pytest.raises(sdk_exc.BadRequestException) as refused:
            who.compute.create_server(name="no", flavor_id=flavor.id, image_id=image_id,
                                      networks="none")
        assert message in error_body(refused.value, 400)
    assert list(admin.compute.servers(all_projects=True)) == []

    server = member.compute.create_server(name="from-glance", flavor_id=flavor.id,
                                          image_id=image["id"], networks="none")
    server = member.compute.wait_for_server(server, status="ACTIVE", wait=180)
    shown = member.compute.get(f"/servers/{server.id}").json()["server"]["image"]
    assert shown["id"] == image["id"] == server.image.id
    assert shown["links"][0]["href"].endswith(f"/images/{image['id']}")
    node = admin.compute.get_server(server.id).hypervisor_hostname
    assert ironic(stack, "GET", f"/nodes/{node}")["instance_info"]["image_source"] \
        == image["id"]
    member.compute.delete_server(server)
    member.compute.wait_for_delete(server, wait=120)

    # Glance down: a 503 naming it, nothing made.
    glance_service.stop()
    try:
        with pytest.raises(sdk_exc.HttpException) as down:
            member.compute.create_server(name="down", flavor_id=flavor.id,
                                         image_id=image["id"], networks="none")
        assert error_body(down.value, 503).startswith("Glance: ")
        assert list(admin.compute.servers(all_projects=True)) == []
    finally:
        glance_service.start()


# -- keystone mode: Glance found in the caller's catalog, read with the caller's token --------

@pytest.fixture
def compute_keystone(stack, world, placement, tmp_path, keystone_service, glance_keystone):
    """computed-api in keystone mode, started once Glance is in Keystone's catalog
    (glance_keystone); its URL."""
    yield from serve_keystone_api(stack, world, placement, tmp_path, keystone_service)


def test_keystone_mode_reads_glance_from_the_catalog_with_the_callers_token(
        stack, world, compute_keystone, keystone_service, glance_keystone):
    from tests.functional.test_api_keystone import connection as ks_connection
    ks = keystone_service
    # Project A's private image, uploaded by its member through Keystone.
    image = glance_keystone.upload(f"a-{uuid.uuid4().hex[:6]}", visibility="private",
                                   token=ks.token(MEMBER_A))
    assert image["owner"] == ks.project_id(MEMBER_A)
    admin = ks_connection(ks, compute_keystone, KS_ADMIN)
    member_a = ks_connection(ks, compute_keystone, MEMBER_A)
    member_b = ks_connection(ks, compute_keystone, MEMBER_B)
    # The catalog lists Glance as the image service (what computed-api found it by).
    assert admin.session.get_endpoint(service_type="image", interface="public") \
        .rstrip("/") == glance_keystone.url
    flavor = gold_flavor(admin, world)
    with pytest.raises(sdk_exc.BadRequestException) as refused:
        member_b.compute.create_server(name="b", flavor_id=flavor.id, image_id=image["id"],
                                       networks="none")
    assert "could not be found" in error_body(refused.value, 400)
    server = member_a.compute.create_server(name="a", flavor_id=flavor.id,
                                            image_id=image["id"], networks="none")
    server = member_a.compute.wait_for_server(server, status="ACTIVE", wait=180)
    node = admin.compute.get_server(server.id).hypervisor_hostname
    assert ironic(stack, "GET", f"/nodes/{node}")["instance_info"]["image_source"] \
        == image["id"]
    member_a.compute.delete_server(server)
    member_a.compute.wait_for_delete(server, wait=120)


# -- the /images proxy (Nova's, to 2.35; its metadata to 2.38) -------------------------------

def test_the_images_proxy_through_openstacksdk(compute, glance_service):
    """openstacksdk's compute images: Glance's images as Nova's proxy shows them, their
    properties as metadata (written back to Glance), deleted through the proxy; another
    project's private image is not found; bad input is a 400 that changes nothing."""
    from openstack.compute.v2.image import Image

    suffix = uuid.uuid4().hex[:6]
    mine = glance_service.upload(f"mine-{suffix}", owner="p1", visibility="private")
    public = glance_service.upload(f"public-{suffix}", owner="p0")
    theirs = glance_service.upload(f"theirs-{suffix}", owner="p2", visibility="private")
    member = connection(compute, "alice:p1")
    other = connection(compute, "bob:p2")

    listed = {image.id: image for image in member.compute.images(details=True)}
    assert {mine["id"], public["id"]} <= set(listed) and theirs["id"] not in listed
    shown = member.compute.get_image(mine["id"])
    assert (shown.name, shown.status, shown.progress, shown.size, shown.min_ram) == \
        (f"mine-{suffix}", "ACTIVE", 100, 1024, 0)
    assert [link["rel"] for link in shown.links] == ["self", "bookmark", "alternate"]
    assert shown.links[2]["href"] == f"{glance_service.url}/images/{mine['id']}"
    by_name = list(member.compute.images(name=f"mine-{suffix}"))
    assert [image.id for image in by_name] == [mine["id"]]
    assert len(list(member.compute.images(limit=1, paginated=False))) == 1
    with pytest.raises(sdk_exc.NotFoundException):
        member.compute.get_image(theirs["id"])
    with pytest.raises(sdk_exc.NotFoundException):
        member.compute.get_image(str(uuid.uuid4()))

    # Metadata: Glance's own properties of the image, written there.
    member.compute.set_image_metadata(mine["id"], os_distro="debian", os_version="12")
    assert member.compute.get_image_metadata(mine["id"]).metadata == {
        "os_distro": "debian", "os_version": "12"}
    assert glance_service._request("GET", f"/v2/images/{mine['id']}")["os_distro"] == "debian"
    Image(id=mine["id"]).replace_metadata(member.compute, {"os_distro": "alpine",
                                                           "architecture": "x86_64"})
    assert member.compute.get_image(mine["id"]).metadata == {
        "os_distro": "alpine", "architecture": "x86_64"}
    member.compute.delete_image_metadata(mine["id"], ["architecture"])
    assert member.compute.get_image_metadata(mine["id"]).metadata == {"os_distro": "alpine"}
    item = member.compute.get(f"/images/{mine['id']}/metadata/os_distro")
    assert item.json() == {"meta": {"os_distro": "alpine"}}

    # Refused, nothing changed: Glance's own attributes, another project's image, a key the
    # body does not name, over the metadata_items quota, too late a microversion.
    for body, status in (({"metadata": {"name": "x"}}, 400),
                         ({"metadata": {"k": 1}}, 400),
                         ({"metadata": {f"k{i}": "v" for i in range(129)}}, 403)):
        response = member.compute.post(f"/images/{mine['id']}/metadata", json=body)
        assert response.status_code == status, response.text
    response = member.compute.put(f"/images/{mine['id']}/metadata/os_distro",
                                  json={"meta": {"other": "x"}})
    assert response.status_code == 400 and "mismatch" in response.text
    response = other.compute.post(f"/images/{mine['id']}/metadata",
                                  json={"metadata": {"k": "v"}})
    assert response.status_code == 404, response.text
    response = other.compute.delete(f"/images/{public['id']}")
    assert response.status_code == 403, response.text
    assert member.compute.get(f"/images/{mine['id']}",
                              microversion="2.36").status_code == 404
    assert member.compute.get(f"/images/{mine['id']}/metadata",
                              microversion="2.38").status_code == 200
    assert member.compute.get(f"/images/{mine['id']}/metadata",
                              microversion="2.39").status_code == 404
    assert member.compute.get_image_metadata(mine["id"]).metadata == {"os_distro": "alpine"}

    member.compute.delete_image(mine["id"])
    with pytest.raises(sdk_exc.NotFoundException):
        member.compute.get_image(mine["id"])
    with pytest.raises(sdk_exc.NotFoundException):
        member.compute.delete_image(mine["id"], ignore_missing=False)
    assert glance_service._request("GET", f"/v2/images/{public['id']}")["status"] == "active"
