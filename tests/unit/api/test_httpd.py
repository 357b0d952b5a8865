"""computed.api.httpd: the server's limits, its graceful stop and its access log, on loopback
with a small WSGI application (the compute API itself is tests/functional/test_api*.py's)."""

from __future__ import annotations

import http.client
import logging
import socket
import threading
import time

import pytest

from computed.api import httpd
from computed.conf.errors import ConfigError
from computed.runtime.stopping import StopRequest


class Application:
    """Answers 200 with the body it read; ``/slow`` waits until ``release`` is set."""

    def __init__(self):
        self.release = threading.Event()
        self.entered = threading.Event()

    def __call__(self, environ, start_response):
        if environ["PATH_INFO"] == "/slow":
            self.entered.set()
            self.release.wait(30)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        start_response("200 OK", [("Content-Type", "text/plain"),
                                  ("Content-Length", str(len(body) + 2))])
        return [b"ok" + body]


@pytest.fixture
def served():
    """An application served by one worker with ONE thread and a 1 s client timeout."""
    reservation = httpd.reserve("127.0.0.1", 0)
    settings = httpd.ServerSettings(host="127.0.0.1", port=reservation.getsockname()[1],
                                    threads=1, client_timeout=1, max_header_size=4096,
                                    graceful_shutdown_timeout=5, backlog=16)
    application, stop = Application(), StopRequest()
    thread = threading.Thread(target=httpd.serve, args=(application, settings, stop))
    thread.start()
    _wait_listening(settings.port)
    yield settings, application, stop
    stop.request()
    application.release.set()
    thread.join(15)
    reservation.close()
    assert not thread.is_alive()


def _wait_listening(port):
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def _get(port, path="/", headers=None, body=None, method="GET"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_a_body_shorter_than_its_content_length_frees_the_only_thread(served):
    settings, _, _ = served
    hung = socket.create_connection(("127.0.0.1", settings.port))
    try:
        hung.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten..")
        # The one thread reads that body until the client timeout; then it serves the next.
        assert _get(settings.port) == (200, b"ok")
        # The hung connection was closed by the server (with a 400 or 408, or without an
        # answer when the timeout struck before the reply), not left open for ever.
        hung.settimeout(10)
        answer = b""
        while chunk := hung.recv(65536):
            answer += chunk
        assert answer.split(b"\r\n")[0] in (b"", b"HTTP/1.1 400 Bad Request",
                                               b"HTTP/1.1 408 Request Timeout"), answer
    finally:
        hung.close()


def test_headers_above_the_limit_are_refused_before_the_application(served):
    settings, _, _ = served
    status, _ = _get(settings.port, headers={"X-Big": "a" * 8192})
    assert status in (413, 431)


def test_a_stop_lets_the_request_in_flight_finish(served):
    settings, application, stop = served
    answers = []
    client = threading.Thread(target=lambda: answers.append(_get(settings.port, "/slow")))
    client.start()
    assert application.entered.wait(10)
    stop.request()
    application.release.set()
    client.join(15)
    assert answers == [(200, b"ok")]


def test_every_request_is_logged(served, caplog):
    settings, _, _ = served
    with caplog.at_level(logging.INFO, logger="computed.api.access"):
        _get(settings.port, "/path?q=1", method="POST", body=b"abc",
             headers={"Content-Length": "3"})
    lines = [r.getMessage() for r in caplog.records if r.name == "computed.api.access"]
    assert len(lines) == 1
    assert '"POST /path?q=1" status 200 len 5' in lines[0]


def test_a_port_in_use_is_a_configuration_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"bind_port.*{port}"):
            httpd.reserve("127.0.0.1", port)
