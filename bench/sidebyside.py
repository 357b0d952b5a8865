"""The pure part of the side-by-side benchmark (bench/nova_bench.py): what a measured phase's
figures are, how requests are counted in the services' logs, and the table that compares two
systems with ratios. No I/O: the benchmark reads the logs and the clocks, this module decides.

A phase's figures (one system, one node count, one run) are a dict with the keys of
:data:`FIGURES` (seconds, shares of one core, requests per minute), ``events`` (the seconds each
maintenance change took to show in Placement; ``events_missed`` those never seen) and ``loads``
(phase name -> (min, max) of the 1-minute load average); ``events_summary`` ({p50, p95, seen,
made}) stands for ``events`` where only those were kept; ``cold_over`` and ``cold_count`` say
how far a cold start that hit its limit got. A figure that was not measured is
``None`` and shows as "-".
"""

from __future__ import annotations

import collections
import datetime
import math
import re
import statistics
from collections.abc import Iterable, Sequence

#: Figure keys, in the table's order, with their rows' labels and units.
FIGURES = (
    ("cold", "cold start: all providers schedulable in Placement", "s"),
    ("first", "  first provider schedulable", "s"),
    ("cpu", "steady CPU of the compute side, no changes", "% of a core"),
    ("placement_rpm", "Placement requests per minute at steady state", "/min"),
    ("ironic_rpm", "Ironic requests per minute at steady state", "/min"),
    ("failover", "kill -9 of the managing service -> a change on its node in Placement", "s"),
    ("down", "  the killed service seen gone (Nova: service down; computed: session expired)",
     "s"),
)
PHASES = ("cold", "steady", "events", "failover")
_REQUEST = re.compile(r"\b(GET|HEAD|POST|PUT|PATCH|DELETE) (/[^\s\"?]*)")
_UUID = re.compile(r"/[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def percentile(values: Iterable[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile (0 < p <= 100) of ``values``; None when empty."""
    ordered = sorted(values)
    if not ordered:
        return None
    if not 0 < p <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {p}")
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def log_time(line: str) -> float | None:
    """The epoch seconds of an oslo.log line's leading ``YYYY-MM-DD HH:MM:SS.mmm`` (local time,
    as the services log it), or None for a line without one."""
    try:
        return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f").timestamp()
    except ValueError:
        return None


def count_requests(lines: Iterable[str], marker: str, t_from: float,
                   t_to: float) -> collections.Counter[str]:
    """Requests an access log recorded between two epoch times: lines holding ``marker`` (the
    logger: ``placement.requestlog``, ``ironic.api``), counted by method and path, uuids as
    ``{uuid}`` and the query dropped."""
    counts: collections.Counter[str] = collections.Counter()
    for line in lines:
        if marker not in line:
            continue
        t = log_time(line)
        if t is None or not t_from <= t <= t_to:
            continue
        match = _REQUEST.search(line, line.index(marker))
        if match:
            counts[f"{match.group(1)} {_UUID.sub('/{uuid}', match.group(2))}"] += 1
    return counts


def per_minute(count: int, seconds: float) -> float:
    if seconds <= 0:
        raise ValueError(f"a window must last, got {seconds} s")
    return 60.0 * count / seconds


def reserved_changed(inventories: dict, resource_class: str) -> bool:
    """Whether a provider's inventories (Placement's ``inventories`` object) no longer offer the
    node: its resource class reserved (Nova and computed reserve the whole node) or gone."""
    inventory = inventories.get(resource_class)
    return inventory is None or inventory.get("reserved", 0) >= inventory.get("total", 1)


def combine(runs: Sequence[dict]) -> dict:
    """One system's figures over several runs: the median of each figure but the request
    rates, the events pooled. A request rate is the mean of the runs' rates, which is the rate
    over all their windows pooled when the windows are equally long: computed makes one request
    every few minutes at steady state, so a median of short windows (0, 0.2, 0) would say 0."""
    out: dict = {}
    for key, _, unit in FIGURES:
        values = [r[key] for r in runs if r.get(key) is not None]
        pick = statistics.fmean if unit == "/min" else statistics.median
        out[key] = pick(values) if values else None
    out["events"] = [v for r in runs for v in r.get("events", [])]
    out["events_missed"] = sum(r.get("events_missed", 0) for r in runs)
    out["failovers"] = [r["failover"] for r in runs if r.get("failover") is not None]
    loads: dict[str, list[float]] = {}
    for r in runs:
        for phase, (low, high) in (r.get("loads") or {}).items():
            loads.setdefault(phase, []).extend([low, high])
    out["loads"] = {phase: (min(v), max(v)) for phase, v in loads.items()}
    unfinished = [r for r in runs if r.get("cold") is None and r.get("cold_over")]
    if unfinished:  # a cold start that hit its limit: how far the furthest got
        out["cold_over"] = max(r["cold_over"] for r in unfinished)
        out["cold_count"] = max(r.get("cold_count", 0) for r in unfinished)
    out["runs"] = len(runs)
    # a single run whose changes' latencies were lost but whose printed p50/p95 were recovered
    if len(runs) == 1 and not out["events"] and runs[0].get("events_summary"):
        out["events_summary"] = runs[0]["events_summary"]
    return out


def ratio(nova: float | None, computed: float | None) -> str:
    """How many times computed's figure Nova's is ("x 12.3"), "-" when either is missing."""
    if nova is None or computed is None or math.inf in (nova, computed):
        return "-"
    if computed == 0:
        return "-" if nova == 0 else "inf"
    return f"x {nova / computed:,.1f}"


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if value == math.inf:
        return "not seen in the limit"
    if unit == "% of a core":
        return f"{100 * value:.1f} %"
    if unit == "/min":
        return f"{value:,.1f}"
    return f"{value:,.2f} s" if value < 10 else f"{value:,.1f} s"


def _events_percentile(side: dict, p: int) -> float | None:
    summary = side.get("events_summary")
    if summary:
        return summary.get(f"p{p}")
    # a change never seen (its wait hit the limit) ranks above every one seen
    return percentile(side["events"] + [math.inf] * side["events_missed"], p)


def _seen(side: dict) -> str:
    summary = side.get("events_summary")
    if summary:
        return f"{summary['seen']} / {summary['made']}"
    made = len(side["events"]) + side["events_missed"]
    return f"{len(side['events'])} / {made}" if made else "-"


def _loads(loads: dict) -> str:
    return "; ".join(f"{p} {loads[p][0]:.1f}-{loads[p][1]:.1f}" for p in PHASES if p in loads)


def table(results: dict[int, dict[str, dict]]) -> list[str]:
    """The comparison as markdown rows: per node count (``results[nodes]["nova"]`` and
    ``["computed"]``, each :func:`combine`'s output), each figure for both and Nova / computed."""
    lines = ["| figure | nodes | Nova 34 (2 nova-compute, 1 nova-conductor) | computed "
             "(3 daemons, 2 reporters) | Nova / computed |", "|---|---:|---:|---:|---:|"]
    for nodes in sorted(results):
        nova, ours = results[nodes]["nova"], results[nodes]["computed"]
        for label, p in (("maintenance on -> Placement reserved, p50", 50), ("  p95", 95)):
            a, b = (_events_percentile(side, p) for side in (nova, ours))
            lines.append(f"| {label} | {nodes:,} | {_figure(a, 's')} | {_figure(b, 's')} | "
                         f"{ratio(a, b)} |")
        lines.append(f"| changes seen / made | {nodes:,} | {_seen(nova)} | {_seen(ours)} | |")
        for key, label, unit in FIGURES:
            a, b = nova.get(key), ours.get(key)
            shown = [_figure(a, unit), _figure(b, unit)]
            if key == "cold":
                shown = [f"> {side['cold_over']:,.0f} s ({side['cold_count']:,} of {nodes:,})"
                         if side.get(key) is None and side.get("cold_over") else text
                         for side, text in ((nova, shown[0]), (ours, shown[1]))]
            lines.append(f"| {label} | {nodes:,} | {shown[0]} | {shown[1]} | {ratio(a, b)} |")
        lines.append(f"| 1-minute load by phase | {nodes:,} | {_loads(nova['loads'])} | "
                     f"{_loads(ours['loads'])} | |")
    return lines
