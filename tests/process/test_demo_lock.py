"""tools/demo's run lock against another process: one holding it, one crashed with the
processes it started still running (the rest is tests/unit/demo/test_lock.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.demo.lock import Busy, RunLock, Started, start_ticks

HOLD = "import sys, time; from tools.demo.lock import RunLock; " \
       "RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(60)"


@pytest.fixture
def holder(tmp_path):
    """Another process holding the lock of tmp_path."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "run.lock")],
                            stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()


def test_a_second_run_refuses_naming_the_holder(tmp_path, holder):
    with pytest.raises(Busy) as raised:
        RunLock(tmp_path / "run.lock").acquire()
    assert raised.value.holder == holder.pid
    assert f"pid {holder.pid}" in str(raised.value) and "\n" not in str(raised.value)


def test_a_crashed_holder_leaves_a_lock_the_next_run_takes_with_its_processes(tmp_path, holder):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        # What the crashed run would have recorded: a live process and one long gone.
        record = {"pid": holder.pid, "processes": [
            {"name": "computed-1", "pid": sleeper.pid, "start_ticks": start_ticks(sleeper.pid)},
            {"name": "computed-2", "pid": 999999999, "start_ticks": 1}]}
        (tmp_path / "run.lock").write_text(json.dumps(record))
        holder.kill()
        holder.wait()
        lock = RunLock(tmp_path / "run.lock")
        left = lock.acquire()
        assert left == [Started("computed-1", sleeper.pid, start_ticks(sleeper.pid))]
        # Still recorded, now as this run's, until it has stopped them.
        assert json.loads((tmp_path / "run.lock").read_text()) == {
            "pid": os.getpid(), "processes": [{"name": "computed-1", "pid": sleeper.pid,
                                               "start_ticks": start_ticks(sleeper.pid)}]}
        lock.release()
        assert not (tmp_path / "run.lock").exists()
    finally:
        sleeper.kill()
        sleeper.wait()
