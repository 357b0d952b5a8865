"""The daemon's outbox: the provider states still to report, sent to the reporters over RPC.

Owns the rules that make reporting lossless and quiet:

* The :class:`Outbox` keeps, per provider, the latest state to report and the state the reporters
  confirmed. :meth:`Outbox.offer` queues a state only when it differs from both, so a sync pass
  over nodes that did not change sends nothing.
* Before a report goes out, the :class:`Gate` (the daemon's claims and fence) decides per report:
  send it, hold it (the claim is still ours but the fence is closed for now, e.g. while ZooKeeper
  reconnects) or drop it (the claim went away or changed claim epoch: the node's next owner
  reports it). See :class:`Verdict`.
* A batch whose call fails (broker or reporter down, timeout, a reporter too old for this API
  version) stays queued and is sent again with backoff (:meth:`Outbox.run`); a newer state for
  the same provider replaces an unsent older one (only the latest matters). A report answered
  ``failed``, or not answered at all, stays queued too. Until it settles, the provider's
  confirmed state is unknown (the report may have reached Placement), so any offer for it is
  sent.
* Only ``applied``, ``stale`` and ``invalid`` settle a report. ``fenced`` and ``kept`` are not
  final: a report fenced because the reporter's view of ZooKeeper lagged behind the claim is sent
  again after :data:`FENCED_RETRY` seconds (if the claim really went away, the gate drops it
  then), and a delete kept because the provider has allocations is sent again every
  :data:`KEPT_RETRY` seconds (doubling up to :data:`MAX_KEPT_RETRY`) until the allocations are
  gone and it applies. A report waiting for its retry time does not hold up the others.

:class:`RpcSender` is the only place outcomes are strings: it sends a batch with an
``apply_reports`` call at :data:`computed.providers.report.API_VERSION` and turns the answers into
:class:`Outcome` values.

Threads: the node thread offers (through :meth:`computed.fleet.reconciler.Fleet.act`) and
forgets; the report thread alone runs :meth:`Outbox.run` and :meth:`Outbox.send_batch`; the
metrics endpoint's request threads and the systemd status loop read :meth:`Outbox.pending` and
the counters. The pending, in-flight and confirmed reports are read and changed under the
outbox's lock only, and sequence numbers are drawn under it; the call to the reporters and the
gate's verdicts (the claim table and the fence, locked on their side) run outside it, so an offer
never waits for the bus. A batch's reports count as in flight from the moment they are taken,
not from the send: an offer of the confirmed state made while the gate is asked is queued, not
taken as already in Placement (the report about to go out changes it; under eventlet nothing
could come between the two). A report answered while its provider was offered anew or
forgotten meets that change under the lock: a newer offer stays queued (entries are compared by
identity), a forgotten provider keeps no pending entry (its confirmed state may come back, keyed
by its old claim epoch, which no later claim matches). :attr:`Outbox.failures`,
:attr:`Outbox.sent` and :attr:`Outbox.last_failed` have one writer, the report thread (its
``+=`` is not shared); readers read one int.
"""

from __future__ import annotations

import enum
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import tenacity

from computed.providers.report import API_VERSION, Outcome, Report
from computed.providers.state import ProviderState
from computed.runtime.retry import Backoff
from computed.upgrade import levels

LOG = logging.getLogger(__name__)

# Longest wait, in seconds, between two attempts to send while the reporters are away.
MAX_BACKOFF = 30.0

# Outcomes after which the outbox stops sending that report; of those, the ones after which
# Placement holds the reported state (a stale report means a newer one of ours was applied).
SETTLED = frozenset({Outcome.APPLIED, Outcome.STALE, Outcome.INVALID})
CONFIRMED = frozenset({Outcome.APPLIED, Outcome.STALE})
# Seconds before a report answered "fenced" is sent again: a reporter reads the claim's epoch
# from its own ZooKeeper session, which may lag the claimant's by a moment.
FENCED_RETRY = 2.0
# Seconds before a delete answered "kept" (the provider has allocations) is sent again, doubling
# with every "kept" up to MAX_KEPT_RETRY.
KEPT_RETRY = 30.0
MAX_KEPT_RETRY = 300.0

Outcomes = Mapping[tuple[str, int], Outcome]  # (uuid, seq) -> outcome


class Verdict(enum.Enum):
    """What the outbox does with a queued report now."""

    SEND = "send"
    HOLD = "hold"  # keep it queued, ask again at the next batch
    DROP = "drop"  # forget it: this daemon no longer reports that provider with that claim epoch


class Gate(Protocol):
    def verdict(self, uuid: str, claim_epoch: int) -> Verdict:
        """Whether a report of ``uuid`` under ``claim_epoch`` may go out now."""


class Sender(Protocol):
    def send(self, batch: list[Report]) -> Outcomes:
        """Deliver ``batch``; the outcome of each report answered. Raises if the call failed."""


class RpcSender:
    """Sends a batch of reports to the reporters with one RPC call (``apply_reports``)."""

    def __init__(self, client: Any, version: Callable[[], str] | None = None):
        # Ask for the API version [upgrade_levels] reports allows (``version``, see
        # computed.upgrade.records.Levels; None: this code's): a reporter too old for it refuses
        # the call (UnsupportedVersion) and the outbox retries, instead of it dropping the
        # reports as invalid; below 1.1 the reports are written as that version names fields.
        self._client = client
        self._version = version or (lambda: API_VERSION)
        self._prepared: dict[str, Any] = {}  # version -> client; the report thread's alone

    def send(self, batch: list[Report]) -> Outcomes:
        version = self._version()
        client = self._prepared.get(version)
        if client is None:
            client = self._prepared[version] = self._client.prepare(version=version,
                                                                    version_cap=version)
        answers = client.call({}, "apply_reports",
                              reports=[levels.report_fields(version, r.to_dict()) for r in batch])
        outcomes = {}
        for answer in answers or ():
            try:
                uuid, seq, outcome = answer
                outcomes[(str(uuid), int(seq))] = Outcome(outcome)
            except (TypeError, ValueError):  # unanswered reports stay queued as failed
                LOG.warning("ignoring a malformed answer from a reporter: %r", answer)
        return outcomes


@dataclass(frozen=True)
class _Entry:
    claim_epoch: int
    state: ProviderState | None
    seq: int
    not_before: float = 0.0  # monotonic time before which it is not sent again
    kept: int = 0  # times it was answered "kept" in a row


class Outbox:
    """What this daemon still has to report, and what the reporters confirmed."""

    def __init__(self, host: str, sender: Sender, gate: Gate, batch_size: int,
                 max_backoff: float = MAX_BACKOFF, clock: Callable[[], float] = time.monotonic):
        self.host = host
        self._clock = clock
        self._sender = sender
        self._gate = gate
        self._batch_size = batch_size
        self._max_backoff = max_backoff
        self._lock = threading.Lock()
        self._pending: dict[str, _Entry] = {}
        # Providers with a report on the wire: until it settles, "confirmed" may not be what
        # Placement will hold, so an offer equal to it must still be sent.
        self._inflight: set[str] = set()
        self._confirmed: dict[str, tuple[int, ProviderState | None]] = {}
        self._seq = itertools.count(int(time.time() * 1000))
        self._wake = threading.Event()
        self.failures = 0  # calls failed in a row (read by computed.daemon.metrics)
        self.sent = 0
        self.last_failed = 0  # reports of the last batch answered "failed"

    def offer(self, uuid: str, claim_epoch: int, state: ProviderState | None) -> bool:
        """Queue ``state`` (None: the node is gone) for ``uuid`` unless it is already confirmed or
        queued under ``claim_epoch``; True if queued."""
        with self._lock:
            if uuid not in self._inflight and self._confirmed.get(uuid) == (claim_epoch, state):
                self._pending.pop(uuid, None)
                return False
            entry = self._pending.get(uuid)
            if entry is not None and (entry.claim_epoch, entry.state) == (claim_epoch, state):
                return False
            self._pending[uuid] = _Entry(claim_epoch, state, next(self._seq))
        self._wake.set()
        return True

    def forget(self, uuids: Iterable[str]) -> None:
        """Stop reporting ``uuids`` (their claims were released)."""
        with self._lock:
            for uuid in uuids:
                self._pending.pop(uuid, None)
                self._confirmed.pop(uuid, None)

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def confirmed(self, uuid: str) -> tuple[int, ProviderState | None] | None:
        """The (claim epoch, state) the reporters last confirmed for ``uuid``."""
        with self._lock:
            return self._confirmed.get(uuid)

    def send_batch(self) -> int:
        """Send up to one batch; returns how many reports went out (raises if the call failed)."""
        now = self._clock()
        with self._lock:
            due = ((uuid, entry) for uuid, entry in self._pending.items()
                   if entry.not_before <= now)
            taken = list(itertools.islice(due, self._batch_size))
            # In flight from the snapshot on, not from the send: an offer of the confirmed state
            # made while the gate is asked must be queued (see offer), or the snapshot's other
            # state would reach Placement after it and nothing would send it again.
            self._inflight.update(uuid for uuid, _ in taken)
        try:
            queued = [(uuid, entry) for uuid, entry in taken if self._may_send(uuid, entry)]
        except BaseException:
            with self._lock:
                self._inflight.difference_update(uuid for uuid, _ in taken)
            raise
        going = {uuid for uuid, _ in queued}
        with self._lock:  # held back or dropped: not on the wire after all
            self._inflight.difference_update(uuid for uuid, _ in taken if uuid not in going)
        if not queued:
            return 0
        try:
            outcomes = self._sender.send([self._report(uuid, entry) for uuid, entry in queued])
        except BaseException:
            with self._lock:
                for uuid, _ in queued:
                    self._inflight.discard(uuid)
                    self._unconfirm(uuid)
            raise
        self._settle(queued, outcomes)
        self.sent += len(queued)
        return len(queued)

    def _report(self, uuid: str, entry: _Entry) -> Report:
        state = None if entry.state is None else entry.state.to_dict()
        return Report(uuid, entry.claim_epoch, entry.seq, self.host, state)

    def _may_send(self, uuid: str, entry: _Entry) -> bool:
        verdict = self._gate.verdict(uuid, entry.claim_epoch)
        if verdict is Verdict.DROP:
            with self._lock:
                if self._pending.get(uuid) is entry:  # not replaced by a newer offer meanwhile
                    del self._pending[uuid]
        return verdict is Verdict.SEND

    def _settle(self, sent: list[tuple[str, _Entry]], outcomes: Outcomes) -> None:
        failed = 0
        with self._lock:
            self._inflight.difference_update(uuid for uuid, _ in sent)
            for uuid, entry in sent:
                outcome = outcomes.get((uuid, entry.seq), Outcome.FAILED)
                if outcome in (Outcome.FENCED, Outcome.KEPT):
                    self._retry_later(uuid, entry, outcome)
                    continue
                if outcome not in SETTLED:
                    failed += 1
                    self._unconfirm(uuid)
                    continue  # stays queued for the next attempt
                if outcome in CONFIRMED:
                    self._confirmed[uuid] = (entry.claim_epoch, entry.state)
                elif outcome is Outcome.INVALID:
                    LOG.error("reporter refused report %s as invalid; not resending", uuid)
                if self._pending.get(uuid) is entry:  # a newer offer stays queued
                    del self._pending[uuid]
        self.last_failed = failed

    def _retry_later(self, uuid: str, entry: _Entry, outcome: Outcome) -> None:
        # Not final (see the module docstring). Called with the lock held.
        self._unconfirm(uuid)
        if self._pending.get(uuid) is not entry:
            return  # a newer offer replaced it: that one goes out instead
        if outcome is Outcome.KEPT:
            delay = min(MAX_KEPT_RETRY, KEPT_RETRY * 2 ** entry.kept)
            self._pending[uuid] = replace(entry, not_before=self._clock() + delay,
                                          kept=entry.kept + 1)
        else:
            self._pending[uuid] = replace(entry, not_before=self._clock() + FENCED_RETRY)

    def _unconfirm(self, uuid: str) -> None:
        # A report whose call failed, or that failed on the reporter's side, may still have
        # reached Placement (a timeout after the write, a write that failed half way): what
        # Placement holds is unknown until a report settles, so no offer may be skipped as
        # "already confirmed" meanwhile. Called with the lock held.
        self._confirmed.pop(uuid, None)

    def run(self, stop: threading.Event) -> None:
        """Send until ``stop``: batches back to back while there is work, backoff on failure."""
        # A failed call keeps everything queued: tried again after 0.5 s, doubling up to
        # max_backoff, with equal jitter (daemons that lost the reporters together do not come
        # back in lockstep); a success starts the backoff over. A stop ends the wait at once.
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(Exception),
            stop=lambda _state: stop.is_set(), sleep=stop.wait,
            wait=Backoff(first=0.5, cap=self._max_backoff, jitter=True),
            before_sleep=self._log_failure)
        while not stop.is_set():
            try:
                sent = retrying(self._send_once)
            except tenacity.RetryError:
                return  # stopped while the reporters were away
            if sent == 0:
                self._wake.wait(1.0)
                self._wake.clear()

    def _send_once(self) -> int:
        try:
            sent = self.send_batch()
            if sent and self.last_failed == sent:
                # The reporter answered but could apply none (Placement or ZooKeeper down on
                # its side): back off as if the call itself had failed.
                raise RuntimeError(f"the reporter could apply none of {sent} report(s)")
        except Exception:
            self.failures += 1
            raise
        self.failures = 0
        return sent

    def _log_failure(self, retry_state: tenacity.RetryCallState) -> None:
        LOG.warning("sending %d pending report(s) failed (%s); retrying in %.1fs",
                    self.pending(), retry_state.outcome.exception(),
                    retry_state.next_action.sleep)

    def kick(self) -> None:
        """Wake :meth:`run` now (a sync pass queued reports)."""
        self._wake.set()

