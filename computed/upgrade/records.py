"""What each service publishes about itself in ZooKeeper, and the pins read from it.

Owns where the release and the RPC versions of the live services are published, and the
sender's view of them (:class:`Levels`):

* A daemon publishes them in its membership of the fleet's group (capabilities ``version`` and
  ``rpc``: :func:`computed.fleet.membership.capabilities`), so they live and die with the
  member.
* A reporter publishes a *service record*: an ephemeral, sequential znode
  ``/computed/<group>/services/computed-reporter/<host>-<seq>`` holding
  ``{"binary", "host", "version", "rpc": {"reports": ...}}`` (:func:`reporter_record`), made
  again by :class:`Publisher` whenever its ZooKeeper session is a new one (an ephemeral znode
  goes with the session that made it). Sequential: replicas on one host each have theirs.

Release 0.1.0 published neither: its daemons are members without versions (taken as serving
what 0.1.0 serves, :data:`computed.upgrade.levels.UNPUBLISHED`), its reporters have no record
(invisible here; they serve reports 1.1, which is what this release sends).

:class:`Levels` is the sender's ``[upgrade_levels]`` pin made a version: a number as is, ``auto``
from the live peers (:func:`computed.upgrade.levels.cap`), looked at again every ``ttl`` seconds
so that a fleet's cap rises as its last old peer goes, without a restart. Reading the peers can
fail (ZooKeeper away): the last version found is kept, and before any was found the interface's
oldest is sent, which every peer serves. Threads: a :class:`Levels` is called from any sender's
thread (the daemon's report thread, its instance workers, the API's request threads); its cache
is behind a lock and the peers are read outside it: once a version is known, one caller per
``ttl`` reads them again while the others go on with the last one (before that, each caller
reads).

Every wait for ZooKeeper here is bounded (``timeout``, the session timeout; see
:mod:`computed.fleet.zookeeper`, "Bounded waits"): :meth:`Publisher.stop` runs on a reporter's
and an API worker's way out, which must end when ZooKeeper is gone; the record is ephemeral and
goes with the session anyway.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kazoo import exceptions as zk_exc
from kazoo.protocol.states import KazooState

from computed.conf.coordination import DEFAULT_SESSION_TIMEOUT
from computed.fleet import zookeeper
from computed.fleet.membership import fleet_root, read_members
from computed.fleet.zookeeper import Deadline
from computed.upgrade import levels
from computed.version import VERSION

LOG = logging.getLogger(__name__)

REPORTER = 'computed-reporter'
#: Seconds a sender keeps the cap ``auto`` found before looking at the peers again.
AUTO_TTL = 30.0


@dataclass(frozen=True)
class ServiceRecord:
    """A live service as it published itself; ``version`` None: not published or unreadable."""

    binary: str
    host: str
    version: str | None
    rpc: tuple[tuple[str, str], ...] = ()

    def serves(self, interface: str) -> str | None:
        return dict(self.rpc).get(interface)


def services_path(group: str) -> str:
    return f'{fleet_root(group)}/services'


def reporters_path(group: str) -> str:
    """Where the reporters of ``group`` publish their records (one child per live reporter)."""
    return f'{services_path(group)}/{REPORTER}'


def reporter_record(host: str) -> bytes:
    """What a reporter on ``host`` publishes."""
    return json.dumps({'binary': REPORTER, 'host': host, 'version': VERSION,
                       'rpc': {'reports': levels.newest('reports')}},
                      sort_keys=True).encode()


def parse_record(name: str, data: bytes) -> ServiceRecord:
    """A reporter's record as read (pure); unreadable data is a record of unknown versions
    named after its znode: the reporter is live, we only cannot say what it serves."""
    try:
        fields = json.loads(data)
    except ValueError:
        fields = None
    if not isinstance(fields, dict) or not isinstance(fields.get('host'), str):
        return ServiceRecord(REPORTER, name, None)
    version, rpc = fields.get('version'), fields.get('rpc')
    served = tuple(sorted((key, value) for key, value in rpc.items()
                          if isinstance(key, str) and isinstance(value, str))
                   ) if isinstance(rpc, dict) else ()
    return ServiceRecord(REPORTER, fields['host'],
                         version if isinstance(version, str) else None, served)


def read_reporters(client: Any, group: str,
                   timeout: float = DEFAULT_SESSION_TIMEOUT) -> list[ServiceRecord]:
    """The live reporters' records (pipelined reads, each round answered within ``timeout``
    seconds, else :class:`computed.fleet.zookeeper.NoAnswer`); none when nobody published."""
    path = reporters_path(group)
    try:
        names = zookeeper.answer(client.get_children_async(path), timeout,
                                 f'the list of {path}')
    except zk_exc.NoNodeError:
        return []
    deadline = Deadline(timeout)
    pending = [(name, client.get_async(f'{path}/{name}')) for name in names]
    found = []
    for name, result in pending:
        try:
            data, _stat = zookeeper.answer(result, deadline, f'a read of {path}/{name}')
        except zk_exc.NoNodeError:
            continue  # gone while we looked
        found.append(parse_record(name, data))
    return sorted(found, key=lambda record: (record.host, record.version or ''))


def read_daemons(client: Any, members_path: str, draining_path: str) -> list[ServiceRecord]:
    """The live daemons (the fleet group's members) as service records."""
    return [ServiceRecord('computed', member.name, member.version, member.rpc)
            for member in read_members(client, members_path, draining_path)]


class Publisher:
    """Keeps this process's record under ``parent`` while its ZooKeeper session lives, and
    makes it again on a new session."""

    def __init__(self, client: Any, parent: str, name: str, data: bytes,
                 timeout: float = DEFAULT_SESSION_TIMEOUT):
        self._client = client
        self._timeout = timeout  # for each request: the session timeout
        self._prefix = f'{parent}/{name}-'
        self._data = data
        self._path: str | None = None
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def path(self) -> str | None:
        return self._path

    def start(self) -> Publisher:
        self._client.add_listener(self._state)
        self._ensure_quietly()  # a process that cannot publish still serves: it is only unseen
        return self

    def _state(self, state: str) -> None:
        # kazoo's event thread: never wait on ZooKeeper here.
        if state == KazooState.CONNECTED and not self._stopped:
            self._client.handler.spawn(self._ensure_quietly)

    def _ensure_quietly(self) -> None:
        try:
            self.ensure()
        except Exception as exc:  # the next reconnection tries again
            LOG.warning('could not publish %s in ZooKeeper: %s', self._prefix,
                        str(exc) or type(exc).__name__)

    def ensure(self) -> None:
        """Create the record unless this session's is there (idempotent)."""
        with self._lock:
            if self._stopped:
                return
            session = self._client.client_id
            stat = zookeeper.answer(self._client.exists_async(self._path), self._timeout,
                                    f'a look at {self._path}') if self._path else None
            if stat is not None and session is not None and stat.ephemeralOwner == session[0]:
                return
            self._path = zookeeper.answer(
                self._client.create_async(self._prefix, self._data, ephemeral=True,
                                          sequence=True, makepath=True),
                self._timeout, f'the creation of {self._prefix}')

    def stop(self) -> None:
        """Remove the record, waiting at most the session timeout for ZooKeeper to answer
        (it would go with the session anyway)."""
        with self._lock:
            self._stopped = True
            path, self._path = self._path, None
        self._client.remove_listener(self._state)
        if path is None:
            return
        try:
            zookeeper.answer(self._client.delete_async(path), self._timeout,
                             f'the delete of {path}')
            return
        except zk_exc.NoNodeError:
            return
        except zk_exc.KazooException as exc:  # NoAnswer included
            reason = str(exc) or type(exc).__name__
        # Logged outside the except: oslo.log would append the exception to the line again.
        LOG.warning("left %s to the ZooKeeper session's end (it is ephemeral): %s", path, reason)


class Levels:
    """The version to send ``interface`` at now, from its ``[upgrade_levels]`` pin."""

    def __init__(self, interface: str, pin: str, peers: Callable[[], Iterable[str | None]],
                 ttl: float = AUTO_TTL, clock: Callable[[], float] = time.monotonic):
        # ``peers``: the versions of ``interface`` the live peers publish (None: none); I/O.
        self.interface = interface
        self.pin = pin
        self._peers = peers
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._version: str | None = None
        self._until = float('-inf')

    def __call__(self) -> str:
        if self.pin != levels.AUTO:
            return self.pin
        with self._lock:
            if self._version is not None and self._clock() < self._until:
                return self._version
            self._until = self._clock() + self._ttl  # one caller looks; the others use the last
            last = self._version
        try:
            version = levels.cap(self.interface, self.pin, list(self._peers()))
        except Exception as exc:
            version = last or levels.HISTORY[self.interface][0]
            LOG.warning('[upgrade_levels] %s = auto: cannot read the versions the live peers '
                        'serve (%s); sending %s', self.interface,
                        str(exc) or type(exc).__name__, version)
        with self._lock:
            if version != self._version and self._version is not None:
                LOG.info('[upgrade_levels] %s = auto: now sending %s (was %s)',
                         self.interface, version, self._version)
            self._version = version
        return version


def instance_levels(pin: str, client: Any | None, members_path: str,
                    draining_path: str) -> Levels:
    """The pin of instance casts: ``auto`` reads the fleet's members (a client is needed)."""
    def peers() -> list[str | None]:
        if client is None:
            raise RuntimeError('no ZooKeeper client')
        return [d.serves('instances') for d in read_daemons(client, members_path, draining_path)]
    return Levels('instances', pin, peers)


def report_levels(pin: str, client: Any, group: str) -> Levels:
    """The pin of provider reports: ``auto`` reads the reporters' records."""
    return Levels('reports', pin,
                  lambda: [record.serves('reports') for record in read_reporters(client, group)])
