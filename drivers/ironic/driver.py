"""``IronicDriver``: the node source backed by the Ironic API.

Owns every request computed makes to Ironic: which microversion, which
fields, which filters, how pages are walked and how failures are retried.

The client is a keystoneauth ``Adapter`` for the baremetal service (auth,
catalog, TLS and version discovery from ``[ironic]``), not openstacksdk:
the driver needs exactly what the adapter gives (a GET of one page, a
PATCH, a PUT, the status and the body) and nothing the SDK adds on top.
openstacksdk's node API (``conn.baremetal.nodes(...)``) builds a ``Node``
resource per node, only to be converted again: listing 3,000 harness nodes
took 10.0 s and 18.8 MiB of allocations at the peak through it (resources
alone, not converted), 2.8 s and 3.2 MiB through this driver
(bench/ironic_list_bench.py, 2026-11-26, same run, a loaded 2-core machine).
It also follows Ironic's ``next`` links (built from Ironic's public
endpoint, which a daemon may not reach; the driver pages by marker), retries
409/503 on its own, and its ``wait_for_*`` poll every 2 s. The SDK's proxy
used as a raw HTTP client (what this driver did before) listed as fast as
the adapter (2.8 s), but importing openstacksdk cost every daemon 10.8 MiB
of RSS (70.3 MiB without it, 81.0 MiB with it) for nothing it used.

Guarantees:

* Requests carry API version :data:`API_VERSION` (1.82, the first with
  ``shard``; ``conductor_group`` needs 1.46, traits 1.37). An Ironic too old
  for it fails with a ``DriverError`` saying so, never with missing data.
* ``list_nodes`` asks only for :data:`~computed_ironic.convert.LIST_FIELDS`,
  filtered server-side to ``conductor_group`` / ``shard`` when set, one page
  of ``page_size`` nodes at a time. It returns the complete list or raises:
  a failed page is retried from the last node already received (marker),
  not from the first page.
* Connection errors, timeouts and 5xx answers are retried with exponential
  backoff and jitter (:mod:`computed_ironic.retry`); when the retries run out
  the caller gets ``DriverUnavailable``. Any other error answer is a
  ``DriverError`` at once: retrying a 400 does not fix it.
* The only retries are these: keystoneauth's own (connect and status code
  retries) are turned off so that the policy in the configuration is the
  whole story.
* A malformed node is skipped and logged with its uuid.
* Fenced writes: an operation given a ``guard`` checks it before every
  PATCH/PUT it sends, each retry included, and before every poll while it
  waits; what the guard raises ends the operation at once (nothing more is
  written) and reaches the caller unchanged.
* Node operations (``deploy``, ``rebuild``, ``undeploy``, ``set_power``,
  ``clear_instance``) also retry 409 "node locked" answers, every
  ``api_retry_interval``, until the operation's own timeout: a lock is a
  conductor at work on the node, which ends (Ironic answers "please retry"),
  however long its work takes under load (a deploy from a Glance image
  looks the image up in Glance, through Keystone, holding the lock), so it
  is waited out as the operation's result is, not counted as a failure of
  Ironic's (Nova's Ironic driver waits ``api_max_retries`` times
  ``api_retry_interval``, 120 s by default). They wait for their
  result by polling the node every ``poll_interval`` (0.2 s: openstacksdk's
  ``wait_for_*`` poll every 2 s, which would dominate a fake deploy). Each
  starts from the node's real state, so repeating one after a crash or a
  timeout is safe. A refusal (400) becomes the error's reason verbatim
  (Ironic's ``faultstring``); a deploy that ends in ``deploy failed`` raises
  ``DeployFailed`` with Ironic's ``last_error``. ``rebuild`` is Ironic's
  ``rebuild`` provision action (from ``active``, ``deploy failed`` or
  ``error``), after the new image and ``preserve_ephemeral`` are written to
  the node's ``instance_info``; the config drive goes with it (Ironic would
  otherwise keep the previous one).

Threads: one driver per daemon, called at once by the listing thread
(``list_nodes``), the node thread (``get_node``) and the instance worker's
threads (the operations, ``get_node``); the main thread closes it. The
driver changes nothing after its constructor but the API v1 URL its first
request discovers (threads racing it each find the same URL, and a ``str``
is replaced whole), and a listing's pages, marker and nodes live in a
:class:`_Listing` of that call alone. What the calls share is the adapter's
keystoneauth session (requests' pool of connections, a token fetched under
the auth plugin's lock), which is safe to share. ``random.random``, the
default jitter, is safe to call from any thread.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
from oslo_config import cfg

from computed.baremetal.driver import (
    POWER_ON,
    POWER_TARGETS,
    REBOOT,
    BaremetalDriver,
    DeployFailed,
    DriverError,
    DriverUnavailable,
    MalformedNode,
    Node,
    OperationTimedOut,
    WriteGuard,
    reuse_known,
)
from computed.runtime import keystone

from . import convert, retry

LOG = logging.getLogger(__name__)

API_VERSION = '1.82'
#: Ironic's default ``[api] max_limit``; a larger page is cut to it anyway.
DEFAULT_PAGE_SIZE = 1000
DEFAULT_POLL_INTERVAL = 0.2
_GROUP = 'ironic'

# Ironic provision states the operations reason about.
AVAILABLE = 'available'
ACTIVE = 'active'
DEPLOY_FAILED = 'deploy failed'
#: A deploy under way: wait for it.
DEPLOYING_STATES = frozenset({'deploying', 'wait call-back'})
#: A tear-down under way (cleaning follows deleting): wait for ``available``.
TEARING_DOWN_STATES = frozenset({'deleting', 'cleaning', 'clean wait'})
#: States from which ``deleted`` (tear down) is accepted.
DELETABLE_STATES = frozenset({ACTIVE, DEPLOY_FAILED, 'error', 'wait call-back',
                              'rescue', 'rescue failed', 'rescue wait',
                              'service failed'})
#: States in which a node holds no deployment (nothing to undeploy).
UNDEPLOYED_STATES = frozenset({AVAILABLE, 'manageable', 'enroll'})


class _Retriable(Exception):
    """An answer worth retrying (5xx), as an exception for the retry loop."""

    def __init__(self, status: int, body: str):
        super().__init__(f'HTTP {status}: {body[:200]}')
        self.status = status


class _Locked(Exception):
    """409 NodeLocked: a conductor holds the node; retry shortly."""


class _MarkerGone(Exception):
    """The node used as page marker was deleted between two attempts."""


def _is_retriable(exc: BaseException) -> bool:
    # keystoneauth's ConnectionError covers refused, reset, timeouts, TLS.
    # DiscoveryFailure is what the first request raises instead when Ironic
    # is down: openstacksdk discovers the API version before it.
    return isinstance(exc, (_Retriable, _MarkerGone, _Locked,
                            ks_exc.ConnectionError, ks_exc.DiscoveryFailure))


def _is_retriable_unless_locked(exc: BaseException) -> bool:
    """A write's retries by the policy: NodeLocked is waited out apart
    (:meth:`IronicDriver._write`)."""
    return _is_retriable(exc) and not isinstance(exc, _Locked)


class IronicDriver(BaremetalDriver):
    """Nodes from Ironic through a keystoneauth ``Adapter`` for the baremetal service.

    Build it with :meth:`from_conf` in the daemon, or :meth:`from_session`
    / :meth:`for_endpoint` (tests, benchmarks); the constructor itself takes
    an existing adapter, so a caller can share or tune one.
    """

    def __init__(self, adapter: ks_adapter.Adapter, *,
                 conductor_group: str | None = None,
                 shard: str | None = None,
                 page_size: int = DEFAULT_PAGE_SIZE,
                 retry_policy: retry.RetryPolicy | None = None,
                 detail: bool = False,
                 sleep: Callable[[float], None] = time.sleep,
                 rand: Callable[[], float] = random.random,
                 poll_interval: float = DEFAULT_POLL_INTERVAL,
                 clock: Callable[[], float] = time.monotonic):
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
        self._api = adapter
        self._v1: str | None = None  # the API v1 URL, once discovered (_endpoint)
        self._conductor_group = conductor_group
        self._shard = shard
        self._page_size = page_size
        self._policy = retry_policy or retry.RetryPolicy()
        self._detail = detail
        self._sleep = sleep
        self._rand = rand
        self._poll_interval = poll_interval
        self._clock = clock

    # -- construction -----------------------------------------------------

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts, **kwargs: Any) -> IronicDriver:
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
                     **kwargs: Any) -> IronicDriver:
        """From a keystoneauth session; ``endpoint`` skips the catalog."""
        return cls(_adapter(session, endpoint, region_name, interface),
                   **kwargs)

    @classmethod
    def for_endpoint(cls, endpoint: str, *, timeout: float = 30.0,
                     **kwargs: Any) -> IronicDriver:
        """For an Ironic running without Keystone (``noauth``)."""
        from keystoneauth1 import noauth
        session = ks_session.Session(auth=noauth.NoAuth(), timeout=timeout)
        return cls.from_session(session, endpoint=endpoint, **kwargs)

    def close(self) -> None:
        self._api.session.close()

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
        return self.list_nodes_reusing({})

    def list_nodes_reusing(self, known: Mapping[str, Node]) -> list[Node]:
        # Each node swapped as it is parsed: a listing's copy of an unchanged node is dropped
        # at once, never all 50,000 alive together (+11-16 MB of RSS kept after each listing).
        listing = _Listing(self, known)
        self._retrying(listing.fetch_remaining, 'list nodes')
        return listing.nodes()

    def lists(self, node: Node) -> bool:
        # Ironic compares conductor groups without case.
        if (self._conductor_group is not None
                and node.conductor_group.lower() != self._conductor_group.lower()):
            return False
        return self._shard is None or node.shard == self._shard

    def get_node(self, uuid: str) -> Node | None:
        what = f'node {uuid}'
        params = {} if self._detail else {'fields': ','.join(
            convert.LIST_FIELDS)}
        response = self._retrying(
            lambda: self._get(f'/nodes/{uuid}', params, what), what)
        if response is None:
            return None
        return convert.node_from_api(response)


    # -- operations ---------------------------------------------------------

    def deploy(self, node_uuid: str, instance_uuid: str,
               image_source: str | None, *, timeout: float,
               guard: WriteGuard | None = None,
               configdrive: dict[str, Any] | None = None) -> Node:
        deadline = self._clock() + timeout
        node = self._require(node_uuid)
        if node.instance_uuid not in (None, instance_uuid):
            raise DeployFailed(node_uuid, f'node hosts instance '
                               f'{node.instance_uuid}, not {instance_uuid}')
        if node.instance_uuid == instance_uuid:
            if node.provision_state == ACTIVE:
                return node
            if node.provision_state in DEPLOYING_STATES:
                return self._wait_deployed(node_uuid, instance_uuid, timeout,
                                           guard)
        self._associate(node, instance_uuid, image_source, guard, deadline)
        self._provision_active(node_uuid, instance_uuid, guard, deadline,
                               configdrive)
        return self._wait_deployed(node_uuid, instance_uuid, timeout, guard)

    def rebuild(self, node_uuid: str, instance_uuid: str,
                image_source: str | None, *, timeout: float,
                guard: WriteGuard | None = None,
                configdrive: dict[str, Any] | None = None,
                preserve_ephemeral: bool = False) -> Node:
        deadline = self._clock() + timeout
        node = self._require(node_uuid)
        if node.instance_uuid != instance_uuid:
            raise DeployFailed(node_uuid, f'node hosts instance '
                               f'{node.instance_uuid}, not {instance_uuid}: '
                               f'not rebuilt')
        if node.provision_state in DEPLOYING_STATES:
            source = self._instance_info(node_uuid).get('image_source')
            if source == image_source:
                # This rebuild, resumed: Ironic is at it already.
                return self._wait_deployed(node_uuid, instance_uuid,
                                           deadline - self._clock(), guard)
            # Another deploy of it: Ironic refuses a rebuild until it ends.
            self._wait(node_uuid, 'deploy before rebuild',
                       deadline - self._clock(),
                       lambda n: n.provision_state not in DEPLOYING_STATES,
                       guard=guard)
        ops: list[dict[str, Any]] = [
            {'op': 'add', 'path': '/instance_info/preserve_ephemeral',
             'value': bool(preserve_ephemeral)}]
        if image_source is not None:
            ops.append({'op': 'add', 'path': '/instance_info/image_source',
                        'value': image_source})
        self._patch(node_uuid, ops, guard, deadline)
        body: dict[str, Any] = {'target': 'rebuild'}
        if configdrive is not None:
            body['configdrive'] = configdrive
        response = self._write('put', f'/nodes/{node_uuid}/states/provision',
                               f'node {node_uuid}', body, guard, deadline)
        if response.status_code >= 400:
            again = self._require(node_uuid)
            # Accepted by an attempt whose answer was lost: Ironic refuses the
            # retry while the rebuild it started runs.
            if not (again.instance_uuid == instance_uuid
                    and again.provision_state in DEPLOYING_STATES):
                raise DeployFailed(node_uuid, f'rebuild refused: '
                                   f'{_fault(response)}')
        return self._wait_deployed(node_uuid, instance_uuid,
                                   deadline - self._clock(), guard)

    def undeploy(self, node_uuid: str, *, timeout: float,
                 guard: WriteGuard | None = None) -> Node:
        deadline = self._clock() + timeout
        node = self._require(node_uuid)
        if node.provision_state in DEPLOYING_STATES - DELETABLE_STATES:
            # Ironic refuses a tear-down while deploying: let it finish.
            node = self._wait(node_uuid, 'deploy before undeploy',
                              deadline - self._clock(),
                              lambda n: n.provision_state
                              not in DEPLOYING_STATES - DELETABLE_STATES,
                              guard=guard)
        if node.provision_state in DELETABLE_STATES:
            self._provision(node_uuid, 'deleted', f'node {node_uuid}', guard,
                            deadline)
        elif node.provision_state not in UNDEPLOYED_STATES | \
                TEARING_DOWN_STATES:
            raise DriverError(f'node {node_uuid}', f'cannot undeploy from '
                              f'state {node.provision_state!r}: '
                              f'{node.last_error or "no last_error"}')
        if node.provision_state not in UNDEPLOYED_STATES:
            node = self._wait(node_uuid, 'undeploy', deadline - self._clock(),
                              _is_available, _undeploy_failure, guard)
        if node.instance_uuid is not None:
            self._patch(node_uuid, [{'op': 'remove',
                                     'path': '/instance_uuid'}], guard,
                        deadline)
            node = self._require(node_uuid)
        return node

    def set_power(self, node_uuid: str, target: str, *,
                  timeout: float, guard: WriteGuard | None = None) -> Node:
        if target not in POWER_TARGETS:
            raise ValueError(f'power target must be one of '
                             f'{sorted(POWER_TARGETS)}, not {target!r}')
        what = f'node {node_uuid}'
        wanted = POWER_ON if target == REBOOT else target
        before = self._power(node_uuid)
        response = self._write('put', f'/nodes/{node_uuid}/states/power',
                               what, {'target': target}, guard,
                               self._clock() + timeout)
        if response.status_code >= 400:
            raise DriverError(what, f'{target} refused: {_fault(response)}')
        deadline = self._clock() + timeout
        while True:
            _check(guard)
            power = self._power(node_uuid)
            if power.get('target_power_state') is None:
                break
            if self._clock() >= deadline:
                raise OperationTimedOut(node_uuid, target, timeout,
                                        power.get('power_state'))
            self._sleep(self._poll_interval)
        if power.get('power_state') != wanted:
            error = power.get('last_error')
            if error == before.get('last_error'):
                error = None
            raise DriverError(what, f'{target} failed: power state is '
                              f'{power.get("power_state")}: '
                              f'{error or "no error"}')
        return self._require(node_uuid)

    def clear_instance(self, node_uuid: str, instance_uuid: str | None = None,
                       *, timeout: float,
                       guard: WriteGuard | None = None) -> Node | None:
        what = f'node {node_uuid}'
        deadline = self._clock() + timeout
        node = self.get_node(node_uuid)
        if node is None:
            return None
        if instance_uuid is not None and node.instance_uuid not in (
                None, instance_uuid):
            LOG.info('%s: not clearing, it hosts instance %s, not %s', what,
                     node.instance_uuid, instance_uuid)
            return node
        if node.instance_uuid is not None and \
                node.provision_state not in UNDEPLOYED_STATES:
            node = self.undeploy(node_uuid, timeout=timeout, guard=guard)
        ops: list[dict[str, Any]] = []
        if node.instance_uuid is not None:
            ops.append({'op': 'remove', 'path': '/instance_uuid'})
        if self._instance_info(node_uuid):
            ops.append({'op': 'replace', 'path': '/instance_info',
                        'value': {}})
        if ops:
            self._patch(node_uuid, ops, guard, deadline)
            node = self._require(node_uuid)
        return node

    # -- operation internals ------------------------------------------------

    def _require(self, node_uuid: str) -> Node:
        node = self.get_node(node_uuid)
        if node is None:
            raise DriverError(f'node {node_uuid}', 'no such node in Ironic')
        return node

    def _fields(self, node_uuid: str, fields: str) -> dict:
        """Fields :class:`Node` does not carry, read raw."""
        what = f'node {node_uuid}'
        body = self._retrying(lambda: self._get(
            f'/nodes/{node_uuid}', {'fields': fields}, what), what)
        if body is None:
            raise DriverError(what, 'no such node in Ironic')
        return body

    def _instance_info(self, node_uuid: str) -> dict:
        return self._fields(node_uuid, 'instance_info').get(
            'instance_info') or {}

    def _power(self, node_uuid: str) -> dict:
        return self._fields(node_uuid,
                            'power_state,target_power_state,last_error')

    def _associate(self, node: Node, instance_uuid: str,
                   image_source: str | None, guard: WriteGuard | None,
                   deadline: float) -> None:
        ops: list[dict[str, Any]] = []
        if node.instance_uuid is None:
            ops.append({'op': 'add', 'path': '/instance_uuid',
                        'value': instance_uuid})
        if image_source is not None:
            ops.append({'op': 'add', 'path': '/instance_info/image_source',
                        'value': image_source})
        if not ops:
            return
        response = self._write('patch', f'/nodes/{node.uuid}',
                               f'node {node.uuid}', ops, guard, deadline)
        if response.status_code < 400:
            return
        # A retried PATCH whose first attempt landed, or a racer.
        again = self._require(node.uuid)
        if again.instance_uuid == instance_uuid and response.status_code == 409:
            self._associate(again, instance_uuid, image_source, guard,
                            deadline)
            return
        raise DeployFailed(node.uuid, f'cannot associate instance '
                           f'{instance_uuid}: {_fault(response)}')

    def _provision_active(self, node_uuid: str, instance_uuid: str,
                          guard: WriteGuard | None, deadline: float,
                          configdrive: dict[str, Any] | None = None) -> None:
        body: dict[str, Any] = {'target': 'active'}
        if configdrive is not None:
            # A JSON object Ironic builds the ISO from (API 1.56+); it keeps
            # it in the node's instance_info.configdrive.
            body['configdrive'] = configdrive
        response = self._write('put', f'/nodes/{node_uuid}/states/provision',
                               f'node {node_uuid}', body, guard, deadline)
        if response.status_code < 400:
            return
        node = self._require(node_uuid)
        if node.instance_uuid == instance_uuid and (
                node.provision_state in DEPLOYING_STATES | {ACTIVE}):
            return  # a retried request whose first attempt was accepted
        raise DeployFailed(node_uuid, _fault(response))

    def _wait_deployed(self, node_uuid: str, instance_uuid: str,
                       timeout: float, guard: WriteGuard | None) -> Node:
        def failure(node: Node) -> DriverError | None:
            if node.provision_state == DEPLOY_FAILED:
                return DeployFailed(node_uuid, node.last_error
                                    or 'deploy failed (no last_error)')
            if node.instance_uuid != instance_uuid:
                return DeployFailed(node_uuid, f'deploy interrupted: node '
                                    f'now hosts {node.instance_uuid}')
            if node.provision_state not in DEPLOYING_STATES | {ACTIVE} and \
                    node.target_provision_state != ACTIVE:
                return DeployFailed(node_uuid, f'deploy interrupted: node is '
                                    f'{node.provision_state}')
            return None
        return self._wait(node_uuid, 'deploy', timeout,
                          lambda n: n.provision_state == ACTIVE, failure,
                          guard)

    def _provision(self, node_uuid: str, target: str, what: str,
                   guard: WriteGuard | None, deadline: float) -> None:
        response = self._write('put', f'/nodes/{node_uuid}/states/provision',
                               what, {'target': target}, guard, deadline)
        if response.status_code >= 400:
            raise DriverError(what, f'provision {target!r} refused: '
                              f'{_fault(response)}')

    def _patch(self, node_uuid: str, ops: list[dict[str, Any]],
               guard: WriteGuard | None, deadline: float) -> None:
        what = f'node {node_uuid}'
        response = self._write('patch', f'/nodes/{node_uuid}', what, ops,
                               guard, deadline)
        if response.status_code >= 400:
            raise DriverError(what, f'update refused: {_fault(response)}')

    def _wait(self, node_uuid: str, operation: str, timeout: float,
              done: Callable[[Node], bool],
              failure: Callable[[Node], DriverError | None] = lambda n: None,
              guard: WriteGuard | None = None) -> Node:
        """Poll the node until ``done``; raise ``failure``'s error or a
        timeout (or what ``guard`` raises, checked before each poll)."""
        deadline = self._clock() + max(timeout, 0.0)
        while True:
            _check(guard)
            node = self._require(node_uuid)
            error = failure(node)
            if error is not None:
                raise error
            if done(node):
                return node
            if self._clock() >= deadline:
                raise OperationTimedOut(node_uuid, operation, timeout,
                                        node.provision_state)
            self._sleep(self._poll_interval)

    def _write(self, method: str, path: str, what: str, body: Any,
               guard: WriteGuard | None, deadline: float) -> Any:
        """One PATCH/PUT, retried on connection errors and 5xx by the retry
        policy, and on NodeLocked every ``interval`` until the clock passes
        ``deadline`` (the operation's: then ``DriverUnavailable``); any other
        answer (success or refusal) is returned. ``guard`` is checked before
        every attempt: what it raises is not retried."""
        call = getattr(self._api, method)

        def once() -> Any:
            _check(guard)
            response = call(path, json=body, microversion=API_VERSION,
                            raise_exc=False, endpoint_override=self._endpoint())
            status = response.status_code
            if status >= 500:
                raise _Retriable(status, response.text)
            if status == 409 and 'locked' in _fault(response).lower():
                raise _Locked(_fault(response))
            return response

        interval = self._policy.interval

        def locked(answers: int, exc: BaseException) -> None:
            LOG.info('%s is locked (answer %d), retrying in %.1f s: %s',
                     what, answers, interval, exc)

        try:
            return retry.until(
                lambda: self._retrying(once, what, _is_retriable_unless_locked),
                lambda exc: isinstance(exc, _Locked), interval, deadline,
                locked, clock=self._clock, sleep=self._sleep)
        except retry.RetriesExhausted as exc:
            raise DriverUnavailable(
                what, f'node still locked at the operation\'s timeout: '
                f'{exc.last}', attempts=exc.attempts, cause=exc.last
            ) from exc.last

    # -- internals ----------------------------------------------------------

    def _endpoint(self) -> str:
        """Ironic's API v1 URL, found by keystoneauth's version discovery under the catalog's
        (or ``endpoint_override``'s) root on the first request, as openstacksdk found it; a
        failure (Ironic down: DiscoveryFailure) is retried as any request is. Threads may race
        the first discovery: each finds the same URL, and a ``str`` is replaced whole."""
        if self._v1 is None:
            data = self._api.get_endpoint_data()
            if data is None or not data.url:
                raise ks_exc.EndpointNotFound('no baremetal API v1 endpoint found')
            self._v1 = data.url
        return self._v1

    def _retrying(self, fn: Callable[[], Any], what: str,
                  retriable: Callable[[BaseException], bool] = _is_retriable
                  ) -> Any:
        try:
            return retry.call(fn, self._policy, retriable, what,
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
        response = self._api.get(
            path, params=params, microversion=API_VERSION, raise_exc=False,
            endpoint_override=self._endpoint())
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


def _check(guard: WriteGuard | None) -> None:
    if guard is not None:
        guard.check()


def _is_available(node: Node) -> bool:
    return node.provision_state == AVAILABLE


def _undeploy_failure(node: Node) -> DriverError | None:
    if node.provision_state in ('clean failed', 'error', DEPLOY_FAILED):
        return DriverError(f'node {node.uuid}', f'undeploy ended in '
                           f'{node.provision_state!r}: '
                           f'{node.last_error or "no last_error"}')
    return None


def _fault(response: Any) -> str:
    """Ironic's message from an error answer (its ``faultstring``)."""
    text = getattr(response, 'text', '') or ''
    try:
        message = json.loads(text).get('error_message', text)
        if isinstance(message, str):
            try:
                message = json.loads(message)
            except ValueError:
                pass
        if isinstance(message, dict):
            message = message.get('faultstring') or json.dumps(message)
        text = str(message)
    except (ValueError, AttributeError):
        pass
    return ' '.join(text.split())[:500] or f'HTTP {response.status_code}'


class _Listing:
    """One walk over the pages of ``GET /v1/nodes``, resumable after errors.

    ``fetch_remaining`` can be called again after it raised: it resumes
    after the last node received. Ironic sorts by id, so nodes before the
    marker are not returned twice; a node created meanwhile behind the
    marker is missed by this listing and found by the next one.
    """

    def __init__(self, driver: IronicDriver, known: Mapping[str, Node]):
        self._driver = driver
        self._known = known
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
        self._nodes[node.uuid] = reuse_known(node, self._known)

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


def _adapter(session: ks_session.Session, endpoint: str | None,
             region_name: str | None, interface: str | None) -> ks_adapter.Adapter:
    # Version discovery (API v1 under the catalog's or the override's root) as openstacksdk
    # did it; no retries of keystoneauth's own: the policy in the configuration is the whole
    # story.
    return ks_adapter.Adapter(
        session, service_type='baremetal', interface=interface, region_name=region_name,
        endpoint_override=endpoint, min_version='1', max_version='1.latest',
        connect_retries=0, status_code_retries=0)
