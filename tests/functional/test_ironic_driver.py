"""IronicDriver and NodeCatalog against the real Ironic of the harness.

Nodes have a per-module token in their name and shard so that other tests sharing the stack do
not disturb the assertions. The first is created through the API, the others are copies of its
row in Ironic's database (Ironic.copy_node: 120 creations one at a time through the API took
most of the module's 2-6 s set-up); their traits are set through the API, their shard and
conductor group in the database (Ironic refuses a conductor group no conductor serves; the
harness conductor is in the default group): the filters under test are still Ironic's own,
server-side. At the end they are dropped from Ironic's database (Ironic.drop_nodes).
"""

from __future__ import annotations

import logging
import sqlite3
import uuid

import openstack.connection
import pytest
from oslo_config import cfg

from computed import conf as computed_conf
from computed.baremetal.catalog import Freshness, NodeCatalog
from computed.baremetal.driver import DriverUnavailable
from computed.runtime import keystone
from computed_ironic import API_VERSION, IronicDriver
from computed_ironic.retry import RetryPolicy

COUNT = 120
PAGE = 25


def _connection(computed_config, stack) -> openstack.connection.Connection:
    return openstack.connection.Connection(
        session=keystone.load_session(computed_config, "ironic"),
        baremetal_endpoint_override=stack["ironic"].url, baremetal_api_version=API_VERSION)


def _ironic_db(stack):
    return sqlite3.connect(stack["ironic"].database, timeout=30)


def _set_column(stack, uuids, column: str, value: str) -> None:
    """Set ``column`` (shard, conductor_group) of the nodes ``uuids`` in Ironic's database."""
    with _ironic_db(stack) as db:
        db.executemany(f"UPDATE nodes SET {column} = ? WHERE uuid = ?",
                       [(value, u) for u in uuids])
    db.close()


@pytest.fixture(scope="module")
def fleet(stack, tmp_path_factory):
    """COUNT nodes: every 3rd in conductor group cg-TOKEN, every 4th in shard s-TOKEN."""
    path = tmp_path_factory.mktemp("ironic-driver") / "computed.conf"
    path.write_text(stack.computed_conf(host="test-host"))
    conf = cfg.ConfigOpts()
    computed_conf.register_opts(conf)
    conf(["--config-file", str(path)], project="computed")
    conn = _connection(conf, stack)
    token = uuid.uuid4().hex[:8]
    group, shard = f"cg-{token}", f"s-{token}"

    names = [f"drv-{token}-{i:04d}" for i in range(COUNT)]
    uuids: list[str] = []
    try:
        first = conn.baremetal.create_node(
            driver="fake-hardware", name=names[0], resource_class="baremetal-drv",
            properties={"capabilities": "boot_mode:uefi", "cpus": 4})
        uuids.append(first.id)
        uuids += stack["ironic"].copy_node(first.id, names[1:])
        _set_column(stack, [u for i, u in enumerate(uuids) if i % 4 == 0], "shard", shard)
        for node_uuid in uuids[::10]:
            conn.baremetal.set_node_traits(node_uuid, ["CUSTOM_Z", "CUSTOM_A"])
        in_group = {u for i, u in enumerate(uuids) if i % 3 == 0}
        _set_column(stack, in_group, "conductor_group", group)
        yield {"uuids": uuids, "group": group, "shard": shard, "in_group": in_group,
               "in_shard": {u for i, u in enumerate(uuids) if i % 4 == 0}, "token": token}
    finally:
        # Straight from Ironic's database, in one transaction (Ironic.drop_nodes, as the world
        # fixture's tear-down): through the API, 120 deletions one at a time took 3-6 s of this
        # module's tear-down and Ironic's CPU.
        stack["ironic"].drop_nodes(uuids)
        conn.close()


def _node_requests(caplog) -> list[str]:
    # openstacksdk also discovers the API version (GET / and /v1/) on first use.
    return [r.getMessage() for r in caplog.records
            if r.name == "keystoneauth.session" and r.getMessage().startswith("REQ:")
            and "/v1/nodes" in r.getMessage()]


def test_lists_every_node_once_page_by_page_with_only_needed_fields(fleet, computed_config,
                                                                      caplog):
    driver = IronicDriver.from_conf(computed_config, page_size=PAGE)
    with caplog.at_level(logging.DEBUG, logger="keystoneauth.session"):
        nodes = driver.list_nodes()
    uuids = [n.uuid for n in nodes]
    assert len(uuids) == len(set(uuids))
    mine = {n.uuid: n for n in nodes if n.uuid in set(fleet["uuids"])}
    assert set(mine) == set(fleet["uuids"])
    requests = _node_requests(caplog)
    assert len(requests) >= COUNT // PAGE + 1
    for line in requests:
        assert "/v1/nodes?" in line and f"limit={PAGE}" in line and "fields=" in line
        assert f"baremetal {API_VERSION}" in line
    for i, node_uuid in enumerate(fleet["uuids"]):
        node = mine[node_uuid]
        assert node.name == f"drv-{fleet['token']}-{i:04d}"
        assert node.resource_class == "baremetal-drv"
        assert node.provision_state == "enroll" and node.maintenance is False
        assert node.properties == {"capabilities": "boot_mode:uefi"}
        assert node.traits == (("CUSTOM_A", "CUSTOM_Z") if i % 10 == 0 else ())
        assert node.shard == (fleet["shard"] if i % 4 == 0 else None)
        assert node.conductor_group == (fleet["group"] if i % 3 == 0 else "")
    driver.close()


def test_filters_by_conductor_group_shard_and_both(fleet, stack):
    url = stack["ironic"].url
    by_group = IronicDriver.for_endpoint(url, conductor_group=fleet["group"], page_size=PAGE)
    by_shard = IronicDriver.for_endpoint(url, shard=fleet["shard"], page_size=PAGE)
    by_both = IronicDriver.for_endpoint(url, conductor_group=fleet["group"],
                                        shard=fleet["shard"], page_size=PAGE)
    assert {n.uuid for n in by_group.list_nodes()} == fleet["in_group"]
    assert {n.uuid for n in by_shard.list_nodes()} == fleet["in_shard"]
    assert {n.uuid for n in by_both.list_nodes()} == fleet["in_group"] & fleet["in_shard"]


def test_default_conductor_group_filter_excludes_named_groups(fleet, stack):
    driver = IronicDriver.for_endpoint(stack["ironic"].url, conductor_group="", page_size=PAGE)
    listed = {n.uuid for n in driver.list_nodes()}
    assert set(fleet["uuids"]) - fleet["in_group"] <= listed
    assert not listed & fleet["in_group"]


def test_get_node_reads_one_node_and_none_for_an_unknown_uuid(fleet, stack):
    driver = IronicDriver.for_endpoint(stack["ironic"].url)
    node = driver.get_node(fleet["uuids"][0])
    assert node.uuid == fleet["uuids"][0] and node.traits == ("CUSTOM_A", "CUSTOM_Z")
    assert driver.get_node(str(uuid.uuid4())) is None


def test_ironic_outage_raises_unavailable_and_the_catalog_keeps_the_last_good_list(
        fleet, stack, computed_config):
    policy = RetryPolicy(max_retries=2, interval=0.05, max_delay=0.2)
    driver = IronicDriver.from_conf(computed_config, page_size=PAGE, retry_policy=policy,
                                    shard=fleet["shard"])
    catalog = NodeCatalog(driver)
    good = catalog.refresh()
    assert set(good.nodes) == fleet["in_shard"] and not good.stale
    ironic = stack["ironic"]
    ironic.stop()
    try:
        with pytest.raises(DriverUnavailable) as info:
            driver.list_nodes()
        assert info.value.attempts == 3
        # A new connection first discovers the API version: that failing is an outage too.
        newcomer = IronicDriver.for_endpoint(ironic.url, retry_policy=policy)
        with pytest.raises(DriverUnavailable):
            newcomer.list_nodes()
        stale = catalog.refresh()
        assert stale.freshness is Freshness.STALE and stale.nodes == good.nodes
        assert isinstance(stale.error, DriverUnavailable)
        assert catalog.view() is stale
    finally:
        ironic.start()
        stack.save()
    fresh = catalog.refresh()
    assert not fresh.stale and set(fresh.nodes) == fleet["in_shard"]
