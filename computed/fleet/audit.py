"""The audit log: every claim, release and action of a daemon, as JSON lines, for evidence.

Owns the record format that tests, chaos runs and operators use to prove after the fact that no
two daemons acted on one node with overlapping claims. Each line is one :class:`AuditEvent`::

    {"t": 1700000000.123456, "host": "c1", "event": "act", "node": "<uuid>", "claim_epoch": 42,
     "action": "sync", ...}

``t`` is wall-clock time (comparable between daemons on one machine), ``claim_epoch`` the claim's
fencing epoch, ``member_epoch`` the daemon's membership epoch and ``term`` the fence's term (see
:mod:`computed.fleet.fence`). A line is flushed as it is written so that a daemon killed with -9
leaves every action it took on record. With no path configured, nothing is written. A file the
log creates is readable by its user and group only (:data:`FILE_MODE`), whatever the umask: it
names every node, host and epoch of the fleet.

Files written before the claim epoch had its own name say ``"epoch"`` for it (and
``"generation"`` for the term); :func:`fencing_violations` reads both, as operators keep their
audit logs.

Threads: one :class:`AuditLog` per daemon, appended to by the fleet thread (joins, claims,
releases, session changes), kazoo's event thread (a claim deleted behind our back), the node
thread and the instance worker's threads (acts, re-homings); the main thread closes it. Each line
is written whole under the log's lock, so lines never interleave, and :meth:`AuditLog.close`
takes the same lock: a record that comes after the close (a thread still running while the
daemon stops) is dropped, not written to a closed file. ``t`` is read before the lock: two
threads' lines may be out of ``t`` order by the time it takes to get it. The order the fencing
rules read is not left to that: a claim's ``claim`` record is written before the claim is
visible to other threads, and its ``act`` records and its ``release`` record are ordered by the
claim table's lock (:meth:`computed.fleet.claims.ClaimTable.while_held`).
"""

from __future__ import annotations

import enum
import json
import os
import threading
import time
from pathlib import Path
from typing import Any


class AuditEvent(enum.Enum):
    JOIN = "join"
    LEAVE = "leave"
    CLAIM = "claim"
    RELEASE = "release"
    ACT = "act"
    REHOME = "rehome"
    # The fence's session states (computed.fleet.fence.SessionState), as they change.
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"


# Who may read an audit file computed creates: its user, and its group (operators' tools); never
# others, whatever the umask. A file that already exists keeps the mode its owner gave it.
FILE_MODE = 0o640

# The claim epoch's key in files written before it was named ``claim_epoch``.
OLD_CLAIM_EPOCH_KEY = "epoch"


class AuditLog:
    """One daemon's audit file, appended to by any thread."""

    def __init__(self, path: str | None, host: str):
        self._host = host
        self._lock = threading.Lock()
        self._file = None
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", buffering=1, opener=_private_opener)

    def record(self, event: AuditEvent, **fields: Any) -> None:
        if self._file is None:
            return  # no audit log configured (or closed): nothing to format
        line = json.dumps({"t": time.time(), "host": self._host, "event": event.value, **fields},
                          sort_keys=True)
        with self._lock:
            # Looked at again under the lock: the main thread may have closed the file since
            # (kazoo's and the instance worker's threads still record while the daemon stops).
            if self._file is not None:
                self._file.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def _private_opener(path: str, flags: int) -> int:
    try:
        fd = os.open(path, flags | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return os.open(path, flags)
    os.fchmod(fd, FILE_MODE)  # the umask may have taken bits away, never added: make it exact
    return fd


def read(path: str | Path) -> list[dict[str, Any]]:
    """All records of one audit file, skipping a torn last line (a process killed mid-write)."""
    records = []
    for line in Path(path).read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def claim_epoch_of(record: dict[str, Any]) -> int | None:
    """The claim epoch a record is about, whichever name its file gives it; None if none."""
    if "claim_epoch" in record:
        return record["claim_epoch"]
    return record.get(OLD_CLAIM_EPOCH_KEY)


def fencing_violations(records: list[dict[str, Any]]) -> list[str]:
    """Actions that broke exclusivity, from the merged audit records of every daemon.

    Two rules, per node: an action with claim epoch ``e`` must come after that same host's claim
    ``e`` and before its release of ``e``; and no action with claim epoch ``e`` may come after
    any claim on the node with a larger claim epoch (a later owner existed: the fencing-token
    rule). Returns one line per violation; empty means the evidence shows no overlap.
    """
    claims: dict[str, list[tuple[float, int, str]]] = {}
    held: dict[tuple[str, str, int], list[float]] = {}
    for record in records:
        node, claim_epoch = record.get("node"), claim_epoch_of(record)
        if node is None or claim_epoch is None:
            continue
        if record["event"] == AuditEvent.CLAIM.value:
            claims.setdefault(node, []).append((record["t"], claim_epoch, record["host"]))
            held[(node, record["host"], claim_epoch)] = [record["t"], float("inf")]
        elif record["event"] == AuditEvent.RELEASE.value:
            span = held.get((node, record["host"], claim_epoch))
            if span is not None:
                span[1] = min(span[1], record["t"])
    violations = []
    for record in records:
        if record["event"] != AuditEvent.ACT.value:
            continue
        node, host, t = record["node"], record["host"], record["t"]
        claim_epoch = claim_epoch_of(record)
        span = held.get((node, host, claim_epoch))
        if span is None or not span[0] <= t <= span[1]:
            violations.append(f"{host} acted on node {node} at {t:.6f} outside its claim "
                              f"epoch {claim_epoch}")
        for claimed_at, newer, other in claims.get(node, ()):
            if newer > claim_epoch and claimed_at < t:
                violations.append(f"{host} acted on node {node} at {t:.6f} with claim epoch "
                                  f"{claim_epoch} after {other} claimed it with claim epoch "
                                  f"{newer} at {claimed_at:.6f}")
    return violations
