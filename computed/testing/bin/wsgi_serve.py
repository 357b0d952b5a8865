"""Serve a WSGI application on 127.0.0.1 with a thread per request (standard library only).

Run with the service's own virtualenv: ``python wsgi_serve.py MODULE:ATTR PORT``. Request lines are
not logged: the application logs what matters, and per-request lines would drown it.

A chunked request body (``Transfer-Encoding: chunked``: what a client uploading a file of no
known length sends, Tempest's Glance image upload among them) is read whole before the
application runs and handed to it with its ``Content-Length``: wsgiref alone passes the raw
chunked stream without a length, which Glance read until the client gave up.
"""

import importlib
import io
import socketserver
import sys
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


def main() -> None:
    target, port = sys.argv[1], int(sys.argv[2])
    # Some applications parse the command line at import (Keystone's oslo.config): they get
    # none, their configuration comes from the environment.
    del sys.argv[1:]
    module, _, attr = target.partition(":")
    app = getattr(importlib.import_module(module), attr)
    server = make_server("127.0.0.1", port, app, server_class=ThreadingWSGIServer,
                         handler_class=QuietHandler)
    server.serve_forever()


if __name__ == "__main__":
    main()
