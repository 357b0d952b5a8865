"""One local run per work directory; a crashed run's processes are handed to the next run (with
another process holding the lock: tests/process/test_demo_lock.py)."""

import json
import os

from tools.demo.lock import RunLock, start_ticks


def test_a_reused_pid_is_not_a_leftover(tmp_path):
    (tmp_path / "run.lock").write_text(json.dumps({"pid": 1, "processes": [
        {"name": "computed-1", "pid": os.getpid(), "start_ticks": start_ticks(os.getpid()) + 1}]}))
    assert RunLock(tmp_path / "run.lock").acquire() == []


def test_a_lock_cut_short_by_a_crash_is_taken_over(tmp_path):
    (tmp_path / "run.lock").write_text('{"pid": 12, "proc')
    assert RunLock(tmp_path / "run.lock").acquire() == []


def test_every_recorded_process_is_written_at_once(tmp_path):
    lock = RunLock(tmp_path / "run.lock")
    lock.acquire()
    lock.record("zookeeper", os.getpid())
    written = json.loads((tmp_path / "run.lock").read_text())
    assert written["processes"] == [{"name": "zookeeper", "pid": os.getpid(),
                                     "start_ticks": start_ticks(os.getpid())}]
    lock.release()
