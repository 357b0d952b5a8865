"""One API call as controllers see it, and the JSON responses they return.

Owns :class:`Call` (the request, its context, its microversion, the backends, the API's base
URL) and the helpers every controller uses to read a body (:meth:`Call.body`, validated by
:mod:`computed.api.schemas`) and answer (:func:`json_response`, :func:`empty`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import webob

from computed.api import errors, microversion, schemas

if TYPE_CHECKING:
    from computed.api.backends import Backends

#: Where the API's resources live under the service root.
PREFIX = '/v2.1'


@dataclasses.dataclass(frozen=True)
class Call:
    request: webob.Request
    context: Any  # oslo_context RequestContext
    version: microversion.Version
    backends: Backends
    params: dict[str, str]

    @property
    def base_url(self) -> str:
        """``http://host:port[/script]/v2.1``, as the client reached it."""
        return self.request.application_url + PREFIX

    def at_least(self, major: int, minor: int) -> bool:
        return self.version >= microversion.Version(major, minor)

    def body(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The JSON body, validated against ``schema``; 400 naming what is wrong."""
        try:
            document = json.loads(self.request.body or b'null')
        except ValueError as exc:
            raise errors.BadRequest(f'Malformed request body: {exc}') from None
        schemas.validate(schema, document)
        return document

    def query(self, name: str) -> str | None:
        return self.request.GET.get(name)


def json_response(status: int, document: Any, headers: dict[str, str] | None = None
                  ) -> webob.Response:
    resp = webob.Response(status=status, content_type='application/json', charset='utf-8')
    resp.text = json.dumps(document)
    for key, value in (headers or {}).items():
        resp.headers[key] = value
    return resp


def empty(status: int, headers: dict[str, str] | None = None) -> webob.Response:
    resp = webob.Response(status=status)
    resp.content_type = None
    for key, value in (headers or {}).items():
        resp.headers[key] = value
    return resp


def flag(value: str | None) -> bool:
    """A boolean query parameter as Nova reads them (1, true, yes, on)."""
    return (value or '').strip().lower() in ('1', 't', 'true', 'y', 'yes', 'on')
