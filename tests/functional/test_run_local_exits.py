"""tools/run-local as a newcomer leaves it: every way out stops everything it started (Glance
included): Ctrl-C, the terminal closing, and the reader of its output going away
(``tools/run-local | head``). ``q`` is the way out of test_run_local_view.py's test, SIGTERM of
test_run_local_lock.py's.

Each test starts its own stack (tests/functional/run_local.py says how) and, once it is ready,
takes one way out; then none of the processes the run recorded, none of their process groups
and no process naming its work directory may be left, nor its lock and state files.
"""

from __future__ import annotations

import pytest

from tests.functional.run_local import assert_nothing_left, runs, start, workdir  # noqa: F401

#: For tests/conftest.py's order until a run has timed this file (three stacks, one per test):
#: seconds on an idle 2-core machine (the tier's guess is 15 s a test).
EXPECTED_FILE_SECONDS = 60


@pytest.mark.parametrize("how", ["ctrl-c", "terminal closed", "stdout closed"])
def test_every_exit_stops_everything_it_started(runs, workdir, how):  # noqa: F811 (fixtures)
    run = start(runs, workdir, terminal=how != "stdout closed")
    run.wait_ready()
    if how == "ctrl-c":
        run.send("\x03")
    elif how == "terminal closed":
        run.output.close()
        run.master = None
    else:  # tools/run-local | head: the reader goes away
        run.output.close()
    run.wait_exit()
    assert_nothing_left(run)
    if how == "ctrl-c":
        assert "Traceback" not in run.output.text, run.output.text[-3000:]
