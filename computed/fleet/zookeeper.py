"""The ZooKeeper session behind tooz: the one place computed reaches inside a library.

Owns the link between tooz's ZooKeeper driver and the parts of computed that use kazoo directly.
The fleet's membership is a tooz group (joined and left through tooz's public API), but claims,
watches and member epochs need kazoo: claims and watches must live in the *same* ZooKeeper
session as the membership, so that all of a daemon's presence expires at once, and a member epoch
is the zxid of the member's znode, which tooz does not report. tooz exposes neither its kazoo
client nor where it keeps a group, so this module reads both from tooz's driver:

* :func:`kazoo_client`: the driver's ``KazooClient`` (``KazooDriver._coord``);
* :func:`group_path`: the znode of a group, as tooz itself builds it
  (``KazooDriver._path_group``), so a ``?namespace=...`` in the backend URL is honoured wherever
  computed reads a group (the daemon's membership and ``computed-manage fleet status`` alike).

No other module may touch tooz's private names. ``tests/unit/fleet/test_zookeeper.py`` builds a
real tooz coordinator from a URL (without connecting) and fails as soon as a tooz release moves
either name.
"""

from __future__ import annotations

from kazoo.client import KazooClient
from tooz import coordination
from tooz.drivers import zookeeper as tooz_zookeeper


class NotZooKeeper(ValueError):
    """The coordinator is not tooz's ZooKeeper driver; the message names what it is."""

    def __init__(self, coordinator: coordination.CoordinationDriver):
        super().__init__(f"the coordination backend {type(coordinator).__name__} is not "
                         f"ZooKeeper: node claims need [coordination] backend_url = "
                         f"zookeeper://...")
        self.coordinator = coordinator


def kazoo_client(coordinator: coordination.CoordinationDriver) -> KazooClient:
    """The KazooClient (one ZooKeeper session) inside tooz's ZooKeeper ``coordinator``."""
    return _driver(coordinator)._coord


def group_path(coordinator: coordination.CoordinationDriver, group: str) -> str:
    """The znode under which tooz keeps the members of ``group`` (one child per member)."""
    return _driver(coordinator)._path_group(group.encode())


def _driver(coordinator: coordination.CoordinationDriver) -> tooz_zookeeper.KazooDriver:
    if not isinstance(coordinator, tooz_zookeeper.KazooDriver):
        raise NotZooKeeper(coordinator)
    return coordinator
