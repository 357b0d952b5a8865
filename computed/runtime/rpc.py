"""The RPC bus: oslo.messaging transports, clients and servers for computed's services.

Owns how computed talks oslo.messaging, so that every service builds its transport the same way
from the configuration it was given (never from a global ``cfg.CONF``).

oslo.messaging registers most of its options on the conf it is handed, but its metrics and tracing
options only on the global ``cfg.CONF``; :func:`get_transport` registers them on computed's own
conf so that a client call does not fail with ``NoSuchOptError: oslo_messaging_metrics``.

:class:`Serving` starts a server (an RPC server or a notification listener) without blocking its
caller while the broker is unreachable, so that a process started before its broker stays
killable and serves as soon as the broker is up.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Sequence
from typing import Any

import oslo_messaging
import tenacity
from oslo_config import cfg

from computed.runtime.retry import Backoff

LOG = logging.getLogger(__name__)

# Seconds between two starts of a server whose start failed (most failures to reach the broker
# are retried inside oslo.messaging's start and never get here), doubling up to the cap.
_RESTART_DELAY = 1.0
_RESTART_DELAY_MAX = 30.0

# (private module, option list = group name) that oslo.messaging only puts on the global CONF.
_GLOBAL_ONLY_OPTS = (("oslo_messaging._metrics.client", "oslo_messaging_metrics"),
                     ("oslo_messaging._tracing.client", "oslo_messaging_tracing"))


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Put oslo.messaging's global-only option groups on ``conf`` too."""
    for module_name, group in _GLOBAL_ONLY_OPTS:
        try:
            opts = getattr(importlib.import_module(module_name), group)
        except (ImportError, AttributeError):  # other releases lay these out differently
            continue
        conf.register_opts(opts, group=group)


def get_transport(conf: cfg.ConfigOpts, url: str | None = None) -> oslo_messaging.Transport:
    """The RPC transport for ``[DEFAULT] transport_url`` (or ``url``)."""
    register_opts(conf)
    return oslo_messaging.get_rpc_transport(conf, url=url)


def get_client(transport: oslo_messaging.Transport, topic: str, server: str | None = None,
               version: str = "1.0", timeout: float | None = None) -> Any:
    """A client for ``topic``; ``server`` aims it at one member's queue."""
    target = oslo_messaging.Target(topic=topic, server=server, version=version)
    return oslo_messaging.get_rpc_client(transport, target, timeout=timeout)


def get_server(transport: oslo_messaging.Transport, topic: str, server: str,
               endpoints: Sequence[object]) -> oslo_messaging.MessageHandlingServer:
    """A server consuming ``topic`` (shared) and ``topic.server`` (its own)."""
    target = oslo_messaging.Target(topic=topic, server=server)
    return oslo_messaging.get_rpc_server(
        transport, target, list(endpoints), executor="threading",
        access_policy=oslo_messaging.DefaultRPCAccessPolicy)


class Serving:
    """One oslo.messaging server (RPC server or notification listener) started off the caller's
    thread; ``what`` names it in the log.

    An oslo.messaging server's ``start()`` first connects to the broker and, while the broker is
    unreachable, retries inside that call for ever (the rabbit driver logs each try). Called from
    a console script's main thread, that made the process deaf to SIGTERM until the broker came
    up. :meth:`start` returns at once: a daemon thread starts the server (again after a failure,
    with backoff), :attr:`started` says when it serves. :meth:`stop` and :meth:`wait` act on a
    server that started; one still waiting for the broker is abandoned (its thread ends with the
    process), and one whose start completes after :meth:`stop` is stopped at once. Thread-safe.
    """

    def __init__(self, what: str, server: Any):
        self.what = what
        self._server = server
        self._lock = threading.Lock()
        self._started = False  # the server serves
        self._stopped = False  # stop() stopped a server that served: wait() waits for it
        self._stopping = threading.Event()

    @property
    def started(self) -> bool:
        """True once the server serves (and until :meth:`stop`)."""
        return self._started

    def start(self) -> None:
        """Start the server in a thread of its own; returns at once."""
        threading.Thread(target=self._start, name=f"start {self.what}", daemon=True).start()

    def _start(self) -> None:
        # A failed start is not the broker's absence (retried inside): log it, start again
        # after _RESTART_DELAY, doubling up to _RESTART_DELAY_MAX, until stop().
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(Exception),
            stop=lambda _state: self._stopping.is_set(), sleep=self._stopping.wait,
            wait=Backoff(_RESTART_DELAY, _RESTART_DELAY_MAX), before_sleep=self._log_failure)
        try:
            started = retrying(self._start_once)
        except tenacity.RetryError:
            return  # stop() came while starts failed
        if not started:
            return
        with self._lock:
            if not self._stopping.is_set():
                self._started = True
                LOG.info("%s: connected to the message bus, serving", self.what)
                return
        self._server.stop()  # stop() came while this start was waiting for the broker
        self._server.wait()

    def _start_once(self) -> bool:
        if self._stopping.is_set():
            return False
        self._server.start()
        return True

    def _log_failure(self, retry_state: tenacity.RetryCallState) -> None:
        LOG.warning("cannot start %s, retrying in %.0fs: %s", self.what,
                    retry_state.next_action.sleep, retry_state.outcome.exception())

    def stop(self) -> None:
        """Stop serving (if it started); a start still under way is abandoned."""
        with self._lock:
            self._stopping.set()
            started, self._started = self._started, False
        if started:
            self._server.stop()
            self._stopped = True

    def wait(self) -> None:
        """Wait for the messages in flight of a server that :meth:`stop` stopped."""
        if self._stopped:
            self._server.wait()
