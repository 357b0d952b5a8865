"""The HTTP server of ``computed-api``: cheroot's threaded WSGI server, in one or more processes.

Owns everything between the listening port and the WSGI application: the port, the worker
processes, each worker's thread pool, the limits a client meets before the API sees its request,
the graceful stop and the access log. The application itself is :mod:`computed.api.app`.

Why cheroot. The candidates were uwsgi, gunicorn with its ``gthread`` workers, cheroot, and
oslo.service's threading backend. oslo.service's threading backend serves WSGI with cheroot
itself, so choosing cheroot is choosing what OpenStack's own services move to, without taking
oslo.service's service framework (computed has its own signal and stop handling). cheroot is
pure Python, has served CherryPy for two decades, and is the one of these whose per-connection
socket timeout bounds *every* read of a request: a body shorter than its Content-Length makes
the read time out after ``[api] client_timeout`` seconds, and the thread is free again (gunicorn's
gthread worker reads a body with no timeout; uwsgi is a C server to build and configure beside
Python, and stays available: :mod:`computed.api.wsgi` is for it and mod_wsgi).

Processes and threads. :func:`reserve` binds the port once in the parent (so a port in use is a
configuration error before anything starts, and ``bind_port = 0`` gets one concrete port), with
``SO_REUSEPORT`` and without listening: the kernel only hands connections to listening sockets.
Each worker then listens on that port with ``SO_REUSEPORT`` too, and the kernel spreads new
connections over the workers. One worker runs in the calling process; more are forked
(:func:`run_workers`), each building its own connections after the fork, and one that dies is
started again.

Limits set on purpose (``[api]``): ``threads`` requests at once per worker, ``backlog`` more
queued by the kernel, ``client_timeout`` for each read and write on a connection (idle
keep-alive connections included), ``max_header_size`` bytes of request line and headers (cheroot
answers 413/414 itself above it; the API's own, smaller limits answer with the Compute error body),
and ``graceful_shutdown_timeout`` for the requests in flight when SIGTERM comes.

Threads: :func:`serve` runs cheroot's accept loop on a thread of its own and waits on the stop
in the calling thread; requests run on cheroot's pool. The access log middleware keeps no state
between requests.
"""

from __future__ import annotations

import dataclasses
import logging as std_logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from cheroot import wsgi
from oslo_log import log as logging

from computed.conf.errors import ConfigError
from computed.runtime.stopping import StopRequest

LOG = logging.getLogger(__name__)
ACCESS_LOG = logging.getLogger('computed.api.access')
#: How often a supervising parent looks for workers that died.
_SUPERVISE_TICK = 0.5
#: A worker that dies this soon after it started is failing at start (a backend it cannot
#: reach): it is started again only after this pause, so a broken worker does not spin.
_RESPAWN_PAUSE = 2.0


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """The ``[api]`` options the server is built from."""

    host: str
    port: int
    threads: int
    client_timeout: int
    max_header_size: int
    graceful_shutdown_timeout: int
    backlog: int

    @classmethod
    def from_conf(cls, api: Any, port: int) -> ServerSettings:
        """From the ``[api]`` group, with the port :func:`reserve` gave."""
        return cls(host=api.bind_host, port=port, threads=api.threads,
                   client_timeout=api.client_timeout, max_header_size=api.max_header_size,
                   graceful_shutdown_timeout=api.graceful_shutdown_timeout,
                   backlog=api.backlog)


def reserve(host: str, port: int) -> socket.socket:
    """Bind ``host:port`` with SO_REUSEPORT, without listening, and return the socket (keep it
    open while serving: the port stays this process's). ConfigError when it cannot be bound."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise ConfigError('api', 'bind_host', f'cannot listen on {host}: '
                          f'{exc.strerror or exc}') from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError('api', 'bind_port', f'cannot listen on {host}:{port}: '
                          f'{exc.strerror or exc}') from None
    return sock


class _Server(wsgi.Server):
    """cheroot's WSGI server, its messages in computed's log rather than on stderr."""

    def error_log(self, msg: str = '', level: int = std_logging.INFO,
                  traceback: bool = False) -> None:
        # cheroot's documented hook; with traceback=True it is inside an except block.
        LOG.log(level, 'HTTP server: %s', msg, exc_info=traceback)


class AccessLog:
    """WSGI middleware: one line per request (method, path, status, bytes, seconds, client).

    The query string is logged (it never carries credentials in this API: tokens are headers).
    """

    def __init__(self, application: Callable[..., Any]) -> None:
        self.application = application

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        started = time.monotonic()
        answer: dict[str, str] = {}

        def recording_start_response(status: str, headers: list[tuple[str, str]],
                                     exc_info: Any = None) -> Any:
            answer['status'] = status.split(' ', 1)[0]
            answer['length'] = next((value for name, value in headers
                                     if name.lower() == 'content-length'), '-')
            return start_response(status, headers, exc_info)

        try:
            return self.application(environ, recording_start_response)
        finally:
            query = environ.get('QUERY_STRING')
            ACCESS_LOG.info('%s "%s %s%s" status %s len %s time %.3f',
                            environ.get('REMOTE_ADDR', '-'), environ.get('REQUEST_METHOD'),
                            environ.get('PATH_INFO', ''), f'?{query}' if query else '',
                            answer.get('status', '-'), answer.get('length', '-'),
                            time.monotonic() - started)


def serve(application: Callable[..., Any], settings: ServerSettings, stop: StopRequest) -> None:
    """Serve ``application`` on ``settings``' port until ``stop`` is asked for, then stop
    gracefully: no new connection, requests in flight get ``graceful_shutdown_timeout``."""
    server = _Server((settings.host, settings.port), AccessLog(application),
                     numthreads=settings.threads, max=settings.threads,
                     request_queue_size=settings.backlog, timeout=settings.client_timeout,
                     shutdown_timeout=settings.graceful_shutdown_timeout, reuse_port=True)
    server.max_request_header_size = settings.max_header_size
    server.prepare()
    accepting = threading.Thread(target=server.serve, name='api-accept', daemon=True)
    accepting.start()
    try:
        while not stop.wait(1.0) and accepting.is_alive():
            pass
    finally:
        server.stop()
        accepting.join(settings.graceful_shutdown_timeout + 5)


def run_workers(count: int, worker: Callable[[StopRequest], None], stop: StopRequest,
                grace: float) -> None:
    """Run ``worker(stop)`` in ``count`` forked processes until ``stop``; start a worker
    again when it dies. On stop each worker gets SIGTERM and ``grace`` seconds (then SIGKILL).

    The parent must not have started threads before calling this (fork copies only the calling
    thread). Each child installs its own stop on SIGTERM/SIGINT."""
    children: dict[int, float] = {}

    def start_one() -> None:
        pid = os.fork()
        if pid == 0:  # the worker: its own stop, its own connections
            status = 1
            try:
                worker(StopRequest().install())
                status = 0
            except SystemExit as exc:  # the worker said why, and asks for this status
                status = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: B036 - a worker must never return into the parent's loop
                LOG.exception('API worker %d failed', os.getpid())
            finally:
                os._exit(status)
        children[pid] = time.monotonic()

    for _ in range(count):
        start_one()
    while not stop.wait(_SUPERVISE_TICK):
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if not done:
                continue
            lived = time.monotonic() - children.pop(pid)
            LOG.error('API worker %d exited (status %d) after %.1f s; starting another',
                      pid, os.waitstatus_to_exitcode(status), lived)
            if lived < _RESPAWN_PAUSE and stop.wait(_RESPAWN_PAUSE):
                break
            start_one()
    for pid in children:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while children and time.monotonic() < deadline:
        for pid in list(children):
            if os.waitpid(pid, os.WNOHANG)[0]:
                children.pop(pid)
        time.sleep(0.1)
    for pid in children:
        LOG.warning('API worker %d did not stop within %g s: killed', pid, grace)
        _signal(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
