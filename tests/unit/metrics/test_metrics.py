"""computed.runtime.metrics and the daemon's and reporter's collectors (computed.daemon.metrics,
computed.reporter.metrics): collectors read the running objects at scrape time; /healthz says
why not."""

from __future__ import annotations

import collections
import http.client
import logging
import socket
import types

import pytest
from oslo_config import cfg
from prometheus_client.parser import text_string_to_metric_families

from computed.baremetal.catalog import NodeCatalog
from computed.baremetal.driver import BaremetalDriver, DriverUnavailable, Node
from computed.conf import metrics as metrics_opts_module
from computed.conf.errors import ConfigError
from computed.daemon import metrics as daemon_metrics
from computed.fleet.fence import Fence
from computed.fleet.membership import IgnoredEntry, MemberInfo
from computed.fleet.reconciler import FleetState
from computed.providers.outbox import Outbox
from computed.reporter import metrics as reporter_metrics
from computed.runtime import metrics
from computed.testing.process import free_port
from tests.unit.daemon.fakes import Clock
from tests.unit.report.fakes import Gate, Reporter


class Driver(BaremetalDriver):
    def __init__(self, *outcomes):
        self.outcomes = list(outcomes)

    def list_nodes(self):
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def get_node(self, uuid):
        return None


class Claims:
    def __init__(self, *nodes: str):
        self.nodes = dict.fromkeys(nodes, object())

    def held(self):
        return dict(self.nodes)


class Membership:
    member_epoch = 77

    def __init__(self, members=(), error=None, ignored=()):
        self._members, self._error, self.reads = list(members), error, 0
        self._ignored = list(ignored)

    def members(self):
        self.reads += 1
        if self._error:
            raise self._error
        return self._members

    def ignored(self):
        return self._ignored


def make_service(clock: Clock, listed=("a", "b", "c"), held=("a", "b"), connected=True,
                 state=FleetState.ACTIVE, membership=None):
    fence = Fence(10.0, clock=clock)
    if connected:
        fence.connected()
        fence.renew(lambda: None)
    catalog = NodeCatalog(Driver([Node(uuid=u) for u in listed or ()]), clock=clock)
    if listed is not None:
        catalog.refresh()
    fleet = types.SimpleNamespace(state=state, claims=Claims(*held), passes=5,
                                  claimed=4, released=1)
    box = Outbox("h", Reporter(None), Gate(), batch_size=100)
    box.offer("a", 1, None)
    box.sent, box.failures = 12, 2
    return types.SimpleNamespace(
        stopped=False, stopping=False, fence=fence, fleet=fleet, catalog=catalog, outbox=box,
        sync=types.SimpleNamespace(last_event_at=None, failing={"n9": None}, failures=3),
        hosting=types.SimpleNamespace(readopt_pending=True, readopt_failures=2),
        membership=membership or Membership([MemberInfo("h", 1, False, 1),
                                             MemberInfo("p", 1, True, 2)],
                                            ignored=[IgnoredEntry("x", "planted", 3)]))


def scrape(collector) -> dict[str, float]:
    registry = metrics.registry(collector)
    from prometheus_client import generate_latest
    text = generate_latest(registry).decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
    return samples


def test_daemon_metrics_read_the_service_at_scrape_time():
    clock = Clock()
    service = make_service(clock)
    collector = daemon_metrics.DaemonCollector(service, clock=clock)
    clock.now += 4
    values = scrape(collector)
    assert values["computed_up"] == 1
    assert values["computed_fleet_state{state=active}"] == 1
    assert values["computed_fleet_state{state=draining}"] == 0
    assert values["computed_zookeeper_session_state{state=connected}"] == 1
    assert values["computed_lease_remaining_seconds"] == pytest.approx(10 * 2 / 3 - 4)
    assert values["computed_member_epoch"] == 77
    assert values["computed_zookeeper_session_timeout_seconds"] == 10.0
    assert values["computed_fleet_members"] == 2
    assert values["computed_fleet_members_draining"] == 1
    assert values["computed_fleet_group_entries_ignored"] == 1
    assert values["computed_nodes_owned"] == 2
    assert values["computed_claim_events_total{event=claim}"] == 4
    assert values["computed_claim_events_total{event=release}"] == 1
    assert values["computed_fleet_passes_total"] == 5
    assert values["computed_ironic_nodes_listed"] == 3
    assert values["computed_ironic_list_age_seconds"] == 4
    assert values["computed_ironic_list_stale"] == 0
    assert values["computed_reports_sent_total"] == 12
    assert values["computed_reports_pending"] == 1
    assert values["computed_report_send_failures"] == 2
    assert values["computed_nodes_sync_failing"] == 1
    assert values["computed_node_sync_failures_total"] == 3
    assert values["computed_instances_readopt_pending"] == 1
    assert values["computed_instances_readopt_failures_total"] == 2
    assert "computed_ironic_last_event_age_seconds" not in values  # no event yet
    assert "computed_rpc_messages_refused_total{reason=forged}" in values
    assert "process_resident_memory_bytes" in values
    # A later scrape sees later values: nothing is copied at registration.
    service.fleet.claims.nodes["c"] = object()
    service.sync.last_event_at = clock.now - 1.5
    values = scrape(collector)
    assert values["computed_nodes_owned"] == 3
    assert values["computed_ironic_last_event_age_seconds"] == 1.5


def test_stale_ironic_list_is_exposed_and_still_healthy():
    clock = Clock()
    service = make_service(clock)
    service.catalog._driver.outcomes.append(DriverUnavailable("list nodes", "down"))
    service.catalog.refresh()
    values = scrape(daemon_metrics.DaemonCollector(service, clock=clock))
    assert values["computed_ironic_list_stale"] == 1
    assert values["computed_ironic_list_failures"] == 1
    health = daemon_metrics.daemon_health(service)
    assert health.ok and "Ironic unreachable for 1 listing" in health.reason


def test_members_are_not_read_while_the_session_is_in_doubt():
    clock = Clock()
    membership = Membership()
    service = make_service(clock, connected=False, membership=membership,
                           state=FleetState.SUSPENDED)
    values = scrape(daemon_metrics.DaemonCollector(service, clock=clock))
    assert membership.reads == 0 and "computed_fleet_members" not in values
    assert values["computed_up"] == 0
    assert values["computed_zookeeper_session_state{state=lost}"] == 1
    assert values["computed_lease_remaining_seconds"] == 0


def test_a_failing_member_read_leaves_the_metric_out():
    clock = Clock()
    service = make_service(clock, membership=Membership(error=RuntimeError("zk")))
    values = scrape(daemon_metrics.DaemonCollector(service, clock=clock))
    assert "computed_fleet_members" not in values and values["computed_nodes_owned"] == 2


def test_daemon_without_node_list():
    clock = Clock()
    service = make_service(clock, listed=None)
    values = scrape(daemon_metrics.DaemonCollector(service, clock=clock))
    assert values["computed_ironic_nodes_listed"] == 0


@pytest.mark.parametrize("change, reason", [
    (dict(stopped=True), "stopped"),
    (dict(stopping=True), "stopping: draining, then leaving"),
    (dict(connected=False), "zookeeper session lost"),
    (dict(state=FleetState.JOINING), "fleet state joining"),
    (dict(state=FleetState.DRAINING), "fleet state draining"),
    (dict(listed=None), "no node list from Ironic yet"),
])
def test_daemon_health_reasons(change, reason):
    stopped, stopping = change.pop("stopped", False), change.pop("stopping", False)
    service = make_service(Clock(), **change)
    service.stopped, service.stopping = stopped, stopping
    assert daemon_metrics.daemon_health(service) == (False, reason)


def test_daemon_health_ok_and_status_line():
    service = make_service(Clock())
    assert daemon_metrics.daemon_health(service) == (True, "ok: 2 nodes owned of 3 listed")
    assert daemon_metrics.describe(service) == ("active, session connected; 2 nodes owned, "
                                         "3 listed; 1 reports pending")


def test_reporter_counts_every_outcome_and_health():
    applier = types.SimpleNamespace(counts=collections.Counter(applied=3, fenced=1))
    zookeeper = types.SimpleNamespace(connected=True)
    values = scrape(reporter_metrics.ReporterCollector(applier, zookeeper))
    assert values["computed_reporter_reports_total{outcome=applied}"] == 3
    assert values["computed_reporter_reports_total{outcome=fenced}"] == 1
    assert values["computed_reporter_reports_total{outcome=invalid}"] == 0
    assert values["computed_reporter_up"] == 1
    for reason in ("unsigned", "forged", "expired", "replayed", "malformed", "unknown_method"):
        assert f"computed_rpc_messages_refused_total{{reason={reason}}}" in values
    zookeeper.connected = False
    assert not reporter_metrics.reporter_health(zookeeper).ok
    assert scrape(reporter_metrics.ReporterCollector(applier, zookeeper))[
        "computed_reporter_up"] == 0


def test_a_reporter_waiting_for_the_message_bus_is_not_healthy():
    applier = types.SimpleNamespace(counts=collections.Counter())
    zookeeper = types.SimpleNamespace(connected=True)
    server = types.SimpleNamespace(started=False)
    assert reporter_metrics.reporter_health(zookeeper, server) == \
        (False, "waiting for the message bus: not serving yet")
    assert scrape(reporter_metrics.ReporterCollector(applier, zookeeper, server=server))[
        "computed_reporter_up"] == 0
    server.started = True
    assert reporter_metrics.reporter_health(zookeeper, server).ok


def conf_with(**metrics_opts) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    metrics_opts_module.register_opts(conf)
    conf([], project="computed", default_config_files=[])
    for key, value in metrics_opts.items():
        conf.set_override(key, value, group="metrics")
    return conf


def test_defaults_are_local_and_disabled():
    conf = conf_with()
    assert conf.metrics.bind_host == "127.0.0.1"
    assert conf.metrics.port == 0 and conf.metrics.reporter_port == 0
    endpoint = daemon_metrics.serve_daemon(conf, make_service(Clock()))
    assert not endpoint.enabled and endpoint.address is None
    endpoint.stop()


def get(address, path: str) -> tuple[int, str, str]:
    connection = http.client.HTTPConnection(*address, timeout=5)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type"), response.read().decode()
    finally:
        connection.close()


def test_endpoint_serves_metrics_and_health_over_http():
    service = make_service(Clock())
    endpoint = daemon_metrics.serve_daemon(conf_with(port=free_port()), service)
    try:
        status, content_type, body = get(endpoint.address, "/metrics")
        assert status == 200 and content_type.startswith("text/plain")
        assert "computed_nodes_owned 2.0" in body
        assert get(endpoint.address, "/healthz")[::2] == (200, "ok: 2 nodes owned of 3 listed\n")
        service.fleet.state = FleetState.DRAINING
        assert get(endpoint.address, "/healthz")[::2] == (503, "fleet state draining\n")
        assert get(endpoint.address, "/nothing")[0] == 404
    finally:
        endpoint.stop()
    with pytest.raises(OSError):
        get(endpoint.address or ("127.0.0.1", 1), "/healthz")


def test_a_broken_health_check_answers_503():
    def broken():
        raise RuntimeError("boom")
    endpoint = metrics.Endpoint("127.0.0.1", free_port(), metrics.registry(
        reporter_metrics.ReporterCollector(types.SimpleNamespace(counts={}),
                                  types.SimpleNamespace(connected=True))), broken).start()
    try:
        assert get(endpoint.address, "/healthz")[::2] == (503, "health check failed: boom\n")
    finally:
        endpoint.stop()


def test_a_busy_port_is_a_config_error_naming_the_option():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        applier = types.SimpleNamespace(counts={})
        with pytest.raises(ConfigError, match=r"\[metrics\] reporter_port: cannot listen on "
                                              rf"127.0.0.1:{port}"):
            reporter_metrics.serve_reporter(conf_with(reporter_port=port), applier,
                                   types.SimpleNamespace(connected=True))


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.0.1.1", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("::", False), ("10.0.0.5", False),
    ("metrics.example.org", False)])
def test_what_counts_as_loopback(host, loopback):
    assert metrics.is_loopback(host) is loopback


@pytest.mark.parametrize("host, warned", [("127.0.0.1", False), ("0.0.0.0", True)])
def test_an_endpoint_beyond_loopback_is_warned_about_once(host, warned, caplog):
    endpoint = metrics.Endpoint(host, free_port(), metrics.registry(
        reporter_metrics.ReporterCollector(types.SimpleNamespace(counts={}),
                                  types.SimpleNamespace(connected=True))), lambda: None)
    with caplog.at_level(logging.WARNING, logger=metrics.__name__):
        endpoint.start()
    endpoint.stop()
    lines = [r for r in caplog.records if "beyond loopback" in r.getMessage()]
    assert len(lines) == (1 if warned else 0)
    if warned:
        assert "[metrics] bind_host" in lines[0].getMessage()
