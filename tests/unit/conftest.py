"""Fixtures shared by the unit tests, and the rule of the tier: a unit test starts no process.

The unit tier imports and calls (computed's console scripts run in-process: tests/cli.py);
tests that need a fresh interpreter, a signal sent to a process or another program are in
tests/process. While a test of this tier runs, starting a process (subprocess, os.fork,
os.posix_spawn, os.system, os.exec*) raises :class:`ProcessStarted` at the call, naming the
tier to move the test to.
"""

import sys

import pytest

from computed import db
from computed.db import engine as db_engine
from tests.database import copy_sqlite

#: The audit events of starting a process (multiprocessing's spawn, which starts its child with
#: _posixsubprocess directly, raises none).
PROCESS_EVENTS = frozenset({'subprocess.Popen', 'os.fork', 'os.forkpty', 'os.posix_spawn',
                            'os.system', 'os.exec', 'os.spawn'})
_running = []  # the unit test running now (empty between tests)


class ProcessStarted(RuntimeError):
    """A unit test started a process."""


def _refuse_processes(event, args):
    if _running and event in PROCESS_EVENTS:
        raise ProcessStarted(f'{_running[0]}: {event} {args[:2]!r}: the unit tier starts no '
                             'process; move the test to tests/process')


# An audit hook cannot be removed: it is added once per process and acts only while a test of
# this directory runs (tests/process may share the process under pytest-xdist).
sys.addaudithook(_refuse_processes)


def _unit_test_running(item):
    _running.append(item.nodeid)
    try:
        return (yield)
    finally:
        _running.clear()


def _unit_test_ending(item, nextitem):
    if nextitem is None:
        # The last test of this process: its tear-down also ends the session's fixtures, of
        # every tier (the functional tests' stack stops its services with processes).
        return (yield)
    return (yield from _unit_test_running(item))


# Set-up, call and tear-down (a fixture may start a process too); called for this directory's
# tests only (pytest calls a conftest's run-test hooks for the tests under it).
pytest_runtest_setup = pytest.hookimpl(wrapper=True)(_unit_test_running)
pytest_runtest_call = pytest.hookimpl(wrapper=True)(_unit_test_running)
pytest_runtest_teardown = pytest.hookimpl(wrapper=True)(_unit_test_ending)


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory):
    """A sqlite database of computed's own migrated once per session (``db.sync``), which the
    ``engine`` fixtures copy: every migration run again for each test cost it ~0.07 s of
    set-up (the unit tier's set-ups summed 52 s over a suite run, most of it that)."""
    path = tmp_path_factory.mktemp("unit-db") / "computed.sqlite"
    db.sync(f"sqlite:///{path}")
    return path


@pytest.fixture
def engine(tmp_path, migrated_sqlite):
    """A migrated sqlite database of computed's own, in the test's scratch directory (a copy
    of the session's migrated one)."""
    url = copy_sqlite(migrated_sqlite, tmp_path / 'computed.sqlite')
    engine = db_engine.engine_from_url(url)
    yield engine
    engine.dispose()
