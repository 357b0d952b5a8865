"""The opt-in memory report of a daemon (computed.daemon.profiling)."""

from __future__ import annotations

import tracemalloc

from computed.daemon import profiling


def test_nothing_starts_without_the_variable(monkeypatch):
    monkeypatch.delenv(profiling.TRACEMALLOC_ENV, raising=False)
    assert not profiling.start_from_env()


def test_the_report_gives_totals_and_the_top_sites():
    tracemalloc.start(profiling.FRAMES)
    try:
        kept = [bytearray(1000) for _ in range(100)]  # noqa: F841
        text = profiling.report(top=5)
    finally:
        tracemalloc.stop()
    first = text.splitlines()[0].split()
    assert first[0] == "rss_mb" and float(first[1]) > 0 and first[2] == "traced_mb"
    assert "-- top by lineno" in text and "-- top by filename" in text
    assert "test_profiling.py" in text
