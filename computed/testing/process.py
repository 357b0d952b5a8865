"""Process and socket helpers shared by the service launchers.

Guarantees: a process started with :func:`spawn` runs in a session of its own with its output in a
log file, so :func:`stop` can end it and every child it forked (ironic's workers, java's threads) by
signalling its process group; nothing is left holding the caller's stdout.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


class ServiceError(RuntimeError):
    """A service failed to start or to answer; the message names the service and its log."""


# A port handed out stays claimed this long (a file under PORT_CLAIMS), time enough for the
# slowest service to bind it; after that its own listener keeps it from being handed out again.
PORT_CLAIM_SECONDS = 600.0
PORT_CLAIMS = Path(tempfile.gettempdir()) / "computed-ports"
LOWEST_PORT = 10000


def _ports_outside_the_ephemeral_range() -> range:
    """The ports below the kernel's ephemeral range, which it gives to no ``connect()`` and no
    ``bind(0)``: a port picked there cannot be taken by some client's outgoing connection
    between the pick and the service's bind (the chaos run's epmd lost its port that way)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    return range(LOWEST_PORT, max(low, LOWEST_PORT + 1000))


def _claim(port: int) -> bool:
    """Claim ``port`` for this run across processes (xdist workers, their children): a file
    made with O_EXCL; a claim older than PORT_CLAIM_SECONDS has lapsed and is taken over."""
    PORT_CLAIMS.mkdir(exist_ok=True)
    path = PORT_CLAIMS / str(port)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        return True
    except FileExistsError:
        pass
    try:
        if time.time() - path.stat().st_mtime < PORT_CLAIM_SECONDS:
            return False
        path.unlink()
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        return True
    except OSError:  # another process took the lapsed claim first
        return False


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on and no other process of the suite was
    handed in the last PORT_CLAIM_SECONDS, picked outside the kernel's ephemeral range."""
    ports = _ports_outside_the_ephemeral_range()
    for _ in range(200):
        port = random.choice(ports)
        if _bindable(port) and _claim(port):
            return port
    raise ServiceError(f"no free port in {ports.start}-{ports.stop - 1} after 200 tries "
                       f"(claims in {PORT_CLAIMS})")


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def exchange(port: int, payload: bytes, expect: int, host: str = "127.0.0.1",
             timeout: float = 2.0) -> bytes:
    """Send ``payload`` and read up to ``expect`` bytes of the answer (b'' on any failure)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(payload)
            answer = b""
            while len(answer) < expect:
                chunk = sock.recv(expect - len(answer))
                if not chunk:
                    break
                answer += chunk
            return answer
    except OSError:
        return b""


def spawn(argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None,
          cwd: Path | None = None) -> int:
    """Start ``argv`` detached from the caller, output appended to ``log``; returns its PID."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True)
    return proc.pid


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A child of ours that exited stays a zombie until reaped: that is not alive.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except OSError as exc:  # not a group leader: signal the process alone
        if exc.errno != errno.EPERM:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def stop(pid: int | None, grace: float = 10.0) -> None:
    """SIGTERM the process group of ``pid``, then SIGKILL it after ``grace`` seconds."""
    if not pid:
        return
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    _signal_group(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def wait_until(check: Callable[[], bool], timeout: float, what: str,
               pid: int | None = None, log: Path | None = None, interval: float = 0.1) -> None:
    """Poll ``check`` until it is true; fail early, with the log's tail, if ``pid`` died."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if pid is not None and not alive(pid):
            raise ServiceError(f"{what}: process {pid} exited before it was ready{_tail(log)}")
        if time.monotonic() > deadline:
            raise ServiceError(f"{what}: not ready after {timeout:.0f}s{_tail(log)}")
        time.sleep(interval)


def _tail(log: Path | None, lines: int = 15) -> str:
    if log is None or not log.exists():
        return ""
    text = log.read_text(errors="replace").splitlines()[-lines:]
    return f" (log {log}):\n" + "\n".join(text)


def run(argv: Sequence[str], what: str, env: Mapping[str, str] | None = None,
        timeout: float = 600, cwd: Path | None = None) -> str:
    """Run a setup command to completion; a failure raises with its output."""
    try:
        proc = subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, env=dict(env) if env is not None else None,
                              timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise ServiceError(f"{what}: no answer after {timeout:g}s") from None
    if proc.returncode != 0:
        output = (proc.stdout + proc.stderr).strip().splitlines()[-20:]
        raise ServiceError(f"{what} failed (exit {proc.returncode}):\n" + "\n".join(output))
    return proc.stdout
