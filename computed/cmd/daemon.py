"""``computed``: the compute daemon, one per controller node.

Loads and validates the configuration, then runs :class:`computed.daemon.service.ComputeService`:
joins the fleet's tooz group on ZooKeeper as member ``host`` (normalised to lower case), claims
its share of the Ironic nodes on the hash ring with fencing (see
:mod:`computed.fleet.reconciler`), listens to Ironic's notifications, and reports its nodes'
providers to the reporters over RPC. On SIGTERM or SIGINT it drains: its free nodes go to its
peers before it leaves. With ZooKeeper gone it cannot drain, and stops within a few session
timeouts all the same (:mod:`computed.daemon.service`: every wait of a stop is bounded). Asked
to stop while it starts its ZooKeeper session, it gives the start up at once and exits 0.

This module is the daemon's one composition root: :func:`_service` builds every part (driver,
database engine, RPC transport, fleet, outbox, node sync, notification listener, instance worker
and its RPC server) from the configuration, in the order they depend on each other, and hands them
to the service in three groups (:class:`~computed.daemon.service.FleetParts`,
:class:`~computed.daemon.service.ReportingParts`, :class:`~computed.daemon.service.InstanceParts`).
No part refers to one built after it: listeners are plain objects handed down (the fleet's
wake-up Event) or plain calls made by the service. Defaults come from ``computed.conf`` only.

Exit status: 0 after a clean stop, 1 when the coordination backend or Ironic cannot be used, 2 for
bad configuration.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn
from urllib import parse

import oslo_messaging
from oslo_config import cfg
from oslo_log import log as logging
from tooz import coordination

from computed.baremetal import events
from computed.baremetal.catalog import NodeCatalog
from computed.cmd import common
from computed.conf import loader
from computed.conf.coordination import session_timeout
from computed.conf.default import normalise_host
from computed.conf.errors import ConfigError
from computed.daemon import metrics
from computed.daemon.hosting import Hosting
from computed.daemon.listing import ListingRound, Listings, round_path
from computed.daemon.nodes import FleetNodes
from computed.daemon.profiling import start_from_env as start_profiling
from computed.daemon.service import ComputeService, FleetParts, InstanceParts, ReportingParts
from computed.daemon.sync import NodeSync, ReportGate
from computed.db import engine as db_engine
from computed.fleet.audit import AuditLog
from computed.fleet.claims import ClaimTable
from computed.fleet.fence import Fence
from computed.fleet.membership import Membership, fleet_root
from computed.fleet.reconciler import Fleet
from computed.fleet.rehome import Rehomer
from computed.fleet.zookeeper import kazoo_client
from computed.instances import rpcapi, scheduler
from computed.instances.lifecycle import Owner
from computed.instances.notifications import InstanceNotifier
from computed.instances.worker import InstanceWorker
from computed.providers.outbox import Outbox, RpcSender
from computed.runtime import keystone, rpc, systemd
from computed.runtime.stopping import StopRequest
from computed.scheduling.loader import pipeline_from_conf
from computed.upgrade import records as upgrade_records

PROG = 'computed'
EXIT_BACKEND = 1
LOG = logging.getLogger(__name__)

# How often the main loop looks whether the service stopped by itself (a stop asked by a
# signal wakes it at once).
_TICK = 0.2


def _backend_label(url: str) -> str:
    # scheme://hosts only: a URL's query or userinfo is not for the log.
    parts = parse.urlsplit(url)
    return f'{parts.scheme}://{parts.netloc.rpartition("@")[2]}{parts.path}'


def _reason(exc: Exception) -> str:
    # tooz wraps kazoo errors, often with an empty message of its own.
    return str(exc) or repr(exc.__cause__ or exc)


def _service(conf: cfg.ConfigOpts, resources: contextlib.ExitStack) -> ComputeService:
    """Build every part of the daemon from ``conf``, each after what it needs, and hand them to
    the service that runs them, in three groups (fleet, provider reporting, instances). What
    the service does not close itself (the database engine, the two RPC transports) is put on
    ``resources``, released after the service is closed (also when a later part fails)."""
    url = conf.coordination.backend_url
    if parse.urlsplit(url).scheme == 'file':
        raise ConfigError('coordination', 'backend_url',
                          'file:// keeps group membership only; the daemon needs '
                          'zookeeper://HOST:PORT to claim nodes exclusively')
    if not conf.database.connection:
        raise ConfigError('database', 'connection',
                          'required by the daemon (it records what it reported)')
    host = normalise_host(conf.host)
    # Before anything connects: a filter or weigher that cannot be loaded is a ConfigError.
    pipeline = pipeline_from_conf(conf)
    group = conf.coordination.group
    driver = common.baremetal_driver(conf)
    engine = db_engine.engine_from_conf(conf)
    resources.callback(engine.dispose)
    transport = rpc.get_transport(conf, 'daemon', host)
    resources.callback(transport.cleanup)  # its connections, and their heartbeat threads
    # Ironic's notifications come in, the instances' go out ([oslo_messaging_notifications]).
    notification_transport = oslo_messaging.get_notification_transport(conf)
    resources.callback(notification_transport.cleanup)
    coordinator = coordination.get_coordinator(url, host.encode())
    zookeeper = kazoo_client(coordinator)
    catalog = NodeCatalog(driver)
    nodes = FleetNodes(catalog, engine)

    # The fleet: membership, claims, fence, reconciler. The membership's and the claims'
    # watches wake the reconciler through one Event, made before all three; the session's
    # states reach the fence and then the reconciler through the service (its kazoo listener).
    wake = threading.Event()
    fence = Fence(session_timeout(url))
    # Every wait for ZooKeeper is bounded by the session timeout (the granted one once known):
    # with no answer by then, a leave is moot and a stop must not wait for ever.
    answer_within = lambda: fence.session_timeout  # noqa: E731 - read at each request
    membership = Membership(coordinator, group, host, conf.fleet.weight, wake=wake,
                            answer_within=answer_within)
    audit = AuditLog(conf.fleet.audit_log, membership.host)
    claims = ClaimTable(zookeeper, fleet_root(group), membership.host, audit, wake=wake,
                        answer_within=answer_within)
    hosting = Hosting(engine, membership, Rehomer(engine, host, conf.fleet.rehome_grace), audit,
                      resume_interval=conf.fleet.resume_interval)
    fleet = Fleet(membership, claims, fence, nodes=nodes, hosting=hosting, audit=audit,
                  join_timeout=conf.coordination.join_timeout,
                  drain_timeout=conf.fleet.drain_timeout, wake=wake)

    # Provider reports: node sync -> outbox -> RPC -> computed-reporter.
    reporters = rpc.get_client(transport, conf.reporter.topic, timeout=conf.reporter.call_timeout)
    # [upgrade_levels]: the reports' version from the reporters' records, the casts' from the
    # members'; both read through this daemon's session, looked at again every 30 s.
    report_version = upgrade_records.report_levels(conf.upgrade_levels.reports, zookeeper, group)
    outbox = Outbox(host, RpcSender(reporters, report_version), ReportGate(claims, fence),
                    batch_size=conf.reporter.batch_size)
    sync = NodeSync(catalog, nodes, driver, fleet, outbox)
    listener = heartbeat = watch = rounds = None
    if conf.ironic.notifications:
        watch = events.StreamWatch(host, conf.ironic.heartbeat_interval,
                                   conf.ironic.max_event_lag)
        listener = rpc.Serving('Ironic notification listener', events.listener(
            notification_transport, conf.ironic.notification_topic,
            conf.ironic.notification_exchange, events.pool_name(group, host), sync,
            conf.ironic.heartbeat_topic, watch))
        heartbeat = events.Heartbeat(
            events.notifier(notification_transport, host, conf.ironic.heartbeat_topic), host,
            watch=watch)
        rounds = ListingRound(zookeeper, round_path(group), host,
                              timeout=session_timeout(url))
    listings = Listings(nodes, catalog, engine, conf.fleet.node_refresh_interval,
                        conf.fleet.fleet_listing_interval, watch, rounds, heartbeat)

    # Instance operations (computed.instances.worker), cast to this host's queue. The worker
    # acts as this daemon under the member epoch of its last join (the membership's).
    placement = keystone.load_adapter(conf, 'placement')
    daemon = Owner(engine, driver, placement, host, membership.member_epoch,
                   max_attempts=conf.scheduler.max_attempts,
                   owner_of=scheduler.zookeeper_owner(zookeeper, fleet_root(group),
                                                      session_timeout(url)),
                   pipeline=pipeline)
    cast_version = upgrade_records.instance_levels(
        conf.upgrade_levels.instances, zookeeper, membership.members_path,
        membership.draining_path)
    worker = InstanceWorker(fleet, daemon,
                            compute=rpcapi.ComputeAPI(transport, version=cast_version),
                            notifier=InstanceNotifier(notification_transport, host),
                            membership=membership)
    rpc_server = rpc.Serving(f'instance operations server ({rpcapi.TOPIC}.{host})',
                             rpc.get_server(transport, rpcapi.TOPIC, host, [worker]))

    return ComputeService(
        FleetParts(coordinator=coordinator, zookeeper=zookeeper, fence=fence,
                   membership=membership, fleet=fleet, audit=audit),
        ReportingParts(driver=driver, catalog=catalog, nodes=nodes, listings=listings,
                       sync=sync, outbox=outbox, listener=listener, heartbeat=heartbeat,
                       heartbeat_interval=conf.ironic.heartbeat_interval),
        InstanceParts(hosting=hosting, worker=worker, rpc_server=rpc_server))


def serve(conf: cfg.ConfigOpts, stop: StopRequest) -> int:
    """Run the daemon of ``conf`` until ``stop`` is requested (or the service ends by itself);
    its exit status. The stop drains first unless it waives the drain
    (:attr:`~computed.runtime.stopping.StopRequest.drain`). Everything the daemon opened is
    closed when this returns: its threads, connections and transports (so it can run in a
    thread of a longer-lived process: the test suite runs daemons so)."""
    start_profiling()  # only with COMPUTED_TRACEMALLOC set (benchmarks)
    with contextlib.ExitStack() as resources:
        return _serve(conf, stop, resources)


def _serve(conf: cfg.ConfigOpts, stop: StopRequest, resources: contextlib.ExitStack) -> int:
    backend = _backend_label(conf.coordination.backend_url)
    service = _service(conf, resources)
    endpoint = metrics.serve_daemon(conf, service)  # before joining: a busy port is a config error
    try:
        started = service.start(stop.event)
    except coordination.ToozError as exc:
        LOG.error('Cannot use coordination backend %s ([coordination] '
                  'backend_url): %s', backend, _reason(exc))
        started = None
    if not started:
        try:
            service.close()
        finally:
            endpoint.stop()
        if started is None:
            return EXIT_BACKEND
        LOG.info('computed stopped: %s during its start, before it joined group %s',
                 stop.signal_name, conf.coordination.group)
        return 0
    status = systemd.StatusLoop(lambda: metrics.describe(service)).start()
    systemd.ready(metrics.describe(service))
    try:
        LOG.info('computed is up: host %s in group %s on %s',
                 service.membership.host, conf.coordination.group, backend)
        while not stop.wait(_TICK) and not service.stopped:
            pass
        if stop.requested and stop.drain:
            LOG.info('Received %s: draining, then leaving group %s',
                     stop.signal_name, conf.coordination.group)
            systemd.stopping(f'{stop.signal_name}: draining')
        elif stop.requested:
            LOG.info('Stop %s: leaving group %s without draining',
                     stop.signal_name, conf.coordination.group)
            systemd.stopping(f'{stop.signal_name}: leaving')
        if stop.requested:
            service.stop(drain=stop.drain)
            service.wait(conf.fleet.drain_timeout + 10)
        failed = service.error
    finally:
        status.stop()
        try:
            service.close()
        finally:
            # Last: until the process is about to exit, /healthz answers 503 rather than
            # nothing, so a load balancer never reads a stopping daemon as healthy.
            endpoint.stop()
    if failed is not None:
        # Some exceptions (kazoo's ConnectionLoss) have no message: the type is then the reason.
        LOG.error('computed stopped: %s', str(failed) or type(failed).__name__)
        return EXIT_BACKEND
    LOG.info('computed stopped')
    return 0


def _body(argv: Sequence[str]) -> int:
    conf = loader.load(argv, PROG)
    common.setup_logging(conf)
    return serve(conf, StopRequest().install())


def main(argv: Sequence[str] | None = None) -> NoReturn:
    common.run_service(PROG, lambda: _body(sys.argv[1:] if argv is None else argv))
