"""Flavors through python-openstackclient against ``computed-api`` (in the test's process; issue
24 items 1, 2, 6): the commands operators run, each answered as Nova answers them."""

from __future__ import annotations

import json
import uuid

from tests.functional.test_api import (  # noqa: F401 (fixtures)
    ADMIN,
    compute,
    openstack_cli,
)

WORLD_NODES = 1


def test_flavor_commands_of_the_cli(world, compute):  # noqa: F811
    def cli(*args, version="2.61"):
        result = openstack_cli(compute, ADMIN, *args, version=version)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    tag = uuid.uuid4().hex[:6]
    cli("flavor", "create", "--id", "4242", "--ram", "8192", "--vcpus", "2", "--disk", "20",
        "--description", "first", "--property", f"resources:{world.rc}=1",
        "--property", "hw:x=1", f"bm-big-{tag}")
    cli("flavor", "create", "--ram", "512", "--vcpus", "1", "--disk", "5", f"bm-small-{tag}")
    big = json.loads(cli("flavor", "show", "4242", "-f", "json"))
    assert (big["id"], big["description"]) == ("4242", "first")
    listed = json.loads(cli("flavor", "list", "--min-ram", "4096", "-f", "json"))
    assert [f["ID"] for f in listed] == ["4242"]
    cli("flavor", "set", "--description", "second", "4242")
    cli("flavor", "unset", "--property", "hw:x", "4242")
    big = json.loads(cli("flavor", "show", "4242", "-f", "json"))
    assert big["description"] == "second" and "hw:x" not in json.dumps(big["properties"])
    # A second resource class would make the flavor unbuildable: refused, named.
    refused = openstack_cli(compute, ADMIN, "flavor", "set", "--property",
                            "resources:CUSTOM_OTHER=1", "4242")
    assert refused.returncode != 0
    assert "CUSTOM_OTHER" in refused.stderr, refused.stderr
    cli("flavor", "delete", "4242", f"bm-small-{tag}")
