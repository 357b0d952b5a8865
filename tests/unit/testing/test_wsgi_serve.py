"""The harness's WSGI server (computed/testing/bin/wsgi_serve.py, what serves Keystone,
Placement and Glance): a chunked request body (what Tempest's image upload sends, a file
without a length) reaches the application whole, with its length. wsgiref alone hands the
application the raw chunked stream without a length: Glance read it until the client gave up
(60 s), and the client's retry found the image already saving (a 409)."""

from __future__ import annotations

import http.client
import importlib.util
import threading
from pathlib import Path

import pytest

SERVE = Path(__file__).resolve().parents[3] / "computed" / "testing" / "bin" / "wsgi_serve.py"


def _module():
    spec = importlib.util.spec_from_file_location("wsgi_serve", SERVE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def echo(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length)
    start_response("200 OK", [("Content-Type", "application/octet-stream"),
                              ("Content-Length", str(len(body)))])
    return [body]


@pytest.fixture
def server():
    module = _module()
    served = module.make_server("127.0.0.1", 0, echo, server_class=module.ThreadingWSGIServer,
                                handler_class=module.QuietHandler)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield served.server_address[1]
    served.shutdown()
    served.server_close()


@pytest.mark.parametrize("chunks", [[b"*" * 1024], [b"a" * 10, b"b" * 5000, b"c"], []])
def test_a_chunked_body_reaches_the_application_whole(server, chunks):
    connection = http.client.HTTPConnection("127.0.0.1", server, timeout=10)
    connection.request("PUT", "/file", body=iter(chunks), encode_chunked=True,
                       headers={"Transfer-Encoding": "chunked"})
    response = connection.getresponse()
    assert (response.status, response.read()) == (200, b"".join(chunks))
    # The connection stays usable: the body was read to its end.
    connection.request("PUT", "/file", body=b"next", headers={"Content-Length": "4"})
    assert connection.getresponse().read() == b"next"
