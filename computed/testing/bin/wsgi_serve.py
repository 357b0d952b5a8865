"""Serve a WSGI application on 127.0.0.1 with a thread per request (standard library only).

Run with the service's own virtualenv: ``python wsgi_serve.py MODULE:ATTR PORT [WORKERS]``.
Request lines are not logged: the application logs what matters, and per-request lines would
drown it.

WORKERS (default 1): with 1, one process imports the application and serves it (what every test
uses). With N > 1, pre-fork as uwsgi does: the parent binds the socket once, then forks N worker
processes that each import the application on their own (uwsgi's ``lazy-apps``, as devstack runs
Placement: nothing the application opens at import, a database pool, is shared across a fork) and
serve the shared socket with a thread per request; the kernel hands each connection to one of
them. One Python process is held to one core by its GIL; a production Placement runs several.
The parent serves nothing: it waits, and stops every worker (SIGTERM, then SIGKILL) and exits
when it is told to stop (SIGTERM, SIGINT) or when any worker exits (exit status 1 then: a worker
that died is a failure, not a smaller server). Workers also get SIGTERM if the parent dies
without stopping them (``PR_SET_PDEATHSIG``): no worker outlives it holding the port. All of them
are in the parent's process group, which computed/testing/process.stop signals.

A chunked request body (``Transfer-Encoding: chunked``: what a client uploading a file of no
known length sends, Tempest's Glance image upload among them) is read whole before the
application runs and handed to it with its ``Content-Length``: wsgiref alone passes the raw
chunked stream without a length, which Glance read until the client gave up.
"""

import ctypes
import importlib
import io
import os
import signal
import socketserver
import sys
import time
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 128


def dechunked(stream) -> bytes:
    """The body of a chunked request read from ``stream`` (its trailers skipped)."""
    body = bytearray()
    while True:
        size = int(stream.readline(65537).split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while stream.readline(65537).strip():  # trailers, up to the empty line
                pass
            return bytes(body)
        body += stream.read(size)
        stream.readline(65537)  # the CRLF after the chunk


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        pass

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = dechunked(self.rfile)
            self.rfile = io.BytesIO(body)
            del self.headers["Transfer-Encoding"]
            self.headers["Content-Length"] = str(len(body))
        return True


PR_SET_PDEATHSIG = 1
#: Seconds a worker has to end after SIGTERM before the parent kills it.
WORKER_GRACE = 5.0


class Stop(Exception):
    """The parent was told to stop (SIGTERM or SIGINT)."""


def load(target: str):
    """The application ``MODULE:ATTR`` names."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _die_with(parent: int) -> None:
    """SIGTERM this process when ``parent`` ends (Linux); exit now if it already has."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the process group still reaches us
        pass
    if os.getppid() != parent:
        os._exit(1)


def _worker(server: ThreadingWSGIServer, target: str, parent: int) -> None:
    """A forked worker: import the application, serve the inherited socket; never returns."""
    try:
        _die_with(parent)
        server.set_app(load(target))
        server.serve_forever()
    except BaseException:  # noqa: BLE001 - its traceback goes to the log, then it exits
        import traceback
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


def _stop_workers(workers: set[int], grace: float = WORKER_GRACE) -> None:
    """SIGTERM each worker still running, wait up to ``grace`` s for all, SIGKILL the rest and
    reap them: when this returns none of them holds the socket."""
    for pid in workers:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while workers and time.monotonic() < deadline:
        for pid in list(workers):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                workers.discard(pid)
        time.sleep(0.02)
    for pid in workers:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    workers.clear()


def serve_workers(server: ThreadingWSGIServer, target: str, count: int) -> int:
    """Fork ``count`` workers serving ``server``'s socket; wait until told to stop (0) or until
    one of them exits (1), then stop them all. Returns the parent's exit status."""
    parent = os.getpid()
    workers: set[int] = set()

    def stop(signum, frame):
        raise Stop(signal.Signals(signum).name)

    stopping = (signal.SIGTERM, signal.SIGINT)
    previous = {signum: signal.signal(signum, stop) for signum in stopping}
    try:
        # Blocked while forking: a worker must never run the parent's handler (it would go on
        # as a second parent); each puts the defaults back first (it just ends on SIGTERM).
        # A SIGTERM that came meanwhile is delivered to the parent once unblocked.
        signal.pthread_sigmask(signal.SIG_BLOCK, stopping)
        try:
            for _ in range(count):
                pid = os.fork()
                if pid == 0:
                    try:
                        for signum, handler in previous.items():
                            signal.signal(signum, handler)
                        signal.pthread_sigmask(signal.SIG_UNBLOCK, stopping)
                        _worker(server, target, parent)
                    finally:
                        os._exit(1)
                workers.add(pid)
            server.socket.close()  # the workers hold it; the parent never accepts
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stopping)
        pid, status = os.wait()
        workers.discard(pid)
        print(f"wsgi_serve: worker {pid} exited (status {status:#x}); stopping the others",
              file=sys.stderr, flush=True)
        return 1
    except Stop:
        return 0
    finally:
        # A second SIGTERM during the stop must not cut it short (workers left running).
        for signum in stopping:
            signal.signal(signum, signal.SIG_IGN)
        _stop_workers(workers)


def main() -> None:
    target, port = sys.argv[1], int(sys.argv[2])
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    if workers < 1:
        sys.exit(f"wsgi_serve: workers {workers}: at least 1")
    # Some applications parse the command line at import (Keystone's oslo.config): they get
    # none, their configuration comes from the environment.
    del sys.argv[1:]
    if workers == 1:
        app = load(target)
        server = make_server("127.0.0.1", port, app, server_class=ThreadingWSGIServer,
                             handler_class=QuietHandler)
        server.serve_forever()
        return
    # Bound before any worker imports the application: a connection made meanwhile waits in
    # the backlog for the first worker ready.
    server = make_server("127.0.0.1", port, None, server_class=ThreadingWSGIServer,
                         handler_class=QuietHandler)
    sys.exit(serve_workers(server, target, workers))


if __name__ == "__main__":
    main()
