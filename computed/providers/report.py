"""Provider reports: the messages a daemon sends to the reporters, and the daemon's outbox.

Owns the wire format of a report and the rules that make reporting lossless and quiet:

* A :class:`Report` says "provider ``uuid`` should look like ``state``" (``None``: the node is gone
  from Ironic, delete the provider if it has no allocations), signed with the sender's claim epoch
  on the node (its fencing token) and a sequence number that only grows within the sender's
  process. Reporters apply a report only if ``(epoch, seq)`` is newer than the last one applied
  for that provider, so duplicates and reordered reports are ignored, and a fenced-out owner's
  report (smaller epoch, or an epoch that no longer holds the claim) is refused.
* The :class:`Outbox` keeps, per provider, the latest state to report and the state the reporters
  confirmed. ``offer`` queues a state only when it differs from both, so a sync pass over nodes
  that did not change sends nothing. A batch whose call fails (broker or reporter down, timeout)
  stays queued and is sent again with backoff; a newer state for the same provider replaces an
  unsent older one (only the latest matters).

Outcomes a reporter returns per report (:class:`Outcome`): ``applied``; ``stale`` (not newer than
what was applied: a duplicate or reordered report, nothing to resend); ``fenced`` (the sender does
not hold the claim with that epoch: dropped, the new owner reports); ``kept`` (a delete refused
because the provider has allocations); ``failed`` (retry later); ``invalid`` (malformed: dropped).
"""

from __future__ import annotations

import enum
import itertools
import logging
import random
import threading
import time
import uuid as uuid_lib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

LOG = logging.getLogger(__name__)

API_VERSION = "1.0"


class MalformedReport(ValueError):
    """A report that does not follow the wire format; the message names the field (and uuid)."""


class Outcome(str, enum.Enum):
    APPLIED = "applied"
    STALE = "stale"
    FENCED = "fenced"
    KEPT = "kept"
    FAILED = "failed"
    INVALID = "invalid"


# Outcomes after which the outbox stops sending that report.
SETTLED = frozenset({Outcome.APPLIED, Outcome.STALE, Outcome.FENCED, Outcome.KEPT,
                     Outcome.INVALID})


@dataclass(frozen=True)
class Report:
    uuid: str
    epoch: int
    seq: int
    host: str
    state: Mapping[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {"uuid": self.uuid, "epoch": self.epoch, "seq": self.seq, "host": self.host,
                "state": None if self.state is None else dict(self.state)}

    @classmethod
    def from_dict(cls, data: Any) -> "Report":
        """Validate an untrusted message (it crossed the bus)."""
        if not isinstance(data, dict):
            raise MalformedReport(f"report: expected an object, got {type(data).__name__}")
        uuid = data.get("uuid")
        try:
            uuid = str(uuid_lib.UUID(str(uuid)))
        except ValueError:
            raise MalformedReport(f"report: field 'uuid': not a UUID: {uuid!r}") from None
        for field in ("epoch", "seq"):
            value = data.get(field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise MalformedReport(f"report {uuid}: field {field!r}: expected a "
                                      f"non-negative integer, got {value!r}")
        host = data.get("host")
        if not isinstance(host, str) or not host:
            raise MalformedReport(f"report {uuid}: field 'host': expected a host name")
        state = data.get("state")
        if state is not None and not isinstance(state, dict):
            raise MalformedReport(f"report {uuid}: field 'state': expected an object or null")
        if state is not None and state.get("uuid") != uuid:
            raise MalformedReport(f"report {uuid}: field 'state': describes provider "
                                  f"{state.get('uuid')!r}")
        return cls(uuid, data["epoch"], data["seq"], host, state)


@dataclass
class _Entry:
    epoch: int
    state: Mapping[str, Any] | None
    seq: int


class Outbox:
    """What this daemon still has to report, and what the reporters confirmed."""

    def __init__(self, host: str, send: Callable[[list[Report]], Mapping[tuple[str, int], str]],
                 batch_size: int = 100,
                 may_send: Callable[[str, int], bool | None] = lambda u, e: True,
                 max_backoff: float = 30.0):
        self.host = host
        self._send = send
        self._batch_size = batch_size
        self._may_send = may_send
        self._max_backoff = max_backoff
        self._lock = threading.Lock()
        self._pending: dict[str, _Entry] = {}
        # Providers with a report on the wire: until it settles, "confirmed" may not be what
        # Placement will hold, so an offer equal to it must still be sent.
        self._inflight: set[str] = set()
        self._confirmed: dict[str, tuple[int, Mapping[str, Any] | None]] = {}
        self._seq = itertools.count(int(time.time() * 1000))
        self._wake = threading.Event()
        self.failures = 0
        self.sent = 0
        self.last_failed = 0  # reports of the last batch answered "failed"

    def offer(self, uuid: str, epoch: int, state: Mapping[str, Any] | None) -> bool:
        """Queue ``state`` for ``uuid`` unless it is already confirmed or queued; True if queued."""
        with self._lock:
            if uuid not in self._inflight and self._confirmed.get(uuid) == (epoch, state):
                self._pending.pop(uuid, None)
                return False
            entry = self._pending.get(uuid)
            if entry is not None and (entry.epoch, entry.state) == (epoch, state):
                return False
            self._pending[uuid] = _Entry(epoch, state, next(self._seq))
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

    def confirmed(self, uuid: str) -> tuple[int, Mapping[str, Any] | None] | None:
        with self._lock:
            return self._confirmed.get(uuid)

    def send_batch(self) -> int:
        """Send up to one batch; returns how many reports went out (raises if the call failed)."""
        with self._lock:
            batch = [Report(uuid, e.epoch, e.seq, self.host, e.state)
                     for uuid, e in itertools.islice(self._pending.items(), self._batch_size)]
        batch = [r for r in batch if self._still_ours(r)]
        if not batch:
            return 0
        with self._lock:
            self._inflight.update(r.uuid for r in batch)
        try:
            outcomes = self._send(batch)
        except BaseException:
            with self._lock:
                self._inflight.difference_update(r.uuid for r in batch)
            raise
        self._settle(batch, outcomes)
        self.sent += len(batch)
        return len(batch)

    def _still_ours(self, report: Report) -> bool:
        """Send it (True); hold it (None from may_send: the claim is ours but the fence is
        closed, e.g. while ZooKeeper reconnects); or drop it (the claim went away or changed
        epoch: the node's next owner reports it)."""
        verdict = self._may_send(report.uuid, report.epoch)
        if verdict:
            return True
        if verdict is None:
            return False
        with self._lock:
            entry = self._pending.get(report.uuid)
            if entry is not None and entry.seq == report.seq:
                del self._pending[report.uuid]
        return False

    def _settle(self, batch: list[Report], outcomes: Mapping[tuple[str, int], str]) -> None:
        failed = 0
        with self._lock:
            self._inflight.difference_update(r.uuid for r in batch)
            for report in batch:
                outcome = outcomes.get((report.uuid, report.seq), Outcome.FAILED.value)
                entry = self._pending.get(report.uuid)
                if outcome not in {o.value for o in SETTLED}:
                    failed += 1
                    continue  # failed: stays queued for the next attempt
                if outcome in (Outcome.APPLIED.value, Outcome.STALE.value, Outcome.KEPT.value):
                    self._confirmed[report.uuid] = (report.epoch, report.state)
                elif outcome == Outcome.INVALID.value:
                    LOG.error("reporter refused report %s as invalid; not resending",
                              report.uuid)
                if entry is not None and entry.seq == report.seq:
                    del self._pending[report.uuid]
        self.last_failed = failed

    def run(self, stop: threading.Event) -> None:
        """Send until ``stop``: batches back to back while there is work, backoff on failure."""
        backoff = 0.0
        while not stop.is_set():
            try:
                sent = self.send_batch()
                if sent and self.last_failed == sent:
                    # The reporter answered but could apply none (Placement or ZooKeeper
                    # down on its side): back off as if the call itself had failed.
                    raise RuntimeError(f"the reporter could apply none of {sent} report(s)")
                backoff = 0.0
                self.failures = 0
            except Exception as exc:  # the call failed: keep everything queued, retry later
                self.failures += 1
                backoff = min(self._max_backoff, max(0.5, backoff * 2))
                LOG.warning("sending %d pending report(s) failed (%s); retrying in %.1fs",
                            self.pending(), exc, backoff)
                stop.wait(backoff * (0.5 + random.random() / 2))
                continue
            if sent == 0:
                self._wake.wait(1.0)
                self._wake.clear()

    def kick(self) -> None:
        self._wake.set()
