"""Servers a create admitted and has not placed yet: placed by this process's threads.

Owns what happens to the servers of a ``POST /servers`` between its 202 and the cast of their
builds. The request thread only admits them (the quota, then one row each, BUILDING with no node
nor host: what Nova shows as the task ``scheduling``) and hands them here
(:meth:`BuildQueue.submit`); ``[api] scheduling_threads`` threads of this process place each
request's servers (:meth:`computed.instances.rpcapi.ServerAPI.place_admitted`: Placement's
candidates, the filters, a claim) and cast each build to its daemon. Why not in the request: a
placement waits on Placement, a second or more when it is busy, and a burst of creates held
every request thread that long (issue 22: 100 creates, a create call's p95 16 s); the 202 now
costs the admission only, as Nova's does (its conductor schedules after the API answered).

Guarantees:

* **All or none** (Nova's ``min_count`` rule, :func:`place`): if one server of a request finds
  no host, or placing fails (Placement unavailable), none is built: the servers placed give
  their node and allocation back, and every server of the request is left in ERROR with the
  reason as its fault, which the client reads after its 202, as in Nova.
* **Nothing admitted is lost.** A server is taken (a compare-and-set on its row,
  :func:`computed.db.instances.take_admitted`) before it is placed. Every half of ``[api]
  pending_build_timeout`` each API process looks for admitted servers nobody took for that
  long (their process died with them queued or being placed, or its queue is that far
  behind) and places them (:meth:`BuildQueue.sweep`), a request's servers together.
* **Placed once.** Two processes taking one server: one take wins. Should both place it
  anyway (a placement slower than the timeout), Placement holds one allocation per consumer
  (a new consumer's generation) and the row's compare-and-set (BUILDING, unplaced) lets one
  placement be recorded; the other's allocation attempt fails, or is removed.
* **A delete while admitted wins.** It marks the row DELETED; the placement's compare-and-set
  then fails and removes the allocation it made
  (:func:`computed.instances.scheduler.place_admitted`).
* A cast that fails (the bus down) leaves the server placed, BUILDING on its daemon, which
  resumes it (:mod:`computed.instances.rpcapi`: recorded before cast).

Threads: request threads call :meth:`BuildQueue.submit`; the pool's threads run :func:`place`,
one request each; the sweeper thread lists and submits. They share only the engine, the
Placement adapter and the RPC transport, each safe to share, and race only in the database
and Placement (above).
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Iterable, Sequence
from concurrent import futures
from typing import Any

from sqlalchemy.engine import Engine

from computed.api import errors
from computed.db import instances as db_instances
from computed.db import models
from computed.db.common import DatabaseError
from computed.db.instances import InstanceConflict, InstanceNotFound, InstanceRow
from computed.instances import scheduler
from computed.instances.rpcapi import NO_VALID_HOST, ServerAPI
from computed.placement import allocations
from computed.placement.http import PlacementError

LOG = logging.getLogger(__name__)

#: Most admitted servers one sweep takes over.
SWEEP_BATCH = 100


def requests_of(rows: Iterable[InstanceRow]) -> list[tuple[InstanceRow, ...]]:
    """Admitted rows grouped into their requests (one ``reservation_id``; a row without one
    alone), each in the order of its rows' names' index, first request first. Pure."""
    groups: dict[str, list[InstanceRow]] = {}
    for row in rows:
        groups.setdefault(row.reservation_id or row.uuid, []).append(row)
    return [tuple(sorted(group, key=lambda r: (r.created_at, r.uuid)))
            for group in groups.values()]


def fault_of(count: int, index: int, reason: str) -> str:
    """The fault every server of a request is left with when its ``index``-th (from 0) of
    ``count`` servers could not be placed for ``reason``. Pure."""
    if count == 1:
        return reason
    return (f'{NO_VALID_HOST}: {count} servers were requested together and server '
            f'{index + 1} found no host ({reason}); none is built')


def take(engine: Engine, rows: Iterable[InstanceRow]) -> tuple[InstanceRow, ...]:
    """The rows this process takes to place, as taken (those taken meanwhile by another
    process, placed or deleted are left out)."""
    taken = [db_instances.take_admitted(engine, row.uuid, row.updated_at) for row in rows]
    return tuple(row for row in taken if row is not None)


def place(servers: ServerAPI, engine: Engine, placement: Any,
          taken: Sequence[InstanceRow]) -> list[InstanceRow]:
    """Place the servers of one request (``taken``: :func:`take`'s), all or none, and cast
    their builds; the rows after.

    A server deleted meanwhile is left out. Never raises for a server's sake: what went wrong
    ends in the servers' rows (ERROR, fault)."""
    placed: list[InstanceRow] = []
    for index, row in enumerate(taken):
        try:
            placed.append(servers.place_admitted(row))
        except (InstanceConflict, InstanceNotFound):
            LOG.info('instance %s: deleted or placed elsewhere before it was placed here',
                     row.uuid)
        except (scheduler.NoValidHost, scheduler.BadRequest) as exc:
            return _fail_all(engine, placement, taken, placed,
                             fault_of(len(taken), index, f'{NO_VALID_HOST}: {exc}'))
        except (PlacementError, DatabaseError) as exc:
            return _fail_all(engine, placement, taken, placed,
                             fault_of(len(taken), index,
                                      f'{NO_VALID_HOST}: placing failed: {exc}'))
    for row in placed:
        try:
            servers.start_build(row)
        except Exception as exc:  # the daemon resumes what it was not told (rpcapi)
            LOG.warning('instance %s: build cast to %s failed (%s); the daemon resumes it',
                        row.uuid, row.host, exc)
    return placed


def _fail_all(engine: Engine, placement: Any, taken: Sequence[InstanceRow],
              placed: Sequence[InstanceRow], fault: str) -> list[InstanceRow]:
    """Every server of the request in ERROR with ``fault``: the placed ones give their node
    and allocation back (ERROR first, so that no daemon builds them meanwhile); the others
    were never placed. A server deleted meanwhile is left alone (the delete wins)."""
    LOG.info('request of instance %s: %s', taken[0].uuid, fault)
    result = []
    placed_rows = {row.uuid: row for row in placed}
    for row in taken:
        was_placed = row.uuid in placed_rows
        try:
            if was_placed:
                row = placed_rows[row.uuid]
                result.append(db_instances.set_instance_state(
                    engine, row.uuid, models.ERROR, fault, expect_state=models.BUILDING,
                    expect_host=row.host, expect_member_epoch=row.member_epoch,
                    release_node=True))
            else:
                result.append(db_instances.set_instance_state(
                    engine, row.uuid, models.ERROR, fault, expect_state=models.BUILDING,
                    expect_unplaced=True))
        except (InstanceConflict, InstanceNotFound):
            continue
        if was_placed:
            try:
                allocations.remove(placement, row.uuid)
            except PlacementError as exc:
                LOG.warning('instance %s: its allocation on node %s could not be removed (%s)',
                            row.uuid, row.node_uuid, exc)
    return result


class BuildQueue:
    """This process's placement threads and its sweeper (see the module's docstring).

    ``executor`` runs :func:`place` (a thread pool of ``[api] scheduling_threads``; the unit
    tests give a synchronous one); ``timeout``: ``[api] pending_build_timeout``."""

    def __init__(self, servers: ServerAPI, engine: Engine, placement: Any,
                 executor: futures.Executor, timeout: float):
        self._servers = servers
        self._engine = engine
        self._placement = placement
        self._executor = executor
        self._timeout = timeout
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None

    def submit(self, rows: Sequence[InstanceRow]) -> None:
        """Place the admitted servers of one request in the background."""
        self._executor.submit(self._run, tuple(rows))

    def _run(self, rows: tuple[InstanceRow, ...]) -> None:
        try:
            taken = take(self._engine, rows)
            if taken:
                place(self._servers, self._engine, self._placement, taken)
        except errors.ZOOKEEPER_ERRORS as exc:  # who holds which node: asked of ZooKeeper
            LOG.warning('placing the request of instance %s failed, a sweep retries it: %s',
                        rows[0].uuid, errors.zookeeper_unavailable(exc).message)
        except Exception:  # left admitted: a sweep takes them over
            LOG.exception('placing the request of instance %s failed; a sweep retries it',
                          rows[0].uuid)

    def sweep(self) -> int:
        """Take over the admitted servers nobody took for ``timeout`` seconds; how many."""
        since = models.utcnow() - datetime.timedelta(seconds=self._timeout)
        rows = db_instances.admitted_instances(self._engine, since, SWEEP_BATCH)
        for request in requests_of(rows):
            LOG.warning('instance %s: admitted %s and not placed since: placing it here',
                        request[0].uuid, request[0].created_at.isoformat(timespec='seconds'))
            self.submit(request)
        return len(rows)

    def start(self) -> None:
        """Start the sweeper thread."""
        self._sweeper = threading.Thread(target=self._sweep_forever, name='pending-sweeper',
                                         daemon=True)
        self._sweeper.start()

    def _sweep_forever(self) -> None:
        while not self._stop.wait(self._timeout / 2):
            try:
                self.sweep()
            except Exception:  # the database away: the next sweep looks again
                LOG.exception('looking for admitted servers to place failed')

    def stop(self) -> None:
        """Stop sweeping and let the placements in flight finish (each bounded by Placement's
        and the database's timeouts); queued ones are left admitted for a sweep."""
        self._stop.set()
        self._executor.shutdown(wait=True, cancel_futures=True)
        if self._sweeper is not None:
            self._sweeper.join()
