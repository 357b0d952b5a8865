"""Joining the group against a real ZooKeeper: a join whose answer was lost is not a duplicate.

When the connection drops after ZooKeeper created the member znode but before its answer came
back, the daemon joins again (:meth:`computed.fleet.reconciler.Fleet.run` retries) and meets its
own member: that must stand as its join, not wait ``join_timeout`` and end the daemon with
"another computed runs with the same host". A member of another session still refuses.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from tooz import coordination

from computed.fleet.membership import Membership, MembershipError
from computed.testing.zookeeper import ZooKeeper


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    server = ZooKeeper(tmp_path_factory.mktemp("zk-join"), {})
    server.start()
    yield server
    server.stop()


@pytest.fixture
def coordinators(zookeeper):
    started = []

    def start(member: bytes) -> coordination.CoordinationDriver:
        coordinator = coordination.get_coordinator(f"{zookeeper.url}?timeout=5", member)
        coordinator.start()
        started.append(coordinator)
        return coordinator
    yield start
    for coordinator in started:
        coordinator.stop()


def test_joining_again_in_the_same_session_keeps_the_own_member(coordinators):
    group = f"g{uuid.uuid4().hex[:8]}"
    membership = Membership(coordinators(b"c1"), group, "c1", 1, wake=threading.Event())
    first = membership.join(timeout=3, stopping=lambda: False)
    assert membership.join(timeout=3, stopping=lambda: False) == first


def test_a_member_of_another_session_with_the_same_host_still_refuses(coordinators):
    group = f"g{uuid.uuid4().hex[:8]}"
    Membership(coordinators(b"c1"), group, "c1", 1, wake=threading.Event()).join(
        timeout=3, stopping=lambda: False)
    other = Membership(coordinators(b"c1"), group, "c1", 1, wake=threading.Event())
    with pytest.raises(MembershipError, match="already a member"):
        other.join(timeout=1, stopping=lambda: False)
