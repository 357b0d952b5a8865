"""A user who gets a bare-metal server can log into it (issue 24 item 11): a key pair made with
the stock ``openstack`` CLI and openstacksdk, a server built with it and user data through
computed-api, and what the real Ironic received on the deploy, read back from the node
(``instance_info.configdrive``: the harness's Ironic shows instance secrets), holds the key
and the user data; the key pair's bad input is a 4xx, never a 500. The fleet is test_api.py's
``compute`` fixture (2 daemons, a reporter, computed-api, fake hardware)."""

from __future__ import annotations

import base64
import json

from tests.functional.daemons import ironic
from tests.functional.test_api import (  # noqa: F401 - the fixture
    ADMIN,
    IMAGE,
    compute,
    connection,
    gold_flavor,
    openstack_cli,
)

WORLD_NODES = 2
USER_DATA = "#cloud-config\nruncmd:\n  - [touch, /tmp/computed-was-here]\n"


def test_the_key_and_user_data_reach_ironic(stack, world, compute, tmp_path):  # noqa: F811
    def cli(*args):
        result = openstack_cli(compute, "carol:p9", *args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    # The stock CLI makes a key pair (the private key written to a file, the public imported).
    private = tmp_path / "carol.pem"
    made = json.loads(cli("keypair", "create", "--private-key", str(private), "-f", "json",
                          "carol-key"))
    assert made["name"] == "carol-key" and made["type"] == "ssh"
    assert "PRIVATE KEY" in private.read_text()
    listed = json.loads(cli("keypair", "list", "-f", "json"))
    assert [k["Name"] for k in listed] == ["carol-key"]
    public_key = connection(compute, "carol:p9").compute.get_keypair("carol-key").public_key
    assert public_key.startswith("ssh-")  # the CLI makes the key and imports it

    member = connection(compute, "carol:p9", "2.61")
    flavor = gold_flavor(connection(compute, ADMIN), world)
    server = member.compute.create_server(
        name="Login Test", flavor_id=flavor.id, image_id=IMAGE, networks="none",
        key_name="carol-key", user_data=base64.b64encode(USER_DATA.encode()).decode())
    server = member.compute.wait_for_server(server, status="ACTIVE", wait=180)
    assert server.key_name == "carol-key"
    node = connection(compute, ADMIN).compute.get_server(server.id).hypervisor_hostname

    info = ironic(stack, "GET", f"/nodes/{node}?fields=instance_info")["instance_info"]
    drive = info["configdrive"]
    assert drive["meta_data"]["public_keys"] == {"carol-key": public_key}
    assert drive["meta_data"]["keys"] == [{"name": "carol-key", "type": "ssh",
                                           "data": public_key}]
    assert (drive["meta_data"]["uuid"], drive["meta_data"]["name"],
            drive["meta_data"]["hostname"], drive["meta_data"]["availability_zone"]) == \
        (server.id, "Login Test", "login-test", "nova")
    assert drive["user_data"] == USER_DATA
    assert info["image_source"] == IMAGE

    # The key pair can go; the server keeps what it was built with.
    cli("keypair", "delete", "carol-key")
    assert json.loads(cli("keypair", "list", "-f", "json")) == []
    assert member.compute.get_server(server.id).key_name == "carol-key"

    # Bad input: a 4xx in the Compute body, nothing made.
    raw = member.compute
    for body in ({"keypair": {"name": "bad/name"}},
                 {"keypair": {"name": "k", "public_key": "ssh-rsa nope"}}):
        response = raw.post("/os-keypairs", json=body, raise_exc=False)
        assert response.status_code == 400 and "badRequest" in response.text, response.text
    response = raw.post("/servers", json={"server": {
        "name": "x", "flavorRef": flavor.id, "imageRef": IMAGE, "networks": "none",
        "key_name": "carol-key"}}, raise_exc=False)
    assert response.status_code == 400 and "carol-key" in response.text, response.text
    member.compute.delete_server(server)
