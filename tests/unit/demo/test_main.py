"""tools/run-local's ways out, without starting anything: a pause between two views ends when
the reader of the output goes away, and a crashed run's processes are stopped computed's first
(the whole run, on a stack: tests/functional/test_run_local_exits.py and
test_run_local_lock.py)."""

import os
import sys
import threading

import pytest

from tools.demo import __main__ as demo
from tools.demo.lock import Started


def pipe_as_stdout(monkeypatch) -> int:
    """The run's stdout as the writer's end of a pipe; returns the reader's end. (Set in the
    test's body: pytest puts its own capture back on sys.stdout between setup and call.)"""
    read, write = os.pipe()
    monkeypatch.setattr(sys, "stdout", os.fdopen(write, "w"))
    return read


def test_a_pause_ends_when_the_reader_of_a_pipe_goes_away(monkeypatch):
    reader = pipe_as_stdout(monkeypatch)
    terminal = demo.Terminal()
    terminal.say("a view")
    assert os.read(reader, 100) == b"a view\n"
    os.close(reader)
    # Without the look at the pipe, this pause would end after its 30 s without a word.
    with pytest.raises(demo.Stopped, match="its output was closed"):
        terminal.pause(30)
    assert terminal.gone
    terminal.say("nowhere")  # silent from then on, never a second Stopped


def test_a_pause_on_a_pipe_that_is_still_read_lasts_its_time(monkeypatch):
    reader = pipe_as_stdout(monkeypatch)
    terminal = demo.Terminal()
    terminal.pause(0.05)
    assert not terminal.gone
    os.close(reader)


def test_a_crashed_runs_computed_processes_stop_before_its_services(monkeypatch, tmp_path):
    stopped: list[str] = []
    names = {100: "zookeeper", 101: "placement", 102: "ironic", 103: "reporter-1",
             104: "api-1", 105: "computed-1", 106: "computed-2"}
    lock = threading.Lock()

    def stop(pid, grace):
        with lock:
            stopped.append(names[pid])

    monkeypatch.setattr(demo, "stop", stop)
    # In the order the crashed run recorded them: its services first.
    demo.clean_leftovers([Started(name, pid, 1) for pid, name in names.items()], tmp_path,
                         lambda text: None)
    services = {"zookeeper", "placement", "ironic"}
    assert sorted(stopped) == sorted(names.values())
    assert set(stopped[:4]).isdisjoint(services) and set(stopped[4:]) == services, stopped
