"""The Ironic driver against a real Ironic that holds a node's lock for longer than the
driver's retry count allows: the harness's Ironic with a fake deploy that takes seconds (``[fake]
deploy_delay``), during which its conductor holds the node's exclusive lock and answers every
write to it 409 "locked ... please retry". A write from the driver is waited out until its
operation's timeout (d864a73), where it used to fail after ``api_max_retries`` attempts: what
failed Tempest's builds at load 20 when Ironic held nodes locked while reading Glance."""

from __future__ import annotations

import logging
import time

from computed.baremetal.driver import DriverUnavailable
from computed.testing import ironic as ironic_harness
from computed.testing.ironic import Ironic
from computed_ironic import IronicDriver
from computed_ironic.retry import RetryPolicy

DELAY = 3  # seconds of each fake deploy step (prepare and deploy): the lock is held for ~6 s


def _provision(url: str, node: str, target: str, reached: str | None = None) -> None:
    ironic_harness.request("PUT", f"{url}/v1/nodes/{node}/states/provision",
                           {"target": target})
    if reached is None:
        return
    deadline = time.monotonic() + 120
    while True:
        shown = ironic_harness.request("GET", f"{url}/v1/nodes/{node}")
        if shown["provision_state"] == reached and not shown["target_provision_state"]:
            return
        assert time.monotonic() < deadline, shown
        time.sleep(0.2)


def _deploying(url: str, name: str) -> str:
    """A node whose deploy (started by another client) holds its lock for a few seconds."""
    node = ironic_harness.enroll_nodes(url, 1, prefix=name)[0]
    _provision(url, node, "manage", "manageable")
    _provision(url, node, "provide", "available")
    ironic_harness.request("PATCH", f"{url}/v1/nodes/{node}", [
        {"op": "add", "path": "/instance_info/image_source",
         "value": "http://images.example/locked.qcow2"}])
    _provision(url, node, "active")
    return node


def test_a_write_to_a_node_locked_past_the_retry_count_is_waited_out(tmp_path, caplog):
    service = Ironic(tmp_path, deploy_delay=DELAY)
    service.start()
    try:
        node = _deploying(service.url, "waited")
        # One retry 1 s apart: far less than the deploy holds the lock.
        driver = IronicDriver.for_endpoint(
            service.url, retry_policy=RetryPolicy(max_retries=1, interval=1))
        with caplog.at_level(logging.INFO, logger="computed_ironic.driver"):
            done = driver.set_power(node, "power on", timeout=120)
        assert done.power_state == "power on"
        locked = [r for r in caplog.records if "is locked (answer" in r.getMessage()]
        assert len(locked) > 1  # more locked answers than the count would have allowed
        # ... and a lock outlasting the operation's own timeout is the operation's failure.
        node = _deploying(service.url, "timed-out")
        try:
            driver.set_power(node, "power on", timeout=1)
        except DriverUnavailable as exc:
            assert "still locked at the operation's timeout" in str(exc)
        else:
            raise AssertionError("a write locked past its timeout succeeded")
    finally:
        service.stop()
