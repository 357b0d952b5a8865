"""What the tests of tools/run-local share: starting it as a newcomer does, reading what it says,
what it recorded, and what it left behind.

The tests are in three files, one concern each, so that the suite's workers run them side by
side (``--dist loadfile`` keeps a file on one worker, and each test starts a whole stack):
``test_run_local_exits.py`` (every way out stops everything), ``test_run_local_lock.py`` (one run
per work directory, a crashed run cleaned by the next) and ``test_run_local_view.py`` (the view's
keys, the compute API it shows, README.md's first server).

Each test starts ``tools/run-local`` (its own stack, in a scratch work directory) as a separate
process (:class:`RunLocal`): on a pseudo-terminal when the exit path needs one (``q``, Ctrl-C,
closing the terminal), else without a terminal, where it runs until signalled. What it started is
read from its lock file and the stack's state file while it runs; after it exits, none of those
processes, none of their process groups and no process naming the work directory may be left
(:func:`assert_nothing_left`).
"""

from __future__ import annotations

import functools
import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from computed.testing.process import alive

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RUN_LOCAL = ROOT / "tools" / "run-local"
NODES = 6
SMALL = ("--nodes", str(NODES), "--daemons", "2")
# Starting a stack takes 10-60 s on a loaded 2-core machine; a first run also builds the
# OpenStack services' virtualenvs.
READY_TIMEOUT = 600
EXIT_TIMEOUT = 90


class Output:
    """Everything a file descriptor yields, read by a thread so the writer never blocks;
    ``close`` closes the reader's end (through ``close``, the owner of the descriptor)."""

    def __init__(self, fd: int, close: Callable[[], None]):
        self.fd = fd
        self.text = ""
        self._close = close
        self._closing = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self._closing.is_set():
            # Never blocked in read(): a descriptor closed under a blocked read stays open until
            # that read returns, and the writer would not see its reader go until it wrote again.
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # a pty whose other side is gone reads EIO
                return
            if not chunk:
                return
            self.text += chunk.decode(errors="replace")

    def close(self) -> None:
        """Stop reading, then close the reader's end: the writer finds it gone at once."""
        self._closing.set()
        self.thread.join(10)
        self._close()

    def wait_for(self, text: str, proc: subprocess.Popen, timeout: float, since: int = 0) -> None:
        """Wait until ``text`` appears (after offset ``since`` of what was read)."""
        deadline = time.monotonic() + timeout
        while text not in self.text[since:]:
            if proc.poll() is not None:
                time.sleep(0.5)  # the last words
                raise AssertionError(f"run-local exited {proc.returncode} before {text!r}:\n"
                                     f"{self.text[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"run-local never showed {text!r}:\n{self.text[-4000:]}")
            time.sleep(0.2)


class RunLocal:
    """One tools/run-local process and what it said it started."""

    def __init__(self, workdir: Path, terminal: bool, extra: tuple[str, ...] = ()):
        self.workdir = workdir
        argv = [str(RUN_LOCAL), *SMALL, "--workdir", str(workdir), *extra]
        self.master: int | None = None
        if terminal:
            # setsid -c: a session of its own with the pty as controlling terminal, as a shell
            # in a terminal window gives it (Ctrl-C and the hang-up reach it through the pty).
            self.master, slave = pty.openpty()
            self.proc = subprocess.Popen(["setsid", "-c", *argv], stdin=slave, stdout=slave,
                                         stderr=slave, cwd=ROOT)
            os.close(slave)
            self.output = Output(self.master, functools.partial(os.close, self.master))
        else:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, cwd=ROOT,
                                         start_new_session=True)
            self.output = Output(self.proc.stdout.fileno(), self.proc.stdout.close)
        self.pids: set[int] = set()

    def wait_ready(self, inherited: set[int] = frozenset()) -> None:
        """Wait for the view; ``inherited``: a crashed run's processes, still in the record."""
        self.output.wait_for("providers in Placement", self.proc, READY_TIMEOUT)
        # Every process it started, as its files record them (read now: they go on exit).
        self.pids = recorded_pids(self.workdir) - inherited
        assert len(self.pids) >= 3, f"too few recorded processes: {self.pids}"
        assert all(alive(pid) for pid in self.pids), self.pids

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def wait_exit(self) -> int:
        try:
            return self.proc.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"run-local still running {EXIT_TIMEOUT}s after being told to "
                                 f"stop:\n{self.output.text[-4000:]}") from None

    def cleanup(self) -> None:
        """After a failed test: stop whatever is left, as a later run would."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(EXIT_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.master is not None:
            try:
                os.close(self.master)
            except OSError:
                pass
        for pid in self.pids | leftovers(self.workdir):
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def recorded_pids(workdir: Path) -> set[int]:
    pids = set()
    lock = workdir / "run.lock"
    if lock.exists():
        pids |= {p["pid"] for p in json.loads(lock.read_text())["processes"]}
    state = workdir / "state.json"
    if state.exists():
        pids |= {info["pid"] for info in json.loads(state.read_text()).values() if "pid" in info}
    return pids


def _proc_entries():
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace")
                environ = (entry / "environ").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if stat[0] != "Z":
                yield int(entry.name), int(stat[2]), cmdline + environ


def leftovers(workdir: Path, groups: set[int] = frozenset()) -> set[int]:
    """Live processes in one of ``groups`` or naming the work directory."""
    me = os.getpid()
    return {pid for pid, pgid, text in _proc_entries()
            if pid != me and (pgid in groups or str(workdir) in text)}


def assert_nothing_left(run: RunLocal) -> None:
    groups = run.pids | {run.proc.pid}
    deadline = time.monotonic() + 10  # processes killed a moment ago may still be reaped
    while True:
        left = {pid for pid in run.pids if alive(pid)} | leftovers(run.workdir, groups)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    described = {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:120] for pid in left
                 if Path(f"/proc/{pid}").exists()}
    assert not left, f"left running after exit: {described}\n{run.output.text[-3000:]}"
    assert not (run.workdir / "run.lock").exists()
    assert not (run.workdir / "state.json").exists()


@pytest.fixture
def workdir(tmp_path):
    return tmp_path / "demo"


@pytest.fixture
def runs():
    started: list[RunLocal] = []
    yield started
    for run in started:
        run.cleanup()


def start(runs, workdir, terminal=False, extra=()) -> RunLocal:
    run = RunLocal(workdir, terminal, extra)
    runs.append(run)
    return run


