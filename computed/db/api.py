"""Reading and writing computed's database: small functions, one transaction each.

Owns every statement computed runs against its database. Each public function
takes the ``Engine`` to use (from :mod:`computed.db.engine`, which also bounds
every call; nothing here is global), runs in its own transaction and returns
plain frozen dataclasses, not ORM objects, so results can cross threads freely.

Guarantees:

* :func:`apply_report_if_newer` applies the reports of one provider in
  strictly increasing (claim_epoch, seq) order, across threads and processes:
  the provider's row is locked for the whole read-compare-apply-store
  (``SELECT ... FOR UPDATE`` on PostgreSQL and MySQL; on sqlite the database
  write lock, taken up front by ``BEGIN IMMEDIATE``), so two reporters never
  both apply, and an older report is never applied after a newer one.
* :func:`apply_reports_if_newer` does the same for a batch of providers in one transaction,
  locking their rows in uuid order and skipping (never waiting for) rows another transaction
  holds; rows are inserted beforehand in a short transaction of their own, so the batch's
  transaction waits on no other.
* :func:`record_placement_generation` (the resync's repair) runs under the same row lock and
  changes nothing unless the row still holds the (claim_epoch, seq) the caller read: a repair
  never overtakes, nor undoes, a report.
* At most one live (not DELETED) instance per node: the database refuses a
  second (see :mod:`computed.db.models`); the refusal surfaces as
  :class:`NodeInUse` carrying the node uuid.
* Every instance write that names an expected (host, member epoch) is a
  compare-and-set on it; :func:`rehome_instance` too: of two adopters racing
  for one instance, exactly one wins.
* :func:`reserve_quota` takes the quota decisions of one project one at a time (its
  ``quota_projects`` row locked; sqlite's write lock) and counts, in one statement, every build
  that may stay: live instance rows, and reservations whose row does not exist yet. A build it
  admits is counted by every later decision until its row is DELETED, so admitted builds never
  exceed the limit, however they interleave with failures and deletes.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Callable, Collection, Iterable
from typing import Any

import sqlalchemy as sa
import tenacity
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from computed.db import models
from computed.db.engine import engine_from_url  # noqa: F401 - callers' long-standing name
from computed.db.engine import is_deadlock as _is_deadlock
from computed.db.engine import transaction as _transaction
from computed.db.models import (
    Flavor,
    FlavorExtraSpec,
    Instance,
    InstanceState,
    KeyPair,
    Provider,
    QuotaLimit,
    QuotaProject,
    QuotaReservation,
)

# (claim_epoch, seq) of a provider row inserted only to be locked; real reports have both >= 0.
_UNAPPLIED = -1
DEADLOCK_RETRIES = 5  # attempts of one transaction that deadlocks (or fails to serialise)

_providers = Provider.__table__
_instances = Instance.__table__
_flavors = Flavor.__table__
_extra_specs = FlavorExtraSpec.__table__
_quota_limits = QuotaLimit.__table__
_quota_projects = QuotaProject.__table__
_quota_reservations = QuotaReservation.__table__
_key_pairs = KeyPair.__table__


def _deadlock_retries(may_retry: Callable[[], bool] = lambda: True) -> tenacity.Retrying:
    """The attempts of one transaction: one that deadlocks (or fails to serialise) is tried
    again at once while ``may_retry()`` says so, up to :data:`DEADLOCK_RETRIES` attempts in all;
    any other error, or the last attempt's, propagates."""
    return tenacity.Retrying(
        stop=tenacity.stop_after_attempt(DEADLOCK_RETRIES), reraise=True,
        retry=tenacity.retry_if_exception(lambda error: isinstance(error, sa_exc.DBAPIError)
                                          and _is_deadlock(error) and may_retry()))


# -- errors ----------------------------------------------------------------------------------

class DatabaseError(Exception):
    """Base of the errors this module raises on purpose."""


class NodeInUse(DatabaseError):
    """The node already has a live instance."""

    def __init__(self, node_uuid: str, instance_uuid: str | None = None):
        self.node_uuid = node_uuid
        self.instance_uuid = instance_uuid
        super().__init__(f"node {node_uuid} already hosts a live instance"
                         + (f"; cannot place instance {instance_uuid}" if instance_uuid else ""))


class InstanceExists(DatabaseError):
    def __init__(self, instance_uuid: str):
        self.instance_uuid = instance_uuid
        super().__init__(f"instance {instance_uuid} already exists")


class InstanceNotFound(DatabaseError):
    def __init__(self, instance_uuid: str):
        self.instance_uuid = instance_uuid
        super().__init__(f"instance {instance_uuid} not found")


class FlavorNotFound(DatabaseError):
    def __init__(self, flavor_id: str):
        self.flavor_id = flavor_id
        super().__init__(f"flavor {flavor_id} not found")


class FlavorExists(DatabaseError):
    """A flavor with that id or name exists already."""

    def __init__(self, flavor_id: str, name: str):
        self.flavor_id = flavor_id
        self.name = name
        super().__init__(f"flavor with id {flavor_id} or name {name!r} already exists")


class InstanceConflict(DatabaseError):
    """The instance is not in the state (or with the owner) the caller expected."""

    def __init__(self, instance_uuid: str, expected: str, actual: str):
        self.instance_uuid = instance_uuid
        self.expected = expected
        self.actual = actual
        super().__init__(f"instance {instance_uuid}: expected {expected}, found {actual}")


# -- rows ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ProviderRow:
    uuid: str
    claim_epoch: int
    seq: int
    host: str
    state: str | None
    deleted: bool
    updated_at: datetime.datetime
    # Placement's generation of the provider after computed's last write to it (None: not known,
    # e.g. written before revision 0003, or deleted).
    placement_generation: int | None = None


@dataclasses.dataclass(frozen=True)
class Applied:
    """What an ``apply`` callback of :func:`apply_report_if_newer` may return: the new state's
    JSON (None: the provider was deleted) and Placement's generation after the write."""

    state: str | None
    placement_generation: int | None = None


@dataclasses.dataclass(frozen=True)
class InstanceRow:
    uuid: str
    node_uuid: str | None
    host: str | None
    member_epoch: int | None
    # A plain string as stored, not an InstanceState: a state written by newer code must still
    # read (states need no migration, see computed.db.models).
    state: str
    resource_class: str
    traits: tuple[str, ...]
    image: str | None
    fault: str | None
    created_at: datetime.datetime
    updated_at: datetime.datetime
    deleted_at: datetime.datetime | None
    # The compute API's view (revision 0004): owner, name, metadata, flavor copy.
    project_id: str | None = None
    user_id: str | None = None
    name: str | None = None
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)
    flavor: dict[str, Any] | None = None
    # What Nova's create takes and shows back (revision 0006).
    description: str | None = None
    access_ip_v4: str | None = None
    access_ip_v6: str | None = None
    reservation_id: str | None = None
    # The key pair it was built with, its user data and config drive (revision 0007).
    key_name: str | None = None
    key_type: str | None = None
    key_data: str | None = None
    user_data: str | None = None
    config_drive: bool | None = None
    # The server's tags, in the order they were added (revision 0008).
    tags: tuple[str, ...] = ()

    @property
    def live(self) -> bool:
        return self.state != models.DELETED


@dataclasses.dataclass(frozen=True)
class FlavorRow:
    id: str
    name: str
    vcpus: int
    ram: int
    disk: int
    ephemeral: int
    swap: int
    is_public: bool
    description: str | None
    created_at: datetime.datetime
    extra_specs: dict[str, str]


def _provider_row(row: Any) -> ProviderRow:
    return ProviderRow(uuid=row.uuid, claim_epoch=row.claim_epoch, seq=row.seq, host=row.host,
                       state=row.state, deleted=bool(row.deleted), updated_at=row.updated_at,
                       placement_generation=row.placement_generation)


def _instance_row(row: Any) -> InstanceRow:
    return InstanceRow(uuid=row.uuid, node_uuid=row.node_uuid, host=row.host,
                       member_epoch=row.member_epoch, state=row.state,
                       resource_class=row.resource_class,
                       traits=tuple(json.loads(row.traits)), image=row.image, fault=row.fault,
                       created_at=row.created_at, updated_at=row.updated_at,
                       deleted_at=row.deleted_at, project_id=row.project_id,
                       user_id=row.user_id, name=row.name,
                       metadata=json.loads(row.user_metadata) if row.user_metadata else {},
                       flavor=json.loads(row.flavor) if row.flavor else None,
                       description=row.description, access_ip_v4=row.access_ip_v4,
                       access_ip_v6=row.access_ip_v6, reservation_id=row.reservation_id,
                       key_name=row.key_name, key_type=row.key_type, key_data=row.key_data,
                       user_data=row.user_data, config_drive=row.config_drive,
                       tags=tuple(json.loads(row.tags)) if row.tags else ())


# -- engine and transactions -----------------------------------------------------------------

# -- providers -------------------------------------------------------------------------------

def _insert_unapplied(conn: Connection, uuid: str, host: str) -> None:
    """Make sure the provider has a row to lock, without failing if a racer made it first."""
    values = dict(uuid=uuid, claim_epoch=_UNAPPLIED, seq=_UNAPPLIED, host=host, state=None,
                  deleted=True, updated_at=models.utcnow())
    dialect = conn.dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql
        stmt = postgresql.insert(_providers).values(**values).on_conflict_do_nothing()
    elif dialect == "sqlite":
        from sqlalchemy.dialects import sqlite
        stmt = sqlite.insert(_providers).values(**values).on_conflict_do_nothing()
    elif dialect in ("mysql", "mariadb"):
        from sqlalchemy.dialects import mysql
        insert = mysql.insert(_providers).values(**values)
        # A no-op update rather than INSERT IGNORE: on a duplicate it takes the row's exclusive
        # lock at once; IGNORE would take a shared one, and two transactions upgrading shared
        # locks for the FOR UPDATE below deadlock.
        stmt = insert.on_duplicate_key_update(uuid=insert.inserted.uuid)
    else:
        if conn.execute(sa.select(_providers.c.uuid).where(_providers.c.uuid == uuid)
                        .with_for_update()).first() is not None:
            return
        stmt = sa.insert(_providers).values(**values)
    conn.execute(stmt)


def _lock_provider(conn: Connection, uuid: str) -> ProviderRow | None:
    """Lock the provider's row (inserted beforehand) for this transaction; None when no report
    was applied yet."""
    row = conn.execute(sa.select(_providers).where(_providers.c.uuid == uuid)
                       .with_for_update()).one()
    return None if row.claim_epoch == _UNAPPLIED else _provider_row(row)


def apply_report_if_newer(engine: Engine, uuid: str, claim_epoch: int, seq: int, host: str,
                          apply: Callable[[ProviderRow | None], str | Applied | None]) -> bool:
    """Apply one provider report if it is newer than the last applied; True if applied.

    In one transaction, with the provider's row locked: compare (claim_epoch,
    seq) with the stored pair; if not strictly greater, return False without
    calling ``apply``. Otherwise call ``apply(row)`` (``row`` is the last
    applied state, None for a provider never applied) — it writes Placement and
    returns the new state's JSON, or None when it deleted the provider, or an
    :class:`Applied` that also carries Placement's generation after the write — and
    store (claim_epoch, seq, host, state, placement generation). If ``apply`` raises, nothing is
    stored and the exception propagates. If the commit itself fails after ``apply``
    the report is not recorded and a later report re-applies: Placement writes
    must be idempotent.
    """
    if claim_epoch < 0 or seq < 0:
        raise ValueError(f"provider {uuid}: claim_epoch and seq must be >= 0, "
                         f"got ({claim_epoch}, {seq})")
    # A deadlock can only come from taking the lock, before apply ran; retrying then is safe.
    # After apply it is the caller's failure to see.
    applied = False
    attempts = _deadlock_retries(lambda: not applied)
    for attempt in attempts:
        applied = False
        with attempt:
            # Inserted and committed apart: no transaction that writes Placement holds an
            # uncommitted insert another (a batch's) would have to wait for.
            with _transaction(engine, write=True) as conn:
                _insert_unapplied(conn, uuid, host)
            with _transaction(engine, write=True) as conn:
                row = _lock_provider(conn, uuid)
                if row is not None and (row.claim_epoch, row.seq) >= (claim_epoch, seq):
                    return False
                applied = True
                result = apply(row)
                if not isinstance(result, Applied):
                    result = Applied(result)
                conn.execute(sa.update(_providers).where(_providers.c.uuid == uuid).values(
                    claim_epoch=claim_epoch, seq=seq, host=host, state=result.state,
                    deleted=result.state is None,
                    placement_generation=result.placement_generation,
                    updated_at=models.utcnow()))
            return True
    raise AssertionError("unreachable")


@dataclasses.dataclass(frozen=True)
class ReportKey:
    """What orders one report of a batch (:func:`apply_reports_if_newer`)."""

    uuid: str
    claim_epoch: int
    seq: int
    host: str


@dataclasses.dataclass(frozen=True)
class BatchResult:
    """What :func:`apply_reports_if_newer` did: the uuids whose report was ``applied`` (and
    stored), those whose report was ``stale`` (not newer than the stored one), and those left
    ``busy`` because another transaction held their row (not looked at: apply them alone)."""

    applied: frozenset[str]
    stale: frozenset[str]
    busy: tuple[str, ...]


def _insert_unapplied_many(conn: Connection, reports: list[ReportKey]) -> None:
    """Rows to lock for every report's provider that has none, in one statement where the
    backend allows (in the order given)."""
    now = models.utcnow()
    values = [dict(uuid=report.uuid, claim_epoch=_UNAPPLIED, seq=_UNAPPLIED, host=report.host,
                   state=None, deleted=True, updated_at=now) for report in reports]
    dialect = conn.dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql
        conn.execute(postgresql.insert(_providers).values(values).on_conflict_do_nothing())
    elif dialect == "sqlite":
        from sqlalchemy.dialects import sqlite
        conn.execute(sqlite.insert(_providers).values(values).on_conflict_do_nothing())
    else:
        for report in reports:
            _insert_unapplied(conn, report.uuid, report.host)


def apply_reports_if_newer(
        engine: Engine, reports: Collection[ReportKey],
        apply: Callable[[list[tuple[ReportKey, ProviderRow | None]]], dict[str, Applied]],
) -> BatchResult:
    """Apply a batch of reports, each only if newer than its provider's last applied one, in ONE
    transaction: :func:`apply_report_if_newer` for many providers at once.

    The uuids must be distinct. Rows missing are first inserted (unapplied) and committed in a
    short transaction of their own, so that the batch's transaction never waits on another's
    insert. Then, in one transaction, the batch's rows are locked in uuid order, skipping those
    another transaction holds (``FOR UPDATE SKIP LOCKED`` on PostgreSQL and MySQL; sqlite's
    write lock, taken by ``BEGIN IMMEDIATE``, holds them all): the skipped are returned as
    ``busy``, untouched. Each locked report not strictly newer than its row is ``stale``. The
    newer ones go to ONE call ``apply([(report, row), ...])`` (``row`` None: never applied),
    which writes Placement and returns ``{uuid: Applied}`` for the reports it applied; those
    rows are stored (claim_epoch, seq, host, state, generation), the others are left as they
    were (their reports failed: the sender retries). If ``apply`` raises, nothing is stored
    and the exception propagates; if the commit fails, none of the batch is recorded and later
    reports re-apply (Placement writes must be idempotent).
    """
    by_uuid = {report.uuid: report for report in reports}
    if len(by_uuid) != len(reports):
        raise ValueError("a batch of reports names a provider more than once")
    for report in reports:
        if report.claim_epoch < 0 or report.seq < 0:
            raise ValueError(f"provider {report.uuid}: claim_epoch and seq must be >= 0, "
                             f"got ({report.claim_epoch}, {report.seq})")
    uuids = sorted(by_uuid)
    if not uuids:
        return BatchResult(frozenset(), frozenset(), ())
    applied = False
    attempts = _deadlock_retries(lambda: not applied)
    for attempt in attempts:
        applied = False
        with attempt:
            with _transaction(engine, write=True) as conn:
                _insert_unapplied_many(conn, [by_uuid[uuid] for uuid in uuids])
            with _transaction(engine, write=True) as conn:
                rows = {row.uuid: row for row in conn.execute(
                    sa.select(_providers).where(_providers.c.uuid.in_(uuids))
                    .order_by(_providers.c.uuid).with_for_update(skip_locked=True))}
                stale, newer = set(), []
                for uuid in uuids:
                    raw = rows.get(uuid)
                    if raw is None:
                        continue  # held by another transaction
                    report = by_uuid[uuid]
                    row = None if raw.claim_epoch == _UNAPPLIED else _provider_row(raw)
                    if row is not None and (row.claim_epoch, row.seq) >= (report.claim_epoch,
                                                                          report.seq):
                        stale.add(uuid)
                    else:
                        newer.append((report, row))
                applied = True
                results = apply(newer) if newer else {}
                done = {report.uuid for report, _ in newer if report.uuid in results}
                if done:
                    now = models.utcnow()
                    conn.execute(
                        sa.update(_providers).where(_providers.c.uuid == sa.bindparam("b_uuid"))
                        .values(claim_epoch=sa.bindparam("b_claim_epoch"),
                                seq=sa.bindparam("b_seq"), host=sa.bindparam("b_host"),
                                state=sa.bindparam("b_state"),
                                deleted=sa.bindparam("b_deleted"),
                                placement_generation=sa.bindparam("b_generation"),
                                updated_at=now),
                        [dict(b_uuid=uuid, b_claim_epoch=by_uuid[uuid].claim_epoch,
                              b_seq=by_uuid[uuid].seq, b_host=by_uuid[uuid].host,
                              b_state=results[uuid].state,
                              b_deleted=results[uuid].state is None,
                              b_generation=results[uuid].placement_generation)
                         for uuid in sorted(done)])
            return BatchResult(frozenset(done), frozenset(stale),
                               tuple(uuid for uuid in uuids if uuid not in rows))
    raise AssertionError("unreachable")


def record_placement_generation(engine: Engine, uuid: str, claim_epoch: int, seq: int,
                                repair: Callable[[ProviderRow], int | None]) -> bool:
    """Repair one provider if its row still holds (claim_epoch, seq); True if ``repair`` ran.

    In one transaction, with the provider's row locked as :func:`apply_report_if_newer` locks
    it: when the row is gone, deleted, or holds another (claim_epoch, seq) (a report was applied
    since the caller read it), return False without calling ``repair``. Otherwise call
    ``repair(row)`` — it makes Placement hold the row's state again and returns Placement's
    generation after that — and store the generation; the report columns are left as they are.
    If ``repair`` raises, nothing is stored and the exception propagates.
    """
    repaired = False
    attempts = _deadlock_retries(lambda: not repaired)
    for attempt in attempts:
        repaired = False
        with attempt:
            with _transaction(engine, write=True) as conn:
                raw = conn.execute(sa.select(_providers).where(_providers.c.uuid == uuid)
                                   .with_for_update()).first()
                if raw is None or raw.deleted or raw.state is None or \
                        (raw.claim_epoch, raw.seq) != (claim_epoch, seq):
                    return False
                repaired = True
                generation = repair(_provider_row(raw))
                conn.execute(sa.update(_providers).where(_providers.c.uuid == uuid).values(
                    placement_generation=generation))
            return True
    raise AssertionError("unreachable")


def applied_providers(engine: Engine) -> list[ProviderRow]:
    """Every provider a report was applied to (deleted ones too), in uuid order: what the
    resync compares with Placement."""
    with _transaction(engine) as conn:
        rows = conn.execute(sa.select(_providers).where(
            _providers.c.claim_epoch != _UNAPPLIED).order_by(_providers.c.uuid))
        return [_provider_row(row) for row in rows]


def get_provider(engine: Engine, uuid: str) -> ProviderRow | None:
    """The provider's last applied report, deleted or not; None if never applied."""
    with _transaction(engine) as conn:
        row = conn.execute(sa.select(_providers).where(_providers.c.uuid == uuid)).first()
    return None if row is None or row.claim_epoch == _UNAPPLIED else _provider_row(row)


def provider_uuids(engine: Engine) -> set[str]:
    """Uuids of the providers applied and not deleted."""
    with _transaction(engine) as conn:
        rows = conn.execute(sa.select(_providers.c.uuid).where(
            _providers.c.deleted == sa.false(), _providers.c.claim_epoch != _UNAPPLIED))
        return {row.uuid for row in rows}


def live_providers(engine: Engine) -> list[ProviderRow]:
    """The providers applied and not deleted, with their last applied state, in uuid order:
    the nodes as the compute API shows them (``os-hypervisors``)."""
    with _transaction(engine) as conn:
        rows = conn.execute(sa.select(_providers).where(
            _providers.c.deleted == sa.false(), _providers.c.claim_epoch != _UNAPPLIED)
            .order_by(_providers.c.uuid))
        return [_provider_row(row) for row in rows]


def mark_deleted(engine: Engine, uuid: str) -> bool:
    """Record that the provider is gone (state cleared), keeping its (claim_epoch, seq) so that
    an older report is still refused. True if it was not already deleted."""
    with _transaction(engine, write=True) as conn:
        result = conn.execute(sa.update(_providers).where(
            _providers.c.uuid == uuid, _providers.c.deleted == sa.false()).values(
            deleted=True, state=None, placement_generation=None, updated_at=models.utcnow()))
        return result.rowcount == 1


# -- instances -------------------------------------------------------------------------------

#: What a compare-and-set may expect the instance's state to be: one state (an InstanceState,
#: or a row's state as read), or any of several.
ExpectedStates = InstanceState | str | Collection[InstanceState]


def _state(state: InstanceState | str) -> str:
    """The state as stored (a plain string); ValueError naming it when unknown."""
    try:
        return InstanceState(state).value
    except ValueError:
        raise ValueError(f"unknown instance state {state!r}; known: "
                         f"{_describe(models.STATES)}") from None


def _describe(states: ExpectedStates) -> str:
    if isinstance(states, str):
        return str(states)
    return "/".join(sorted(str(state) for state in states))


def _raise_integrity(error: sa_exc.IntegrityError, instance_uuid: str,
                     node_uuid: str | None) -> None:
    # Every backend names the violated constraint or column in its message:
    # "uq_instances_live_node_uuid" (PostgreSQL, MySQL), "instances.live_node_uuid" (sqlite).
    if node_uuid is not None and "live_node_uuid" in str(error.orig):
        raise NodeInUse(node_uuid, instance_uuid) from None
    raise error


def _select_instance(conn: Connection, uuid: str) -> Any:
    return conn.execute(sa.select(_instances).where(_instances.c.uuid == uuid)).first()


def create_instance(engine: Engine, uuid: str, resource_class: str, *,
                    node_uuid: str | None = None, host: str | None = None,
                    member_epoch: int | None = None, traits: Iterable[str] = (),
                    image: str | None = None,
                    state: InstanceState = models.BUILDING,
                    fault: str | None = None,
                    project_id: str = models.BUILT_IN_PROJECT,
                    user_id: str = models.BUILT_IN_USER,
                    name: str | None = None,
                    metadata: dict[str, str] | None = None,
                    flavor: dict[str, Any] | None = None) -> InstanceRow:
    """Record a new instance, managed by (``host``, ``member_epoch``), of ``project_id``.
    Raises :class:`NodeInUse` if ``node_uuid`` already hosts a live instance,
    :class:`InstanceExists` if ``uuid`` is taken."""
    state = _state(state)
    now = models.utcnow()
    values = dict(uuid=uuid, node_uuid=node_uuid, host=host, member_epoch=member_epoch,
                  state=state, resource_class=resource_class,
                  traits=json.dumps(sorted(set(traits))), image=image, fault=fault,
                  created_at=now, updated_at=now,
                  deleted_at=now if state == models.DELETED else None,
                  project_id=project_id, user_id=user_id, name=name,
                  user_metadata=json.dumps(metadata, sort_keys=True) if metadata else None,
                  flavor=json.dumps(flavor, sort_keys=True) if flavor is not None else None)
    try:
        with _transaction(engine, write=True) as conn:
            if _select_instance(conn, uuid) is not None:
                raise InstanceExists(uuid)
            conn.execute(sa.insert(_instances).values(**values))
            return _instance_row(_select_instance(conn, uuid))
    except sa_exc.IntegrityError as error:
        _raise_integrity(error, uuid, node_uuid)
        raise


def get_instance(engine: Engine, uuid: str) -> InstanceRow | None:
    with _transaction(engine) as conn:
        row = _select_instance(conn, uuid)
    return None if row is None else _instance_row(row)


def _conditions(uuid: str, expect_state: ExpectedStates | None, expect_host: str | None,
                expect_member_epoch: int | None) -> list[Any]:
    conditions = [_instances.c.uuid == uuid]
    if expect_state is not None:
        states = {expect_state} if isinstance(expect_state, str) else set(expect_state)
        # str() of an InstanceState is its value: the drivers are given plain strings.
        conditions.append(_instances.c.state.in_(sorted(str(state) for state in states)))
    if expect_host is not None:
        conditions.append(_instances.c.host == expect_host)
    if expect_member_epoch is not None:
        conditions.append(_instances.c.member_epoch == expect_member_epoch)
    return conditions


def _update_expecting(engine: Engine, uuid: str, values: dict[str, Any],
                      expect_state: ExpectedStates | None, expect_host: str | None,
                      expect_member_epoch: int | None,
                      node_uuid: str | None = None) -> InstanceRow:
    """Update the instance if it matches the expectations; the row after, or an error saying
    which expectation failed."""
    try:
        with _transaction(engine, write=True) as conn:
            result = conn.execute(sa.update(_instances).where(
                *_conditions(uuid, expect_state, expect_host, expect_member_epoch))
                .values(**values))
            row = _select_instance(conn, uuid)
            if row is None:
                raise InstanceNotFound(uuid)
            if result.rowcount != 1:
                expected = {"state": None if expect_state is None else _describe(expect_state),
                            "host": expect_host,
                            "member epoch": expect_member_epoch}
                raise InstanceConflict(
                    uuid, ", ".join(f"{k} {v}" for k, v in expected.items() if v is not None),
                    f"state {row.state}, host {row.host}, member epoch {row.member_epoch}")
            return _instance_row(row)
    except sa_exc.IntegrityError as error:
        _raise_integrity(error, uuid, node_uuid)
        raise


def set_instance_state(engine: Engine, uuid: str, state: InstanceState,
                       fault: str | None = None, *,
                       expect_state: ExpectedStates | None = None,
                       expect_host: str | None = None,
                       expect_member_epoch: int | None = None,
                       release_node: bool = False) -> InstanceRow:
    """Set the instance's state and fault (``fault`` replaces the stored one; None clears it).

    With ``expect_*`` it is a compare-and-set: raises :class:`InstanceConflict`
    when the instance is not in one of ``expect_state`` or not held by
    (``expect_host``, ``expect_member_epoch``) — how a daemon that lost an
    instance to a re-homing finds out. DELETED frees the node for another
    instance; so does ``release_node``, which empties ``node_uuid`` in the same
    statement (a failed build gives its node back and keeps its row, in ERROR).
    """
    state = _state(state)
    now = models.utcnow()
    values: dict[str, Any] = dict(state=state, fault=fault, updated_at=now)
    if state == models.DELETED:
        values["deleted_at"] = now
    if release_node:
        values["node_uuid"] = None
    return _update_expecting(engine, uuid, values, expect_state, expect_host,
                             expect_member_epoch)


def assign_node(engine: Engine, uuid: str, node_uuid: str, host: str, member_epoch: int, *,
                expect_state: ExpectedStates | None = models.BUILDING,
                expect_host: str | None = None, expect_member_epoch: int | None = None,
                fault: str | None = None) -> InstanceRow:
    """Schedule the instance on ``node_uuid``, managed by (``host``, ``member_epoch``), with
    ``fault`` (a build retried on another node keeps its attempts there). Raises
    :class:`NodeInUse` if the node already hosts another live instance, and with
    ``expect_*`` :class:`InstanceConflict` as :func:`set_instance_state` does."""
    values = dict(node_uuid=node_uuid, host=host, member_epoch=member_epoch, fault=fault,
                  updated_at=models.utcnow())
    return _update_expecting(engine, uuid, values, expect_state, expect_host,
                             expect_member_epoch, node_uuid)


def rehome_instance(engine: Engine, uuid: str, from_host: str, from_member_epoch: int,
                    to_host: str, to_member_epoch: int) -> bool:
    """Move a live instance from (``from_host``, ``from_member_epoch``) to (``to_host``,
    ``to_member_epoch``) if it is still held by the former: a compare-and-set, so of two
    racing adopters exactly one gets True."""
    with _transaction(engine, write=True) as conn:
        result = conn.execute(sa.update(_instances).where(
            _instances.c.uuid == uuid, _instances.c.host == from_host,
            _instances.c.member_epoch == from_member_epoch,
            _instances.c.state != models.DELETED).values(
            host=to_host, member_epoch=to_member_epoch, updated_at=models.utcnow()))
        return result.rowcount == 1


def _live(conn: Connection, *conditions: Any) -> list[InstanceRow]:
    rows = conn.execute(sa.select(_instances).where(
        _instances.c.state != models.DELETED, *conditions).order_by(_instances.c.created_at,
                                                                    _instances.c.uuid))
    return [_instance_row(row) for row in rows]


def instances_by_host(engine: Engine, host: str) -> list[InstanceRow]:
    """The live instances managed by ``host``, oldest first."""
    with _transaction(engine) as conn:
        return _live(conn, _instances.c.host == host)


def live_instances(engine: Engine) -> list[InstanceRow]:
    """Every instance not DELETED, oldest first."""
    with _transaction(engine) as conn:
        return _live(conn)


def nodeless_instances(engine: Engine) -> list[InstanceRow]:
    """Live instances without a node (e.g. a failed build that released its node)."""
    with _transaction(engine) as conn:
        return _live(conn, _instances.c.node_uuid.is_(None))


def instance_hosts(engine: Engine) -> dict[str, str]:
    """``{node_uuid: host}`` for the nodes hosting a live instance (the sticky nodes)."""
    with _transaction(engine) as conn:
        rows = conn.execute(sa.select(_instances.c.node_uuid, _instances.c.host).where(
            _instances.c.state != models.DELETED, _instances.c.node_uuid.is_not(None),
            _instances.c.host.is_not(None)))
        return {row.node_uuid: row.host for row in rows}


#: Columns instances can be listed in the order of (:func:`list_instances`' ``sort``).
INSTANCE_SORT_COLUMNS = frozenset({"created_at", "updated_at", "uuid", "name", "project_id",
                                   "user_id", "host", "node_uuid", "image", "description",
                                   "access_ip_v4", "access_ip_v6", "key_name"})


def _sort_column(name: str) -> Any:
    column = _instances.c[name]
    # Nullable text columns compare as '' so that a marker on a NULL still finds its place.
    return column if name in ("created_at", "updated_at", "uuid") else \
        sa.func.coalesce(column, "")


#: The compute API's fields of an instance that :func:`set_instance_details` writes.
INSTANCE_DETAILS = frozenset({"description", "access_ip_v4", "access_ip_v6", "reservation_id",
                              "key_name", "key_type", "key_data", "user_data", "config_drive"})


def set_instance_details(engine: Engine, uuid: str, **details: str | bool | None
                         ) -> InstanceRow:
    """Record the compute API's fields of a new instance (:data:`INSTANCE_DETAILS`: what
    Nova's create takes besides what scheduling needs); :class:`InstanceNotFound` if there is
    no such instance."""
    unknown = set(details) - INSTANCE_DETAILS
    if unknown:
        raise ValueError(f"not instance details: {sorted(unknown)}")
    with _transaction(engine, write=True) as conn:
        if details:
            conn.execute(sa.update(_instances).where(_instances.c.uuid == uuid)
                         .values(**details))
        row = _select_instance(conn, uuid)
        if row is None:
            raise InstanceNotFound(uuid)
        return _instance_row(row)


def list_instances(engine: Engine, *, project_id: str | None = None, host: str | None = None,
                   states: Collection[str] | None = None, name: str | None = None,
                   image: str | None = None, reservation_id: str | None = None,
                   include_deleted: bool = False,
                   marker: str | None = None, limit: int | None = None,
                   sort: Iterable[tuple[str, bool]] = ()) -> list[InstanceRow]:
    """Instances filtered: ``project_id`` (None: every project), ``host``, ``states``,
    ``name`` (a substring), ``image``, ``reservation_id`` (exactly); live ones only unless
    ``include_deleted``.
    In the order of ``sort``, ``(column, ascending)`` pairs of :data:`INSTANCE_SORT_COLUMNS`,
    then by creation and uuid in the first pair's direction (newest first without ``sort``, as
    the compute API lists servers). ``marker``: start after that instance
    (:class:`InstanceNotFound` if it is not one of the listed)."""
    conditions = []
    if project_id is not None:
        conditions.append(_instances.c.project_id == project_id)
    if host is not None:
        conditions.append(_instances.c.host == host)
    if image is not None:
        conditions.append(_instances.c.image == image)
    if reservation_id is not None:
        conditions.append(_instances.c.reservation_id == reservation_id)
    if states is not None:
        conditions.append(_instances.c.state.in_(sorted(states)))
    if name:
        escaped = name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        conditions.append(_instances.c.name.like(f"%{escaped}%", escape="\\"))
    if not include_deleted:
        conditions.append(_instances.c.state != models.DELETED)
    keys = list(sort)
    for column in ("created_at", "uuid"):
        if column not in {key for key, _ascending in keys}:
            keys.append((column, keys[0][1] if keys else False))
    unknown = {key for key, _ascending in keys} - INSTANCE_SORT_COLUMNS
    if unknown:
        raise ValueError(f"cannot sort instances on {sorted(unknown)}")
    columns = [(_sort_column(key), ascending) for key, ascending in keys]
    order = [column.asc() if ascending else column.desc() for column, ascending in columns]
    with _transaction(engine) as conn:
        if marker is not None:
            start = conn.execute(sa.select(*(column for column, _asc in columns)).where(
                _instances.c.uuid == marker, *conditions)).first()
            if start is None:
                raise InstanceNotFound(marker)
            # Keyset paging: after the marker in the whole order (uuid, last, is unique).
            after = []
            for position, (column, ascending) in enumerate(columns):
                equal = [earlier == start[i] for i, (earlier, _asc) in
                         enumerate(columns[:position])]
                beyond = column > start[position] if ascending else column < start[position]
                after.append(sa.and_(*equal, beyond))
            conditions.append(sa.or_(*after))
        query = sa.select(_instances).where(*conditions).order_by(*order)
        if limit is not None:
            query = query.limit(limit)
        return [_instance_row(row) for row in conn.execute(query)]


def count_live_instances(engine: Engine, project_id: str) -> int:
    """How many instances ``project_id`` has that are not DELETED (what its quota counts)."""
    with _transaction(engine) as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(_instances).where(
            _instances.c.project_id == project_id,
            _instances.c.state != models.DELETED)).scalar_one()


#: What :func:`edit_instance` may change: the compute API's fields a server's owner edits.
EDITABLE = frozenset({"name", "description", "access_ip_v4", "access_ip_v6", "metadata",
                      "tags"})


def edit_instance(engine: Engine, uuid: str,
                  change: Callable[[InstanceRow], dict[str, Any]]) -> InstanceRow:
    """Change a live instance's :data:`EDITABLE` fields under its row lock: ``change`` gets the
    row as it is and returns the values to write (``metadata`` a whole dict, ``tags`` a whole
    list); it may raise to write nothing. So two edits of one instance (two metadata merges)
    never lose one another's change, and a check ``change`` makes (a count against a quota)
    holds for what is written.
    :class:`InstanceNotFound` if there is no live instance ``uuid``."""
    with _transaction(engine, write=True) as conn:
        row = conn.execute(sa.select(_instances).where(
            _instances.c.uuid == uuid, _instances.c.state != models.DELETED)
            .with_for_update()).first()
        if row is None:
            raise InstanceNotFound(uuid)
        values = dict(change(_instance_row(row)))
        unknown = set(values) - EDITABLE
        if unknown:
            raise ValueError(f"not editable: {sorted(unknown)}")
        if "metadata" in values:
            metadata = values.pop("metadata")
            values["user_metadata"] = json.dumps(metadata, sort_keys=True) if metadata \
                else None
        if "tags" in values:
            values["tags"] = json.dumps(list(values["tags"])) if values["tags"] else None
        if values:
            conn.execute(sa.update(_instances).where(_instances.c.uuid == uuid).values(
                **values, updated_at=models.utcnow()))
        return _instance_row(_select_instance(conn, uuid))


def instances_in_period(engine: Engine, start: datetime.datetime, end: datetime.datetime,
                        project_id: str | None = None) -> list[InstanceRow]:
    """The instances that existed at some time in [``start``, ``end``): created before
    ``end`` and not deleted before ``start`` (of ``project_id``, or of every project), oldest
    first: what a usage report over the period counts."""
    conditions = [_instances.c.created_at < end,
                  sa.or_(_instances.c.deleted_at.is_(None), _instances.c.deleted_at > start)]
    if project_id is not None:
        conditions.append(_instances.c.project_id == project_id)
    with _transaction(engine) as conn:
        rows = conn.execute(sa.select(_instances).where(*conditions).order_by(
            _instances.c.created_at, _instances.c.uuid))
        return [_instance_row(row) for row in rows]


# -- flavors ---------------------------------------------------------------------------------

def _flavor_row(row: Any, extra_specs: dict[str, str]) -> FlavorRow:
    return FlavorRow(id=row.id, name=row.name, vcpus=row.vcpus, ram=row.ram, disk=row.disk,
                     ephemeral=row.ephemeral, swap=row.swap, is_public=bool(row.is_public),
                     description=row.description, created_at=row.created_at,
                     extra_specs=extra_specs)


def _specs_of(conn: Connection, flavor_ids: Collection[str]) -> dict[str, dict[str, str]]:
    specs: dict[str, dict[str, str]] = {flavor_id: {} for flavor_id in flavor_ids}
    if flavor_ids:
        for row in conn.execute(sa.select(_extra_specs).where(
                _extra_specs.c.flavor_id.in_(sorted(flavor_ids)))):
            specs[row.flavor_id][row.key] = row.value
    return specs


def create_flavor(engine: Engine, flavor_id: str, name: str, *, vcpus: int, ram: int, disk: int,
                  ephemeral: int = 0, swap: int = 0, is_public: bool = True,
                  description: str | None = None,
                  extra_specs: dict[str, str] | None = None) -> FlavorRow:
    """Record a flavor; :class:`FlavorExists` when its id or name is taken."""
    try:
        with _transaction(engine, write=True) as conn:
            taken = conn.execute(sa.select(_flavors.c.id).where(sa.or_(
                _flavors.c.id == flavor_id, _flavors.c.name == name))).first()
            if taken is not None:
                raise FlavorExists(flavor_id, name)
            conn.execute(sa.insert(_flavors).values(
                id=flavor_id, name=name, vcpus=vcpus, ram=ram, disk=disk, ephemeral=ephemeral,
                swap=swap, is_public=is_public, description=description,
                created_at=models.utcnow()))
            for key, value in (extra_specs or {}).items():
                conn.execute(sa.insert(_extra_specs).values(flavor_id=flavor_id, key=key,
                                                            value=value))
            return _flavor_row(_select_flavor(conn, flavor_id), dict(extra_specs or {}))
    except sa_exc.IntegrityError:  # a concurrent create with the same id or name
        raise FlavorExists(flavor_id, name) from None


def _select_flavor(conn: Connection, flavor_id: str) -> Any:
    return conn.execute(sa.select(_flavors).where(_flavors.c.id == flavor_id)).first()


def get_flavor(engine: Engine, flavor_id: str) -> FlavorRow:
    """The flavor with its extra specs; :class:`FlavorNotFound`."""
    with _transaction(engine) as conn:
        row = _select_flavor(conn, flavor_id)
        if row is None:
            raise FlavorNotFound(flavor_id)
        return _flavor_row(row, _specs_of(conn, [flavor_id])[flavor_id])


#: Columns flavors can be listed in the order of (:func:`list_flavors`' ``sort_key``).
FLAVOR_SORT_COLUMNS = frozenset({"id", "name", "ram", "vcpus", "disk", "ephemeral", "swap",
                                 "created_at"})


def list_flavors(engine: Engine, *, marker: str | None = None, limit: int | None = None,
                 min_ram: int | None = None, min_disk: int | None = None,
                 sort_key: str = "id", ascending: bool = True) -> list[FlavorRow]:
    """Flavors in the order of ``sort_key`` (one of :data:`FLAVOR_SORT_COLUMNS`), then by id,
    after ``marker`` (:class:`FlavorNotFound` if no such flavor), with at least ``min_ram`` MB
    of RAM and ``min_disk`` GB of disk."""
    if sort_key not in FLAVOR_SORT_COLUMNS:
        raise ValueError(f"cannot sort flavors on {sort_key!r}")
    column, by_id = _flavors.c[sort_key], _flavors.c.id
    with _transaction(engine) as conn:
        query = sa.select(_flavors).order_by(
            *((column.asc(), by_id.asc()) if ascending else (column.desc(), by_id.desc())))
        if min_ram is not None:
            query = query.where(_flavors.c.ram >= min_ram)
        if min_disk is not None:
            query = query.where(_flavors.c.disk >= min_disk)
        if marker is not None:
            start = _select_flavor(conn, marker)
            if start is None:
                raise FlavorNotFound(marker)
            # Keyset paging: after the marker in the whole order (the id, last, is unique).
            value = getattr(start, sort_key)
            if ascending:
                query = query.where(sa.or_(column > value,
                                           sa.and_(column == value, by_id > start.id)))
            else:
                query = query.where(sa.or_(column < value,
                                           sa.and_(column == value, by_id < start.id)))
        if limit is not None:
            query = query.limit(limit)
        rows = list(conn.execute(query))
        specs = _specs_of(conn, [row.id for row in rows])
        return [_flavor_row(row, specs[row.id]) for row in rows]


def delete_flavor(engine: Engine, flavor_id: str) -> None:
    """Remove the flavor and its extra specs (servers keep their copy); FlavorNotFound."""
    with _transaction(engine, write=True) as conn:
        # The flavor's row first, as set_extra_specs takes it: the two never deadlock.
        if conn.execute(sa.select(_flavors.c.id).where(_flavors.c.id == flavor_id)
                        .with_for_update()).first() is None:
            raise FlavorNotFound(flavor_id)
        conn.execute(sa.delete(_extra_specs).where(_extra_specs.c.flavor_id == flavor_id))
        if conn.execute(sa.delete(_flavors).where(_flavors.c.id == flavor_id)).rowcount != 1:
            raise FlavorNotFound(flavor_id)


def set_extra_specs(engine: Engine, flavor_id: str, specs: dict[str, str],
                    check: Callable[[dict[str, str]], None] | None = None) -> dict[str, str]:
    """Add or replace the given extra specs of the flavor; all its specs after. ``check`` gets
    what the flavor's specs would be, under the flavor's lock (a concurrent writer cannot slip
    in between), and raises to refuse: then nothing is written."""
    with _transaction(engine, write=True) as conn:
        if conn.execute(sa.select(_flavors.c.id).where(_flavors.c.id == flavor_id)
                        .with_for_update()).first() is None:
            raise FlavorNotFound(flavor_id)
        if check is not None:
            check(dict(_specs_of(conn, [flavor_id])[flavor_id], **specs))
        for key, value in specs.items():
            conn.execute(sa.delete(_extra_specs).where(_extra_specs.c.flavor_id == flavor_id,
                                                       _extra_specs.c.key == key))
            conn.execute(sa.insert(_extra_specs).values(flavor_id=flavor_id, key=key,
                                                        value=value))
        return _specs_of(conn, [flavor_id])[flavor_id]


def set_flavor_description(engine: Engine, flavor_id: str,
                           description: str | None) -> FlavorRow:
    """Replace the flavor's description (the only thing Nova lets change); FlavorNotFound."""
    with _transaction(engine, write=True) as conn:
        if conn.execute(sa.update(_flavors).where(_flavors.c.id == flavor_id).values(
                description=description)).rowcount != 1:
            raise FlavorNotFound(flavor_id)
        return _flavor_row(_select_flavor(conn, flavor_id),
                           _specs_of(conn, [flavor_id])[flavor_id])


def delete_extra_spec(engine: Engine, flavor_id: str, key: str) -> bool:
    """Remove one extra spec; False when the flavor has none by that key
    (:class:`FlavorNotFound` when there is no such flavor)."""
    with _transaction(engine, write=True) as conn:
        if _select_flavor(conn, flavor_id) is None:
            raise FlavorNotFound(flavor_id)
        return conn.execute(sa.delete(_extra_specs).where(
            _extra_specs.c.flavor_id == flavor_id, _extra_specs.c.key == key)).rowcount == 1


# -- quota limits ----------------------------------------------------------------------------

def quota_limits(engine: Engine, project_id: str) -> dict[str, int]:
    """``{resource: hard limit}`` the project has of its own (no defaults)."""
    with _transaction(engine) as conn:
        return {row.resource: row.hard_limit for row in conn.execute(
            sa.select(_quota_limits).where(_quota_limits.c.project_id == project_id))}


def set_quota_limits(engine: Engine, project_id: str, limits: dict[str, int]) -> dict[str, int]:
    """Set the project's own limits for the given resources; all its own limits after."""
    with _transaction(engine, write=True) as conn:
        for resource, hard_limit in limits.items():
            conn.execute(sa.delete(_quota_limits).where(
                _quota_limits.c.project_id == project_id,
                _quota_limits.c.resource == resource))
            conn.execute(sa.insert(_quota_limits).values(
                project_id=project_id, resource=resource, hard_limit=hard_limit))
        return {row.resource: row.hard_limit for row in conn.execute(
            sa.select(_quota_limits).where(_quota_limits.c.project_id == project_id))}


def delete_quota_limits(engine: Engine, project_id: str) -> None:
    """Forget the project's own limits (the defaults apply again)."""
    with _transaction(engine, write=True) as conn:
        conn.execute(sa.delete(_quota_limits).where(_quota_limits.c.project_id == project_id))


# -- quota reservations ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class QuotaUsage:
    """What a project's builds hold or may hold, counted in computed's database: ``instances``
    (live rows, ERROR ones included, plus admitted builds without a row yet) and
    ``resource_class`` units (live rows holding a node of that class, plus admitted builds of
    that class without a row yet)."""

    instances: int
    resource_class: int


def _insert_quota_project(conn: Connection, project_id: str) -> None:
    """Make sure the project has a row to lock, without failing if a racer made it first."""
    dialect = conn.dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql
        stmt = postgresql.insert(_quota_projects).values(
            project_id=project_id).on_conflict_do_nothing()
    elif dialect == "sqlite":
        from sqlalchemy.dialects import sqlite
        stmt = sqlite.insert(_quota_projects).values(
            project_id=project_id).on_conflict_do_nothing()
    elif dialect in ("mysql", "mariadb"):
        from sqlalchemy.dialects import mysql
        insert = mysql.insert(_quota_projects).values(project_id=project_id)
        # As _insert_unapplied: takes the exclusive lock at once on a duplicate.
        stmt = insert.on_duplicate_key_update(project_id=insert.inserted.project_id)
    else:
        if conn.execute(sa.select(_quota_projects.c.project_id).where(
                _quota_projects.c.project_id == project_id).with_for_update()).first():
            return
        stmt = sa.insert(_quota_projects).values(project_id=project_id)
    conn.execute(stmt)


def _quota_usage(conn: Connection, project_id: str, resource_class: str,
                 expired_before: datetime.datetime) -> QuotaUsage:
    # One statement, so one snapshot even at READ COMMITTED: a build whose row appears
    # meanwhile is counted either by its reservation or by its row, never by neither.
    live = sa.and_(_instances.c.project_id == project_id,
                   _instances.c.state != models.DELETED)
    holds_class = sa.and_(live, _instances.c.resource_class == resource_class,
                          _instances.c.node_uuid.is_not(None))
    rowless = sa.and_(
        _quota_reservations.c.project_id == project_id,
        _quota_reservations.c.created_at >= expired_before,
        ~sa.exists().where(_instances.c.uuid == _quota_reservations.c.instance_uuid))
    pending_class = sa.and_(rowless, _quota_reservations.c.resource_class == resource_class)

    def count(table: sa.Table, condition: Any) -> Any:
        return sa.select(sa.func.count()).select_from(table).where(condition).scalar_subquery()
    row = conn.execute(sa.select(
        count(_instances, live).label("rows"),
        count(_instances, holds_class).label("class_rows"),
        count(_quota_reservations, rowless).label("pending"),
        count(_quota_reservations, pending_class).label("pending_class"))).one()
    return QuotaUsage(instances=row.rows + row.pending,
                      resource_class=row.class_rows + row.pending_class)


def reserve_quota(engine: Engine, project_id: str, instance_uuid: str, resource_class: str,
                  decide: Callable[[QuotaUsage], None], *, ttl: float) -> None:
    """Take one quota decision for a build of ``project_id``: ``decide`` gets the project's
    usage (:class:`QuotaUsage`, counted under the project's lock) and raises to refuse; if it
    returns, a reservation of ``instance_uuid`` is recorded in the same transaction, so the
    next decision counts this build until its instance row exists (then the row counts it)
    and after (:func:`release_quota_reservation`). Reservations older than ``ttl`` seconds (a
    process that died mid-build) are no longer counted and are removed."""
    expired_before = models.utcnow() - datetime.timedelta(seconds=ttl)
    for attempt in _deadlock_retries():
        with attempt:
            with _transaction(engine, write=True) as conn:
                _insert_quota_project(conn, project_id)
                conn.execute(sa.select(_quota_projects.c.project_id).where(
                    _quota_projects.c.project_id == project_id).with_for_update()).one()
                conn.execute(sa.delete(_quota_reservations).where(
                    _quota_reservations.c.project_id == project_id,
                    _quota_reservations.c.created_at < expired_before))
                decide(_quota_usage(conn, project_id, resource_class, expired_before))
                conn.execute(sa.insert(_quota_reservations).values(
                    instance_uuid=instance_uuid, project_id=project_id,
                    resource_class=resource_class, created_at=models.utcnow()))
                return


def release_quota_reservation(engine: Engine, instance_uuid: str) -> None:
    """Forget the reservation of a build whose instance row now exists (or never will)."""
    with _transaction(engine, write=True) as conn:
        conn.execute(sa.delete(_quota_reservations).where(
            _quota_reservations.c.instance_uuid == instance_uuid))


def quota_reservations(engine: Engine, project_id: str) -> list[str]:
    """The instance uuids of the project's reservations (tests, diagnostics)."""
    with _transaction(engine) as conn:
        return [row.instance_uuid for row in conn.execute(
            sa.select(_quota_reservations.c.instance_uuid).where(
                _quota_reservations.c.project_id == project_id))]


# -- key pairs -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class KeyPairRow:
    id: int
    user_id: str
    name: str
    type: str
    public_key: str
    fingerprint: str
    created_at: datetime.datetime


class KeyPairExists(DatabaseError):
    def __init__(self, user_id: str, name: str):
        super().__init__(f"key pair {name!r} of user {user_id} exists")
        self.user_id = user_id
        self.name = name


class KeyPairNotFound(DatabaseError):
    def __init__(self, user_id: str, name: str):
        super().__init__(f"key pair {name!r} of user {user_id} not found")
        self.user_id = user_id
        self.name = name


def _key_pair_row(row: Any) -> KeyPairRow:
    return KeyPairRow(id=row.id, user_id=row.user_id, name=row.name, type=row.type,
                      public_key=row.public_key, fingerprint=row.fingerprint,
                      created_at=row.created_at)


def _select_key_pair(conn: Connection, user_id: str, name: str) -> Any:
    return conn.execute(sa.select(_key_pairs).where(_key_pairs.c.user_id == user_id,
                                                    _key_pairs.c.name == name)).first()


def create_key_pair(engine: Engine, user_id: str, name: str, key_type: str, public_key: str,
                    fingerprint: str) -> KeyPairRow:
    """Record a key pair of ``user_id``; :class:`KeyPairExists` if the user has one of that
    name (the unique constraint decides between racers)."""
    try:
        with _transaction(engine, write=True) as conn:
            if _select_key_pair(conn, user_id, name) is not None:
                raise KeyPairExists(user_id, name)
            conn.execute(sa.insert(_key_pairs).values(
                user_id=user_id, name=name, type=key_type, public_key=public_key,
                fingerprint=fingerprint, created_at=models.utcnow()))
            return _key_pair_row(_select_key_pair(conn, user_id, name))
    except sa_exc.IntegrityError:
        raise KeyPairExists(user_id, name) from None


def get_key_pair(engine: Engine, user_id: str, name: str) -> KeyPairRow:
    """The key pair; :class:`KeyPairNotFound` if ``user_id`` has none of that name."""
    with _transaction(engine) as conn:
        row = _select_key_pair(conn, user_id, name)
    if row is None:
        raise KeyPairNotFound(user_id, name)
    return _key_pair_row(row)


def list_key_pairs(engine: Engine, user_id: str, *, marker: str | None = None,
                   limit: int | None = None) -> list[KeyPairRow]:
    """``user_id``'s key pairs by name; after the key pair named ``marker``
    (:class:`KeyPairNotFound` if the user has none of that name)."""
    conditions = [_key_pairs.c.user_id == user_id]
    with _transaction(engine) as conn:
        if marker is not None:
            if _select_key_pair(conn, user_id, marker) is None:
                raise KeyPairNotFound(user_id, marker)
            conditions.append(_key_pairs.c.name > marker)
        query = sa.select(_key_pairs).where(*conditions).order_by(_key_pairs.c.name)
        if limit is not None:
            query = query.limit(limit)
        return [_key_pair_row(row) for row in conn.execute(query)]


def count_key_pairs(engine: Engine, user_id: str) -> int:
    with _transaction(engine) as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(_key_pairs).where(
            _key_pairs.c.user_id == user_id)).scalar_one()


def delete_key_pair(engine: Engine, user_id: str, name: str) -> None:
    """Remove the key pair; :class:`KeyPairNotFound` if there is none (servers built with it
    keep their copy)."""
    with _transaction(engine, write=True) as conn:
        result = conn.execute(sa.delete(_key_pairs).where(_key_pairs.c.user_id == user_id,
                                                          _key_pairs.c.name == name))
    if result.rowcount != 1:
        raise KeyPairNotFound(user_id, name)
