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
* A 500 (Internal Server Error, not 502-504) is not taken for "unavailable" on its face: the
  request is sent once more, and if it gets 500 again while Placement answers a probe that reads
  its database (``GET`` :data:`PROBE`), the request itself is the cause (e.g. a NUL in a
  provider name, which PostgreSQL cannot store): :class:`PlacementRequestFailed`, a
  :class:`PlacementError` that callers must not resend as is (:func:`judge_500` decides). So a
  request that makes Placement fail costs three requests, never an endless retry. A 500 whose
  probe fails too stays :class:`PlacementUnavailable`.
* Error details are one line of at most 300 characters.
* No other retries here: what is worth retrying (a generation conflict, a taken node) is a
  decision of the caller, who knows what to re-read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from keystoneauth1 import exceptions as ks_exc

#: The Placement API microversion of every request (1.39: consumer types, and ``in:`` traits).
MICROVERSION = '1.39'

_DETAIL_CHARS = 300
#: What is asked of Placement after a request got 500 twice: a read of its database that no
#: request of computed's can break (a provider list filtered by a plain name).
PROBE = '/resource_providers?name=computed-placement-probe'
#: Seconds between a request's 500 and its one retry.
RETRY_500_DELAY = 0.2


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


class PlacementRequestFailed(PlacementError):
    """Placement answered 500 to this request twice while it answered others: the request
    itself makes Placement fail. Resending it as is would fail for ever."""


def judge_500(retry_status: int | None, probe_status: int | None) -> str:
    """PURE: what a 500 means, from the status of the request's one retry and of the probe
    sent after it (None: not sent, or no answer). ``"answered"``: the retry got an answer
    below 500, use it; ``"request"``: the retry got 500 and the probe was answered 200, the
    request is the cause; ``"unavailable"``: anything else (Placement fails whatever it is
    asked)."""
    if retry_status is not None and retry_status < 500:
        return 'answered'
    if retry_status == 500 and probe_status == 200:
        return 'request'
    return 'unavailable'


class PlacementHTTP:
    """Sends requests to Placement through a keystoneauth ``Adapter``; thread-safe."""

    def __init__(self, adapter: Any, microversion: str = MICROVERSION, *,
                 sleep: Callable[[float], None] = time.sleep):
        self._adapter = adapter
        self._sleep = sleep
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
        :raises PlacementRequestFailed: a 500 caused by the request (see the module docstring).
        :raises PlacementError: Keystone refused the credentials.
        """
        resp = self._send(method, url, uuid, body, consumer)
        if resp.status_code != 500:
            if resp.status_code > 500:
                raise error(uuid, f'{method} {url}', resp, consumer=consumer)
            return resp
        first = resp
        self._sleep(RETRY_500_DELAY)
        retry = self._answer_or_none(method, url, uuid, body, consumer)
        probe = None
        if retry is not None and retry.status_code == 500:
            probe = self._answer_or_none('GET', PROBE, None, None, None)
        verdict = judge_500(None if retry is None else retry.status_code,
                            None if probe is None else probe.status_code)
        if verdict == 'answered':
            return retry
        if verdict == 'request':
            raise PlacementRequestFailed(
                uuid, f'{method} {url}', status=500, code=error_code(retry),
                detail=_short('Placement failed this request twice (HTTP 500) while it answers '
                              'others: the request is the cause, not resent as is: '
                              + error_detail(retry)),
                consumer=consumer)
        raise error(uuid, f'{method} {url}', retry if retry is not None else first,
                    consumer=consumer)

    def _answer_or_none(self, method: str, url: str, uuid: str | None, body: Any,
                        consumer: str | None) -> Any:
        """The response to a request, None when it got no answer at all."""
        try:
            return self._send(method, url, uuid, body, consumer)
        except PlacementUnavailable:
            return None

    def _send(self, method: str, url: str, uuid: str | None, body: Any,
              consumer: str | None) -> Any:
        """One request: its response, whatever its status."""
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
