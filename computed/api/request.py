"""One API call as controllers see it, and the JSON responses they return.

Owns :class:`Call` (the request, its context, its microversion, the backends, the API's base
URL) and the helpers every controller uses to read a body (:meth:`Call.body`, validated by
:mod:`computed.api.schemas`) and answer (:func:`json_response`, :func:`empty`, times as
:func:`microsecond_time`).

A Call exists only for a request within :mod:`computed.api.limits`: path parameters, the
caller's user and project ids, and every query parameter are checked when it is made (NUL,
lengths, ``limit`` in ASCII digits, ``sort_dir`` a direction), its body when it is read (size,
depth, NaN, NUL), so a controller never meets them; each refusal is a 400 naming the field.
"""

from __future__ import annotations

import dataclasses
import json
import urllib.parse
from typing import TYPE_CHECKING, Any

import webob

from computed.api import errors, limits, microversion, schemas

if TYPE_CHECKING:
    from computed.api.backends import Backends

#: Where the API's resources live under the service root.
PREFIX = '/v2.1'
#: Nova's v2.0: the same resources at microversion 2.1, without microversion headers.
PREFIX_V2_0 = '/v2'
#: The WSGI environ key of the prefix a request came under (:data:`PREFIX` unless set).
PREFIX_KEY = 'computed.api.prefix'


@dataclasses.dataclass(frozen=True)
class Call:
    request: webob.Request
    context: Any  # oslo_context RequestContext
    version: microversion.Version
    backends: Backends
    params: dict[str, str]

    def __post_init__(self) -> None:
        for name, value in self.params.items():
            limits.identifier(value, name)
        for name in ('project_id', 'user_id'):
            value = getattr(self.context, name, None)
            if value:
                limits.identifier(value, f"The token's {name}")
        limits.query(self.request.GET.items())

    @property
    def base_url(self) -> str:
        """``http://host:port[/script]/v2.1`` (or ``/v2``), as the client reached it."""
        return self.request.application_url + self.request.environ.get(PREFIX_KEY, PREFIX)

    def next_links(self, path: str, marker: str,
                   limit: int | None = None) -> list[dict[str, str]]:
        """A list's ``*_links``: the next page of ``path`` (after ``base_url``), this request's
        query with its ``marker`` replaced by ``marker``; with ``limit``, its ``limit`` replaced
        too (a page size the request did not state, its default, is then in the link)."""
        replaced = {'marker'} if limit is None else {'marker', 'limit'}
        query = [(key, value) for key, value in self.request.GET.items()
                 if key not in replaced]
        if limit is not None:
            query.append(('limit', str(limit)))
        query.append(('marker', marker))
        return [{'rel': 'next',
                 'href': f'{self.base_url}{path}?{urllib.parse.urlencode(query)}'}]

    def at_least(self, major: int, minor: int) -> bool:
        return self.version >= microversion.Version(major, minor)

    def body(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The JSON body, validated against ``schema``; 400 naming what is wrong."""
        length = self.request.content_length
        if length is not None and length > limits.MAX_BODY_BYTES:
            # Refused before it is read.
            raise errors.RequestTooLarge(f'The request body is {length} bytes; the limit is '
                                         f'{limits.MAX_BODY_BYTES}')
        document = limits.json_body(self.request.body)
        schemas.validate(schema, document)
        return document

    def query(self, name: str) -> str | None:
        return self.request.GET.get(name)

    def query_int(self, name: str, minimum: int = 0, maximum: int = limits.MAX_INT
                  ) -> int | None:
        """A number query parameter in ASCII digits (400 naming it otherwise); None if
        absent."""
        text = self.query(name)
        return None if text is None else limits.query_int(text, name, minimum, maximum)

    def limit(self) -> int:
        """The page size: ``limit`` (checked already) capped at ``[api] max_limit``."""
        cap = self.backends.conf.api.max_limit
        text = self.query('limit')
        return cap if text is None else min(limits.query_int(text, 'limit'), cap)


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


def microsecond_time(value: Any) -> str | None:
    """A naive UTC time as Nova's usage and aggregate documents show it (ISO 8601 to the
    microsecond, no zone); None stays None."""
    return None if value is None else value.isoformat(timespec='microseconds')


def flag(value: str | None) -> bool:
    """A boolean query parameter as Nova reads them (1, true, yes, on)."""
    return (value or '').strip().lower() in ('1', 't', 'true', 'y', 'yes', 'on')
