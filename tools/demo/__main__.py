"""A local computed fleet to watch and poke: real services, fake nodes, daemons, a live view.

Run through ``tools/run-local`` (which installs what is missing first), or from the repository
root as ``.venv/bin/python -m tools.demo``. Brings up ZooKeeper, RabbitMQ, PostgreSQL (when
available), Placement and Ironic on loopback, enrolls ``--nodes`` schedulable fake-hardware nodes,
starts ``--daemons`` computed daemons and one computed-reporter as separate processes
(:mod:`tools.demo.fleet`), and shows a live view (:mod:`tools.demo.view`). Keys: ``k`` kill -9 a
daemon, ``t`` stop one gracefully (it drains), ``a`` add a daemon, ``m`` toggle maintenance on a
node, ``q`` quit. Without a terminal it prints the view every few seconds and runs until
signalled (or ``--seconds N``). ``--rehome-grace N``: the daemons' ``[fleet] rehome_grace``
(30 s unless given), how long a killed daemon's instances wait before a peer adopts them.

One run per work directory: a second one refuses in one line while the first lives
(:mod:`tools.demo.lock`), and cleans up what a crashed one left. Every way out stops everything the
run started: ``q``, Ctrl-C, SIGTERM, the terminal closing (SIGHUP), the reader of its output going
away (``tools/run-local | head``: noticed while it waits between two views, not at the next
one), a failure while starting. What a crashed run left is stopped computed's processes first,
while their services still answer (:func:`clean_leftovers`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import select
import shutil
import signal
import sys
import termios
import time
import tty
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from computed.testing.process import ServiceError, stop
from computed.testing.stack import ORDER, Stack, together
from tools.demo.lock import Busy, RunLock

# futurist (through tooz) warns that eventlet is deprecated when it finds it installed; the local
# run does not use eventlet, and the warning would only sit on top of its screen.
warnings.filterwarnings("ignore", module="futurist")

if TYPE_CHECKING:
    from tools.demo.fleet import LocalFleet

ROOT = Path(__file__).resolve().parents[2]
PROG = "tools/run-local"
CLEAR = "\033[H\033[2J"
EXIT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Seconds a crashed run's process gets to stop after SIGTERM, before SIGKILL.
STOP_GRACE_LEFTOVER = 5.0
# Seconds between two views without a terminal.
QUIET_REFRESH = 5.0


class Stopped(BaseException):
    """Time to stop everything (a BaseException, as KeyboardInterrupt: no library's
    ``except Exception`` may swallow it)."""


class Terminal:
    """The run's output: a write that fails, or a pause between views that sees the reader or
    the terminal go away, stops the run once; it is silent from then on so that stopping is
    never cut short by it."""

    def __init__(self) -> None:
        self.gone = False

    def say(self, text: str, end: str = "\n") -> None:
        if self.gone:
            return
        try:
            sys.stdout.write(text + end)
            sys.stdout.flush()
        except OSError:  # EPIPE from a closed pipe, EIO from a closed terminal
            self._gone()

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` between two views, cut short when the output goes away meanwhile:
        the writer's end of a pipe whose reader left, or of a terminal that closed, says so at
        once (POLLERR, POLLHUP), where the next write would find out only a refresh later. An
        output that is a file never does."""
        if self.gone:
            time.sleep(seconds)
            return
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)  # no events asked: errors and hang-ups only
        if poller.poll(seconds * 1000):
            self._gone()

    def _gone(self) -> None:
        self.gone = True
        # Later writes, and the interpreter's last flush, go nowhere instead of failing.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        raise Stopped("its output was closed") from None


def _stop_on(signum: int, _frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def clean_leftovers(lock_leftovers: list, workdir: Path, say) -> None:
    """Stop what a crashed run in ``workdir`` left: its recorded processes, then its services.

    computed's processes go first, all at once, while the services they talk to still run (as
    :meth:`tools.demo.fleet.LocalFleet.down` stops them): a daemon or reporter whose ZooKeeper
    was stopped before it waits out its bounded leave, longer than the grace, and was killed
    after it, one at a time. The services' processes follow, all at once, then the stack's own
    stop (its databases, its virtual host)."""
    if lock_leftovers:
        say(f"stopping {len(lock_leftovers)} processes left by a crashed run: "
            + ", ".join(f"{p.name} (pid {p.pid})" for p in lock_leftovers))
        services = [p for p in lock_leftovers if p.name in ORDER]
        computed = [p for p in lock_leftovers if p.name not in ORDER]
        for wave in (computed, services):
            together([functools.partial(stop, p.pid, grace=STOP_GRACE_LEFTOVER) for p in wave])
    if (workdir / "state.json").exists():
        Stack.load(workdir).down()


def watch(fleet: LocalFleet, out: Terminal, seconds: float | None) -> None:
    """Show the view until ``q``, a signal, or ``seconds``; keys act on the fleet."""
    from tools.demo.view import render
    interactive = seconds is None and sys.stdin.isatty() and sys.stdout.isatty()
    deadline = None if seconds is None else time.monotonic() + seconds
    keys = {"k": fleet.kill, "t": fleet.terminate, "a": fleet.add, "m": fleet.maintenance}
    saved = termios.tcgetattr(sys.stdin) if interactive else None
    try:
        if interactive:
            tty.setcbreak(sys.stdin.fileno())
        while deadline is None or time.monotonic() < deadline:
            if interactive:
                # One row short: the cursor's line after the last one would scroll the top off.
                size = shutil.get_terminal_size()
                out.say(CLEAR + render(fleet.snapshot(), size.lines - 1, size.columns), end="")
            else:
                out.say(render(fleet.snapshot()) + "\n")
            if not interactive:
                out.pause(QUIET_REFRESH if deadline is None else
                          max(0.0, min(QUIET_REFRESH, deadline - time.monotonic())))
                continue
            ready, _, _ = select.select([sys.stdin], [], [], 1.0)
            if ready:
                key = sys.stdin.read(1)
                if key in ("q", ""):  # "": the terminal is gone
                    return
                if key in keys:
                    try:
                        keys[key]()
                    except Exception as exc:  # noqa: BLE001 - a key that failed is an event
                        fleet.log(f"{key}: failed: {type(exc).__name__}: {exc}")
    finally:
        if saved is not None:
            with contextlib.suppress(OSError, termios.error):
                termios.tcsetattr(sys.stdin, termios.TCSADRAIN, saved)


def main() -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0],
                                     allow_abbrev=False)
    parser.add_argument("--nodes", type=int, default=300, help="fake nodes (default %(default)s)")
    parser.add_argument("--daemons", type=int, default=3, help="daemons (default %(default)s)")
    parser.add_argument("--seconds", type=float,
                        help="run this long, then stop everything and exit (default: until q "
                             "or a signal)")
    parser.add_argument("--rehome-grace", type=float, default=None, metavar="SECONDS",
                        help="[fleet] rehome_grace of the daemons: how long a killed daemon's "
                             "instances wait before a peer adopts them (default 30)")
    parser.add_argument("--workdir", type=Path, default=ROOT / ".demo",
                        help="configs, logs and the services' data (default %(default)s)")
    args = parser.parse_args()
    if args.nodes < 1 or args.daemons < 1:
        parser.error("--nodes and --daemons must be at least 1")
    if args.rehome_grace is not None and not 0 <= args.rehome_grace < float("inf"):
        parser.error("--rehome-grace must be a number of seconds, 0 or more")
    workdir = args.workdir.resolve()
    lock = RunLock(workdir / "run.lock")
    try:
        leftovers = lock.acquire()
    except Busy as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    for signum in EXIT_SIGNALS:
        signal.signal(signum, _stop_on)
    out = Terminal()
    fleet = None
    status, why = 0, "q"
    try:
        # Imported once the lock is held: a second run refuses without loading these libraries.
        from tools.demo.fleet import LocalFleet
        options = {} if args.rehome_grace is None else {"rehome_grace": args.rehome_grace}
        fleet = LocalFleet(workdir, args.nodes, args.daemons, lock, out.say, **options)
        clean_leftovers(leftovers, workdir, out.say)
        fleet.up()
        watch(fleet, out, args.seconds)
        why = "time is up" if args.seconds is not None else "q"
    except Stopped as stopped:
        why = str(stopped)
    except ServiceError as exc:
        why, status = f"failed: {exc}", 1
    except Exception as exc:  # noqa: BLE001 - whatever failed, what was started must stop
        why, status = f"failed: {type(exc).__name__}: {exc} (logs in {workdir})", 1
    finally:
        # Stopping is not interrupted: a second Ctrl-C or a hang-up now would orphan the rest.
        for signum in EXIT_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        with contextlib.suppress(Stopped):
            out.say(f"\n{PROG}: stopping everything this run started ({why}) ...")
        if fleet is not None:
            fleet.down()
        lock.release()
        with contextlib.suppress(Stopped):
            out.say(f"{PROG}: stopped")
    return status


if __name__ == "__main__":
    sys.exit(main())
