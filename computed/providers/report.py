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

* :func:`admit` bounds what one call can make a reporter do, before anything else reads it
  (:class:`Limits`, from ``[reporter]`` options): at most ``max_reports`` reports per call (the
  rest are answered ``failed``, so the sender sends them again in a later call), and per report
  at most ``max_traits`` traits (each custom trait costs a Placement request) and no string
  longer than ``max_chars`` (no field of a report is longer than a Placement name, 255). A report
  over a limit is answered ``invalid`` and named in one log line of bounded length. Seen before:
  3,000 traits became 3,004 Placement requests, a 20,000-report call held a reporter for 35 s,
  and a 10 MB field became one 10 MB log line. A string (or key) holding a control character
  (C0, DEL, C1) or a lone surrogate is refused the same way (:data:`CONTROL`): no field of an
  honest report has one, and a provider name with a NUL made Placement answer 500, which the
  reporter took for "unavailable", and the report was resent for ever; ``invalid`` is final.

Outcomes a reporter returns per report (:class:`Outcome`): ``applied``; ``stale`` (not newer than
what was applied: a duplicate or reordered report, nothing to resend); ``fenced`` (the sender does
not hold the claim with that claim epoch: dropped, the new owner reports); ``kept`` (a delete
refused because the provider has allocations); ``failed`` (retry later); ``invalid`` (malformed:
dropped). They cross the bus as their string values and are :class:`Outcome` everywhere else.
"""

from __future__ import annotations

import enum
import re
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


#: Characters no string of a report may hold: C0 controls (NUL, newline...), DEL, C1 controls
#: and lone surrogates (which cannot even be encoded to send to Placement).
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")

# A report has a handful of fields and its state a handful more: anything wider or deeper is not
# a report, and is refused before it is walked any further.
_MAX_KEYS = 16
_MAX_DEPTH = 3
# How much of a refused value a log line or an answer shows.
_BRIEF = 64


@dataclass(frozen=True)
class Limits:
    """What one ``apply_reports`` call may make a reporter do (``[reporter]`` options)."""

    max_reports: int
    max_traits: int
    max_chars: int


@dataclass
class Admission:
    """A call split by :func:`admit`: the raw reports to apply, the answers for the others, and
    one log line per refused report."""

    admitted: list[Any]
    answers: list[list[Any]]
    refused: list[str]
    deferred: int


def admit(raw_reports: list[Any], limits: Limits) -> Admission:
    """Split one call's reports into those within ``limits`` and the rest (pure)."""
    admission = Admission([], [], [], 0)
    for index, raw in enumerate(raw_reports):
        identity = _identity(raw, limits)
        if index >= limits.max_reports:
            admission.deferred += 1
            if identity is not None:
                admission.answers.append([*identity, Outcome.FAILED.value])
            continue
        reason = oversize(raw, limits)
        if reason is None:
            admission.admitted.append(raw)
            continue
        name = identity[0] if identity else brief(raw.get("uuid") if isinstance(raw, dict)
                                                  else None)
        admission.refused.append(f"report {name}: {reason}")
        if identity is not None:
            admission.answers.append([*identity, Outcome.INVALID.value])
    return admission


def oversize(data: Any, limits: Limits) -> str | None:
    """Why one report as it crossed the bus is larger than ``limits`` allow, or holds a control
    character; None when it does not. Looks at no more of it than the limits let through
    (pure)."""
    pending: list[tuple[str, Any, int]] = [("report", data, 0)]
    while pending:
        path, value, depth = pending.pop()
        if isinstance(value, str):
            if len(value) > limits.max_chars:
                return (f"field {path!r}: {len(value)} characters, at most {limits.max_chars} "
                        f"([reporter] max_field_length): {brief(value)}")
            if CONTROL.search(value):
                return f"field {path!r}: a control character: {brief(value)}"
        elif isinstance(value, bool) or value is None or isinstance(value, float):
            continue
        elif isinstance(value, int):
            if not -2**63 <= value < 2**63:
                return f"field {path!r}: an integer of {value.bit_length()} bits, at most 64"
        elif depth >= _MAX_DEPTH:
            return f"field {path!r}: nested deeper than a report is"
        elif isinstance(value, dict):
            if len(value) > _MAX_KEYS:
                return f"field {path!r}: {len(value)} keys, a report has at most {_MAX_KEYS}"
            for key, item in value.items():
                if (not isinstance(key, str) or len(key) > limits.max_chars
                        or CONTROL.search(key)):
                    return f"field {path!r}: a key that is no field name: {brief(key)}"
                pending.append((f"{path}.{key}" if path != "report" else key, item, depth + 1))
        elif isinstance(value, (list, tuple)):
            if len(value) > limits.max_traits:
                return (f"field {path!r}: {len(value)} items, at most {limits.max_traits} "
                        f"([reporter] max_traits)")
            pending.extend((f"{path}[{i}]", item, depth + 1) for i, item in enumerate(value))
    return None


def brief(value: Any) -> str:
    """``repr(value)`` cut to a length fit for one log line."""
    text = repr(value)
    return text if len(text) <= _BRIEF else f"{text[:_BRIEF]}...({len(text)} characters)"


def _identity(raw: Any, limits: Limits) -> tuple[str, int] | None:
    """``(uuid, seq)`` to answer a report by, when both are readable and short."""
    if not isinstance(raw, dict):
        return None
    uuid, seq = raw.get("uuid"), raw.get("seq")
    if (isinstance(uuid, str) and len(uuid) <= limits.max_chars and isinstance(seq, int)
            and not isinstance(seq, bool) and 0 <= seq < 2**63):
        return uuid, seq
    return None
