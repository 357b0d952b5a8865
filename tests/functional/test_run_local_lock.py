"""One tools/run-local per work directory: a second run refuses in one line naming the first
run's PID and leaves it running; a crashed run (SIGKILL: it stopped nothing) is cleaned by the
next run, which stops every process the crashed one recorded before it starts its own stack, and
stops everything it started itself on SIGTERM.

The runs have no terminal (tests/functional/run_local.py says how they are started and what
"nothing left" means).
"""

from __future__ import annotations

import signal
import subprocess

from computed.testing.process import alive
from tests.functional.run_local import (  # noqa: F401 (runs, workdir: fixtures)
    ROOT,
    RUN_LOCAL,
    SMALL,
    assert_nothing_left,
    runs,
    start,
    workdir,
)

#: For tests/conftest.py's order until a run has timed this file (two stacks, one after the other):
#: seconds on an idle 2-core machine (the tier's guess is 15 s a test).
EXPECTED_FILE_SECONDS = 50


def test_a_second_run_refuses_and_a_crashed_run_is_cleaned_by_the_next(
        runs, workdir):  # noqa: F811 (fixtures)
    first = start(runs, workdir)
    first.wait_ready()
    second = subprocess.run([str(RUN_LOCAL), *SMALL, "--workdir", str(workdir)],
                            capture_output=True, text=True, timeout=120, cwd=ROOT,
                            stdin=subprocess.DEVNULL)
    assert second.returncode != 0
    refusal = second.stderr.strip().splitlines()
    assert len(refusal) == 1 and f"pid {first.proc.pid}" in refusal[0], second.stderr
    assert first.proc.poll() is None and all(alive(pid) for pid in first.pids)

    first.proc.kill()  # a crash: nothing of the first run is stopped
    first.proc.wait(10)
    assert all(alive(pid) for pid in first.pids)
    third = start(runs, workdir)
    third.wait_ready(inherited=first.pids)
    assert not {pid for pid in first.pids if alive(pid)}, "the crashed run's processes live on"
    third.proc.send_signal(signal.SIGTERM)
    third.wait_exit()
    assert_nothing_left(third)
