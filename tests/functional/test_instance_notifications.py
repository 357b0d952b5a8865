"""Versioned instance notifications on the harness's RabbitMQ (issue 15 item 8).

A daemon configured with ``[oslo_messaging_notifications] driver = messagingv2`` and a topic of
the test's own; an oslo.messaging notification listener in the test hears one server's build,
power actions and delete, in order, with Nova's payload shape.
"""

from __future__ import annotations

import threading

import oslo_messaging
import pytest
from oslo_config import cfg

from computed.fleet.membership import fleet_root
from computed.instances import scheduler
from computed.instances.rpcapi import ComputeAPI, ServerAPI
from computed.runtime import keystone
from tests.functional.daemons import instance_bus, make_available, wait_for, wait_schedulable

WORLD_NODES = 2
IMAGE = "http://127.0.0.1/images/demo.qcow2"


class Heard:
    """The notification endpoint: every (event_type, priority, publisher, payload) heard."""

    def __init__(self):
        self.events: list[tuple[str, str, str, dict]] = []
        self.lock = threading.Lock()

    def _record(self, priority, publisher_id, event_type, payload):
        with self.lock:
            self.events.append((event_type, priority, publisher_id, payload))

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self._record("INFO", publisher_id, event_type, payload)

    def error(self, ctxt, publisher_id, event_type, payload, metadata):
        self._record("ERROR", publisher_id, event_type, payload)

    def about(self, instance_uuid):
        with self.lock:
            return [(event, priority, publisher, payload["nova_object.data"])
                    for event, priority, publisher, payload in self.events
                    if payload["nova_object.data"]["uuid"] == instance_uuid]


@pytest.fixture
def heard(stack, world):
    topic = f"notifications-{world.group}"
    conf = cfg.ConfigOpts()
    conf([])
    transport = oslo_messaging.get_notification_transport(conf, url=stack["rabbitmq"].url)
    endpoint = Heard()
    listener = oslo_messaging.get_notification_listener(
        transport, [oslo_messaging.Target(topic=topic)], [endpoint], executor="threading")
    listener.start()
    endpoint.topic = topic
    yield endpoint
    listener.stop()
    listener.wait()
    transport.cleanup()


def test_one_servers_life_is_heard_as_versioned_notifications(stack, world, placement,
                                                              computed_config, heard):
    make_available(stack, world.nodes)
    world.reporter("r1")
    daemon = world.daemon("c1", extra=f"[oslo_messaging_notifications]\ndriver = messagingv2\n"
                                      f"topics = {heard.topic}\n")
    daemon.wait_log("claimed", timeout=120)  # other groups' daemons report these nodes too
    wait_schedulable(world, placement)
    zk, transport = instance_bus(stack)
    try:
        api = ServerAPI(world.engine, keystone.load_adapter(computed_config, "placement"),
                        ComputeAPI(transport),
                        scheduler.zookeeper_owner(zk, fleet_root(world.group)))
        row = api.create(world.resource_class, image=IMAGE)
        assert api.wait(row.uuid, timeout=120).state == "ACTIVE"
        for action, state in (("stop", "STOPPED"), ("start", "ACTIVE"), ("reboot", "ACTIVE"),
                              ("delete", "DELETED")):
            api.action(action, row.uuid)
            wait_for(lambda state=state: api.get(row.uuid).state == state, 60,
                     f"{action} done", world.processes)
    finally:
        transport.cleanup()
        zk.stop()
        zk.close()

    expected = [f"instance.{action}.{phase}"
                for action in ("create", "power_off", "power_on", "reboot", "delete")
                for phase in ("start", "end")]
    wait_for(lambda: len(heard.about(row.uuid)) >= len(expected), 30, "every notification",
             world.processes)
    events = heard.about(row.uuid)
    assert [event for event, *_ in events] == expected
    assert all(priority == "INFO" and publisher == "computed:c1"
               for _, priority, publisher, _ in events)
    created = events[1][3]
    assert (created["state"], created["host"], created["node"]) == ("active", "c1",
                                                                   row.node_uuid)
    assert created["flavor"]["nova_object.data"]["extra_specs"] == {
        f"resources:{world.rc}": "1"}
    assert events[-1][3]["state"] == "deleted"
