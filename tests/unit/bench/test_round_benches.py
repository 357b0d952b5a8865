"""bench/round_cpu.py runs end to end at a small size (its figures are BENCHMARKS.md's; here only
that it still runs against the code it measures). bench/listing_memory.py, which starts a fake
Ironic process, is tests/process/test_listing_memory_bench.py."""

from __future__ import annotations

from bench import round_cpu


def test_round_cpu_runs(capsys):
    assert round_cpu.main(["--nodes", "200", "--runs", "1", "--missed", "3"]) == 0
    out = capsys.readouterr().out
    assert "steady state, 3 changed with no event" in out and "confirming" in out

