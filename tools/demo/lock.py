"""One local run per work directory, and the record of every process it started.

``WORKDIR/run.lock`` is held with flock(2) for the whole run, so the kernel releases it when the
run ends in any way, kill -9 included. The file says, as JSON, which process holds it and every
process the run started: ``{"pid": ..., "processes": [{"name", "pid", "start_ticks"}]}``.
``start_ticks`` is the process's start time from /proc, so a PID that the system has since given
to an unrelated program is never signalled.

:meth:`RunLock.acquire` refuses (:class:`Busy`, naming the holder's PID) while another run holds
the lock. A lock file nobody holds is the leftover of a crashed run: ``acquire`` takes it over and
returns the processes that run recorded and that still run, for the caller to stop; they stay
recorded until this run ends, in case it crashes too.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path


class Busy(RuntimeError):
    """Another run holds the lock."""

    def __init__(self, path: Path, holder: int | None):
        self.path = path
        self.holder = holder
        who = f"pid {holder}" if holder else "another process"
        super().__init__(f"a local run is already running in {path.parent} ({who}); "
                         f"stop it first (q in its terminal, or kill {holder or 'it'})")


@dataclass(frozen=True)
class Started:
    """A process a run started, as the lock file records it."""

    name: str
    pid: int
    start_ticks: int


def start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot, or None if there is no such process
    (or only its zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command name: state is field 3 of stat(5), starttime field 22.
    return None if fields[0] == "Z" else int(fields[19])


def still_running(started: Started) -> bool:
    return start_ticks(started.pid) == started.start_ticks


class RunLock:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd: int | None = None
        self._processes: list[Started] = []

    def acquire(self) -> list[Started]:
        """Take the lock; returns what a crashed previous run left running.

        :raises Busy: another run holds it.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read(fd).get("pid")
                os.close(fd)
                raise Busy(self.path, holder) from None
            # The holder we waited behind may have removed the file meanwhile: a lock on an
            # unlinked file locks nothing.
            with contextlib.suppress(FileNotFoundError):
                if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                    break
            os.close(fd)
        leftover = [p for p in (Started(**p) for p in _read(fd).get("processes", []))
                    if still_running(p)]
        self._fd = fd
        # Still recorded, now as this run's: should this run die before stopping them, the next
        # one finds them here.
        self._processes = list(leftover)
        self._write()
        return leftover

    def record(self, name: str, pid: int) -> None:
        """Note a process this run started (written at once: the run may be killed next)."""
        ticks = start_ticks(pid)
        if ticks is not None:
            self._processes.append(Started(name, pid, ticks))
            self._write()

    @property
    def processes(self) -> list[Started]:
        return list(self._processes)

    def release(self) -> None:
        """Remove the lock file and let go (only once everything recorded is stopped)."""
        if self._fd is None:
            return
        self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None

    def _write(self) -> None:
        data = json.dumps({"pid": os.getpid(),
                           "processes": [asdict(p) for p in self._processes]}, indent=1)
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data.encode() + b"\n", 0)


def _read(fd: int) -> dict:
    size = os.fstat(fd).st_size
    try:
        data = json.loads(os.pread(fd, size, 0) or b"{}")
    except ValueError:  # cut short by a crash mid-write: nothing to trust
        return {}
    return data if isinstance(data, dict) else {}
