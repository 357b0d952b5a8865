"""``computed-api``: serves the compute API (:mod:`computed.api`) over HTTP.

Loads and validates the configuration, reserves ``[api] bind_host``:``[api] bind_port`` and
serves the WSGI application on native threads with cheroot (:mod:`computed.api.httpd`): one
worker in this process, or ``[api] workers`` forked processes sharing the port, each with
``[api] threads`` threads and its own connections (made after the fork). SIGTERM or SIGINT
stops gracefully: requests in flight get ``[api] graceful_shutdown_timeout`` seconds. For uwsgi
or mod_wsgi, load :mod:`computed.api.wsgi` instead.

Exit status: 0 after SIGTERM or SIGINT, 1 when a backend cannot be used, 2 for bad
configuration (including a port that cannot be bound).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from oslo_config import cfg
from oslo_log import log as logging

from computed.api import app, backends, httpd
from computed.cmd import common
from computed.conf import loader
from computed.conf.errors import ConfigError
from computed.runtime import systemd
from computed.runtime.stopping import StopRequest

PROG = 'computed-api'
LOG = logging.getLogger(__name__)


def _worker(conf: cfg.ConfigOpts, settings: httpd.ServerSettings, stop: StopRequest) -> None:
    """One serving process: its backends, the application, the server until ``stop``. A
    ZooKeeper that cannot be used is :class:`common.ServiceError` (one line, exit 1)."""
    try:
        connected = backends.connect(conf, conf.coordination.backend_url)
    except common.ZOOKEEPER_ERRORS as exc:
        raise common.zookeeper_failure(conf.coordination.backend_url, exc) from None
    try:
        httpd.serve(app.build(conf, connected), settings, stop)
    finally:
        connected.close()


def _forked_worker(conf: cfg.ConfigOpts, settings: httpd.ServerSettings,
                   stop: StopRequest) -> None:
    """:func:`_worker` in a forked process: what one process would print as one line (a backend
    that cannot be used) is logged as one line, and the worker exits 1 (the supervisor starts
    another)."""
    try:
        _worker(conf, settings, stop)
    except common.ServiceError as exc:
        LOG.error('API worker %d cannot serve: %s', os.getpid(), exc)
        raise SystemExit(common.EXIT_UNREACHABLE) from None


def serve(conf: cfg.ConfigOpts, stop: StopRequest) -> int:
    if not conf.database.connection:  # before listening: a load balancer would see it up
        raise ConfigError('database', 'connection', 'required by the compute API')
    reservation = httpd.reserve(conf.api.bind_host, conf.api.bind_port)
    try:
        settings = httpd.ServerSettings.from_conf(conf.api, reservation.getsockname()[1])
        LOG.info('computed-api listening on %s:%s (%s workers x %s threads, auth %s)',
                 settings.host, settings.port, conf.api.workers, settings.threads,
                 conf.api.auth_strategy)
        systemd.ready(f'serving on {settings.host}:{settings.port}')
        if conf.api.workers == 1:
            _worker(conf, settings, stop)
        else:
            httpd.run_workers(conf.api.workers,
                              lambda own_stop: _forked_worker(conf, settings, own_stop),
                              stop, grace=settings.graceful_shutdown_timeout + 5)
    finally:
        reservation.close()
    return 0


def _body(argv: Sequence[str]) -> int:
    conf = loader.load(argv, PROG)
    common.setup_logging(conf)
    return serve(conf, StopRequest().install())


def main(argv: Sequence[str] | None = None) -> NoReturn:
    common.run_service(PROG, lambda: _body(sys.argv[1:] if argv is None else argv))
