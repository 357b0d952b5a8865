"""computed.runtime.systemd against a real datagram socket, as systemd's manager would listen."""

from __future__ import annotations

import os
import socket
import uuid

import pytest

from computed.runtime import systemd


@pytest.fixture
def listener(tmp_path, monkeypatch):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = tmp_path / "notify"
    sock.bind(str(path))
    sock.settimeout(5)
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    yield sock
    sock.close()


def received(sock: socket.socket) -> list[str]:
    return sock.recv(4096).decode().split("\n")


def test_ready_sends_ready_and_status(listener):
    assert systemd.ready("joined; 3 nodes")
    assert received(listener) == ["READY=1", "STATUS=joined; 3 nodes"]


def test_stopping_and_status(listener):
    assert systemd.stopping("draining")
    assert received(listener) == ["STOPPING=1", "STATUS=draining"]
    assert systemd.status("two\nlines")
    assert received(listener) == ["STATUS=two lines"]  # a newline would start another field


def test_abstract_socket_name(monkeypatch):
    name = f"computed-test-{uuid.uuid4()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())
        sock.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert systemd.ready()
        assert received(sock) == ["READY=1"]


def test_no_socket_is_a_no_op(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert systemd.ready("x") is False
    assert systemd.notify("READY=1", environ={}) is False


def test_unreachable_socket_is_logged_not_raised(tmp_path, caplog):
    env = {"NOTIFY_SOCKET": str(tmp_path / "nobody-listens")}
    assert systemd.notify("READY=1", environ=env) is False
    assert "cannot notify systemd" in caplog.text


def test_watchdog_interval_is_half_the_unit_setting():
    pid = str(os.getpid())
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "30000000"}) == 15.0
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": pid}) == 15.0
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}) is None
    assert systemd.watchdog_interval({}) is None
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "junk"}) is None


def test_status_loop_sends_status_and_watchdog(listener, monkeypatch):
    monkeypatch.setenv("WATCHDOG_USEC", "200000")  # ping every 0.1 s
    loop = systemd.StatusLoop(lambda: "active; 7 nodes", interval=10).start()
    try:
        first, second = received(listener), received(listener)
    finally:
        loop.stop()
    assert first == second == ["WATCHDOG=1", "STATUS=active; 7 nodes"]


def test_status_loop_survives_a_failing_description(listener):
    def broken() -> str:
        raise RuntimeError("boom")
    loop = systemd.StatusLoop(broken, interval=0.05).start()
    try:
        # Nothing to say and no watchdog: an empty notify sends nothing, and the loop goes on.
        with pytest.raises(socket.timeout):
            listener.settimeout(0.3)
            listener.recv(4096)
    finally:
        loop.stop()
    assert loop._thread is not None and not loop._thread.is_alive()


def test_status_loop_without_systemd_starts_no_thread(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    loop = systemd.StatusLoop(lambda: "x").start()
    assert loop._thread is None
    loop.stop()
