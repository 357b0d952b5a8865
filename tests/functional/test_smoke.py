"""Smoke tests: each real service answers the client computed itself uses to talk to it."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import openstack.connection
import sqlalchemy
from tooz import coordination

from computed.runtime import keystone, rpc
from tests.functional.daemons import bus_conf

ROOT = Path(__file__).resolve().parents[2]


def test_tooz_member_joins_a_group_on_zookeeper(stack):
    # A 2 s session can expire under load; nothing here is about expiry.
    url = f"{stack['zookeeper'].url}?timeout=10"
    group = f"smoke-{uuid.uuid4().hex[:8]}".encode()
    member = coordination.get_coordinator(url, b"member-a")
    observer = coordination.get_coordinator(url, b"observer")
    member.start(start_heart=True)
    observer.start(start_heart=True)
    try:
        member.create_group(group).get()
        member.join_group(group, capabilities=b'{"host": "a"}').get()
        assert observer.get_members(group).get() == {b"member-a"}
        assert observer.get_member_capabilities(group, b"member-a").get() == b'{"host": "a"}'
        member.leave_group(group).get()
        assert observer.get_members(group).get() == set()
    finally:
        member.stop()
        observer.stop()


def test_rpc_call_crosses_rabbitmq_between_two_processes(stack):
    url = stack["rabbitmq"].url
    topic = f"smoke-{uuid.uuid4().hex[:8]}"
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.functional.rpc_echo_server", url, topic, "echo-1",
         str(stack.lock_path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready", server.stderr.read()
        transport = rpc.get_transport(bus_conf(stack), "test", url=url)
        try:
            client = rpc.get_client(transport, topic, timeout=30)
            answer = client.call({}, "echo", value="over the bus")
            aimed = rpc.get_client(transport, topic, server="echo-1", timeout=30)
            again = aimed.call({}, "echo", value=42)
        finally:
            transport.cleanup()
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert answer == {"value": "over the bus", "pid": server.pid}
    assert again == {"value": 42, "pid": server.pid}


def test_resource_provider_with_inventory_in_placement(computed_config):
    placement = keystone.load_adapter(computed_config, "placement")
    headers = {"OpenStack-API-Version": "placement 1.39"}
    rp_uuid = str(uuid.uuid4())
    created = placement.post("/resource_providers",
                             json={"uuid": rp_uuid, "name": f"smoke-{rp_uuid}"},
                             headers=headers, raise_exc=False)
    assert created.status_code == 200, created.text
    generation = created.json()["generation"]
    inventory = {"resource_provider_generation": generation,
                 "inventories": {"CUSTOM_BAREMETAL_SMOKE": {
                     "total": 1, "reserved": 0, "min_unit": 1, "max_unit": 1, "step_size": 1,
                     "allocation_ratio": 1.0}}}
    assert placement.put("/resource_classes/CUSTOM_BAREMETAL_SMOKE", headers=headers,
                         raise_exc=False).status_code in (201, 204)
    put = placement.put(f"/resource_providers/{rp_uuid}/inventories", json=inventory,
                        headers=headers, raise_exc=False)
    assert put.status_code == 200, put.text
    got = placement.get(f"/resource_providers/{rp_uuid}/inventories", headers=headers).json()
    assert got["inventories"]["CUSTOM_BAREMETAL_SMOKE"]["total"] == 1


def test_ironic_node_created_with_openstacksdk_reaches_available(computed_config, stack):
    session = keystone.load_session(computed_config, "ironic")
    conn = openstack.connection.Connection(
        session=session, baremetal_endpoint_override=stack["ironic"].url,
        baremetal_api_version="1.115")
    node = conn.baremetal.create_node(driver="fake-hardware", name=f"smoke-{uuid.uuid4().hex[:8]}",
                                      resource_class="baremetal-smoke")
    try:
        assert node.provision_state == "enroll"
        conn.baremetal.set_node_provision_state(node, "manage")
        _wait_provision_state(conn, node.id, "manageable")
        conn.baremetal.set_node_provision_state(node, "provide")
        _wait_provision_state(conn, node.id, "available")
    finally:
        conn.baremetal.delete_node(node.id, ignore_missing=True)


def _wait_provision_state(conn, node_id: str, state: str, timeout: float = 60) -> None:
    # openstacksdk's own wait polls every 2 s; a tighter loop keeps the suite quick.
    deadline = time.monotonic() + timeout
    while True:
        node = conn.baremetal.get_node(node_id)
        if node.provision_state == state:
            return
        assert node.last_error is None, node.last_error
        assert time.monotonic() < deadline, f"node {node_id} stuck in {node.provision_state}"
        time.sleep(0.1)


def test_postgresql_database_answers_sqlalchemy(stack):
    if "postgres" not in stack:
        # No server and no binaries on this machine: the database layer runs on sqlite.
        engine = sqlalchemy.create_engine(f"sqlite:///{stack.workdir / 'smoke.sqlite'}")
    else:
        engine = sqlalchemy.create_engine(stack["postgres"].url)
    with engine.connect() as connection:
        assert connection.execute(sqlalchemy.text("SELECT 1")).scalar() == 1
    engine.dispose()
