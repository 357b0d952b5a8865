"""The reporter: applies provider reports from the daemons to Placement, in order, fenced.

Owns the write path to Placement. Any number of ``computed-reporter`` replicas consume one RPC
topic (:mod:`computed.reporter.endpoint`); each call carries a batch of
:class:`computed.providers.report.Report` from one daemon, which :meth:`ReportApplier.apply`
answers with an outcome per report. For each report, in this order:

1. **Validate** it (:meth:`Report.from_dict`, :meth:`ProviderState.from_dict`): a malformed report
   is logged and answered ``invalid``, never retried, never fatal to the worker.
   A ``seq`` too far ahead of this reporter's clock is malformed too
   (:data:`computed.providers.report.MAX_SEQ_AHEAD_MS`).
2. **Fence** it: the live claim on the node must have that claim epoch (the claim znode's
   creation zxid) *and* name the report's ``host`` (the claim znode's data), both read from
   ZooKeeper by :class:`ClaimReader` in one pipelined round per batch. A report from a daemon
   that lost its claim (a partition, a long pause, a handover), one naming another host, and any
   report for a claim whose data cannot be parsed are answered ``fenced`` and not applied. This
   does not authenticate the sender: see docs/security.md.
3. **Order** it: in one database transaction that locks the provider's row, a report is applied
   only if its ``(claim_epoch, seq)`` is newer than the last one applied
   (:func:`computed.db.api.apply_report_if_newer`; duplicates and reordered reports answer
   ``stale``); the Placement write happens inside that transaction, so two replicas never apply
   two reports of one provider out of order.
4. **Apply** it through :class:`computed.placement.client.PlacementClient`. A provider is
   deleted only for a report that says its node is gone, and only when it has no allocations
   (``kept`` otherwise). Placement unreachable answers ``failed``: the sender keeps the report
   and retries. Every Placement request is bounded by ``[placement] timeout``, which bounds how
   long the provider's row stays locked; and once one request of a batch got no answer at all,
   the reports of the batch not yet started answer ``failed`` at once, so that a Placement that
   hangs costs a batch one timeout, not one per report, and the reporter answers the call before
   the daemon gives up on it. The row also records Placement's generation after the write,
   which the resync (:mod:`computed.reporter.resync`) compares with Placement's listing to find
   what someone else changed.
"""

from __future__ import annotations

import collections
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy.engine import Engine

from computed.db import api as db_api
from computed.fleet import claims
from computed.placement.client import DeleteOutcome, PlacementClient
from computed.placement.http import PlacementError, PlacementUnavailable
from computed.providers.report import MalformedReport, Outcome, Report
from computed.providers.state import InvalidProvider, ProviderState

LOG = logging.getLogger(__name__)


class ClaimReader:
    """The live claims (their epochs and hosts), read from ZooKeeper.

    Read-only: a reporter never claims. ``client`` is a started KazooClient, ``root`` the
    fleet's root path (:func:`computed.fleet.membership.fleet_root`).
    """

    def __init__(self, client: Any, root: str):
        self._client = client
        self._root = root

    def claim_holders(self, nodes: Iterable[str]) -> dict[str, tuple[int, str | None]]:
        """``{node: (claim epoch, host)}`` for each of ``nodes`` claimed now (host None: the
        claim's data cannot be parsed); unclaimed ones are left out. One pipelined round of
        reads. Raises what kazoo raises when ZooKeeper cannot be read."""
        return claims.claim_holders(self._client, self._root, nodes)


class ReportApplier:
    """Applies batches of reports; thread-safe; counts outcomes for logs and metrics.

    ``placement`` writes the providers, ``claims`` says which claims are live (the fence),
    ``engine`` is computed's database, where the last applied report of each provider orders
    the next; ``clock`` the wall clock (seconds) that bounds a report's ``seq``.
    """

    def __init__(self, placement: PlacementClient, claims: ClaimReader, engine: Engine,
                 workers: int = 4, clock: Callable[[], float] = time.time):
        self._placement = placement
        self._claims = claims
        self._engine = engine
        self._clock = clock
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="apply")
        self._lock = threading.Lock()
        self._stripes = [threading.Lock() for _ in range(64)]
        self.counts: collections.Counter[str] = collections.Counter()

    def apply(self, raw_reports: Any) -> list[list[Any]]:
        """Outcomes as ``[uuid, seq, outcome]`` triples, one per well-formed report."""
        if not isinstance(raw_reports, list):
            return self.drop(f"its 'reports' is a {type(raw_reports).__name__}, not a list")
        reports, answers = self._parse(raw_reports)
        try:
            holders = (self._claims.claim_holders([r.uuid for r, _ in reports])
                       if reports else {})
        except Exception as exc:  # ZooKeeper unreachable: cannot fence, so apply nothing
            LOG.warning("cannot read claims to fence %d report(s): %s", len(reports), exc)
            return answers + [[r.uuid, r.seq, self._count(Outcome.FAILED)] for r, _ in reports]
        current = []
        for report, state in reports:
            holder = holders.get(report.uuid)
            # A claim whose host is unreadable (None) matches no report: it fences everything.
            if holder is not None and holder == (report.claim_epoch, report.host):
                current.append((report, state))
                continue
            LOG.info("fenced: report %s seq %s from %s with claim epoch %s; the live claim is "
                     "%s", report.uuid, report.seq, report.host, report.claim_epoch,
                     "none" if holder is None else
                     f"claim epoch {holder[0]} held by {holder[1] or '(unreadable)'}")
            answers.append([report.uuid, report.seq, self._count(Outcome.FENCED)])
        # Set by the first report of this batch that Placement did not answer at all.
        unanswered = threading.Event()
        outcomes = self._pool.map(functools.partial(self._apply_one, unanswered=unanswered),
                                  current)
        for (report, _), outcome in zip(current, outcomes):
            answers.append([report.uuid, report.seq, self._count(outcome)])
        return answers

    def drop(self, reason: str) -> list[list[Any]]:
        """Refuse a whole message (logged with ``reason``, counted invalid); the empty answer."""
        LOG.error("dropping a message of reports: %s", reason)
        self._count(Outcome.INVALID)
        return []

    def _parse(self, raw_reports: list) -> tuple[list, list[list[Any]]]:
        reports, answers = [], []
        for raw in raw_reports:
            try:
                report = Report.from_dict(raw, clock=self._clock)
                state = None if report.state is None else ProviderState.from_dict(report.state)
            except (MalformedReport, InvalidProvider) as exc:
                LOG.error("dropping malformed report: %s", exc)
                if isinstance(raw, dict) and isinstance(raw.get("seq"), int):
                    answers.append([str(raw.get("uuid")), raw["seq"],
                                    self._count(Outcome.INVALID)])
                else:
                    self._count(Outcome.INVALID)
                continue
            reports.append((report, state))
        return reports, answers

    def _apply_one(self, item: tuple[Report, ProviderState | None],
                   unanswered: threading.Event) -> Outcome:
        # One report per provider at a time in this process: the database row lock would do it
        # too, but under eventlet a thread blocked in the database driver blocks the whole
        # process, including the green thread holding that lock.
        with self.provider_lock(item[0].uuid):
            if unanswered.is_set():  # (also while this waited for the provider's lock)
                return Outcome.FAILED  # Placement did not answer this batch: the sender resends
            outcome, no_answer = self._apply_locked(item)
        if no_answer:
            unanswered.set()
        return outcome

    def provider_lock(self, uuid: str) -> threading.Lock:
        """This process's lock of one provider: held while applying a report to it, and by the
        resync while repairing it."""
        return self._stripes[hash(uuid) % len(self._stripes)]

    def _apply_locked(self, item: tuple[Report, ProviderState | None]) -> tuple[Outcome, bool]:
        """The report's outcome, and whether Placement failed to answer at all."""
        report, state = item

        def write(row: db_api.ProviderRow | None) -> db_api.Applied:
            # Runs inside the ordering transaction, with the provider's row locked.
            if state is None:
                if self._placement.delete(report.uuid) is DeleteOutcome.KEPT:
                    raise _Kept()
                return db_api.Applied(None)
            # A provider never applied before is most likely not in Placement yet. What the row
            # says was applied last (by any replica) decides whether this replica's cache of
            # Placement may be trusted.
            self._placement.apply(state, assume_new=row is None,
                                  last_applied=_last_applied(row))
            # The generation the resync compares with Placement's listing
            # (computed.reporter.resync): a later change by someone else bumps it.
            return db_api.Applied(json.dumps(state.to_dict(), sort_keys=True),
                                  self._placement.generation(report.uuid))

        try:
            newer = db_api.apply_report_if_newer(self._engine, report.uuid, report.claim_epoch,
                                                 report.seq, report.host, write)
        except _Kept:
            LOG.warning("provider %s: node gone from Ironic but the provider has allocations; "
                        "kept", report.uuid)
            return Outcome.KEPT, False
        except PlacementUnavailable as exc:
            LOG.warning("provider %s: Placement unavailable, report will be resent: %s",
                        report.uuid, exc)
            return Outcome.FAILED, exc.status is None  # no HTTP status: no answer
        except PlacementError as exc:
            LOG.error("provider %s: Placement refused the report: %s", report.uuid, exc)
            return Outcome.FAILED, False
        except Exception:
            LOG.exception("provider %s: applying report seq %s failed", report.uuid, report.seq)
            return Outcome.FAILED, False
        return (Outcome.APPLIED if newer else Outcome.STALE), False

    def _count(self, outcome: Outcome) -> str:
        with self._lock:
            self.counts[outcome.value] += 1
        return outcome.value

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _last_applied(row: db_api.ProviderRow | None) -> ProviderState | None:
    """The state the row says was applied last; None when none was (or the last was a delete)."""
    if row is None or row.state is None:
        return None
    return ProviderState.from_dict(json.loads(row.state))


class _Kept(Exception):
    """Raised inside the ordering transaction to roll it back when a delete is refused."""
