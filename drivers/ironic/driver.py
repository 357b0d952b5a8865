"""``IronicDriver``: the node source backed by the Ironic API.

Owns every request computed makes to Ironic: which microversion, which
fields, which filters, how pages are walked and how failures are retried.
Guarantees:

* Requests carry API version :data:`API_VERSION` (1.82, the first with
  ``shard``; ``conductor_group`` needs 1.46, traits 1.37). An Ironic too old
  for it fails with a ``DriverError`` saying so, never with missing data.
* ``list_nodes`` asks only for :data:`~drivers.ironic.convert.LIST_FIELDS`,
  filtered server-side to ``conductor_group`` / ``shard`` when set, one page
  of ``page_size`` nodes at a time. It returns the complete list or raises:
  a failed page is retried from the last node already received (marker),
  not from the first page.
* Connection errors, timeouts and 5xx answers are retried with exponential
  backoff and jitter (:mod:`drivers.ironic.retry`); when the retries run out
  the caller gets ``DriverUnavailable``. Any other error answer is a
  ``DriverError`` at once: retrying a 400 does not fix it.
* The only retries are these: openstacksdk's own (5 retries on 409/503 for
  baremetal, one connect retry) are turned off so that the policy in the
  configuration is the whole story.
* A malformed node is skipped and logged with its uuid.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any, Callable

import openstack.connection
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
from oslo_config import cfg

from computed import keystone
from computed.driver import (BaremetalDriver, DriverError, DriverUnavailable,
                             MalformedNode, Node)
from drivers.ironic import convert, retry

LOG = logging.getLogger(__name__)

API_VERSION = '1.82'
#: Ironic's default ``[api] max_limit``; a larger page is cut to it anyway.
DEFAULT_PAGE_SIZE = 1000
_GROUP = 'ironic'


class _Retriable(Exception):
    """An answer worth retrying (5xx), as an exception for the retry loop."""

    def __init__(self, status: int, body: str):
        super().__init__(f'HTTP {status}: {body[:200]}')
        self.status = status


class _MarkerGone(Exception):
    """The node used as page marker was deleted between two attempts."""


def _is_retriable(exc: BaseException) -> bool:
    # keystoneauth's ConnectionError covers refused, reset, timeouts, TLS.
    # DiscoveryFailure is what the first request raises instead when Ironic
    # is down: openstacksdk discovers the API version before it.
    return isinstance(exc, (_Retriable, _MarkerGone, ks_exc.ConnectionError,
                            ks_exc.DiscoveryFailure))


class IronicDriver(BaremetalDriver):
    """Nodes from Ironic through an openstacksdk ``Connection``.

    Build it with :meth:`from_conf` in the daemon, or :meth:`from_session`
    / :meth:`for_endpoint` (tests, benchmarks); the constructor itself takes
    an existing connection, so a caller can share or tune one.
    """

    def __init__(self, connection: openstack.connection.Connection, *,
                 conductor_group: str | None = None,
                 shard: str | None = None,
                 page_size: int = DEFAULT_PAGE_SIZE,
                 retry_policy: retry.RetryPolicy | None = None,
                 detail: bool = False,
                 sleep: Callable[[float], None] = time.sleep,
                 rand: Callable[[], float] = random.random):
        """
        :param conductor_group: list only this group's nodes; '' is Ironic's
            default group, None means every group.
        :param shard: list only this shard's nodes; None means every shard.
        :param detail: list through ``/v1/nodes/detail`` (every field,
            ``updated_at`` included) instead of ``?fields=`` (small pages,
            ``updated_at`` None: Ironic does not accept it in ``fields``).
        """
        if page_size < 1:
            raise ValueError(f'page_size must be >= 1, not {page_size}')
        self._conn = connection
        self._conductor_group = conductor_group
        self._shard = shard
        self._page_size = page_size
        self._policy = retry_policy or retry.RetryPolicy()
        self._detail = detail
        self._sleep = sleep
        self._rand = rand

    # -- construction -----------------------------------------------------

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts, **kwargs: Any) -> 'IronicDriver':
        """From the ``[ironic]`` section (auth, endpoint, filters, retries)."""
        options = conf[_GROUP]
        session = keystone.load_session(conf, _GROUP)
        interfaces = options.valid_interfaces or []
        kwargs.setdefault('conductor_group', options.conductor_group)
        kwargs.setdefault('shard', options.shard)
        kwargs.setdefault('retry_policy', retry.RetryPolicy(
            max_retries=options.api_max_retries,
            interval=options.api_retry_interval))
        return cls.from_session(
            session, endpoint=options.endpoint_override,
            region_name=options.region_name,
            interface=interfaces[0] if interfaces else None, **kwargs)

    @classmethod
    def from_session(cls, session: ks_session.Session, *,
                     endpoint: str | None = None,
                     region_name: str | None = None,
                     interface: str | None = None,
                     **kwargs: Any) -> 'IronicDriver':
        """From a keystoneauth session; ``endpoint`` skips the catalog."""
        return cls(_connection(session, endpoint, region_name, interface),
                   **kwargs)

    @classmethod
    def for_endpoint(cls, endpoint: str, *, timeout: float = 30.0,
                     **kwargs: Any) -> 'IronicDriver':
        """For an Ironic running without Keystone (``noauth``)."""
        from keystoneauth1 import noauth
        session = ks_session.Session(auth=noauth.NoAuth(), timeout=timeout)
        return cls.from_session(session, endpoint=endpoint, **kwargs)

    def close(self) -> None:
        self._conn.close()

    # -- reading ----------------------------------------------------------

    @property
    def filters(self) -> dict[str, str]:
        """The server-side filters every listing carries."""
        filters = {}
        if self._conductor_group is not None:
            filters['conductor_group'] = self._conductor_group
        if self._shard is not None:
            filters['shard'] = self._shard
        return filters

    def list_nodes(self) -> list[Node]:
        listing = _Listing(self)
        self._retrying(listing.fetch_remaining, 'list nodes')
        return listing.nodes()

    def get_node(self, uuid: str) -> Node | None:
        what = f'node {uuid}'
        params = {} if self._detail else {'fields': ','.join(
            convert.LIST_FIELDS)}
        response = self._retrying(
            lambda: self._get(f'/nodes/{uuid}', params, what), what)
        if response is None:
            return None
        return convert.node_from_api(response)

    # -- internals ----------------------------------------------------------

    def _retrying(self, fn: Callable[[], Any], what: str) -> Any:
        try:
            return retry.call(fn, self._policy, _is_retriable, what,
                              sleep=self._sleep, rand=self._rand)
        except retry.RetriesExhausted as exc:
            raise DriverUnavailable(what, f'Ironic unreachable: {exc.last}',
                                    attempts=exc.attempts,
                                    cause=exc.last) from exc
        except ks_exc.ClientException as exc:
            # Anything keystoneauth raises that is not a connection problem
            # (auth failure, no endpoint in the catalog) is configuration.
            raise DriverError(what, f'{type(exc).__name__}: {exc}') from exc

    def _get(self, path: str, params: dict[str, str],
             what: str) -> dict | None:
        """One GET; the JSON body, None on 404, or an exception."""
        response = self._conn.baremetal.get(
            path, params=params, microversion=API_VERSION, raise_exc=False,
            connect_retries=0)
        status = response.status_code
        if status == 404:
            return None
        if status >= 500:
            raise _Retriable(status, response.text)
        if status == 406:
            raise DriverError(what, f'Ironic does not support API version '
                              f'{API_VERSION} (needed for shard): '
                              f'{response.text[:200]}')
        if status >= 400:
            raise DriverError(what, f'HTTP {status}: {response.text[:200]}')
        try:
            body = response.json()
        except ValueError:
            raise _Retriable(status, 'answer is not JSON: ' + response.text)
        if not isinstance(body, dict):
            raise DriverError(what, f'unexpected answer {body!r:.200}')
        return body


class _Listing:
    """One walk over the pages of ``GET /v1/nodes``, resumable after errors.

    ``fetch_remaining`` can be called again after it raised: it resumes
    after the last node received. Ironic sorts by id, so nodes before the
    marker are not returned twice; a node created meanwhile behind the
    marker is missed by this listing and found by the next one.
    """

    def __init__(self, driver: IronicDriver):
        self._driver = driver
        self._marker: str | None = None
        self._done = False
        self._nodes: dict[str, Node] = {}
        self.skipped = 0

    def fetch_remaining(self) -> None:
        while not self._done:
            self._fetch_page()

    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def _fetch_page(self) -> None:
        driver = self._driver
        params = dict(driver.filters, limit=str(driver._page_size))
        if not driver._detail:
            params['fields'] = ','.join(convert.LIST_FIELDS)
        if self._marker:
            params['marker'] = self._marker
        path = '/nodes/detail' if driver._detail else '/nodes'
        body = driver._get(path, params, 'list nodes')
        if body is None:
            self._restart_if_marker_gone()
            raise DriverError('list nodes', f'HTTP 404 on {path}')
        records = body.get('nodes')
        if not isinstance(records, list):
            raise DriverError('list nodes',
                              f'no "nodes" list in the answer: {body!r:.200}')
        for record in records:
            self._add(record)
        # Ironic adds "next" only when the page is full. We page by marker
        # rather than requesting the "next" URL: that URL is built from
        # Ironic's public_endpoint/Host header, which the daemon may not be
        # able to reach; the marker is the only thing it carries.
        if not body.get('next') or not records:
            self._done = True

    def _add(self, record: Any) -> None:
        uuid = record.get('uuid') if isinstance(record, dict) else None
        if isinstance(uuid, str):
            # Advance past malformed nodes too, or a bad last record
            # would make the next page start at the same place.
            self._marker = uuid
        try:
            node = convert.node_from_api(record)
        except MalformedNode as exc:
            self.skipped += 1
            LOG.warning('Skipping node %s from Ironic: %s',
                        exc.uuid or '<no uuid>', exc)
            return
        self._nodes[node.uuid] = node

    def _restart_if_marker_gone(self) -> None:
        if self._marker is None:
            return
        # The marker node was deleted: Ironic answers 404 for it. Start over
        # (as a retriable failure) rather than guess where to resume.
        LOG.info('Marker node %s vanished while listing, starting over',
                 self._marker)
        self._marker = None
        self._nodes.clear()
        raise _MarkerGone('marker node deleted during the listing')


def _connection(session: ks_session.Session, endpoint: str | None,
                region_name: str | None, interface: str | None
                ) -> openstack.connection.Connection:
    config: dict[str, Any] = {
        'baremetal_api_version': API_VERSION,
        'baremetal_status_code_retries': 0,
        'baremetal_connect_retries': 0,
    }
    if endpoint:
        config['baremetal_endpoint_override'] = endpoint
    if region_name:
        config['region_name'] = region_name
    if interface:
        config['interface'] = interface
    return openstack.connection.Connection(session=session, **config)
