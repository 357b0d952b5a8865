"""The reporter's metrics and health: what a ``computed-reporter`` shows at scrape time.

Owns what ``/metrics`` and ``/healthz`` of a reporter say (served by
:mod:`computed.runtime.metrics`): reports handled by outcome
(:class:`computed.reporter.applier.ReportApplier`'s counts) and the resync's rounds, drift and
repairs (:class:`computed.reporter.resync.Resync`'s counts). A reporter is healthy while it
serves and its ZooKeeper client is connected (it checks every report's claim there).

Guarantees: nothing here writes or does I/O; counts are copied before they are read, as the
applier's workers and the resync thread update them meanwhile. Threads: the metrics endpoint's
request threads.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from oslo_config import cfg
from prometheus_client.core import Metric

from computed.providers.report import Outcome
from computed.reporter.applier import PLACEMENT_REFUSED
from computed.reporter.resync import Drift
from computed.reporter.resync import Outcome as RepairOutcome
from computed.runtime import metrics
from computed.runtime.metrics import Health, counter, gauge


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
        yield gauge("reporter_up", "1 while /healthz answers 200.",
                    1.0 if reporter_health(self._zookeeper, self._server).ok else 0.0)
        counts = dict(self._applier.counts)  # a copy: workers update it while we read
        family = counter("reporter_reports", "Reports handled, by outcome: applied, stale "
                         "(duplicate or reordered), fenced (sender no longer owns the node), "
                         "kept (delete refused: allocations), failed (Placement or database "
                         "error; resent), invalid.", labels=["outcome"])
        for outcome in Outcome:
            family.add_metric([outcome.value], float(counts.get(outcome.value, 0)))
        yield family
        yield counter("reporter_placement_refused_reports", "Reports Placement itself failed: "
                      "HTTP 500 to the report's request twice while it answered a probe (e.g. "
                      "a name its database cannot store); answered invalid, not resent. Also "
                      "counted in reporter_reports{outcome=\"invalid\"}.",
                      value=float(counts.get(PLACEMENT_REFUSED, 0)))
        if self._resync is not None:
            yield from self._resync_metrics(dict(self._resync.counts))

    @staticmethod
    def _resync_metrics(counts: dict[str, int]) -> Iterator[Metric]:
        rounds = counter("reporter_resync_rounds", "Resync rounds of this reporter, by result: "
                         "done, skipped (another replica had the turn, or resynced within the "
                         "interval), failed (Placement, database or ZooKeeper error).",
                         labels=["result"])
        for result in ("done", "skipped", "failed"):
            rounds.add_metric([result], float(counts.get(f"rounds_{result}", 0)))
        yield rounds
        yield counter("reporter_resync_providers_checked", "Providers compared with "
                      "Placement's listing by this reporter's resync rounds.",
                      value=float(counts.get("checked", 0)))
        drift = counter("reporter_resync_drift", "Drift found by the resync, by kind: missing "
                        "(not in Placement), changed (generation moved: written by someone else), "
                        "unrecorded (no generation recorded yet).", labels=["kind"])
        for kind in Drift:
            drift.add_metric([kind.value], float(counts.get(f"drift_{kind.value}", 0)))
        yield drift
        repairs = counter("reporter_resync_repairs", "Providers the resync handled, by outcome: "
                          "repaired (Placement written back), verified (already right; "
                          "generation recorded), moved (a report came first), fenced (claim "
                          "epoch no longer live), failed.", labels=["outcome"])
        for outcome in RepairOutcome:
            repairs.add_metric([outcome.value], float(counts.get(outcome.value, 0)))
        yield repairs
        yield counter("reporter_resync_placement_requests", "Placement requests made by "
                      "the resync (one listing per round, plus the repairs).",
                      value=float(counts.get("requests", 0)))


def serve_reporter(conf: cfg.ConfigOpts, applier: Any, zookeeper: Any,
                   resync: Any = None, server: Any = None) -> metrics.Endpoint:
    """Start the reporter's endpoint on ``[metrics] reporter_port`` (no-op when it is 0)."""
    return metrics.serve(conf.metrics.bind_host, conf.metrics.reporter_port,
                         ReporterCollector(applier, zookeeper, resync, server),
                         lambda: reporter_health(zookeeper, server), "reporter_port")
