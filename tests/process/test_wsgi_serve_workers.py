"""The harness's WSGI server with worker processes (computed/testing/bin/wsgi_serve.py ``PORT
WORKERS``, what ``--placement-workers`` runs Placement under): every worker answers on the one
port; stopping the server (computed/testing/process.stop, as the harness does) leaves none of its
processes; a worker that dies takes the server down (the others stopped, the port free again);
a parent killed outright takes its workers with it."""

from __future__ import annotations

import os
import signal
import socket
import sys
import urllib.request

import psutil
import pytest

from computed.testing import process

SERVE = process.Path(__file__).resolve().parents[2] / "computed" / "testing" / "bin" / \
    "wsgi_serve.py"
APP = '''
import os


def application(environ, start_response):
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
'''
#: Requests made before every worker must have answered one: the kernel wakes the workers
#: waiting on the socket in turn, so two workers answer within a few requests.
TRIES = 200


def answer(port: int) -> int:
    """The PID of the worker that answered ``GET /``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as resp:
        return int(resp.read())


@pytest.fixture
def serve(tmp_path):
    """Start wsgi_serve.py with ``workers``; returns (pid, port, log). Stopped at the end."""
    (tmp_path / "pidapp.py").write_text(APP)
    started = []

    def start(workers: int) -> tuple[int, int, process.Path]:
        port = process.free_port()
        log = tmp_path / "serve.log"
        pid = process.spawn([sys.executable, str(SERVE), "pidapp:application", str(port),
                             str(workers)], log, env={**os.environ, "PYTHONPATH": str(tmp_path)},
                            cwd=tmp_path)
        started.append(pid)
        process.wait_until(lambda: process.port_open(port), 30, "wsgi_serve", pid=pid, log=log)
        return pid, port, log

    yield start
    for pid in started:
        process.stop(pid)


def group(pgid: int) -> set[int]:
    """Every live process of the process group ``pgid`` (zombies are not alive)."""
    found = set()
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.add(proc.pid)
        except (ProcessLookupError, PermissionError):
            pass
    return found


def workers_of(pid: int, count: int) -> set[int]:
    """The worker PIDs of the server ``pid``, once it has forked ``count`` of them."""
    process.wait_until(lambda: len(psutil.Process(pid).children()) == count, 30, "workers")
    return {child.pid for child in psutil.Process(pid).children()}


def port_free(port: int) -> bool:
    """A server could listen on ``port`` again (SO_REUSEADDR, as wsgi_serve binds: the
    connections just served may linger in TIME_WAIT)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def test_every_worker_answers_and_stop_leaves_no_process(serve):
    pid, port, _ = serve(2)
    workers = workers_of(pid, 2)
    seen = set()
    for _ in range(TRIES):
        seen.add(answer(port))
        if seen == workers:
            break
    assert seen == workers
    assert group(pid) == workers | {pid}
    process.stop(pid)
    assert group(pid) == set()
    assert port_free(port)


def test_one_worker_is_todays_server_without_fork(serve):
    pid, port, _ = serve(1)
    assert answer(port) == pid
    assert psutil.Process(pid).children() == []


def test_a_worker_that_dies_takes_the_server_down_and_frees_the_port(serve):
    pid, port, log = serve(2)
    dead, other = sorted(workers_of(pid, 2))
    os.kill(dead, signal.SIGKILL)
    process.wait_until(lambda: not process.alive(pid), 30, "the server's exit")
    assert not process.alive(other)
    assert group(pid) == set()
    assert port_free(port)
    assert f"worker {dead} exited" in log.read_text()


def test_a_parent_killed_outright_takes_its_workers_with_it(serve):
    pid, port, _ = serve(2)
    workers = workers_of(pid, 2)
    os.kill(pid, signal.SIGKILL)  # no handler runs: the workers learn it from the kernel
    process.wait_until(lambda: not group(pid), 30, "the workers' exit")
    assert not any(process.alive(w) for w in workers)
    assert port_free(port)
