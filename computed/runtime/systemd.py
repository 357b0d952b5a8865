"""systemd's notification protocol (``sd_notify``), with the standard library only.

Owns how computed tells systemd about its life under ``Type=notify`` units: ``READY=1`` once
the service runs, ``STATUS=...`` lines that ``systemctl status`` shows, ``STOPPING=1`` when a
drain begins, and ``WATCHDOG=1`` pings when the unit sets ``WatchdogSec=``.

Guarantees: without ``$NOTIFY_SOCKET`` (not started by systemd, or a unit of another type) every
call is a no-op; a notification that cannot be delivered is logged, never raised, so systemd
being away never stops the daemon. The socket path may be a file system path or, starting with
``@``, a Linux abstract socket name (as systemd passes it).

Threads: :func:`notify` opens a socket of its own for every datagram, so the main thread
(``READY=1``, ``STOPPING=1``) and the status loop's thread never share one. :class:`StatusLoop`
runs its own thread (``systemd-status``), which only reads the service through ``describe``
(the reads a metrics scrape makes, each safe from any thread); its stop is an Event.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping

LOG = logging.getLogger(__name__)

ENV_SOCKET = "NOTIFY_SOCKET"
ENV_WATCHDOG_USEC = "WATCHDOG_USEC"
ENV_WATCHDOG_PID = "WATCHDOG_PID"


def _address(path: str) -> str | bytes:
    # '@name' is an abstract socket: a leading NUL byte instead of the '@'.
    if path.startswith("@"):
        return b"\0" + path[1:].encode()
    return path


def notify(*fields: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send ``fields`` (e.g. ``"READY=1"``) as one datagram; True when one was sent."""
    env = os.environ if environ is None else environ
    path = env.get(ENV_SOCKET)
    if not path or not fields:
        return False
    message = "\n".join(fields).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(_address(path))
            sock.sendall(message)
    except OSError as exc:
        LOG.warning("cannot notify systemd on %s: %s", path, exc)
        return False
    return True


def _one_line(text: str) -> str:
    # A STATUS value ends at the first newline: the rest would be read as other fields.
    return " ".join(text.split())


def ready(status: str = "") -> bool:
    """The service is up: systemd finishes starting the unit (and its dependents)."""
    return notify("READY=1", *([f"STATUS={_one_line(status)}"] if status else []))


def stopping(status: str = "") -> bool:
    """The service is stopping (draining): systemd shows 'deactivating' until it exits."""
    return notify("STOPPING=1", *([f"STATUS={_one_line(status)}"] if status else []))


def status(text: str) -> bool:
    return notify(f"STATUS={_one_line(text)}")


def watchdog_interval(environ: Mapping[str, str] | None = None) -> float | None:
    """Seconds between watchdog pings the unit asks for (half its WatchdogSec), or None."""
    env = os.environ if environ is None else environ
    usec = env.get(ENV_WATCHDOG_USEC)
    pid = env.get(ENV_WATCHDOG_PID)
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        seconds = int(usec) / 1_000_000
    except ValueError:
        return None
    return seconds / 2 if seconds > 0 else None


class StatusLoop:
    """A thread that sends ``STATUS=<describe()>`` every ``interval`` seconds (and ``WATCHDOG=1``
    when the unit has a watchdog), so ``systemctl status`` shows the daemon's state.

    The watchdog pings come from this thread: a process whose threads stop running (a frozen
    interpreter, a process stopped) stops pinging and systemd restarts it. With native threads
    one other thread stuck (a call that never returns) does not stop the pings, as a blocked
    event hub did under eventlet.
    """

    def __init__(self, describe: Callable[[], str], interval: float = 10.0):
        self._describe = describe
        watchdog = watchdog_interval()
        self._interval = min(interval, watchdog) if watchdog else interval
        self._watchdog = watchdog is not None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> StatusLoop:
        if os.environ.get(ENV_SOCKET):
            self._thread = threading.Thread(target=self._run, name="systemd-status",
                                            daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            fields = ["WATCHDOG=1"] if self._watchdog else []
            try:
                fields.append(f"STATUS={_one_line(self._describe())}")
            except Exception as exc:  # a status line is never worth stopping the pings for
                LOG.debug("cannot describe the service for systemd: %s", exc)
            notify(*fields)
            self._stop.wait(self._interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
