"""Serve a WSGI application on 127.0.0.1 with a thread per request (standard library only).

Run with the service's own virtualenv: ``python wsgi_serve.py MODULE:ATTR PORT``. Request lines are
not logged: the application logs what matters, and per-request lines would drown it.
"""

import importlib
import socketserver
import sys
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 128


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        pass


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
