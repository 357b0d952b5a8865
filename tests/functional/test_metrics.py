"""The metrics and health endpoint of a real daemon and reporter, scraped over HTTP.

A daemon alone in a group of its own claims every node Ironic lists, so its metrics must say so;
the reporter applying its reports must count them. On SIGTERM the daemon's health turns 503
before its endpoint goes away.
"""

from __future__ import annotations

import http.client
import signal
import socket
import time
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from computed import db
from computed.testing.process import free_port
from tests.functional.daemons import Daemon, Reporter, dump_logs, fleet_database

NODES = 6


def get(port: int, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def samples(port: int) -> dict[str, float]:
    status, text = get(port, "/metrics")
    assert status == 200, text
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            values[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
    return values


def wait_for(check, timeout, what, processes):
    deadline = time.monotonic() + timeout
    seen = []  # every distinct answer, for the failure message
    while time.monotonic() < deadline:
        try:
            last = check()
        except OSError as exc:  # the endpoint is not listening (yet, or any more)
            last = repr(exc)
        if last is True:
            return
        if not seen or seen[-1] != last:
            seen.append(last)
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached after {timeout}s (seen: {seen[-5:]!r})\n"
                         f"{dump_logs(processes)}")


@pytest.fixture
def fleet(stack, tmp_path):
    token = uuid.uuid4().hex[:6]
    if "postgres" in stack:
        database = stack["postgres"].create_database(f"metrics_{token}")
        db.sync(database)
        stack.save()
    else:
        database = fleet_database(tmp_path)
    nodes = stack["ironic"].enroll_nodes(NODES, resource_class=f"metrics-{token}",
                                         prefix=f"met-{token}")
    processes = []

    def start(cls, host, **kw):
        process = cls(stack, tmp_path, host, group=f"m{token}", database=database, **kw)
        processes.append(process.start())
        return process

    yield start, nodes
    for process in processes:
        process.ensure_stopped()
    stack["ironic"].drop_nodes(nodes)


def test_daemon_and_reporter_expose_metrics_and_health(fleet):
    start, nodes = fleet
    daemon_port, reporter_port = free_port(), free_port()
    ports = f"[metrics]\nport = {daemon_port}\nreporter_port = {reporter_port}\n"
    reporter = start(Reporter, "r1", extra=ports)
    daemon = start(Daemon, "c1", drain_timeout=3, extra=ports)
    processes = [daemon, reporter]

    def daemon_healthy():
        status, body = get(daemon_port, "/healthz")
        return status == 200 or (status, body)

    wait_for(daemon_healthy, 60, "daemon /healthz 200", processes)

    def owns_and_reported_every_listed_node():
        values = samples(daemon_port)
        listed = values.get("computed_ironic_nodes_listed", 0)
        applied = samples(reporter_port)["computed_reporter_reports_total{outcome=applied}"]
        return (listed >= NODES and values["computed_nodes_owned"] == listed
                and values["computed_reports_sent_total"] >= listed
                and values["computed_reports_pending"] == 0 and applied >= NODES) or values

    wait_for(owns_and_reported_every_listed_node, 90, "every listed node owned and reported",
             processes)
    values = samples(daemon_port)
    assert values["computed_up"] == 1
    assert values["computed_fleet_state{state=active}"] == 1
    assert values["computed_zookeeper_session_state{state=connected}"] == 1
    assert values["computed_fleet_members"] == 1
    assert values["computed_lease_remaining_seconds"] > 0
    assert values["computed_claim_events_total{event=claim}"] >= values["computed_nodes_owned"]
    assert values["computed_reports_sent_total"] >= NODES
    assert values["computed_ironic_list_stale"] == 0

    assert get(reporter_port, "/healthz") == (200, "ok: serving\n")
    counted = samples(reporter_port)
    assert counted["computed_reporter_up"] == 1
    assert counted["computed_reporter_reports_total{outcome=applied}"] >= NODES
    assert counted["computed_reporter_reports_total{outcome=invalid}"] == 0

    # SIGTERM: the daemon drains, leaves and stops; its health turns 503 before the endpoint
    # goes away, and never back to 200 (a load balancer takes it out at once).
    daemon.signal(signal.SIGTERM)
    answers = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            answer = get(daemon_port, "/healthz")
        except OSError:
            break  # the endpoint went with the daemon
        if not answers or answers[-1] != answer:
            answers.append(answer)
        time.sleep(0.02)
    unhealthy = [i for i, (status, _) in enumerate(answers) if status != 200]
    assert unhealthy, answers
    assert all(answers[i][0] == 503 for i in range(unhealthy[0], len(answers))), answers
    # 503 from the signal on (not from the drain's first pass), and until the process ends.
    assert answers[unhealthy[0]][1] in ("stopping: draining, then leaving\n",
                                        "stopped\n"), answers
    # Its endpoint is the last thing it stops: it is about to exit on that one SIGTERM (a second
    # one now would land in the interpreter's shutdown, where Python's handler is gone).
    assert daemon.proc.wait(30) == 0
    with pytest.raises(OSError):
        get(daemon_port, "/healthz")  # the endpoint went with the daemon
    assert reporter.stop(30) == 0


def test_a_busy_metrics_port_stops_the_daemon_with_a_config_error(fleet):
    start, _nodes = fleet
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        daemon = start(Daemon, "c1", extra=f"[metrics]\nport = {port}\n")
        assert daemon.proc.wait(60) == 2, dump_logs([daemon])
    assert f"[metrics] port: cannot listen on 127.0.0.1:{port}" in daemon.log.read_text()
