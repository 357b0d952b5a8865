"""Prometheus metrics and the health check of a process, over one small HTTP server.

Owns how an operator or a load balancer reads a running process, whatever the process:

* ``GET /metrics``: Prometheus text exposition, from the collectors the process's domain gives
  (:class:`computed.daemon.metrics.DaemonCollector`,
  :class:`computed.reporter.metrics.ReporterCollector`), plus this process's CPU, memory and
  open files, its release, and the RPC messages its servers refused
  (:func:`computed.runtime.rpc.refused_counts`, by reason). Collectors read the running objects
  at scrape time, so the product modules keep no metrics state of their own and a scrape always
  sees the current value, never a copy that could drift.
* ``GET /healthz``: ``200 ok: ...`` when the process does its job, ``503 <reason>`` otherwise,
  as one line of text; what "its job" is comes with the collector (a :class:`Health` function).

This module knows no domain: it imports none of fleet, providers, reporter or daemon; each
domain's collector builds its families with :func:`gauge`, :func:`states` and
:func:`counter`. Guarantees: a scrape or health check never writes anything; a health check
that raises is a 503, not a dead server. The server binds ``[metrics] bind_host`` (127.0.0.1 by
default) and the process's port; port 0 disables it. A port that cannot be bound is a
configuration error, reported before the process joins anything. Threads: the server's thread
accepts, one thread per request reads the collectors (which must be safe to read from any
thread).
"""

from __future__ import annotations

import http.server
import ipaddress
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.process_collector import ProcessCollector

from computed.conf.errors import ConfigError
from computed.runtime import rpc, signing
from computed.version import VERSION

LOG = logging.getLogger(__name__)

PREFIX = "computed"


class Health(NamedTuple):
    ok: bool
    reason: str


def gauge(name: str, doc: str, value: float, **labels: str) -> GaugeMetricFamily:
    """One gauge ``computed_<name>``, with one sample (``labels``, if any, name it)."""
    family = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


def counter(name: str, doc: str, value: float | None = None,
            labels: list[str] | None = None) -> CounterMetricFamily:
    """A counter ``computed_<name>`` (exposed as ``computed_<name>_total``): one sample of
    ``value``, or none yet with ``labels`` (add them with ``add_metric``)."""
    return CounterMetricFamily(f"{PREFIX}_{name}", doc, value=value, labels=labels)


def states(name: str, doc: str, current: Any, every: Iterable[Any]) -> GaugeMetricFamily:
    """One series per state of an enum (``every``), 1 for ``current``: alerts can match on the
    label."""
    family = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=["state"])
    for state in every:
        family.add_metric([state.value], 1.0 if state is current else 0.0)
    return family


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


def _rpc_refused() -> CounterMetricFamily:
    """The messages this process's RPC servers refused before any endpoint saw them
    (:func:`computed.runtime.rpc.refused_counts`)."""
    counts = rpc.refused_counts()
    family = CounterMetricFamily(
        f"{PREFIX}_rpc_messages_refused", "RPC messages refused before dispatch, by reason: "
        "unsigned, forged (no [messaging] signing_keys gives that signature), expired, "
        "replayed, misdirected (signed for another receiver), malformed (a context no "
        "computed sender writes), unknown_method (or version). See docs/security.md.",
        labels=["reason"])
    for reason in signing.REASONS:
        family.add_metric([reason], float(counts.get(reason, 0)))
    return family


class _RpcRefusedCollector:
    # Process-wide, as the counts are: the daemon's instance casts, the reporter's report calls.
    def collect(self) -> Iterable[CounterMetricFamily]:
        yield _rpc_refused()
        yield CounterMetricFamily(
            f"{PREFIX}_rpc_messages_unsigned_accepted", "RPC messages without a signature "
            "accepted because [messaging] accept_unsigned is set (turning signing on or off): "
            "once it no longer grows on any process, every sender signs.",
            value=float(rpc.unsigned_accepted_count()))


class _BuildInfoCollector:
    # Every process says its release, so a dashboard shows a fleet mid-upgrade (Prometheus'
    # <name>_build_info convention: value 1, the facts in labels).
    def collect(self) -> Iterable[GaugeMetricFamily]:
        yield gauge("build_info", "The release of computed this process runs (value 1).", 1.0,
                    version=VERSION)


def registry(collector: Any) -> CollectorRegistry:
    """A registry of ``collector``, the RPC refusals and this process's CPU, memory and open
    files."""
    result = CollectorRegistry(auto_describe=False)  # no collect() at registration
    result.register(collector)
    result.register(_BuildInfoCollector())
    result.register(_RpcRefusedCollector())
    ProcessCollector(registry=result)
    return result


def serve(host: str, port: int, collector: Any, health: Callable[[], Health],
          option: str) -> Endpoint:
    """Start an endpoint for ``collector`` and ``health`` on ``host:port`` (a no-op object when
    ``port`` is 0); a port that cannot be bound is a ConfigError naming ``[metrics] option``."""
    return Endpoint(host, port, registry(collector), health).start(option)
