"""What every console script shares: one-line failures, logging setup, reaching ZooKeeper.

Guarantees: no traceback reaches the terminal for a bad configuration (exit 2), a service that
cannot be reached or refuses a request (:class:`ServiceUnreachable`, :class:`ServiceError`: one
line naming the service, its address and, from ``computed-manage``, the command; exit 1) or
Ctrl-C (exit 130). Whatever kazoo or tooz raises while a command talks to ZooKeeper through
:func:`zookeeper_coordinator` or :func:`zookeeper` (a connection lost after it was made, an
expired session, a znode missing or not allowed, no answer in time) is one of these: a command
never prints kazoo's traceback.
"""

from __future__ import annotations

import contextlib
import logging as std_logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TextIO
from urllib import parse

from kazoo import exceptions as zk_exc
from kazoo.handlers.threading import KazooTimeoutError
from oslo_config import cfg
from oslo_log import log as logging
from tooz import coordination

from computed.baremetal.driver import BaremetalDriver, UnknownDriver, load_driver
from computed.conf.coordination import with_session_of_at_least
from computed.conf.errors import ConfigError
from computed.conf.loader import EXIT_CONFIG
from computed.fleet.zookeeper import NotZooKeeper, kazoo_client
from computed.runtime import secrets

EXIT_INTERRUPTED = 130
EXIT_UNREACHABLE = 1


class ServiceError(Exception):
    """A service this program needs failed a request; names the service, where it was sought
    (never credentials) and, once set, the command that asked (:attr:`command`)."""

    def __init__(self, service: str, address: str, reason: str):
        self.service = service
        self.address = address
        self.reason = reason
        self.command = ''  # e.g. "fleet status", set by the console script that knows it
        super().__init__(service, address, reason)

    def _what(self) -> str:
        return f'{self.service} at {self.address}: {self.reason}'

    def __str__(self) -> str:
        return f'{self.command}: {self._what()}' if self.command else self._what()


class ServiceUnreachable(ServiceError):
    """A service this program needs did not answer (or stopped answering)."""

    def _what(self) -> str:
        return f'{self.service} at {self.address} unreachable: {self.reason}'


#: What kazoo and tooz raise when ZooKeeper does not carry a request out.
ZOOKEEPER_ERRORS = (zk_exc.KazooException, KazooTimeoutError, coordination.ToozError)
#: Of those, the ones that say ZooKeeper did not answer (rather than refused).
_NO_ANSWER = (zk_exc.ConnectionLoss, zk_exc.SessionExpiredError, KazooTimeoutError,
              coordination.ToozConnectionError, coordination.OperationTimedOut)


def zookeeper_failure(url: str, exc: BaseException) -> ServiceError:
    """The one-line error for ``exc``, raised by kazoo or tooz on ZooKeeper at ``url``
    (:class:`ServiceUnreachable` when ZooKeeper did not answer)."""
    name = type(exc).__name__
    text = ' '.join(str(exc).split())
    cause = exc.__cause__  # tooz wraps kazoo's errors, often with no message of its own
    if isinstance(exc, coordination.ToozError) and cause is not None:
        text = f'{text}: {type(cause).__name__}' if text else type(cause).__name__
    if isinstance(exc, zk_exc.SessionExpiredError):
        reason = f'its session expired ({name})'
    elif isinstance(exc, zk_exc.ConnectionLoss) and not text:
        reason = f'the connection was lost ({name})'
    elif isinstance(exc, zk_exc.NoNodeError):
        reason = f'a znode the command needs does not exist ({name}{": " + text if text else ""})'
    elif isinstance(exc, zk_exc.NoAuthError):
        reason = (f'not allowed ({name}): check the credentials in [coordination] '
                  f'backend_url')
    else:
        reason = f'{text} ({name})' if text and name not in text else (text or name)
    kind = ServiceUnreachable if isinstance(exc, _NO_ANSWER) else ServiceError
    return kind('ZooKeeper', zookeeper_address(url), reason)


def zookeeper_address(url: str) -> str:
    """The servers of a ``zookeeper://`` URL, without credentials, for messages."""
    netloc = parse.urlsplit(url).netloc
    return ','.join(server.rpartition('@')[2] for server in netloc.split(','))


def fail(prog: str, message: str, status: int) -> NoReturn:
    print(f'{prog}: error: {message}', file=sys.stderr)
    sys.exit(status)


def run(prog: str, body: Callable[[], int]) -> NoReturn:
    """Run ``body`` and exit with its status, turning the expected failures
    into one line instead of a traceback."""
    # Until oslo.log is set up, Python would print library warnings (e.g.
    # stevedore failing to load an unknown auth plugin) on stderr, around
    # the one line a bad configuration is allowed; oslo.log's setup
    # replaces this handler.
    std_logging.getLogger().addHandler(std_logging.NullHandler())
    sys.exit(outcome(prog, body))


def run_service(prog: str, body: Callable[[], int]) -> NoReturn:
    """:func:`run` for the long-running services (computed, computed-reporter, computed-api):
    once ``body`` has returned, the service has stopped what it started and logged so, and the
    process ends at once (:func:`end_process`)."""
    # As in run: no stray log lines on stderr before oslo.log's setup replaces this handler.
    std_logging.getLogger().addHandler(std_logging.NullHandler())
    end_process(outcome(prog, body))


def end_process(status: int) -> NoReturn:
    """End the process with ``status`` now: its log handlers and standard streams flushed, then
    ``os._exit``, without the interpreter's teardown.

    Ended by ``sys.exit``, a stopped service went on through the teardown of every module it
    had imported: 2.2-2.9 s after its last line ("computed stopped") on a loaded 2-core machine
    (measured 2026-11-28, load ~16: tools/run-local's q reaped its four processes 3.4-3.6 s
    after SIGTERM, 0.5-1.7 s once ended here), which every stop waited for (systemd's,
    tools/run-local's, the tests'). The teardown's other work is not needed by then: the atexit
    handlers are the standard library's (thread pools whose work the service ended; logging's
    flush, done here), and the service's own threads were stopped by its body (one left hanging
    no longer keeps the process alive); the audit log is line-buffered and closed at the stop.
    A console script run inside a test process (tests/cli.py) ends with ``SystemExit(status)``
    instead, as its caller would see a subprocess end."""
    std_logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more to say
            pass
    os._exit(status)


def outcome(prog: str, body: Callable[[], int], stderr: TextIO | None = None) -> int:
    """The exit status of ``body``: what it returns, or for the expected failures their status
    with one line on ``stderr`` (default: ``sys.stderr``) instead of a traceback. :func:`run`
    exits with it; a console script's service run in a thread of another program (the test
    suite's in-process daemons) ends with it."""
    try:
        return body()
    except ConfigError as exc:
        # Late configuration problems (e.g. a section a command needs).
        status, message = EXIT_CONFIG, str(exc)
    except ServiceError as exc:  # ServiceUnreachable included
        status, message = EXIT_UNREACHABLE, str(exc)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    print(f'{prog}: error: {message}', file=stderr or sys.stderr)
    return status


def setup_logging(conf: cfg.ConfigOpts) -> None:
    logging.setup(conf, 'computed')
    secrets.keep_out_of_logs(log_secrets(conf))


def log_secrets(conf: cfg.ConfigOpts) -> list[str]:
    """What no log line may show of ``conf``: kazoo logs the digest credential of a
    backend_url with user:password at DEBUG; the signing keys are never logged by computed, and
    a library that would is masked too."""
    return (secrets.url_secrets(conf.coordination.backend_url or '') +
            [key for key in conf.messaging.signing_keys if key])


def baremetal_driver(conf: cfg.ConfigOpts) -> BaremetalDriver:
    """The driver named by ``[DEFAULT] baremetal_driver``, configured from ``conf``."""
    try:
        driver_class = load_driver(conf.baremetal_driver)
    except UnknownDriver as exc:
        raise ConfigError(None, 'baremetal_driver', str(exc)) from None
    return driver_class.from_conf(conf)


def connect_zookeeper(conf: cfg.ConfigOpts, member: str,
                      timeout: float | None = None,
                      give_up: Callable[[], bool] = lambda: False,
                      min_session: float = 0.0) -> coordination.CoordinationDriver:
    """A tooz coordinator on ``[coordination] backend_url`` whose ZooKeeper session is started,
    without joining any group; its session at least ``min_session`` seconds (a one-shot
    command's ``[coordination] command_session_timeout``; a service keeps the URL's, which its
    peers' view of it depends on). Raises :class:`ServiceUnreachable` when no session could be
    had within ``timeout`` seconds (None: a one-shot command's ``[coordination]
    command_connect_timeout``), or as soon as ``give_up()`` (polled) is true; kazoo stops
    trying then (a server that accepted the connection and does not answer holds that stop
    until kazoo's connect attempt ends: the session timeout, divided among the servers)."""
    if timeout is None:
        timeout = conf.coordination.command_connect_timeout
    url = with_session_of_at_least(conf.coordination.backend_url, min_session)
    coordinator = coordination.get_coordinator(url, member.encode())
    try:
        client = kazoo_client(coordinator)
    except NotZooKeeper as exc:
        raise ConfigError("coordination", "backend_url", str(exc)) from None
    # kazoo's start(timeout) cannot be interrupted; its start_async's event can be polled.
    connected = client.start_async()
    deadline = time.monotonic() + timeout
    while not connected.wait(0.2) and not give_up() and time.monotonic() < deadline:
        pass
    if not client.connected:
        client.stop()
        client.close()
        reason = 'gave up' if give_up() else f'no session within {timeout:g} s'
        raise ServiceUnreachable('ZooKeeper', zookeeper_address(url), reason)
    return coordinator


@contextlib.contextmanager
def zookeeper_coordinator(conf: cfg.ConfigOpts, member: str = 'computed-manage',
                          timeout: float | None = None
                          ) -> Iterator[coordination.CoordinationDriver]:
    """:func:`connect_zookeeper` as a context: read and write through its kazoo client, and
    find where tooz keeps a group, with :mod:`computed.fleet.zookeeper`, as the daemon does.
    What kazoo or tooz raises inside it leaves it as :class:`ServiceError` (one line)."""
    coordinator = connect_zookeeper(conf, member, timeout,
                                    min_session=conf.coordination.command_session_timeout)
    client = kazoo_client(coordinator)
    try:
        yield coordinator
    except ZOOKEEPER_ERRORS as exc:
        raise zookeeper_failure(conf.coordination.backend_url, exc) from None
    finally:
        client.stop()
        client.close()


@contextlib.contextmanager
def zookeeper(conf: cfg.ConfigOpts, member: str = 'computed-manage',
              timeout: float | None = None) -> Iterator[Any]:
    """A started KazooClient on ``[coordination] backend_url`` (no group membership)."""
    with zookeeper_coordinator(conf, member, timeout) as coordinator:
        yield kazoo_client(coordinator)
