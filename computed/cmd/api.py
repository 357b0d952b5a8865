"""``computed-api``: serves the compute API (:mod:`computed.api`) over HTTP.

Loads and validates the configuration, listens on ``[api] bind_host``:``[api] bind_port`` and
serves the WSGI application with eventlet's WSGI server (this package is where eventlet enters
the process: every request is a green thread, and kazoo gets its eventlet handler). With
``[api] workers`` > 1 the listening socket is shared by that many forked processes, each with
its own connections (made after the fork). For uwsgi or mod_wsgi, load
:mod:`computed.api.wsgi` instead.

Exit status: 0 after SIGTERM or SIGINT, 1 when a backend cannot be used, 2 for bad
configuration (including a port that cannot be bound).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import eventlet
import eventlet.wsgi
from oslo_config import cfg
from oslo_log import log as logging

from computed.api import app, backends
from computed.cmd import common
from computed.conf import loader
from computed.conf.errors import ConfigError
from computed.runtime import systemd

PROG = 'computed-api'
LOG = logging.getLogger(__name__)


class _Stopped(Exception):
    """SIGTERM or SIGINT: leave the server loop."""


def _stop(_signum: int, _frame: Any) -> None:
    raise _Stopped()


def _serve(conf: cfg.ConfigOpts, sock: Any) -> None:
    connected = backends.connect(conf, common.coordinator_url(conf.coordination.backend_url))
    try:
        application = app.build(conf, connected)
        eventlet.wsgi.server(sock, application, log=logging.getLogger('computed.api.access'),
                             log_output=True, debug=False)
    except _Stopped:
        pass
    finally:
        connected.close()


def serve(conf: cfg.ConfigOpts) -> int:
    if not conf.database.connection:  # before listening: a load balancer would see it up
        raise ConfigError('database', 'connection', 'required by the compute API')
    address = (conf.api.bind_host, conf.api.bind_port)
    try:
        sock = eventlet.listen(address)
    except OSError as exc:
        raise ConfigError('api', 'bind_port', f'cannot listen on {address[0]}:{address[1]}: '
                          f'{exc.strerror or exc}') from None
    LOG.info('computed-api listening on %s:%s (%s workers, auth %s)', *sock.getsockname()[:2],
             conf.api.workers, conf.api.auth_strategy)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop)
    systemd.ready(f'serving on {address[0]}:{address[1]}')
    if conf.api.workers == 1:
        _serve(conf, sock)
        return 0
    children = []
    for _ in range(conf.api.workers):
        pid = os.fork()
        if pid == 0:
            try:
                _serve(conf, sock)
            finally:
                os._exit(0)
        children.append(pid)
    try:
        for pid in children:
            os.waitpid(pid, 0)
    except _Stopped:
        for pid in children:
            os.kill(pid, signal.SIGTERM)
        for pid in children:
            os.waitpid(pid, 0)
    return 0


def _body(argv: Sequence[str]) -> int:
    conf = loader.load(argv, PROG)
    common.setup_logging(conf)
    return serve(conf)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    common.run(PROG, lambda: _body(sys.argv[1:] if argv is None else argv))
