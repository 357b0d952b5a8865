"""The one HTTP layer under every request computed makes to Placement.

Owns what all Placement requests share, whichever part of computed sends them (the providers
client in :mod:`computed.placement.client`, the instance allocations in
:mod:`computed.placement.allocations`): the microversion, the mapping of failures to
:class:`PlacementError` / :class:`PlacementUnavailable`, and reading Placement's JSON answers
and error documents. Requests go through a keystoneauth1 ``Adapter`` the caller configures
(``computed.runtime.keystone.load_adapter(conf, "placement")``).

Guarantees:

* Every request carries ``OpenStack-API-Version: placement`` :data:`MICROVERSION` and asks for
  JSON; keystoneauth never raises for an HTTP status (``raise_exc=False``): callers look at the
  status themselves, and only the failures below become exceptions here.
* Every request is bounded by the session's timeout (``[placement] timeout``,
  :data:`computed.conf.ksa.HTTP_TIMEOUT` by default), so a Placement that accepts connections and
  never answers fails the request instead of holding its caller.
* A connection failure, a timeout or a 5xx is :class:`PlacementUnavailable` (retry later); an
  authentication failure is :class:`PlacementError` (or Unavailable when Keystone answered
  5xx). Either names the provider or consumer the request was about and the request itself.
* Error details are one line of at most 300 characters.
* No retries here: what is worth retrying (a generation conflict, a taken node) is a decision of
  the caller, who knows what to re-read.
"""

from __future__ import annotations

import threading
from typing import Any

from keystoneauth1 import exceptions as ks_exc

#: The Placement API microversion of every request (1.39: consumer types, and ``in:`` traits).
MICROVERSION = '1.39'

_DETAIL_CHARS = 300


class PlacementError(Exception):
    """Placement refused a request or answered something unusable.

    ``uuid`` is the provider the request was about and ``consumer`` the
    consumer (an instance) for allocation requests; both None for requests
    about neither. ``status`` is the HTTP status (None without a response),
    ``code`` Placement's error code (``placement.*``) when given.
    """

    def __init__(self, uuid: str | None, what: str, status: int | None = None,
                 code: str | None = None, detail: str = '', *,
                 consumer: str | None = None):
        summary = what
        if status is not None:
            summary += f': HTTP {status}'
        if code:
            summary += f' {code}'
        if detail:
            summary += f': {detail}'
        subject = (f'consumer {consumer}' if consumer and not uuid
                   else f'provider {uuid or "-"}')
        super().__init__(f'{subject}: {summary}')
        self.uuid = uuid
        self.consumer = consumer
        self.what = what
        self.status = status
        self.code = code
        self.detail = detail


class PlacementUnavailable(PlacementError):
    """Placement could not be reached or failed (5xx): worth retrying."""


class PlacementHTTP:
    """Sends requests to Placement through a keystoneauth ``Adapter``; thread-safe."""

    def __init__(self, adapter: Any, microversion: str = MICROVERSION):
        self._adapter = adapter
        self._headers = {'OpenStack-API-Version': f'placement {microversion}',
                         'Accept': 'application/json'}
        self._count_lock = threading.Lock()
        self._requests = 0

    @property
    def request_count(self) -> int:
        """HTTP requests sent so far (for measurements and tests)."""
        return self._requests

    def request(self, method: str, url: str, uuid: str | None = None, body: Any = None, *,
                consumer: str | None = None) -> Any:
        """The response to ``method url`` (with ``body`` as JSON), whatever its status below 500.

        ``uuid`` (a provider) and ``consumer`` name what the request is about, for errors.

        :raises PlacementUnavailable: no answer, or a 5xx.
        :raises PlacementError: Keystone refused the credentials.
        """
        with self._count_lock:
            self._requests += 1
        kwargs: dict[str, Any] = {'headers': self._headers, 'raise_exc': False}
        if body is not None:
            kwargs['json'] = body
        what = f'{method} {url}'
        try:
            resp = self._adapter.request(url, method, **kwargs)
        except (ks_exc.ConnectTimeout, ks_exc.RequestTimeout) as exc:
            # The one line an operator sees about a Placement that accepts and never answers.
            raise PlacementUnavailable(
                uuid, what, consumer=consumer,
                detail=_short(f'no answer from Placement within [placement] timeout: {exc}'))
        except (ks_exc.ConnectionError, ks_exc.DiscoveryFailure) as exc:
            raise PlacementUnavailable(uuid, what, detail=_short(f'cannot reach Placement: {exc}'),
                                       consumer=consumer)
        except ks_exc.ClientException as exc:
            # Raised by authentication (Keystone), not by Placement.
            status = getattr(exc, 'http_status', None)
            cls = PlacementUnavailable if status and status >= 500 else PlacementError
            raise cls(uuid, what, status=status, detail=_short(str(exc)), consumer=consumer)
        if resp.status_code >= 500:
            raise error(uuid, what, resp, consumer=consumer)
        return resp


def error(uuid: str | None, what: str, resp: Any, *,
          consumer: str | None = None) -> PlacementError:
    """The exception for an answer the caller did not expect (Unavailable for a 5xx)."""
    cls = PlacementUnavailable if resp.status_code >= 500 else PlacementError
    return cls(uuid, what, status=resp.status_code, code=error_code(resp),
               detail=error_detail(resp), consumer=consumer)


def json_body(uuid: str | None, what: str, resp: Any, *,
              consumer: str | None = None) -> dict[str, Any]:
    """The JSON object of a 200 answer; anything else is a :class:`PlacementError`."""
    if resp.status_code != 200:
        raise error(uuid, what, resp, consumer=consumer)
    try:
        body = resp.json()
    except ValueError:
        raise PlacementError(uuid, what, status=resp.status_code,
                             detail='answer is not JSON', consumer=consumer) from None
    if not isinstance(body, dict):
        raise PlacementError(uuid, what, status=resp.status_code,
                             detail='answer is not a JSON object', consumer=consumer)
    return body


def error_code(resp: Any) -> str | None:
    """Placement's error code (``placement.*``) of an error answer, None when it has none."""
    try:
        return resp.json()['errors'][0].get('code')
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None


def error_detail(resp: Any) -> str:
    """The detail of an error answer (or its text), on one short line."""
    try:
        return _short(resp.json()['errors'][0].get('detail') or '')
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return _short(getattr(resp, 'text', '') or '')


def _short(text: str) -> str:
    text = ' '.join(text.split())
    return text if len(text) <= _DETAIL_CHARS else text[:_DETAIL_CHARS] + '…'
