"""``computed-reporter``: applies the daemons' provider reports to Placement.

Loads and validates the configuration, connects to Placement (``[placement]``), computed's database
(``[database] connection``, where the last applied report of every provider is kept) and ZooKeeper
(``[coordination] backend_url``: to check that a report's sender still holds its claim, and to
publish the RPC version it serves, :mod:`computed.upgrade.records`),
then serves the RPC topic ``[reporter] topic`` until SIGTERM or SIGINT. Run as many replicas as
needed; they share the topic. See :mod:`computed.reporter.applier` for the rules.

The reporter is assembled here: a :class:`~computed.reporter.applier.ReportApplier` over the
Placement client, a :class:`~computed.reporter.applier.ClaimReader` on the ZooKeeper client and
the database engine, served by a :class:`~computed.reporter.endpoint.ReporterEndpoint`; and the
:class:`~computed.reporter.resync.Resync` thread (``[placement] resync_interval``), with a
Placement client of its own, the same claims, database and per-provider locks.

ZooKeeper not answering at start is waited for, not fatal: the reporter tries again and again
(:func:`wait_for_zookeeper`), each attempt bounded by ``[coordination]
reporter_connect_timeout``, one log line per attempt naming the service and its address, the
pauses doubling up to :data:`RETRY_CAP` seconds, and SIGTERM or SIGINT ends the wait at once.
ZooKeeper gone while it serves does not hold its stop: the delete of its service record waits at
most the session timeout (the record is ephemeral), the claim reads likewise, and kazoo's close
is bounded by kazoo.

Exit status: 0 after a clean stop (also while waiting for ZooKeeper), 1 when a backend cannot be
used, 2 for bad configuration.
"""

from __future__ import annotations

import contextlib
import logging as std_logging
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import NoReturn

from kazoo.client import KazooClient
from oslo_config import cfg
from oslo_log import log as logging

from computed.cmd import common
from computed.conf import loader
from computed.conf.coordination import session_timeout
from computed.conf.default import normalise_host
from computed.conf.errors import ConfigError
from computed.db import engine as db_engine
from computed.fleet.membership import fleet_root
from computed.fleet.zookeeper import kazoo_client
from computed.placement.client import PlacementClient
from computed.providers.report import Limits
from computed.reporter import metrics
from computed.reporter.applier import ClaimReader, ReportApplier
from computed.reporter.endpoint import ReporterEndpoint
from computed.reporter.resync import Resync
from computed.runtime import keystone, rpc, systemd
from computed.runtime.stopping import StopRequest
from computed.upgrade import records as upgrade_records

PROG = 'computed-reporter'
EXIT_BACKEND = 1
LOG = logging.getLogger(__name__)
# Seconds between two log lines with the outcome counters.
STATS_INTERVAL = 60.0
#: Waiting for ZooKeeper at start (one attempt takes at most ``[coordination]
#: reporter_connect_timeout`` seconds): the pause after the first failed attempt, and the
#: longest pause (so at most one log line per RETRY_CAP seconds).
RETRY_FIRST = 1.0
RETRY_CAP = 30.0


class _KazooQuiet:
    """kazoo logs each refused connection of an attempt (a dozen lines in 5 s); while waiting,
    the one line per attempt above says it all, so only kazoo's errors get through.

    The logger's level is the process's: with reporters run in threads of one process (the
    test suite's), their waits overlap. The first to begin quiets the logger, the last to end
    puts back the level found then (a level saved by each wait, nested, could be put back out
    of order and leave kazoo quiet for good)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waits = 0
        self._level = std_logging.NOTSET

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        logger = std_logging.getLogger('kazoo.client')
        with self._lock:
            if not self._waits:
                self._level = logger.level
                logger.setLevel(std_logging.ERROR)
            self._waits += 1
        try:
            yield
        finally:
            with self._lock:
                self._waits -= 1
                if not self._waits:
                    logger.setLevel(self._level)


_kazoo_quiet = _KazooQuiet()


def wait_for_zookeeper(conf: cfg.ConfigOpts, member: str, stop: StopRequest) -> KazooClient | None:
    """A started KazooClient on ``[coordination] backend_url``, after as many attempts as it
    takes; None when a stop was requested first."""
    delay, attempt = RETRY_FIRST, 0
    while not stop.requested:
        attempt += 1
        with _kazoo_quiet():
            try:
                return kazoo_client(common.connect_zookeeper(
                    conf, member, conf.coordination.reporter_connect_timeout,
                    give_up=lambda: stop.requested))
            except common.ServiceUnreachable as exc:
                failure = str(exc)
        if stop.requested:
            break
        # Logged outside the except: oslo.log would append the exception again.
        LOG.warning('%s (attempt %d); trying again in %g s', failure, attempt, delay)
        stop.wait(delay)
        delay = min(delay * 2, RETRY_CAP)
    return None


def serve(conf: cfg.ConfigOpts, stop: StopRequest) -> int:
    if not conf.database.connection:
        raise ConfigError('database', 'connection',
                          'required by the reporter (it orders reports per provider)')
    host = normalise_host(conf.host)
    placement = PlacementClient(keystone.load_adapter(conf, 'placement'))
    engine = db_engine.engine_from_conf(conf)
    client = wait_for_zookeeper(conf, f'reporter-{host}', stop)
    if client is None:
        LOG.info('computed-reporter stopped before ZooKeeper answered')
        engine.dispose()
        return 0
    try:
        claims = ClaimReader(client, fleet_root(conf.coordination.group),
                             session_timeout(conf.coordination.backend_url))
        applier = ReportApplier(placement, claims, engine, workers=conf.reporter.workers)
        resync = Resync(PlacementClient(keystone.load_adapter(conf, 'placement')), claims,
                        engine, provider_lock=applier.provider_lock,
                        interval=conf.placement.resync_interval,
                        max_repairs=conf.placement.resync_max_repairs,
                        forget=placement.forget, zookeeper=client,
                        root=fleet_root(conf.coordination.group), host=host,
                        timeout=session_timeout(conf.coordination.backend_url))
        transport = rpc.get_transport(conf, 'reporter', host)
        # Started off this thread: while the broker is unreachable the start waits for it,
        # and this loop must still see SIGTERM.
        limits = Limits(max_reports=conf.reporter.max_reports_per_call,
                        max_traits=conf.reporter.max_traits,
                        max_chars=conf.reporter.max_field_length)
        server = rpc.Serving(f'reporter server ({conf.reporter.topic})',
                             rpc.get_server(transport, conf.reporter.topic, host,
                                            [ReporterEndpoint(applier, limits)]))
        metrics_endpoint = metrics.serve_reporter(conf, applier, client, resync, server)
        server.start()
        resync.start()
        # What this reporter serves, for the daemons' [upgrade_levels] reports = auto.
        record = upgrade_records.Publisher(
            client, upgrade_records.reporters_path(conf.coordination.group), host,
            upgrade_records.reporter_record(host),
            timeout=session_timeout(conf.coordination.backend_url)).start()
        LOG.info('computed-reporter %s waiting for the message bus to serve topic %s', host,
                 conf.reporter.topic)
        status = systemd.StatusLoop(lambda: f'reports: {dict(applier.counts)}').start()
        try:
            next_stats = time.monotonic() + STATS_INTERVAL
            serving = False
            while not stop.wait(0.5):
                if server.started and not serving:
                    serving = True
                    LOG.info('computed-reporter %s serving topic %s', host, conf.reporter.topic)
                    systemd.ready(f'serving topic {conf.reporter.topic}')
                if time.monotonic() >= next_stats:
                    LOG.info('reports so far: %s', dict(applier.counts))
                    next_stats = time.monotonic() + STATS_INTERVAL
        finally:
            systemd.stopping()
            record.stop()
            resync.stop()
            status.stop()
            metrics_endpoint.stop()
            server.stop()
            server.wait()
            applier.close()
            transport.cleanup()
            engine.dispose()
    finally:
        client.stop()
        client.close()
    LOG.info('computed-reporter stopped; reports: %s', dict(applier.counts))
    return 0


def _body(argv: Sequence[str]) -> int:
    conf = loader.load(argv, PROG)
    common.setup_logging(conf)
    return serve(conf, StopRequest().install())


def main(argv: Sequence[str] | None = None) -> NoReturn:
    common.run_service(PROG, lambda: _body(sys.argv[1:] if argv is None else argv))
