"""computed.fleet.zookeeper on real tooz coordinators, built from URLs and never connected.

The alarm for a tooz upgrade: the module reads two private names of tooz's ZooKeeper driver
(``_coord`` and ``_path_group``); if a tooz release renames or removes either, these tests fail
and say which, before any daemon starts with the wrong session or reads the wrong group.
"""

import pytest
from kazoo.client import KazooClient
from tooz import coordination
from tooz.drivers import zookeeper as tooz_zookeeper

from computed.fleet.zookeeper import NotZooKeeper, group_path, kazoo_client


def coordinator(url: str) -> coordination.CoordinationDriver:
    return coordination.get_coordinator(url, b"probe")


@pytest.mark.parametrize("scheme", ["zookeeper", "kazoo"])
def test_tooz_zookeeper_driver_still_has_what_computed_reads(scheme):
    driver = coordinator(f"{scheme}://127.0.0.1:2181?namespace=custom")
    assert type(driver) is tooz_zookeeper.KazooDriver
    assert isinstance(driver._coord, KazooClient), \
        "tooz's ZooKeeper driver no longer keeps its KazooClient in _coord"
    assert driver._path_group(b"computed") == "/custom/computed", \
        "tooz's ZooKeeper driver no longer builds group paths with _path_group"


def test_kazoo_client_is_the_coordinators_own_session():
    driver = coordinator("zookeeper://127.0.0.1:2181")
    client = kazoo_client(driver)
    assert client is kazoo_client(driver) and isinstance(client, KazooClient)
    assert not client.connected  # nothing was started


def test_group_path_honours_the_namespace_of_the_url():
    assert group_path(coordinator("zookeeper://127.0.0.1:2181"), "computed") == \
        "/tooz/computed"
    assert group_path(coordinator("zookeeper://127.0.0.1:2181?timeout=2&namespace=site-1"),
                      "computed") == "/site-1/computed"


def test_another_backend_is_refused_with_its_name(tmp_path):
    driver = coordinator(f"file://{tmp_path}")
    with pytest.raises(NotZooKeeper, match="FileDriver is not ZooKeeper") as raised:
        kazoo_client(driver)
    assert raised.value.coordinator is driver
    with pytest.raises(NotZooKeeper):
        group_path(driver, "computed")
