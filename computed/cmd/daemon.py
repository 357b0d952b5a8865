"""``computed``: the compute daemon, one per controller node.

Loads and validates the configuration, then runs :class:`computed.daemon.service.ComputeService`:
joins the fleet's tooz group on ZooKeeper as member ``host`` (normalised to lower case), claims
its share of the Ironic nodes on the hash ring with fencing (see :mod:`computed.fleet.reconciler`), listens
to Ironic's notifications, and reports its nodes' providers to the reporters over RPC. On SIGTERM
or SIGINT it drains: its free nodes go to its peers before it leaves.

Exit status: 0 after a clean stop, 1 when the coordination backend or Ironic cannot be used, 2 for
bad configuration.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Sequence
from typing import NoReturn
from urllib import parse

import oslo_messaging
from oslo_config import cfg
from oslo_log import log as logging
from tooz import coordination

from computed.cmd import common
from computed.conf import loader
from computed.conf.default import normalise_host
from computed.conf.errors import ConfigError
from computed.instances import rpcapi
from computed.runtime import keystone, metrics, rpc, systemd
from computed.instances.lifecycle import Owner
from computed.instances.worker import InstanceWorker
from computed.db import api as db_api
from computed.baremetal.events import listener
from computed.providers.outbox import Outbox, RpcSender
from computed.daemon.service import ComputeService, session_timeout

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


def _reason(exc: Exception) -> str:
    # tooz wraps kazoo errors, often with an empty message of its own.
    return str(exc) or repr(exc.__cause__ or exc)


def _service(conf: cfg.ConfigOpts) -> ComputeService:
    url = conf.coordination.backend_url
    if parse.urlsplit(url).scheme == 'file':
        raise ConfigError('coordination', 'backend_url',
                          'file:// keeps group membership only; the daemon needs '
                          'zookeeper://HOST:PORT to claim nodes exclusively')
    if not conf.database.connection:
        raise ConfigError('database', 'connection',
                          'required by the daemon (it records what it reported)')
    host = normalise_host(conf.host)
    driver = common.baremetal_driver(conf)
    engine = db_api.engine_from_url(conf.database.connection)
    transport = rpc.get_transport(conf)
    client = rpc.get_client(transport, conf.reporter.topic,
                            timeout=conf.reporter.call_timeout)

    def outbox(gate):
        return Outbox(host, RpcSender(client), gate, batch_size=conf.reporter.batch_size)

    def events(on_node):
        notifications = oslo_messaging.get_notification_transport(conf)
        return listener(notifications, conf.ironic.notification_topic,
                        conf.ironic.notification_exchange, f'computed-{host}', on_node)

    coordinator = coordination.get_coordinator(
        common.coordinator_url(url), host.encode())
    service = ComputeService(
        coordinator, driver, host=host, group=conf.coordination.group,
        session_timeout=session_timeout(url), weight=conf.fleet.weight,
        node_refresh_interval=conf.fleet.node_refresh_interval,
        audit_path=conf.fleet.audit_log, join_timeout=conf.coordination.join_timeout,
        drain_timeout=conf.fleet.drain_timeout, outbox=outbox,
        engine=engine, rehome_grace=conf.fleet.rehome_grace,
        events=events if conf.ironic.notifications else None)
    placement = keystone.load_adapter(conf, 'placement')
    service.worker = InstanceWorker(service.fleet, lambda: Owner(
        engine, driver, placement, host, service.membership.epoch))
    service.rpc_server = rpc.get_server(transport, rpcapi.TOPIC, host, [service.worker])
    return service


def serve(conf: cfg.ConfigOpts, stop: _Stop) -> int:
    backend = _backend_label(conf.coordination.backend_url)
    service = _service(conf)
    endpoint = metrics.serve_daemon(conf, service)  # before joining: a busy port is a config error
    try:
        service.start()
    except coordination.ToozError as exc:
        LOG.error('Cannot use coordination backend %s ([coordination] '
                  'backend_url): %s', backend, _reason(exc))
        return EXIT_BACKEND
    service.rpc_server.start()  # instance operations (computed.instances.worker)
    status = systemd.StatusLoop(lambda: metrics.describe(service)).start()
    systemd.ready(metrics.describe(service))
    try:
        LOG.info('computed is up: host %s in group %s on %s',
                 service.membership.host, conf.coordination.group, backend)
        while not stop.requested and not service.stopped:
            time.sleep(_TICK)
        if stop.requested:
            LOG.info('Received %s: draining, then leaving group %s',
                     stop.signal_name, conf.coordination.group)
            systemd.stopping(f'{stop.signal_name}: draining')
            service.stop()
            service.wait(conf.fleet.drain_timeout + 10)
        failed = service.error
    finally:
        status.stop()
        endpoint.stop()
        service.rpc_server.stop()
        service.worker.stop()
        service.close()
    if failed is not None:
        LOG.error('computed stopped: %s', failed)
        return EXIT_BACKEND
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
