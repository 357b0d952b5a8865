"""The stop a long-running process is asked for: SIGTERM or SIGINT, as one event.

Owns the one thing a signal handler does in computed's services: set a
:class:`threading.Event` (and remember which signal it was). Python runs signal handlers in the
main thread between bytecodes, so the handler only sets the event; the main loop, which waits on
it, does the stopping. Any thread may wait on :attr:`StopRequest.event` or call
:meth:`StopRequest.wait`, which returns as soon as the stop is asked for (no polling tick).

Guarantees: :meth:`install` takes over SIGTERM and SIGINT only (so Ctrl-C means "stop cleanly",
not KeyboardInterrupt in the middle of a drain); a stop asked for twice is still one stop. A stop
asked by a call may waive the drain (:attr:`StopRequest.drain`): what a test's tear-down asks of
a daemon run in its process, where a SIGKILL would end the test process too.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterable

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Set once a stop is asked for, by a signal (:meth:`install`) or a call (:meth:`request`).

    Threads: set by the main thread's signal handler or by any thread through :meth:`request`;
    read and waited on by any thread.
    """

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal_name = ''
        self._no_drain = threading.Event()

    @property
    def drain(self) -> bool:
        """Whether the stop asks the service to hand its work over before it ends (a signal's
        always does; :meth:`request` with ``drain=False`` does not)."""
        return not self._no_drain.is_set()

    @property
    def requested(self) -> bool:
        return self.event.is_set()

    def request(self, reason: str = 'requested', drain: bool = True) -> None:
        """Ask for the stop; ``drain=False``: end without handing work over first (a daemon
        leaves its group at once). A request without drain wins over one with, whichever came
        first, for a service that has not yet begun to drain."""
        if not drain:
            self._no_drain.set()
        if not self.event.is_set():
            self.signal_name = reason
        self.event.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block up to ``timeout`` seconds (None: until asked); True once a stop is asked for."""
        return self.event.wait(timeout)

    def handle(self, signum: int, _frame: object) -> None:
        self.request(signal.Signals(signum).name)

    def install(self, signums: Iterable[int] = STOP_SIGNALS) -> StopRequest:
        """Make ``signums`` set this request (call from the main thread)."""
        for signum in signums:
            signal.signal(signum, self.handle)
        return self
