"""The resync: finds and repairs what someone else changed in Placement (issue 13 item 3).

Owns the periodic comparison of Placement with what computed last applied. Reports reach
Placement only when a node changes (the daemons' outbox suppresses unchanged states, the
reporter skips writes its database says were made), so a provider deleted by hand or lost in a
Placement restore, or whose traits or inventory someone else changed, would stay wrong until
its node changed. Every ``[placement] resync_interval`` seconds one reporter replica runs a
round:

1. **Detect**, cheaply: ONE ``GET /resource_providers`` (every provider with its generation;
   Placement does not page it) against the database's rows (the last applied report of each
   provider, with Placement's generation recorded after computed's last write). :func:`plan`,
   pure, says what drifted: a provider the database says exists that Placement does not list is
   *missing*; one whose generation differs from the recorded one was written by someone else
   (*changed*: traits, inventory, or only an allocation, which bumps it too); one with no
   recorded generation (written before migration 0003) is *unrecorded* and verified once. A
   provider whose last report was a delete is left alone even if it still exists (kept for its
   allocations; the daemon's outbox retries that delete).
2. **Repair**, ordered and fenced like a report (:class:`Resync`): per provider, under this
   process's provider lock and the database row lock
   (:func:`computed.db.providers.record_placement_generation`), only if the row still holds the
   (claim_epoch, seq) the round read, and only if that claim epoch is still the live claim's
   (read from ZooKeeper, as the fence reads it): then the row's state is applied with
   ``verify=True`` (re-read, write only what differs) and the new generation recorded. A report
   arriving meanwhile waits for that one provider only, and is applied after: the repair never
   writes anything but the last applied state, so it cannot reorder reports.

Guarantees: one round at a time fleet-wide (a non-blocking ZooKeeper lock ``<fleet
root>/resync-lock``; a replica that does not get it skips the round) and, across replicas, about
one round per interval (the round's end time is kept in ``<fleet root>/resync-last``; a replica
whose interval comes sooner than that skips). At most ``[placement] resync_max_repairs``
repairs per round; the rest are found again by the next round. Placement unavailable (down, a
5xx, a timeout) stops the round at that repair, so a hanging Placement costs a round one
timeout, not one per repair. Each round logs one INFO line
(providers checked, drift by kind, repairs, Placement requests) and feeds the counters
:class:`computed.reporter.metrics.ReporterCollector` exports. A failed round (Placement,
database or ZooKeeper away) is logged and retried at the next interval; it never stops the
reporter.

Threads: one resync thread runs the rounds (:meth:`Resync.run_once`); the main thread starts and
stops it (an Event). A repair shares a provider with the RPC server's workers that apply
reports: it takes the applier's lock of that provider (:meth:`ReportApplier.provider_lock`) and
the database row lock, and drops the applier's cached view of it before it lets the lock go
(an RPC worker waiting for that provider then reads Placement afresh); the resync's own
:class:`~computed.placement.client.PlacementClient` is used by its thread alone (so its request
count is the round's). :attr:`Resync.counts` is changed under the resync's lock and copied by the
metrics endpoint's request threads (``dict()``, one C-level copy under the GIL).
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo.exceptions import NoNodeError
from sqlalchemy.engine import Engine

from computed.conf.coordination import DEFAULT_SESSION_TIMEOUT
from computed.db import providers as db_providers
from computed.fleet import zookeeper as zk
from computed.placement.http import PlacementError, PlacementUnavailable
from computed.providers.state import ProviderState

LOG = logging.getLogger(__name__)

LOCK_NODE = 'resync-lock'
LAST_NODE = 'resync-last'
# A replica skips its round when another finished one less than this share of the interval ago
# (a margin for the replicas' clocks and timers).
DUE_SHARE = 0.8


class Drift(str, enum.Enum):
    """Why a provider is repaired."""

    #: Placement does not list it although the database says computed reported it.
    MISSING = 'missing'
    #: Its generation differs from the one recorded after computed's last write.
    CHANGED = 'changed'
    #: No generation recorded (written before migration 0003): verified once.
    UNRECORDED = 'unrecorded'

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass(frozen=True)
class Repair:
    """One provider to repair, with the (claim_epoch, seq) its row held when compared."""

    uuid: str
    claim_epoch: int
    seq: int
    drift: Drift


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a round repairs: ``repairs`` (at most the cap, missing ones first), ``checked``
    providers compared, ``drift`` found by kind (all of it, beyond the cap too), ``deferred``
    repairs left for the next round by the cap."""

    repairs: tuple[Repair, ...]
    checked: int
    drift: Mapping[Drift, int]
    deferred: int


_ORDER = {Drift.MISSING: 0, Drift.CHANGED: 1, Drift.UNRECORDED: 2}


def plan(rows: Iterable[db_providers.ProviderRow], listing: Mapping[str, int],
         max_repairs: int) -> Plan:
    """PURE: the database's rows and Placement's ``{uuid: generation}`` -> what to repair.

    Only rows whose last report applied a state are checked (a deleted provider is left alone,
    present or not). Missing providers come first (a node nobody can schedule on), then changed,
    then unrecorded, each in uuid order; at most ``max_repairs``.
    """
    found: list[Repair] = []
    checked = 0
    for row in rows:
        if row.deleted or row.state is None:
            continue
        checked += 1
        generation = listing.get(row.uuid)
        if generation is None:
            drift = Drift.MISSING
        elif row.placement_generation is None:
            drift = Drift.UNRECORDED
        elif generation != row.placement_generation:
            drift = Drift.CHANGED
        else:
            continue
        found.append(Repair(row.uuid, row.claim_epoch, row.seq, drift))
    found.sort(key=lambda repair: (_ORDER[repair.drift], repair.uuid))
    counts = collections.Counter(repair.drift for repair in found)
    kept = tuple(found[:max(0, max_repairs)])
    return Plan(kept, checked, {kind: counts.get(kind, 0) for kind in Drift},
                len(found) - len(kept))


class Outcome(str, enum.Enum):
    """What became of one repair."""

    #: Placement was written back to the row's state.
    REPAIRED = 'repaired'
    #: Re-read: Placement already held the row's state (e.g. an allocation bumped the
    #: generation); the new generation was recorded.
    VERIFIED = 'verified'
    #: A report was applied since the comparison (or the provider was deleted): nothing to do.
    MOVED = 'moved'
    #: The row's claim epoch is not the live claim's: left to the node's owner.
    FENCED = 'fenced'
    FAILED = 'failed'

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass(frozen=True)
class Round:
    """One round's figures, as logged."""

    plan: Plan
    outcomes: Mapping[Outcome, int]
    requests: int
    seconds: float

    def line(self) -> str:
        drift = ', '.join(f'{kind} {self.plan.drift.get(kind, 0)}' for kind in Drift)
        done = ', '.join(f'{outcome} {self.outcomes.get(outcome, 0)}' for outcome in Outcome)
        return (f'resync: {self.plan.checked} provider(s) checked; drift: {drift}; '
                f'{done}; deferred {self.plan.deferred}; {self.requests} Placement '
                f'request(s); {self.seconds:.2f} s')


class _Fenced(Exception):
    """Raised inside the row's transaction: the claim epoch is not the live claim's."""


class Resync:
    """Runs rounds: in its own thread (:meth:`start`/:meth:`stop`) or one at a time
    (:meth:`run_once`, for tests).

    ``placement`` is a :class:`~computed.placement.client.PlacementClient` of its own (its
    request count is the round's), ``claims`` a :class:`~computed.reporter.applier.ClaimReader`,
    ``provider_lock(uuid)`` this process's lock of a provider (the applier's), ``forget(uuid)``
    drops the applier's cached view of a repaired provider, ``zookeeper`` a started KazooClient
    (None: no fleet-wide lock, e.g. in unit tests) and ``root`` the fleet's root path. Each of
    its own requests to ZooKeeper is answered within ``timeout`` seconds (the session timeout)
    or the round fails (:class:`computed.fleet.zookeeper.NoAnswer`); kazoo's ``Lock`` makes its
    requests without a limit, so it is asked for only right after a bounded read answered (a
    ZooKeeper gone before the round costs it one session timeout, not a thread waiting until
    ZooKeeper is back), and :meth:`stop` bounds what is left (ZooKeeper gone in the
    milliseconds between that read and the lock) by waiting for the thread at most its
    ``timeout`` argument.
    """

    def __init__(self, placement: Any, claims: Any, engine: Engine, *,
                 provider_lock: Callable[[str], Any], interval: float, max_repairs: int,
                 forget: Callable[[str], None] = lambda uuid: None,
                 zookeeper: Any = None, root: str = '', host: str = '',
                 timeout: float = DEFAULT_SESSION_TIMEOUT):
        self._placement = placement
        self._claims = claims
        self._engine = engine
        self._provider_lock = provider_lock
        self._forget = forget
        self.interval = interval
        self._max_repairs = max_repairs
        self._zookeeper = zookeeper
        self._timeout = timeout
        self._root = root
        self._host = host
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._counts_lock = threading.Lock()
        #: Totals since start, for the metrics: rounds (by result), checked, drift_<kind>,
        #: <outcome>, requests.
        self.counts: collections.Counter[str] = collections.Counter()

    # -- the thread -------------------------------------------------------------------------

    def start(self) -> Resync:
        if self.interval > 0:
            self._thread = threading.Thread(target=self._run, name='resync', daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.run_once()
            except Exception:
                self._count(rounds_failed=1)
                LOG.exception('resync round failed; next one in %s s', self.interval)

    # -- a round ----------------------------------------------------------------------------

    def run_once(self) -> Round | None:
        """One round, if this replica gets the fleet's turn; None when it skips."""
        # A bounded look first (NoAnswer when ZooKeeper is gone): kazoo's Lock makes its
        # requests without a limit, so it is asked only right after ZooKeeper answered, and
        # not at all when another replica's round makes this one not due.
        if not self._due():
            self._count(rounds_skipped=1)
            return None
        lock = self._fleet_lock()
        if lock is not None and not lock.acquire(blocking=False):
            LOG.debug('resync: another reporter is resyncing; skipping this round')
            self._count(rounds_skipped=1)
            return None
        try:
            if not self._due():
                self._count(rounds_skipped=1)
                return None
            result = self._round()
            self._finished()
        finally:
            if lock is not None:
                lock.release()
        LOG.info('%s', result.line())
        if result.plan.deferred:
            LOG.warning('resync: %d repair(s) over the cap of %d left for the next round',
                        result.plan.deferred, self._max_repairs)
        return result

    def _round(self) -> Round:
        started = time.monotonic()
        requests = self._placement.request_count
        rows = db_providers.applied_providers(self._engine)
        the_plan = plan(rows, self._placement.generations(), self._max_repairs)
        outcomes: collections.Counter[Outcome] = collections.Counter()
        for index, repair in enumerate(the_plan.repairs):
            if self._stop.is_set():
                break
            try:
                outcomes[self._repair(repair)] += 1
            except PlacementUnavailable as exc:
                # Away or hanging: every next repair would wait out the same timeout.
                outcomes[Outcome.FAILED] += 1
                LOG.warning('resync: round stopped, Placement unavailable (%s); %d repair(s) '
                            'left for the next round', exc, len(the_plan.repairs) - index - 1)
                break
        result = Round(the_plan, dict(outcomes), self._placement.request_count - requests,
                       time.monotonic() - started)
        self._count(rounds_done=1, checked=the_plan.checked, requests=result.requests,
                    **{f'drift_{kind}': n for kind, n in the_plan.drift.items()},
                    **{str(outcome): n for outcome, n in outcomes.items()})
        return result

    def _repair(self, repair: Repair) -> Outcome:
        uuid = repair.uuid
        changed = []

        def fix(row: db_providers.ProviderRow) -> int | None:
            # Inside the row's transaction, the row locked and holding (claim_epoch, seq).
            # The same fence as a report's: the live claim has this claim epoch and this host.
            if self._claims.claim_holders([uuid]).get(uuid) != (row.claim_epoch, row.host):
                raise _Fenced()
            state = ProviderState.from_dict(json.loads(row.state))
            changed.append(self._placement.apply(state, verify=True))
            return self._placement.generation(uuid)

        try:
            with self._provider_lock(uuid):
                try:
                    done = db_providers.record_placement_generation(
                        self._engine, uuid, repair.claim_epoch, repair.seq, fix)
                finally:
                    # Before the lock goes: an RPC worker that takes it next must not apply a
                    # report from the applier's view of the provider from before the repair.
                    self._forget(uuid)
        except _Fenced:
            LOG.info('resync: provider %s (%s) not repaired: claim epoch %s is no longer the '
                     'live claim\'s', uuid, repair.drift, repair.claim_epoch)
            return Outcome.FENCED
        except PlacementUnavailable:
            raise  # the round stops (_round)
        except PlacementError as exc:
            LOG.warning('resync: provider %s (%s) not repaired: %s', uuid, repair.drift, exc)
            return Outcome.FAILED
        except Exception:
            LOG.exception('resync: provider %s (%s) not repaired', uuid, repair.drift)
            return Outcome.FAILED
        if not done:
            return Outcome.MOVED
        if changed and changed[0]:
            LOG.info('resync: provider %s repaired (%s)', uuid, repair.drift)
            return Outcome.REPAIRED
        return Outcome.VERIFIED

    # -- the fleet's turn -------------------------------------------------------------------

    def _fleet_lock(self) -> Any:
        if self._zookeeper is None:
            return None
        return self._zookeeper.Lock(f'{self._root}/{LOCK_NODE}', self._host)

    def _due(self) -> bool:
        """Whether no replica finished a round within the last interval (the lock is held)."""
        if self._zookeeper is None:
            return True
        path = f'{self._root}/{LAST_NODE}'
        try:
            data, _ = zk.answer(self._zookeeper.get_async(path), self._timeout,
                                f'a read of {path}')
        except NoNodeError:
            return True
        try:
            last = json.loads(data.decode())
            finished, host = float(last['finished']), last.get('host')
        except (ValueError, KeyError, TypeError, AttributeError):
            return True
        if host == self._host:
            return True  # our own timer: it already waited the interval
        age = time.time() - finished
        if 0 <= age < self.interval * DUE_SHARE:
            LOG.debug('resync: %s finished a round %.1f s ago; skipping', host, age)
            return False
        return True

    def _finished(self) -> None:
        if self._zookeeper is None:
            return
        path = f'{self._root}/{LAST_NODE}'
        data = json.dumps({'host': self._host, 'finished': time.time()}).encode()
        try:
            zk.answer(self._zookeeper.set_async(path, data), self._timeout, f'a write of {path}')
        except NoNodeError:
            zk.answer(self._zookeeper.create_async(path, data, makepath=True), self._timeout,
                      f'the creation of {path}')

    def _count(self, **counts: int) -> None:
        with self._counts_lock:
            self.counts.update(counts)
