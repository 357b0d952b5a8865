"""computed.runtime.rpc.Serving: a server's start never blocks its caller, stop is safe at any
point of it. The oslo.messaging server is a fake whose start waits like one whose broker is away."""

from __future__ import annotations

import threading

from computed.runtime import rpc


class Server:
    """Blocks in start() until ``broker_up`` is set (as oslo.messaging retries inside start);
    ``failures`` starts raise first."""

    def __init__(self, failures: int = 0):
        self.broker_up = threading.Event()
        self.failures = failures
        self.starts = 0
        self.calls: list[str] = []
        self.done = threading.Event()

    def start(self) -> None:
        self.starts += 1
        if self.starts <= self.failures:
            raise OSError("access refused")
        self.broker_up.wait()
        self.calls.append("start")
        self.done.set()

    def stop(self) -> None:
        self.calls.append("stop")

    def wait(self) -> None:
        self.calls.append("wait")


def test_start_returns_while_the_broker_is_away_and_serves_once_it_is_up():
    server = Server()
    serving = rpc.Serving("test server", server)
    serving.start()  # returns: the broker is away
    assert not serving.started
    server.broker_up.set()
    assert server.done.wait(10)
    _wait_until(lambda: serving.started)
    serving.stop()
    serving.wait()
    assert server.calls == ["start", "stop", "wait"] and not serving.started


def test_stop_while_waiting_for_the_broker_abandons_the_start_and_stops_it_if_it_completes():
    server = Server()
    serving = rpc.Serving("test server", server)
    serving.start()
    serving.stop()
    serving.wait()  # nothing to wait for: it never served
    assert server.calls == []
    server.broker_up.set()  # the start completes after all: the server is stopped at once
    _wait_until(lambda: server.calls == ["start", "stop", "wait"])
    assert not serving.started


def test_a_failed_start_is_retried(monkeypatch, caplog):
    monkeypatch.setattr(rpc, "_RESTART_DELAY", 0.01)
    server = Server(failures=2)
    server.broker_up.set()
    serving = rpc.Serving("test server", server)
    serving.start()
    _wait_until(lambda: serving.started)
    assert server.starts == 3
    assert "cannot start test server" in caplog.text and "access refused" in caplog.text
    serving.stop()


def _wait_until(check, timeout: float = 10.0) -> None:
    done = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if check():
            return
        done.wait(0.01)
    raise AssertionError("condition not reached")


class MeetingServer(Server):
    """A started server whose ``meets`` call ("stop" or "wait") returns only once that call of
    every party of ``barrier`` has begun (as two oslo.messaging listeners each waiting out its
    own poll, or two pools their idle workers): made one after the other, the first would never
    return. ``fails`` makes that call raise."""

    def __init__(self, barrier: threading.Barrier, meets: str, fails: bool = False):
        super().__init__()
        self.broker_up.set()
        self.barrier = barrier
        self.meets = meets
        self.fails = fails

    def _meet(self, call: str) -> None:
        if call != self.meets:
            return
        self.barrier.wait(5)  # BrokenBarrierError unless the other party's call runs meanwhile
        if self.fails:
            raise OSError(f"{call} failed")

    def stop(self) -> None:
        super().stop()
        self._meet("stop")

    def wait(self) -> None:
        super().wait()
        self._meet("wait")


def _two_serving(meeting_at: str) -> tuple[threading.Barrier, list, list[rpc.Serving]]:
    """Two started servings of :class:`MeetingServer` (the first failing) meeting at the call
    ``meeting_at``, and their barrier."""
    barrier = threading.Barrier(2)
    servers = [MeetingServer(barrier, meeting_at, fails=True), MeetingServer(barrier, meeting_at)]
    servings = [rpc.Serving(f"server {n}", server) for n, server in enumerate(servers)]
    for serving in servings:
        serving.start()
        _wait_until(lambda serving=serving: serving.started)
    return barrier, servers, servings


def test_stop_together_stops_servers_at_once_and_a_failure_stops_no_other(caplog):
    barrier, servers, servings = _two_serving(meeting_at="stop")
    rpc.stop_together(servings)
    assert [server.calls for server in servers] == [["start", "stop"], ["start", "stop"]]
    assert not barrier.broken
    assert "stopping server 0 failed" in caplog.text and "stop failed" in caplog.text
    assert not any(serving.started for serving in servings)


def test_wait_together_waits_for_servers_at_once_and_a_failure_keeps_no_other(caplog):
    barrier, servers, servings = _two_serving(meeting_at="wait")
    rpc.stop_together(servings)
    rpc.wait_together(servings)
    assert [server.calls for server in servers] == [["start", "stop", "wait"]] * 2
    assert not barrier.broken
    assert "waiting for server 0 failed" in caplog.text and "wait failed" in caplog.text
