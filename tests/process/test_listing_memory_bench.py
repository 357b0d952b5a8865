"""bench/listing_memory.py runs end to end at a small size, its fake Ironic a child process (its
figures are BENCHMARKS.md's; here only that it still runs against the code it measures)."""

from __future__ import annotations

from bench import listing_memory


def test_listing_memory_runs(capsys):
    assert listing_memory.main(["--nodes", "300", "--rounds", "2", "--threads", "2"]) == 0
    out = capsys.readouterr().out
    assert "first listing" in out and "listing again 2" in out
