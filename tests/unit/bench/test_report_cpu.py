"""bench/report_bench's CPU accounting: a service's CPU is every process under it, and over the
cold start Placement's is also shown per process (its workers', with --placement-workers)."""

from __future__ import annotations

import os

from bench import report_bench


def test_a_group_per_process_and_the_split_shown_only_for_several():
    pids = [os.getpid(), os.getppid()]
    assert report_bench.by_process(pids) == {str(pid): [pid] for pid in pids}
    before = report_bench.cpu_snapshot(report_bench.by_process(pids))
    sum(range(10**5))
    split = report_bench.cpu_delta(before, report_bench.cpu_snapshot(
        report_bench.by_process(pids)))
    assert set(split) == {str(pid) for pid in pids} and all(v >= 0 for v in split.values())
    assert report_bench._split({"7": 1.0}) == ""  # one process: nothing more to say
    assert report_bench._split({"7": 0.2, "8": 55.0, "9": 54.6}) == (
        " (placement by process: 7 0, 8 55, 9 55)")
