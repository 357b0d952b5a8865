"""The Compute API's error responses, and the guarantee that no traceback reaches a client.

Owns the error body format clients parse (``{"itemNotFound": {"code": 404, "message":
"..."}}``: the key names the kind of fault, as Nova's fault wrapper names them) and the
exceptions controllers raise to produce one. A path or query string that is not UTF-8 is a 400
before anything reads it. Anything else raised while serving a request
becomes a 500 ``computeFault`` with a generic message (the traceback goes to the log, with the
request id) and is counted in :data:`FAULTS`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import webob
from kazoo import exceptions as zk_exc
from kazoo.handlers.threading import KazooTimeoutError
from prometheus_client import CollectorRegistry, Counter

LOG = logging.getLogger(__name__)

#: The API's metrics, exposed at ``/metrics`` by :mod:`computed.api.app`.
REGISTRY = CollectorRegistry()
RESPONSES = Counter('computed_api_responses', 'Compute API responses by status code',
                    ['status'], registry=REGISTRY)
FAULTS = Counter('computed_api_faults', 'Compute API requests that failed with an '
                 'unexpected error (500)', registry=REGISTRY)

#: The body key of each status, as Nova's clients know them.
FAULT_NAMES = {400: 'badRequest', 401: 'unauthorized', 403: 'forbidden', 404: 'itemNotFound',
               405: 'badMethod', 406: 'notAcceptable', 409: 'conflict',
               # 410: Nova names no fault for it, so its body is a computeFault.
               410: 'computeFault', 413: 'overLimit',
               415: 'badMediaType', 501: 'notImplemented', 503: 'serviceUnavailable'}


class APIError(Exception):
    """An error response: status and a message for the client."""

    status = 500

    def __init__(self, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.headers = headers or {}


class BadRequest(APIError):
    status = 400


class Unauthorized(APIError):
    status = 401


class Forbidden(APIError):
    status = 403


class NotFound(APIError):
    status = 404


class MethodNotAllowed(APIError):
    status = 405


class NotAcceptable(APIError):
    status = 406


class Conflict(APIError):
    status = 409


class RequestTooLarge(APIError):
    status = 413


class Gone(APIError):
    """What Nova removed for good and answers 410 (nova-network's writes)."""

    status = 410


class NotImplementedHere(APIError):
    """What Nova's Ironic driver does not implement either (Nova answers 501 too)."""

    status = 501


class ServiceUnavailable(APIError):
    """A service the API needs (Placement, ZooKeeper, RabbitMQ, the database) failed."""

    status = 503


#: What kazoo raises when ZooKeeper does not carry a request out; computed's own bound on a
#: wait (:class:`computed.fleet.zookeeper.NoAnswer`) is a ``ConnectionLoss``, so one of them.
ZOOKEEPER_ERRORS = (zk_exc.KazooException, KazooTimeoutError)


def zookeeper_unavailable(exc: BaseException) -> ServiceUnavailable:
    """The 503 for ``exc``, one of :data:`ZOOKEEPER_ERRORS`: one line naming ZooKeeper and
    what it did not do (kazoo's own errors often have no message: then their name)."""
    name = type(exc).__name__
    text = ' '.join(str(exc).split())
    return ServiceUnavailable(f'ZooKeeper: {text} ({name})' if text else f'ZooKeeper: {name}')


#: Control characters (a client's value quoted in a message may hold them), shown escaped:
#: every message is one line.
_ESCAPES = {code: f'\\x{code:02x}' for code in (*range(0x20), 0x7f)}


def body(status: int, message: str) -> dict[str, Any]:
    return {FAULT_NAMES.get(status, 'computeFault'): {'code': status,
                                                      'message': message.translate(_ESCAPES)}}


def response(status: int, message: str, headers: dict[str, str] | None = None
             ) -> webob.Response:
    resp = webob.Response(status=status, content_type='application/json', charset='utf-8')
    resp.text = json.dumps(body(status, message))
    for key, value in (headers or {}).items():
        resp.headers[key] = value
    return resp


def _check_encoding(environ: dict[str, Any]) -> None:
    """400 for a path or query string that is not UTF-8 once unquoted (webob would raise
    UnicodeDecodeError wherever it is first read)."""
    from urllib.parse import unquote_to_bytes
    for key, what in (('PATH_INFO', 'The path'), ('QUERY_STRING', 'The query string')):
        raw = environ.get(key, '')
        try:
            # WSGI gives them as latin-1 strings of the raw bytes.
            unquote_to_bytes(raw.encode('latin-1')).decode('utf-8')
        except (UnicodeDecodeError, UnicodeEncodeError):
            raise BadRequest(f'{what} is not UTF-8') from None


class FaultWrapper:
    """WSGI middleware: an :class:`APIError` becomes its response, anything else a 500 without
    details; every response is counted by status."""

    def __init__(self, application: Any):
        self.application = application

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        def counting(status: str, headers: Any, exc_info: Any = None) -> Any:
            RESPONSES.labels(status.split(' ', 1)[0]).inc()
            return start_response(status, headers, exc_info)
        try:
            _check_encoding(environ)
            return self.application(environ, counting)
        except APIError as exc:
            return response(exc.status, exc.message, exc.headers)(environ, counting)
        except Exception:
            FAULTS.inc()
            LOG.exception('request %s %s (request id %s) failed', environ.get('REQUEST_METHOD'),
                          environ.get('PATH_INFO'), environ.get('openstack.request_id'))
            return response(500, 'Unexpected API Error. The error is logged with the request '
                                 'id; please report it.')(environ, counting)
