"""The order test files run in: longest first, so that the workers end together.

Owns the order of the collected test files (never the order of the tests within a file, nor
which tests run). Under pytest-xdist, ``tools/run-tests`` gives each worker a whole file at a
time in the collected order (``--dist loadfile --no-loadscope-reorder``); xdist's own order,
files with the most tests first, left the files of one or two long tests (the chaos runs, the
ZooKeeper ensemble, the database freeze) to the end of the run, where one worker ran them while
the other had nothing left to do. Here, in each worker, the files are sorted by what they are
expected to cost, longest first (largest processing time first: the classic greedy order for
identical machines), ties in collected order.

A file's expected cost is, in that order of preference:

* the seconds it took in the last run that ran it, read from pytest's cache
  (``.pytest_cache``, key :data:`CACHE_KEY`); every run that ran files records theirs (the
  controller of an xdist run, or a run without workers);
* else what the file says it takes, as a module constant :data:`HINT` (seconds): for a file
  whose tests are far from its tier's guess (each test of tests/functional/test_run_local_*.py
  starts a whole stack: a minute, not 15 s);
* else its tests counted at a per-tier guess (:data:`SECONDS_PER_TEST`): a chaos run takes
  minutes, a functional test tens of seconds, a unit test milliseconds.

Guarantees: every worker computes the same order from the same inputs (the cache is read once
at collection, before any test of this run records anything), so xdist sees identical
collections; without the cache plugin (``-p no:cacheprovider``) the guess alone orders; a
test's outcome never depends on this module.
"""

from __future__ import annotations

import collections
import os

import pytest

CACHE_KEY = "computed/file-seconds"
#: Guessed seconds per test of a file never timed here, by the tier its path starts with.
SECONDS_PER_TEST = {"tests/chaos/": 120.0, "tests/functional/": 15.0, "tests/process/": 2.0}
UNIT_SECONDS = 0.05
#: The module constant a test file may set to the seconds it is expected to take.
HINT = "EXPECTED_FILE_SECONDS"


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def guessed_seconds(path: str, tests: int) -> float:
    """What a file of ``tests`` tests at ``path`` (relative to the repository) is guessed
    to take."""
    for prefix, seconds in SECONDS_PER_TEST.items():
        if path.startswith(prefix):
            return seconds * tests
    return UNIT_SECONDS * tests


def order_files(nodeids: list[str], measured: dict[str, float],
                hinted: dict[str, float] | None = None) -> list[int]:
    """The indexes of ``nodeids`` in run order: files by expected cost (``measured``, else
    ``hinted``, else the tier's guess), longest first, ties in collected order; each file's
    tests together and in their own order."""
    by_file: dict[str, list[int]] = collections.defaultdict(list)
    for index, nodeid in enumerate(nodeids):
        by_file[_file_of(nodeid)].append(index)

    def cost(path: str) -> float:
        for known in (measured, hinted or {}):
            seconds = known.get(path)
            if isinstance(seconds, int | float) and seconds >= 0:
                return float(seconds)
        return guessed_seconds(path, len(by_file[path]))

    # sorted() is stable: files of equal cost keep their collected order.
    files = sorted(by_file, key=lambda path: -cost(path))
    return [index for path in files for index in by_file[path]]


def _cache(config: pytest.Config):
    return getattr(config, "cache", None)  # None with -p no:cacheprovider


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process runs every file anyway: the order changes nothing
    cache = _cache(config)
    measured = (cache.get(CACHE_KEY, {}) if cache is not None else {}) or {}
    if not isinstance(measured, dict):
        measured = {}
    hinted = {_file_of(item.nodeid): getattr(item.module, HINT)
              for item in items if hasattr(getattr(item, "module", None), HINT)}
    order = order_files([item.nodeid for item in items], measured, hinted)
    items[:] = [items[index] for index in order]


class _FileClock:
    """Sums the setup, call and tear-down seconds of every test, per file (in the process
    that sees every report: the xdist controller, or the only process)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = collections.defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[_file_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = _cache(session.config)
        if cache is None or not self.seconds:
            return
        known = cache.get(CACHE_KEY, {}) or {}
        if not isinstance(known, dict):
            known = {}
        known.update({path: round(seconds, 1) for path, seconds in self.seconds.items()})
        cache.set(CACHE_KEY, known)


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker: its controller sees all
        config.pluginmanager.register(_FileClock(), "computed-file-clock")
