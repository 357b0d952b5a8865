"""``computed``: the compute daemon, one per controller node.

What it does today, and nothing more: load and validate the configuration,
join the fleet's tooz group (``[coordination] group`` on ``backend_url``)
as member ``host`` (normalised to lower case) with capabilities
``{"host": host, "weight": 1}``, keep the membership alive with tooz's
heartbeat, and on SIGTERM or SIGINT leave the group and exit 0. Node
management (taking Ironic nodes from the hash ring, reporting them to
Placement) comes with the fleet work, issue 4.

Exit status: 0 after a clean stop, 1 when the coordination backend cannot be
used, 2 for bad configuration.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Sequence
from typing import NoReturn
from urllib import parse

from oslo_config import cfg
from oslo_log import log as logging
from tooz import coordination

from computed.cmd import common
from computed.conf import loader
from computed.conf.default import normalise_host

PROG = 'computed'
EXIT_BACKEND = 1
LOG = logging.getLogger(__name__)

# How often the main loop looks at the stop flag and retries a join; short
# enough that SIGTERM feels immediate.
_TICK = 0.2


class _Stop:
    """Set by the signal handlers, polled by the main loop.

    A plain flag rather than an Event: the handler may run inside the
    eventlet hub, where switching greenthreads is not allowed.
    """

    def __init__(self) -> None:
        self.requested = False
        self.signal_name = ''

    def handle(self, signum: int, _frame: object) -> None:
        self.requested = True
        self.signal_name = signal.Signals(signum).name


def _backend_label(url: str) -> str:
    # scheme://hosts only: a URL's query or userinfo is not for the log.
    parts = parse.urlsplit(url)
    return f'{parts.scheme}://{parts.netloc.rpartition("@")[2]}{parts.path}'


def coordinator_url(url: str) -> str:
    """The backend URL as this (monkey-patched) process must use it.

    Under eventlet, kazoo's default threading handler was seen to lose its
    ZooKeeper connection right after connecting (ConnectionLoss on join in
    3 of 8 starts); its eventlet handler did not (0 of 8). An explicit
    ``handler`` in the URL is the operator's choice and is kept.
    """
    parts = parse.urlsplit(url)
    query = parse.parse_qsl(parts.query)
    if parts.scheme not in ('zookeeper', 'kazoo') or any(
            key == 'handler' for key, _ in query):
        return url
    query.append(('handler', 'eventlet'))
    return parse.urlunsplit(parts._replace(query=parse.urlencode(query)))


def _reason(exc: Exception) -> str:
    # tooz wraps kazoo errors, often with an empty message of its own.
    return str(exc) or repr(exc.__cause__ or exc)


def _join(coordinator: coordination.CoordinationDriver, group: bytes,
          host: str, timeout: float, stop: _Stop) -> bool:
    """Join ``group``; False when stopped before joining.

    A member with our name may be the not-yet-expired session of our own
    previous run, so that conflict is retried until ``timeout``.
    """
    try:
        coordinator.create_group(group).get()
    except coordination.GroupAlreadyExist:
        pass
    deadline = time.monotonic() + timeout
    warned = False
    while not stop.requested:
        try:
            coordinator.join_group(
                group, capabilities={'host': host, 'weight': 1}).get()
            return True
        except coordination.MemberAlreadyExist:
            if time.monotonic() >= deadline:
                raise
            if not warned:
                LOG.warning('A member named %s is already in group %s; '
                            'retrying for up to %s s in case it is our '
                            'own previous session', host, group.decode(),
                            timeout)
                warned = True
            time.sleep(_TICK)
    return False


def _leave(coordinator: coordination.CoordinationDriver,
           group: bytes) -> None:
    try:
        coordinator.leave_group(group).get()
    except coordination.ToozError as exc:
        # Nothing left to do about it: the session ends with stop() and
        # the backend drops the member at the latest when it expires.
        LOG.warning('Could not leave group %s cleanly: %s', group.decode(),
                    _reason(exc))


def serve(conf: cfg.ConfigOpts, stop: _Stop) -> int:
    host = normalise_host(conf.host)
    group = conf.coordination.group.encode()
    backend = _backend_label(conf.coordination.backend_url)
    coordinator = coordination.get_coordinator(
        coordinator_url(conf.coordination.backend_url), host.encode())
    try:
        coordinator.start(start_heart=True)
    except coordination.ToozError as exc:
        LOG.error('Cannot use coordination backend %s ([coordination] '
                  'backend_url): %s', backend, _reason(exc))
        return EXIT_BACKEND
    try:
        try:
            joined = _join(coordinator, group, host,
                           conf.coordination.join_timeout, stop)
        except coordination.MemberAlreadyExist:
            LOG.error('Host %s is already a member of group %s: another '
                      'computed runs with the same [DEFAULT] host',
                      host, group.decode())
            return EXIT_BACKEND
        except coordination.ToozError as exc:
            LOG.error('Cannot join group %s on %s: %s', group.decode(),
                      backend, _reason(exc))
            return EXIT_BACKEND
        if not joined:
            return 0
        LOG.info('computed is up: host %s joined group %s on %s',
                 host, group.decode(), backend)
        while not stop.requested:
            time.sleep(_TICK)
        LOG.info('Received %s, leaving group %s', stop.signal_name,
                 group.decode())
        _leave(coordinator, group)
    finally:
        coordinator.stop()
    LOG.info('computed stopped')
    return 0


def _body(argv: Sequence[str]) -> int:
    conf = loader.load(argv, PROG)
    common.setup_logging(conf)
    stop = _Stop()
    signal.signal(signal.SIGTERM, stop.handle)
    signal.signal(signal.SIGINT, stop.handle)
    return serve(conf, stop)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    common.run(PROG, lambda: _body(sys.argv[1:] if argv is None else argv))
