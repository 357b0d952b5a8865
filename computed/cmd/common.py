"""What every console script shares: one-line failures, logging setup, reaching ZooKeeper.

Guarantees: no traceback reaches the terminal for a bad configuration (exit 2), a service that
cannot be reached (:class:`ServiceUnreachable`: one line naming the service and its address,
exit 1) or Ctrl-C (exit 130).
"""

from __future__ import annotations

import contextlib
import logging as std_logging
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TextIO
from urllib import parse

from oslo_config import cfg
from oslo_log import log as logging
from tooz import coordination

from computed.baremetal.driver import BaremetalDriver, UnknownDriver, load_driver
from computed.conf.errors import ConfigError
from computed.conf.loader import EXIT_CONFIG
from computed.fleet.zookeeper import NotZooKeeper, kazoo_client
from computed.runtime import secrets

EXIT_INTERRUPTED = 130
EXIT_UNREACHABLE = 1
#: Seconds a one-shot command waits for a ZooKeeper session: a reachable ensemble answers in
#: milliseconds, and an operator waiting on a dead one wants to hear so soon.
CLI_CONNECT_TIMEOUT = 10.0


class ServiceUnreachable(Exception):
    """A service this program needs did not answer; names the service and where it was sought
    (never credentials)."""

    def __init__(self, service: str, address: str, reason: str):
        self.service = service
        self.address = address
        self.reason = reason
        super().__init__(f'{service} at {address} unreachable: {reason}')


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
    except ServiceUnreachable as exc:
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
                      timeout: float = CLI_CONNECT_TIMEOUT,
                      give_up: Callable[[], bool] = lambda: False
                      ) -> coordination.CoordinationDriver:
    """A tooz coordinator on ``[coordination] backend_url`` whose ZooKeeper session is started,
    without joining any group. Raises :class:`ServiceUnreachable` when no session could be had
    within ``timeout`` seconds, or as soon as ``give_up()`` (polled) is true; kazoo stops
    trying then."""
    url = conf.coordination.backend_url
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
                          timeout: float = CLI_CONNECT_TIMEOUT
                          ) -> Iterator[coordination.CoordinationDriver]:
    """:func:`connect_zookeeper` as a context: read and write through its kazoo client, and
    find where tooz keeps a group, with :mod:`computed.fleet.zookeeper`, as the daemon does."""
    coordinator = connect_zookeeper(conf, member, timeout)
    client = kazoo_client(coordinator)
    try:
        yield coordinator
    finally:
        client.stop()
        client.close()


@contextlib.contextmanager
def zookeeper(conf: cfg.ConfigOpts, member: str = 'computed-manage',
              timeout: float = CLI_CONNECT_TIMEOUT) -> Iterator[Any]:
    """A started KazooClient on ``[coordination] backend_url`` (no group membership)."""
    with zookeeper_coordinator(conf, member, timeout) as coordinator:
        yield kazoo_client(coordinator)
