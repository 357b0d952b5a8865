"""The reporter: applies provider reports from the daemons to Placement, in order, fenced.

Owns the write path to Placement. Any number of ``computed-reporter`` replicas consume one RPC
topic (:mod:`computed.reporter.endpoint`); each call carries a batch of
:class:`computed.providers.report.Report` from one daemon, which :meth:`ReportApplier.apply`
answers with an outcome per report. For each report, in this order:

1. **Validate** it (:meth:`Report.from_dict`, :meth:`ProviderState.from_dict`): a malformed report
   is logged and answered ``invalid``, never retried, never fatal to the worker. So is a report
   Placement itself fails with a 500 while it answers other requests
   (:class:`computed.placement.http.PlacementRequestFailed`, e.g. a name PostgreSQL cannot
   store): one log line naming the provider, counted ``invalid``, never taken for "Placement
   unavailable" and resent for ever.
   A ``seq`` too far ahead of this reporter's clock is malformed too
   (:data:`computed.providers.report.MAX_SEQ_AHEAD_MS`).
2. **Fence** it: the live claim on the node must have that claim epoch (the claim znode's
   creation zxid) *and* name the report's ``host`` (the claim znode's data), both read from
   ZooKeeper by :class:`ClaimReader` in one pipelined round per batch. A report from a daemon
   that lost its claim (a partition, a long pause, a handover), one naming another host, and any
   report for a claim whose data cannot be parsed are answered ``fenced`` and not applied. This
   does not authenticate the sender; ``[messaging] signing_keys`` does, before a call reaches
   this code (:mod:`computed.runtime.rpc`): see docs/security.md.
3. **Order** it: the batch's reports are applied in ONE database transaction
   (:func:`computed.db.providers.apply_reports_if_newer`) that locks their providers' rows in uuid
   order; a report is applied only if its ``(claim_epoch, seq)`` is newer than the last one
   applied to its provider (duplicates and reordered reports answer ``stale``; of several
   reports of one provider in a call only the newest is applied, the older answer ``stale``, or
   ``failed`` when the newest was not applied). The Placement writes happen inside that
   transaction, so two replicas never apply two reports of one provider out of order. A row
   another transaction holds (another replica applying that provider right now) is skipped,
   not waited for (a wait would keep this worker, and the batch's other rows locked, for as
   long as the other replica's Placement writes take): its report answers ``failed`` and is
   resent. This process also holds its own lock
   of each of the batch's providers (:class:`ProviderLocks`, shared with the resync).
4. **Apply** it through :class:`computed.placement.client.PlacementClient`. Providers never
   applied before are created first, with their traits (one request each, and one more for a
   provider with traits, in parallel over ``workers``), then their inventories are set many
   per request (``POST /reshaper``): a new provider becomes schedulable only once complete; a
   reshaper Placement refuses (a generation conflict, its policy, an old
   Placement) falls back to one provider at a time, and every other report is written alone, so
   each report's outcome is its own. A provider is deleted only for a report that says its node
   is gone, and only when it has no allocations (``kept`` otherwise). Placement unreachable
   answers ``failed``: the sender keeps the report and retries. Every Placement request is
   bounded by ``[placement] timeout``; once one request of a batch got no answer at all, the
   reports of the batch not yet written answer ``failed`` at once, so that a Placement that
   hangs costs a batch about one timeout (plus the requests already in flight), which bounds
   how long the batch's rows stay locked, and the reporter answers the call before the daemon
   gives up on it. If the transaction cannot commit, every report of the batch answers
   ``failed`` (Placement writes are idempotent: the resend finds them done). The row also
   records Placement's generation after the write, which the resync
   (:mod:`computed.reporter.resync`) compares with Placement's listing to find what someone
   else changed.

Threads: the RPC server's workers (oslo.messaging's threading executor) call
:meth:`ReportApplier.apply` for several batches at once; each batch fans its Placement requests
out to the applier's pool (``apply`` threads); the resync thread takes the same provider locks.
Shared, and guarded: the outcome counts (``collections.Counter``, every ``+=`` under the
applier's lock; the metrics endpoint's request threads copy it with ``dict()``, one C-level copy
under the GIL, so never a dict changing size while iterated), the providers held
(:class:`ProviderLocks`: a condition, a batch takes all its providers at once or waits, so two
batches or a batch and a repair never write one provider together), and the
:class:`~computed.placement.client.PlacementClient` (thread-safe on its own). Per batch, on the
calling worker only: the answers and the outcome of each report (the pool threads return
theirs; they share only the batch's ``unanswered`` Event). The ZooKeeper client the
:class:`ClaimReader` reads through is kazoo's, safe to share.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy.engine import Engine

from computed.conf.coordination import DEFAULT_SESSION_TIMEOUT
from computed.db import providers as db_providers
from computed.fleet import claims
from computed.placement.client import DeleteOutcome, PlacementClient
from computed.placement.http import PlacementError, PlacementRequestFailed, PlacementUnavailable
from computed.providers.report import MalformedReport, Outcome, Report
from computed.providers.state import InvalidProvider, ProviderState

LOG = logging.getLogger(__name__)


class ClaimReader:
    """The live claims (their epochs and hosts), read from ZooKeeper.

    Read-only: a reporter never claims. ``client`` is a started KazooClient, ``root`` the
    fleet's root path (:func:`computed.fleet.membership.fleet_root`).
    """

    def __init__(self, client: Any, root: str, timeout: float = DEFAULT_SESSION_TIMEOUT):
        self._client = client
        self._root = root
        self._timeout = timeout  # the session timeout: a round of reads waits no longer

    def claim_holders(self, nodes: Iterable[str]) -> dict[str, tuple[int, str | None]]:
        """``{node: (claim epoch, host)}`` for each of ``nodes`` claimed now (host None: the
        claim's data cannot be parsed); unclaimed ones are left out. One pipelined round of
        reads, answered within the session timeout. Raises what kazoo raises when ZooKeeper
        cannot be read (:class:`computed.fleet.zookeeper.NoAnswer` when it does not answer)."""
        return claims.claim_holders(self._client, self._root, nodes, self._timeout)


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
        self._locks = ProviderLocks()
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
        # Set by the first request of this batch that Placement did not answer at all.
        unanswered = threading.Event()
        # The newest report of each provider goes into the batch. An older one of the same
        # provider is stale once the newest is applied or stale; otherwise it failed too.
        newest = newest_per_provider([report for report, _ in current])
        decided = self._apply_batch([current[index] for index in sorted(newest.values())],
                                    unanswered)
        for index, (report, _) in enumerate(current):
            outcome = decided[report.uuid]
            if newest[report.uuid] != index:
                outcome = (Outcome.STALE if outcome in (Outcome.APPLIED, Outcome.STALE)
                           else Outcome.FAILED)
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

    def _apply_batch(self, batch: list[tuple[Report, ProviderState | None]],
                     unanswered: threading.Event) -> dict[str, Outcome]:
        """Outcomes of a batch of reports of distinct providers, applied in one database
        transaction (:func:`computed.db.providers.apply_reports_if_newer`). A report whose row
        another transaction holds (another replica applying the same provider) fails: waiting for
        that row would hold this worker and the batch's other rows; its sender resends it."""
        items = {report.uuid: (report, state) for report, state in batch}
        keys = [db_providers.ReportKey(report.uuid, report.claim_epoch, report.seq, report.host)
                for report, _ in batch]
        outcomes: dict[str, Outcome] = {}
        with self._locks.hold(items):
            try:
                result = db_providers.apply_reports_if_newer(
                    self._engine, keys, functools.partial(self._write_batch, items, outcomes,
                                                          unanswered))
            except Exception:
                LOG.exception("applying a batch of %d report(s) failed; none was recorded",
                              len(batch))
                # Written to Placement perhaps, but not recorded: the senders resend them.
                return {uuid: (outcomes.get(uuid) if outcomes.get(uuid) in _UNRECORDED
                               else Outcome.FAILED) for uuid in items}
        for uuid in result.stale:
            outcomes[uuid] = Outcome.STALE
        for uuid in result.applied:
            outcomes[uuid] = Outcome.APPLIED
        for uuid in result.busy:
            LOG.info("provider %s: another transaction holds its row (another replica applies "
                     "it); report seq %s failed, to be resent", uuid, items[uuid][0].seq)
            outcomes[uuid] = Outcome.FAILED
        return outcomes

    def _write_batch(self, items: dict[str, tuple[Report, ProviderState | None]],
                     outcomes: dict[str, Outcome], unanswered: threading.Event,
                     newer: list[tuple[db_providers.ReportKey, db_providers.ProviderRow | None]],
                     ) -> dict[str, db_providers.Applied]:
        """Runs inside the batch's transaction, every row of ``newer`` locked: writes them to
        Placement and says which were applied. Providers never applied are created first (in
        parallel, with their traits), then their inventories set many a request
        (``POST /reshaper``); what the reshaper did not set (it was refused) is written one
        provider at a time, as is every other report (:meth:`_write`). ``outcomes`` gets each
        report's."""
        fresh_keys, alone_keys = split_new(newer, {uuid: state for uuid, (_, state)
                                                   in items.items()})
        fresh = [items[key.uuid] for key in fresh_keys]
        alone = [(items[key.uuid], row) for key, row in alone_keys]
        created: list[ProviderState] = []
        made = self._pool.map(functools.partial(self._create, unanswered=unanswered), fresh)
        for (report, state), outcome in zip(fresh, made):
            if outcome is None:
                created.append(state)
            elif outcome is Outcome.STALE:  # exists already: apply it as any report
                alone.append(((report, state), None))
            else:
                outcomes[report.uuid] = outcome
        if created and not unanswered.is_set():
            try:
                self._placement.set_new_inventories(created)
            except PlacementError as exc:  # the reports below fail, or set them one by one
                LOG.warning("setting the inventories of %d new provider(s) at once failed: %s",
                            len(created), exc)
                if isinstance(exc, PlacementUnavailable) and exc.status is None:
                    unanswered.set()
        # What the reshaper did not set, one provider at a time (no request for the others:
        # the client remembers them complete).
        alone = [(items[state.uuid], None) for state in created] + alone
        applied: dict[str, db_providers.Applied] = {}
        written = self._pool.map(functools.partial(self._write_one, unanswered=unanswered),
                                 alone)
        for ((report, _), _), (outcome, result) in zip(alone, written):
            outcomes[report.uuid] = outcome
            if result is not None:
                applied[report.uuid] = result
        return applied

    def _create(self, item: tuple[Report, ProviderState], unanswered: threading.Event
                ) -> Outcome | None:
        """Create a never applied provider: None when created, STALE when it existed already,
        FAILED when Placement failed (no answer at all: ``unanswered`` set)."""
        report, state = item
        if unanswered.is_set():
            return Outcome.FAILED
        try:
            return None if self._placement.create(state) else Outcome.STALE
        except Exception as exc:
            outcome, no_answer = self._failure(report, exc)
            if no_answer:
                unanswered.set()
            return outcome

    def _write_one(self, item: tuple[tuple[Report, ProviderState | None],
                                     db_providers.ProviderRow | None],
                   unanswered: threading.Event) -> tuple[Outcome, db_providers.Applied | None]:
        (report, state), row = item
        if unanswered.is_set():
            return Outcome.FAILED, None
        try:
            return Outcome.APPLIED, self._write(report, state, row)
        except Exception as exc:
            outcome, no_answer = self._failure(report, exc)
            if no_answer:
                unanswered.set()
            return outcome, None

    def provider_lock(self, uuid: str) -> contextlib.AbstractContextManager:
        """This process's lock of one provider: held while applying a report to it, and by the
        resync while repairing it."""
        return self._locks.hold([uuid])

    def _write(self, report: Report, state: ProviderState | None,
               row: db_providers.ProviderRow | None) -> db_providers.Applied:
        """Write one report to Placement; runs inside the ordering transaction, with the
        provider's row locked. Raises :class:`_Kept` when a delete was refused."""
        if state is None:
            if self._placement.delete(report.uuid) is DeleteOutcome.KEPT:
                raise _Kept()
            return db_providers.Applied(None)
        # A provider never applied before is most likely not in Placement yet. What the row
        # says was applied last (by any replica) decides whether this replica's cache of
        # Placement may be trusted.
        self._placement.apply(state, assume_new=row is None, last_applied=_last_applied(row))
        # The generation the resync compares with Placement's listing
        # (computed.reporter.resync): a later change by someone else bumps it.
        return db_providers.Applied(json.dumps(state.to_dict(), sort_keys=True),
                                    self._placement.generation(report.uuid))

    def _failure(self, report: Report, exc: Exception) -> tuple[Outcome, bool]:
        """:func:`_failure`, counting the reports Placement itself fails
        (``counts[PLACEMENT_REFUSED]``)."""
        if isinstance(exc, PlacementRequestFailed):
            with self._lock:
                self.counts[PLACEMENT_REFUSED] += 1
        return _failure(report, exc)

    def _count(self, outcome: Outcome) -> str:
        with self._lock:
            self.counts[outcome.value] += 1
        return outcome.value

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def newest_per_provider(reports: list[Report]) -> dict[str, int]:
    """PURE: ``{uuid: index}`` of the newest report (by ``(claim_epoch, seq)``; the first of
    equals) of each provider in ``reports``."""
    newest: dict[str, int] = {}
    for index, report in enumerate(reports):
        best = newest.get(report.uuid)
        if best is None or (report.claim_epoch, report.seq) > (reports[best].claim_epoch,
                                                               reports[best].seq):
            newest[report.uuid] = index
    return newest


def split_new(newer: list[tuple[db_providers.ReportKey, db_providers.ProviderRow | None]],
              states: dict[str, ProviderState | None]
              ) -> tuple[list[db_providers.ReportKey],
                         list[tuple[db_providers.ReportKey, db_providers.ProviderRow | None]]]:
    """PURE: the reports to apply -> those of providers never applied that report a state
    (created, then their inventories set together) and the others (written one by one:
    providers applied before, deletes), each in the order given."""
    fresh = [key for key, row in newer if row is None and states[key.uuid] is not None]
    alone = [(key, row) for key, row in newer
             if not (row is None and states[key.uuid] is not None)]
    return fresh, alone


def _failure(report: Report, exc: Exception) -> tuple[Outcome, bool]:
    """The outcome of a report whose write raised ``exc`` (logged, naming the provider), and
    whether Placement failed to answer at all."""
    if isinstance(exc, _Kept):
        LOG.warning("provider %s: node gone from Ironic but the provider has allocations; "
                    "kept", report.uuid)
        return Outcome.KEPT, False
    if isinstance(exc, PlacementRequestFailed):
        LOG.error("provider %s: Placement fails report seq %s itself (HTTP 500 twice, while it "
                  "answers other requests); refused as invalid, not resent: %s",
                  report.uuid, report.seq, exc)
        return Outcome.INVALID, False
    if isinstance(exc, PlacementUnavailable):
        LOG.warning("provider %s: Placement unavailable, report will be resent: %s",
                    report.uuid, exc)
        return Outcome.FAILED, exc.status is None  # no HTTP status: no answer
    if isinstance(exc, PlacementError):
        LOG.error("provider %s: Placement refused the report: %s", report.uuid, exc)
        return Outcome.FAILED, False
    LOG.error("provider %s: applying report seq %s failed", report.uuid, report.seq,
              exc_info=exc)
    return Outcome.FAILED, False


#: The count of reports Placement itself failed (a 500 of their own), beside the outcomes'.
PLACEMENT_REFUSED = "placement_refused"

#: Outcomes of a batch that record nothing, and stay true when the batch's commit fails.
_UNRECORDED = (Outcome.KEPT, Outcome.FAILED, Outcome.INVALID)


class ProviderLocks:
    """This process's locks of providers by uuid: :meth:`hold` takes a whole set at once
    (waiting until none is held elsewhere), so batches never deadlock on each other."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held: set[str] = set()

    @contextlib.contextmanager
    def hold(self, uuids: Iterable[str]) -> Iterator[None]:
        wanted = set(uuids)
        with self._cond:
            self._cond.wait_for(lambda: self._held.isdisjoint(wanted))
            self._held |= wanted
        try:
            yield
        finally:
            with self._cond:
                self._held -= wanted
                self._cond.notify_all()


def _last_applied(row: db_providers.ProviderRow | None) -> ProviderState | None:
    """The state the row says was applied last; None when none was (or the last was a delete)."""
    if row is None or row.state is None:
        return None
    return ProviderState.from_dict(json.loads(row.state))


class _Kept(Exception):
    """Raised inside the ordering transaction to roll it back when a delete is refused."""
