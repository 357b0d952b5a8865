"""The harness's Ironic reading the harness's Glance (:meth:`Ironic.use_glance`): a node
deployed from a Glance image is rebuilt from one. Without Glance credentials Ironic 39.0.0
answers that rebuild with a 500 (``auto_lessee``: it cannot tell the image's type), which
failed Tempest's five rebuilds of Glance images; a deployed Ironic has its ``[glance]`` user."""

from __future__ import annotations

import time
import uuid

from computed.testing import ironic as ironic_harness
from computed.testing.ironic import Ironic
from computed.testing.keystone import ADMIN, PEOPLE


def _provision(url: str, node: str, target: str, reached: str) -> dict:
    ironic_harness.request("PUT", f"{url}/v1/nodes/{node}/states/provision",
                           {"target": target})
    deadline = time.monotonic() + 120
    while True:
        shown = ironic_harness.request("GET", f"{url}/v1/nodes/{node}")
        if shown["provision_state"] == reached and not shown["target_provision_state"]:
            return shown
        assert shown["provision_state"] not in ("deploy failed", "error"), shown["last_error"]
        assert time.monotonic() < deadline, shown
        time.sleep(0.5)


def test_a_node_from_a_glance_image_is_rebuilt_from_one(tmp_path, keystone_service,
                                                        glance_keystone):
    ks = keystone_service
    image = glance_keystone.upload(f"rebuild-{uuid.uuid4().hex[:6]}", token=ks.token(ADMIN))
    service = Ironic(tmp_path)
    service.use_glance(ks.auth_url, ADMIN, ks.password(ADMIN), PEOPLE[ADMIN][0])
    service.start()
    try:
        url = service.url
        node = ironic_harness.enroll_nodes(url, 1, prefix=f"glance-{uuid.uuid4().hex[:6]}")[0]
        _provision(url, node, "manage", "manageable")
        _provision(url, node, "provide", "available")
        ironic_harness.request("PATCH", f"{url}/v1/nodes/{node}", [
            {"op": "add", "path": "/instance_info/image_source", "value": image["id"]}])
        _provision(url, node, "active", "active")
        rebuilt = _provision(url, node, "rebuild", "active")
        assert rebuilt["instance_info"]["image_source"] == image["id"]
        assert rebuilt["last_error"] is None
        # Ironic read the image in Glance: it knows its type.
        assert rebuilt["instance_info"].get("image_type") == "whole-disk"
    finally:
        service.stop()
