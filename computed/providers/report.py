"""Provider reports on the wire: the message a daemon sends to the reporters, and their answers.

Owns the wire format of a report and of its outcome; :mod:`computed.providers.outbox` sends
reports, :mod:`computed.reporter.applier` applies them.

* A :class:`Report` says "provider ``uuid`` should look like ``state``" (``None``: the node is gone
  from Ironic, delete the provider if it has no allocations), signed with the sender's claim epoch
  on the node (``claim_epoch``, its fencing token) and a sequence number that only grows within the
  sender's process. Reporters apply a report only if ``(claim_epoch, seq)`` is newer than the last
  one applied for that provider, so duplicates and reordered reports are ignored, and a fenced-out
  owner's report (smaller claim epoch, or one that no longer holds the claim) is refused.
* :meth:`Report.from_dict` validates an untrusted message and raises :class:`MalformedReport`
  naming the field and the uuid; a ``seq`` more than :data:`MAX_SEQ_AHEAD_MS` ahead of the
  reporter's wall clock is refused too. It reads the claim epoch from ``claim_epoch`` or, as daemons
  before API 1.1 sent it, from ``epoch``: a reporter accepts reports from daemons not yet upgraded.

Outcomes a reporter returns per report (:class:`Outcome`): ``applied``; ``stale`` (not newer than
what was applied: a duplicate or reordered report, nothing to resend); ``fenced`` (the sender does
not hold the claim with that claim epoch: dropped, the new owner reports); ``kept`` (a delete
refused because the provider has allocations); ``failed`` (retry later); ``invalid`` (malformed:
dropped). They cross the bus as their string values and are :class:`Outcome` everywhere else.
"""

from __future__ import annotations

import enum
import time
import uuid as uuid_lib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# The version of the reporter's RPC endpoint, and the one daemons ask for. oslo.messaging
# dispatches a call only to an endpoint of the same major and an equal or larger minor version, so
# a 1.1 reporter serves 1.0 daemons (which send the key "epoch") while a 1.0 reporter answers a 1.1
# call with UnsupportedVersion, which the daemon's outbox retries: upgrade reporters first, and a
# daemon upgraded too early holds its reports instead of seeing them refused as invalid.
# 1.1: the claim epoch travels as "claim_epoch" (1.0: "epoch").
API_VERSION = "1.1"

# How far ahead of the reporter's wall clock (in ms) a report's seq may be. A sender starts its seq
# at its own time.time()*1000 and adds one per report, so an honest seq is its sender's start time
# plus the reports it offered since: clocks in a cloud differ by seconds, and a cold start of
# 50,000 providers adds 50,000, both far inside a day. Without a bound one forged seq (2**62)
# made every later honest report of the provider "stale" for good; with it a forged report can
# hold a provider for at most this long (or until the node is claimed again). See
# docs/security.md.
MAX_SEQ_AHEAD_MS = 24 * 3600 * 1000


class MalformedReport(ValueError):
    """A report that does not follow the wire format; the message names the field (and uuid)."""


class Outcome(str, enum.Enum):
    APPLIED = "applied"
    STALE = "stale"
    FENCED = "fenced"
    KEPT = "kept"
    FAILED = "failed"
    INVALID = "invalid"


@dataclass(frozen=True)
class Report:
    uuid: str
    claim_epoch: int
    seq: int
    host: str
    state: Mapping[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {"uuid": self.uuid, "claim_epoch": self.claim_epoch, "seq": self.seq,
                "host": self.host, "state": None if self.state is None else dict(self.state)}

    @classmethod
    def from_dict(cls, data: Any, clock: Callable[[], float] = time.time) -> Report:
        """Validate an untrusted message (it crossed the bus). ``clock`` is the wall clock in
        seconds that bounds ``seq`` (:data:`MAX_SEQ_AHEAD_MS`)."""
        if not isinstance(data, dict):
            raise MalformedReport(f"report: expected an object, got {type(data).__name__}")
        uuid = data.get("uuid")
        if not _is_canonical_uuid(uuid):
            # A sender writes str(uuid.UUID(...)); any other spelling is not one of ours.
            raise MalformedReport(f"report: field 'uuid': not a canonical UUID: {uuid!r}")
        unknown = sorted(str(key) for key in data if key not in _FIELDS)
        if unknown:
            # A field this version would drop could change what the report means.
            raise MalformedReport(f"report {uuid}: unknown field {unknown[0]!r}")
        if "state" not in data:
            # An absent state would read as None, which means "delete the provider".
            raise MalformedReport(f"report {uuid}: field 'state': missing (null deletes)")
        epoch_key = _claim_epoch_key(uuid, data)
        for field in (epoch_key, "seq"):
            value = data.get(field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise MalformedReport(f"report {uuid}: field {field!r}: expected a "
                                      f"non-negative integer, got {value!r}")
        limit = int(clock() * 1000) + MAX_SEQ_AHEAD_MS
        if data["seq"] > limit:
            raise MalformedReport(f"report {uuid}: field 'seq': {data['seq']} is more than "
                                  f"{MAX_SEQ_AHEAD_MS} ms ahead of this reporter's clock "
                                  f"(at most {limit})")
        host = data.get("host")
        if not isinstance(host, str) or not host:
            raise MalformedReport(f"report {uuid}: field 'host': expected a host name")
        state = data.get("state")
        if state is not None and not isinstance(state, dict):
            raise MalformedReport(f"report {uuid}: field 'state': expected an object or null")
        if state is not None and state.get("uuid") != uuid:
            raise MalformedReport(f"report {uuid}: field 'state': describes provider "
                                  f"{state.get('uuid')!r}")
        return cls(uuid, data[epoch_key], data["seq"], host, state)


#: The fields of a report on the wire ("epoch": the claim epoch as API 1.0 named it).
_FIELDS = frozenset({"uuid", "claim_epoch", "epoch", "seq", "host", "state"})


def _is_canonical_uuid(value: Any) -> bool:
    try:
        return isinstance(value, str) and str(uuid_lib.UUID(value)) == value
    except ValueError:
        return False


def _claim_epoch_key(uuid: str, data: Mapping[str, Any]) -> str:
    """The key holding the claim epoch: ``claim_epoch`` (API 1.1), else ``epoch`` (API 1.0)."""
    if "claim_epoch" not in data:
        return "epoch"
    if "epoch" in data and data["epoch"] != data["claim_epoch"]:
        # A fencing token must not be ambiguous: refuse rather than pick one.
        raise MalformedReport(f"report {uuid}: fields 'claim_epoch' and 'epoch' disagree: "
                              f"{data['claim_epoch']!r} != {data['epoch']!r}")
    return "claim_epoch"
