"""Ironic's notifications become hints to the node sync; anything else is dropped."""

from __future__ import annotations

import pytest

from computed.baremetal.events import NotificationEndpoint, node_uuid, pool_name

N1 = "11111111-1111-1111-1111-111111111111"


class Hints:
    def __init__(self):
        self.hints: list[tuple[str, str]] = []

    def hint(self, uuid, event_type):
        self.hints.append((uuid, event_type))


def payload(uuid=N1):
    return {"ironic_object.data": {"uuid": uuid, "provision_state": "active"}}


@pytest.mark.parametrize("priority", ["info", "audit", "warn", "error", "critical", "debug",
                                      "sample"])
def test_a_node_event_of_any_priority_is_a_hint(priority):
    hints = Hints()
    endpoint = NotificationEndpoint(hints)
    getattr(endpoint, priority)({}, "ironic-conductor", "baremetal.node.power_set.end",
                                payload(), {})
    assert hints.hints == [(N1, "baremetal.node.power_set.end")]


@pytest.mark.parametrize("event_type, body", [
    ("baremetal.port.update.end", payload()),   # not about a node
    ("baremetal.node.update.end", "not an object"),
    ("baremetal.node.update.end", {"ironic_object.data": {"uuid": ""}}),
    ("baremetal.node.update.end", {"ironic_object.data": None}),
    (None, payload()),
])
def test_other_and_malformed_notifications_are_dropped(event_type, body):
    hints = Hints()
    NotificationEndpoint(hints).info({}, "ironic-conductor", event_type, body, {})
    assert hints.hints == [] and node_uuid(event_type, body) is None


def test_the_pool_is_named_after_the_group_and_the_host():
    """Two daemons of one host name in two groups on one vhost must not share a queue: each
    would get half of Ironic's events. The name is fixed by the configuration, so a restarted
    daemon resumes the queue it left."""
    assert pool_name("east", "c1") != pool_name("west", "c1")
    assert pool_name("east", "c1") == pool_name("east", "c1") == "computed/east/c1"
    # '-' may sit in groups and hosts; '/' may not (conf.checks): no two pairs share a name.
    assert pool_name("a-b", "c") != pool_name("a", "b-c")
