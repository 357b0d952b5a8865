"""The audit log: every claim, release and action of a daemon, as JSON lines, for evidence.

Owns the record format that tests, chaos runs and operators use to prove after the fact that no
two daemons acted on one node with overlapping claims. Each line is one event::

    {"t": 1700000000.123456, "host": "c1", "event": "act", "node": "<uuid>", "epoch": 42,
     "member_epoch": 7, ...}

``t`` is wall-clock time (comparable between daemons on one machine), ``epoch`` the claim's
fencing epoch. Events: ``join``, ``leave``, ``claim``, ``release``, ``act``, ``suspended``,
``lost``, ``connected``. A line is flushed as it is written so that a daemon killed with -9
leaves every action it took on record. With no path configured, nothing is written.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any


class AuditLog:
    def __init__(self, path: str | None, host: str):
        self._host = host
        self._lock = threading.Lock()
        self._file = None
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", buffering=1)

    def record(self, event: str, **fields: Any) -> None:
        if self._file is None:
            return
        line = json.dumps({"t": time.time(), "host": self._host, "event": event, **fields},
                          sort_keys=True)
        with self._lock:
            self._file.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def read(path: str | Path) -> list[dict[str, Any]]:
    """All records of one audit file, skipping a torn last line (a process killed mid-write)."""
    records = []
    for line in Path(path).read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def fencing_violations(records: list[dict[str, Any]]) -> list[str]:
    """Actions that broke exclusivity, from the merged audit records of every daemon.

    Two rules, per node: an action with claim epoch ``e`` must come after that same host's claim
    ``e`` and before its release of ``e``; and no action with epoch ``e`` may come after any claim
    on the node with a larger epoch (a later owner existed: the fencing-token rule). Returns one
    line per violation; empty means the evidence shows no overlap.
    """
    claims: dict[str, list[tuple[float, int, str]]] = {}
    held: dict[tuple[str, str, int], list[float]] = {}
    for record in records:
        node, epoch = record.get("node"), record.get("epoch")
        if node is None or epoch is None:
            continue
        if record["event"] == "claim":
            claims.setdefault(node, []).append((record["t"], epoch, record["host"]))
            held[(node, record["host"], epoch)] = [record["t"], float("inf")]
        elif record["event"] == "release":
            span = held.get((node, record["host"], epoch))
            if span is not None:
                span[1] = min(span[1], record["t"])
    violations = []
    for record in records:
        if record["event"] != "act":
            continue
        node, epoch, host, t = record["node"], record["epoch"], record["host"], record["t"]
        span = held.get((node, host, epoch))
        if span is None or not span[0] <= t <= span[1]:
            violations.append(f"{host} acted on node {node} at {t:.6f} outside its claim "
                              f"epoch {epoch}")
        for claimed_at, newer, other in claims.get(node, ()):
            if newer > epoch and claimed_at < t:
                violations.append(f"{host} acted on node {node} at {t:.6f} with epoch {epoch} "
                                  f"after {other} claimed it with epoch {newer} at "
                                  f"{claimed_at:.6f}")
    return violations
