"""Prometheus metrics and the health check of a daemon or a reporter, over one small HTTP server.

Owns what an operator or a load balancer can read from a running process:

* ``GET /metrics``: Prometheus text exposition. The numbers are read from the running objects
  (:class:`computed.daemon.service.ComputeService` and the parts it runs,
  :class:`computed.reporter.applier.ReportApplier`) at scrape time by custom collectors, so the
  product modules keep no metrics state of their own and a scrape always sees the current value,
  never a copy that could drift.
* ``GET /healthz``: ``200 ok: ...`` when the process does its job, ``503 <reason>`` otherwise, as
  one line of text. A daemon is healthy when its ZooKeeper session is connected, it is an active
  member of the fleet (not joining, suspended or draining) and it has a node list from Ironic (a
  stale list is still healthy: the last-good rule keeps it in force). A reporter is healthy while
  it serves and its ZooKeeper client is connected (it checks every report's claim there).

Guarantees: a scrape or health check never writes anything; the health check never does I/O
(only the member count of ``/metrics`` reads ZooKeeper, and only while the session is
connected); a failing read leaves its metric out rather than failing the scrape. The server binds
``[metrics] bind_host`` (127.0.0.1 by default) and the process's port; port 0 disables it. A
port that cannot be bound is a configuration error, reported before the process joins anything.
"""

from __future__ import annotations

import http.server
import ipaddress
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from oslo_config import cfg
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector

from computed.conf.errors import ConfigError
from computed.fleet.fence import SessionState
from computed.fleet.reconciler import FleetState
from computed.providers.report import Outcome
from computed.reporter.resync import Drift
from computed.reporter.resync import Outcome as RepairOutcome

if TYPE_CHECKING:  # only for hints: the daemon's modules need not load in a reporter
    from computed.daemon.service import ComputeService

LOG = logging.getLogger(__name__)

PREFIX = "computed"


class Health(NamedTuple):
    ok: bool
    reason: str


# --- the daemon ------------------------------------------------------------------------------


def daemon_health(service: ComputeService) -> Health:
    """Whether a :class:`ComputeService` does its job now, and why not (no I/O)."""
    if service.stopped:
        return Health(False, "stopped")
    if service.stopping:
        # From the signal on, not from the fleet thread's next pass: a load balancer takes the
        # daemon out before its drain has begun.
        return Health(False, "stopping: draining, then leaving")
    session = service.fence.state
    if session is not SessionState.CONNECTED:
        return Health(False, f"zookeeper session {session.value}")
    state = service.fleet.state
    if state is not FleetState.ACTIVE:
        return Health(False, f"fleet state {state.value}")
    view = service.catalog.view()
    if view is None:
        return Health(False, "no node list from Ironic yet")
    stale = f", Ironic unreachable for {view.failures} listing(s)" if view.stale else ""
    return Health(True, f"ok: {len(service.fleet.claims.held())} nodes owned of "
                        f"{len(view)} listed{stale}")


def describe(service: ComputeService) -> str:
    """One line for ``systemctl status``: fleet state, session, nodes, reports."""
    view = service.catalog.view()
    listed = "no node list yet" if view is None else f"{len(view)} listed"
    text = (f"{service.fleet.state.value}, session {service.fence.state.value}; "
            f"{len(service.fleet.claims.held())} nodes owned, {listed}")
    return text + f"; {service.outbox.pending()} reports pending"


def _gauge(name: str, doc: str, value: float, **labels: str) -> GaugeMetricFamily:
    family = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


def _states(name: str, doc: str, current: Any, states: Any) -> GaugeMetricFamily:
    # One series per state, 1 for the current one: alerts can match on the label.
    family = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=["state"])
    for state in states:
        family.add_metric([state.value], 1.0 if state is current else 0.0)
    return family


class DaemonCollector:
    """Reads a :class:`ComputeService` at scrape time."""

    def __init__(self, service: ComputeService, clock: Callable[[], float] = time.monotonic):
        self._service = service
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        service = self._service
        fleet, fence = service.fleet, service.fence
        yield _gauge("up", "1 while /healthz answers 200 (see its reason otherwise).",
                     1.0 if daemon_health(service).ok else 0.0)
        yield _states("fleet_state", "This daemon's state in the fleet.", fleet.state,
                      FleetState)
        yield _states("zookeeper_session_state", "The fence's view of the ZooKeeper session.",
                      fence.state, SessionState)
        yield _gauge("lease_remaining_seconds", "Seconds the fence may still act without a "
                     "ZooKeeper round trip (0: acting on nothing).", fence.lease_remaining())
        yield _gauge("zookeeper_session_timeout_seconds", "The session timeout ZooKeeper "
                     "granted (it clamps the one backend_url asks for); the lease is 2/3 of it.",
                     fence.session_timeout)
        yield _gauge("member_epoch", "Epoch of this daemon's fleet membership (new on every "
                     "join).", float(service.membership.member_epoch))
        yield from self._members()
        yield _gauge("nodes_owned", "Nodes this daemon holds a claim on.",
                     float(len(fleet.claims.held())))
        yield from self._claim_events()
        yield CounterMetricFamily(f"{PREFIX}_fleet_passes", "Reconcile passes of the fleet "
                                  "thread.", value=float(fleet.passes))
        yield from self._ironic()
        yield from self._reports()
        yield from self._events()
        yield from self._sync()
        yield from self._hosting()

    def _members(self) -> Iterator[Metric]:
        # The only read that leaves the process: skip it when the session is in doubt, so a
        # scrape never waits on a ZooKeeper that is away.
        if self._service.fence.state is not SessionState.CONNECTED:
            return
        try:
            members = self._service.membership.members()
        except Exception as exc:
            LOG.debug("metrics: cannot read the fleet's members: %s", exc)
            return
        yield _gauge("fleet_members", "Live members of the fleet, this daemon included.",
                     float(len(members)))
        yield _gauge("fleet_members_draining", "Members of the fleet marked draining.",
                     float(sum(1 for m in members if m.draining)))
        yield _gauge("fleet_group_entries_ignored", "Children of the fleet's group that are "
                     "not live daemons (e.g. a persistent znode planted there): never on the "
                     "ring; 'computed-manage fleet status' names them.",
                     float(len(self._service.membership.ignored())))

    def _claim_events(self) -> Iterator[Metric]:
        family = CounterMetricFamily(f"{PREFIX}_claim_events", "Claims this process made and "
                                     "released (handovers and drains; claims dropped with a "
                                     "lost session are not counted).", labels=["event"])
        family.add_metric(["claim"], float(self._service.fleet.claimed))
        family.add_metric(["release"], float(self._service.fleet.released))
        yield family

    def _ironic(self) -> Iterator[Metric]:
        view = self._service.catalog.view()
        if view is None:
            yield _gauge("ironic_nodes_listed", "Nodes in the last good list from Ironic.", 0.0)
            return
        yield _gauge("ironic_nodes_listed", "Nodes in the last good list from Ironic.",
                     float(len(view)))
        yield _gauge("ironic_list_age_seconds", "Seconds since the node list in force was "
                     "read from Ironic.", view.age(self._clock()))
        yield _gauge("ironic_list_stale", "1 when the last listing failed and the last good "
                     "list is kept.", 1.0 if view.stale else 0.0)
        yield _gauge("ironic_list_failures", "Listings from Ironic failed in a row.",
                     float(view.failures))

    def _reports(self) -> Iterator[Metric]:
        outbox = self._service.outbox
        yield CounterMetricFamily(f"{PREFIX}_reports_sent", "Provider reports sent to the "
                                  "reporters (a report sent again counts again).",
                                  value=float(outbox.sent))
        yield _gauge("reports_pending", "Provider reports waiting to be sent or confirmed.",
                     float(outbox.pending()))
        yield _gauge("report_send_failures", "Batches of reports that failed in a row "
                     "(broker or reporters away); 0 after a success.", float(outbox.failures))

    def _sync(self) -> Iterator[Metric]:
        sync = self._service.sync
        yield _gauge("nodes_sync_failing", "Claimed nodes whose provider state cannot be "
                     "reported (the log names each); retried every pass.", float(len(sync.failing)))
        yield CounterMetricFamily(f"{PREFIX}_node_sync_failures", "Attempts to sync a node that "
                                  "failed (a node that cannot become a provider).",
                                  value=float(sync.failures))

    def _hosting(self) -> Iterator[Metric]:
        hosting = self._service.hosting
        yield _gauge("instances_readopt_pending", "1 while this host's instances are not yet "
                     "under its current member epoch (a re-adoption at join failed and is being "
                     "retried); nothing of this host is resumed meanwhile.",
                     1.0 if hosting.readopt_pending else 0.0)
        yield CounterMetricFamily(f"{PREFIX}_instances_readopt_failures", "Re-adoptions of this "
                                  "host's instances at a join that failed (the database; "
                                  "retried with backoff, the log names the cause).",
                                  value=float(hosting.readopt_failures))

    def _events(self) -> Iterator[Metric]:
        last = self._service.sync.last_event_at
        if last is not None:
            yield _gauge("ironic_last_event_age_seconds", "Seconds since the last Ironic "
                         "notification arrived.", self._clock() - last)


# --- the reporter ----------------------------------------------------------------------------


def reporter_health(zookeeper: Any, server: Any = None) -> Health:
    """A reporter is healthy while its server (a :class:`computed.runtime.rpc.Serving`, when
    given) serves and its ZooKeeper client is connected."""
    if server is not None and not server.started:
        return Health(False, "waiting for the message bus: not serving yet")
    if not zookeeper.connected:
        return Health(False, "zookeeper not connected: reports cannot be checked against claims")
    return Health(True, "ok: serving")


class ReporterCollector:
    """Reads a :class:`ReportApplier`, the reporter's ZooKeeper client and (when given) its
    :class:`~computed.reporter.resync.Resync` at scrape time."""

    def __init__(self, applier: Any, zookeeper: Any, resync: Any = None, server: Any = None):
        self._applier = applier
        self._zookeeper = zookeeper
        self._resync = resync
        self._server = server

    def collect(self) -> Iterator[Metric]:
        yield _gauge("reporter_up", "1 while /healthz answers 200.",
                     1.0 if reporter_health(self._zookeeper, self._server).ok else 0.0)
        counts = dict(self._applier.counts)  # a copy: workers update it while we read
        family = CounterMetricFamily(
            f"{PREFIX}_reporter_reports", "Reports handled, by outcome: applied, stale "
            "(duplicate or reordered), fenced (sender no longer owns the node), kept (delete "
            "refused: allocations), failed (Placement or database error; resent), invalid.",
            labels=["outcome"])
        for outcome in Outcome:
            family.add_metric([outcome.value], float(counts.get(outcome.value, 0)))
        yield family
        if self._resync is not None:
            yield from self._resync_metrics(dict(self._resync.counts))

    @staticmethod
    def _resync_metrics(counts: dict[str, int]) -> Iterator[Metric]:
        rounds = CounterMetricFamily(
            f"{PREFIX}_reporter_resync_rounds", "Resync rounds of this reporter, by result: "
            "done, skipped (another replica had the turn, or resynced within the interval), "
            "failed (Placement, database or ZooKeeper error).", labels=["result"])
        for result in ("done", "skipped", "failed"):
            rounds.add_metric([result], float(counts.get(f"rounds_{result}", 0)))
        yield rounds
        yield CounterMetricFamily(
            f"{PREFIX}_reporter_resync_providers_checked", "Providers compared with "
            "Placement's listing by this reporter's resync rounds.",
            value=float(counts.get("checked", 0)))
        drift = CounterMetricFamily(
            f"{PREFIX}_reporter_resync_drift", "Drift found by the resync, by kind: missing "
            "(not in Placement), changed (generation moved: written by someone else), "
            "unrecorded (no generation recorded yet).", labels=["kind"])
        for kind in Drift:
            drift.add_metric([kind.value], float(counts.get(f"drift_{kind.value}", 0)))
        yield drift
        repairs = CounterMetricFamily(
            f"{PREFIX}_reporter_resync_repairs", "Providers the resync handled, by outcome: "
            "repaired (Placement written back), verified (already right; generation "
            "recorded), moved (a report came first), fenced (claim epoch no longer live), "
            "failed.", labels=["outcome"])
        for outcome in RepairOutcome:
            repairs.add_metric([outcome.value], float(counts.get(outcome.value, 0)))
        yield repairs
        yield CounterMetricFamily(
            f"{PREFIX}_reporter_resync_placement_requests", "Placement requests made by "
            "the resync (one listing per round, plus the repairs).",
            value=float(counts.get("requests", 0)))


# --- the HTTP endpoint -----------------------------------------------------------------------


class Endpoint:
    """``/metrics`` and ``/healthz`` on ``host:port`` in a thread; port 0: disabled, no-ops."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry,
                 health: Callable[[], Health]):
        self.host, self.port = host, port
        self._registry = registry
        self._health = health
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.port != 0

    @property
    def address(self) -> tuple[str, int] | None:
        return None if self._server is None else self._server.server_address[:2]

    def start(self, option: str = "port") -> Endpoint:
        if not self.enabled:
            return self
        try:
            self._server = http.server.ThreadingHTTPServer((self.host, self.port),
                                                           self._handler())
        except OSError as exc:
            raise ConfigError("metrics", option,
                              f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}"
                              ) from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics",
                                        daemon=True)
        self._thread.start()
        LOG.info("metrics and health on http://%s:%d/metrics and /healthz",
                 self.host, self.address[1])
        if not is_loopback(self.host):
            LOG.warning("the metrics endpoint listens on %s, beyond loopback, without "
                        "authentication: anyone who can reach it reads the fleet's state "
                        "([metrics] bind_host)", self.host)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        registry, health = self._registry, self._health

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._answer(200, CONTENT_TYPE_LATEST, generate_latest(registry))
                elif path == "/healthz":
                    try:
                        result = health()
                    except Exception as exc:  # a broken check is unhealthy, not a dead server
                        result = Health(False, f"health check failed: {exc}")
                    self._answer(200 if result.ok else 503, "text/plain; charset=utf-8",
                                 (result.reason + "\n").encode())
                else:
                    self._answer(404, "text/plain; charset=utf-8", b"try /metrics or /healthz\n")

            def _answer(self, code: int, content_type: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                # Scrapes every few seconds would drown the daemon's log.
                LOG.debug("metrics: %s %s", self.address_string(), format % args)

        return Handler


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (pure: a name other than localhost
    counts as beyond loopback, as it may resolve anywhere)."""
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _registry(collector: Any) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)  # no collect() at registration
    registry.register(collector)
    ProcessCollector(registry=registry)  # CPU, memory, open files of this process
    return registry


def serve_daemon(conf: cfg.ConfigOpts, service: ComputeService) -> Endpoint:
    """Start the daemon's endpoint on ``[metrics] port`` (a no-op object when it is 0)."""
    return Endpoint(conf.metrics.bind_host, conf.metrics.port,
                    _registry(DaemonCollector(service)),
                    lambda: daemon_health(service)).start("port")


def serve_reporter(conf: cfg.ConfigOpts, applier: Any, zookeeper: Any,
                   resync: Any = None, server: Any = None) -> Endpoint:
    """Start the reporter's endpoint on ``[metrics] reporter_port`` (no-op when it is 0)."""
    return Endpoint(conf.metrics.bind_host, conf.metrics.reporter_port,
                    _registry(ReporterCollector(applier, zookeeper, resync, server)),
                    lambda: reporter_health(zookeeper, server)).start("reporter_port")
