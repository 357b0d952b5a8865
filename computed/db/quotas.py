"""computed's quotas: the limits projects have of their own, the quota classes' (the default
quotas), the reservations of admitted builds.

Owns every statement on the ``quota_limits``, ``quota_classes``, ``quota_projects`` and
``quota_reservations`` tables, and the counts of a project's instances (and of the cores and
RAM of their flavors) its quota decisions read. Each public function
takes the ``Engine`` to use (from :mod:`computed.db.engine`, which also bounds every call) and
runs in its own transaction.

Guarantees: :func:`reserve_quota` takes the quota decisions of one project one at a time (its
``quota_projects`` row locked; sqlite's write lock) and counts, in one statement, every build
that may stay: live instance rows, and reservations whose row does not exist yet (the cores and
RAM of both, when asked, in one other statement). A build it admits is counted by every later
decision until its row is DELETED, so admitted builds never exceed the limit, however they
interleave with failures and deletes.

Threads: any thread; the project's row lock is the database's, so decisions are serialised
across threads and processes alike.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from computed.db import models
from computed.db.common import deadlock_retries, insert_missing
from computed.db.engine import transaction as _transaction
from computed.db.models import (
    Instance,
    QuotaClass,
    QuotaLimit,
    QuotaProject,
    QuotaReservation,
)

_instances = Instance.__table__
_quota_limits = QuotaLimit.__table__
_quota_classes = QuotaClass.__table__
_quota_projects = QuotaProject.__table__
_quota_reservations = QuotaReservation.__table__


def quota_limits(engine: Engine, project_id: str) -> dict[str, int]:
    """``{resource: hard limit}`` the project has of its own (no defaults)."""
    with _transaction(engine) as conn:
        return _limits(conn, _quota_limits.c.project_id, project_id)


def set_quota_limits(engine: Engine, project_id: str, limits: dict[str, int]) -> dict[str, int]:
    """Set the project's own limits for the given resources; all its own limits after."""
    with _transaction(engine, write=True) as conn:
        return _set_limits(conn, _quota_limits.c.project_id, project_id, limits)


def delete_quota_limits(engine: Engine, project_id: str) -> None:
    """Forget the project's own limits (the defaults apply again)."""
    with _transaction(engine, write=True) as conn:
        conn.execute(sa.delete(_quota_limits).where(_quota_limits.c.project_id == project_id))


# -- quota classes (revision 0010) -------------------------------------------------------

def quota_class_limits(engine: Engine, class_name: str) -> dict[str, int]:
    """``{resource: hard limit}`` set for the quota class (nothing for a class never set)."""
    with _transaction(engine) as conn:
        return _limits(conn, _quota_classes.c.class_name, class_name)


def set_quota_class_limits(engine: Engine, class_name: str,
                           limits: dict[str, int]) -> dict[str, int]:
    """Set the class's limits for the given resources; all its limits after."""
    with _transaction(engine, write=True) as conn:
        return _set_limits(conn, _quota_classes.c.class_name, class_name, limits)


# Project limits and class limits are one shape of table: (owner key, resource, hard_limit).

def _limits(conn: Connection, key: sa.Column, owner: str) -> dict[str, int]:
    return {row.resource: row.hard_limit
            for row in conn.execute(sa.select(key.table).where(key == owner))}


def _set_limits(conn: Connection, key: sa.Column, owner: str,
                limits: dict[str, int]) -> dict[str, int]:
    table = key.table
    for resource, hard_limit in limits.items():
        conn.execute(sa.delete(table).where(key == owner, table.c.resource == resource))
        conn.execute(sa.insert(table).values(
            {key.name: owner, 'resource': resource, 'hard_limit': hard_limit}))
    return _limits(conn, key, owner)


# -- quota reservations ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class QuotaUsage:
    """What a project's builds hold or may hold, counted in computed's database: ``instances``
    (live rows, ERROR ones included, plus admitted builds without a row yet) and
    ``resource_class`` units (live rows holding a node of that class, plus admitted builds of
    that class without a row yet)."""

    instances: int
    resource_class: int
    #: The vcpus and RAM (MB) of the flavors of the same builds: counted only when the decision
    #: asks for them (``count_flavors``), else 0.
    cores: int = 0
    ram: int = 0


def _sizes(flavor: str | None) -> tuple[int, int]:
    """(vcpus, ram) of an instance's flavor copy (JSON); (0, 0) without one (rows before
    revision 0004)."""
    if not flavor:
        return 0, 0
    copy = json.loads(flavor)
    return int(copy.get("vcpus") or 0), int(copy.get("ram") or 0)


def _flavor_usage(conn: Connection, project_id: str,
                  expired_before: datetime.datetime | None) -> tuple[int, int]:
    """(cores, RAM) of the project's live instances' flavors and, with ``expired_before``,
    of its reservations still counted whose row does not exist yet: one statement, so one
    snapshot (a build whose row appears meanwhile counts once)."""
    live = sa.and_(_instances.c.project_id == project_id,
                   _instances.c.state != models.DELETED)
    query: Any = sa.select(_instances.c.flavor.label("flavor"),
                           sa.cast(sa.null(), sa.Integer).label("cores"),
                           sa.cast(sa.null(), sa.Integer).label("ram")).where(live)
    if expired_before is not None:
        rowless = sa.and_(
            _quota_reservations.c.project_id == project_id,
            _quota_reservations.c.created_at >= expired_before,
            ~sa.exists().where(_instances.c.uuid == _quota_reservations.c.instance_uuid))
        query = sa.union_all(query, sa.select(
            sa.cast(sa.null(), sa.Text).label("flavor"), _quota_reservations.c.cores,
            _quota_reservations.c.ram).where(rowless))
    cores = ram = 0
    for row in conn.execute(query):
        vcpus, memory = _sizes(row.flavor) if row.flavor is not None else (
            row.cores or 0, row.ram or 0)
        cores += vcpus
        ram += memory
    return cores, ram


def flavor_usage(engine: Engine, project_id: str) -> tuple[int, int]:
    """(cores, RAM in MB) the project's live instances' flavors add up to."""
    with _transaction(engine) as conn:
        return _flavor_usage(conn, project_id, None)


def _insert_quota_project(conn: Connection, project_id: str) -> None:
    """Make sure the project has a row to lock, without failing if a racer made it first."""
    insert_missing(conn, _quota_projects, "project_id", {"project_id": project_id})


def _quota_usage(conn: Connection, project_id: str, resource_class: str,
                 expired_before: datetime.datetime) -> QuotaUsage:
    # One statement, so one snapshot even at READ COMMITTED: a build whose row appears
    # meanwhile is counted either by its reservation or by its row, never by neither.
    live = sa.and_(_instances.c.project_id == project_id,
                   _instances.c.state != models.DELETED)
    # A server holds a unit of its class once placed; one admitted and not placed yet (no
    # node nor host: computed.api.pending) is about to hold one, so it counts already.
    admitted = sa.and_(_instances.c.state == models.BUILDING, _instances.c.host.is_(None))
    holds_class = sa.and_(live, _instances.c.resource_class == resource_class,
                          sa.or_(_instances.c.node_uuid.is_not(None), admitted))
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
                  decide: Callable[[QuotaUsage], None], *, ttl: float, cores: int = 0,
                  ram: int = 0, count_flavors: bool = False) -> None:
    """Take one quota decision for a build of ``project_id``: ``decide`` gets the project's
    usage (:class:`QuotaUsage`, counted under the project's lock) and raises to refuse; if it
    returns, a reservation of ``instance_uuid`` is recorded in the same transaction, so the
    next decision counts this build until its instance row exists (then the row counts it)
    and after (:func:`release_quota_reservation`). Reservations older than ``ttl`` seconds (a
    process that died mid-build) are no longer counted and are removed. The reservation holds
    the build's ``cores`` and ``ram``; ``count_flavors``: the usage counts the cores and RAM
    of the project's builds too (one more statement, under the same lock)."""
    expired_before = models.utcnow() - datetime.timedelta(seconds=ttl)
    for attempt in deadlock_retries():
        with attempt:
            with _transaction(engine, write=True) as conn:
                _insert_quota_project(conn, project_id)
                conn.execute(sa.select(_quota_projects.c.project_id).where(
                    _quota_projects.c.project_id == project_id).with_for_update()).one()
                conn.execute(sa.delete(_quota_reservations).where(
                    _quota_reservations.c.project_id == project_id,
                    _quota_reservations.c.created_at < expired_before))
                usage = _quota_usage(conn, project_id, resource_class, expired_before)
                if count_flavors:
                    used_cores, used_ram = _flavor_usage(conn, project_id, expired_before)
                    usage = dataclasses.replace(usage, cores=used_cores, ram=used_ram)
                decide(usage)
                conn.execute(sa.insert(_quota_reservations).values(
                    instance_uuid=instance_uuid, project_id=project_id,
                    resource_class=resource_class, created_at=models.utcnow(),
                    cores=cores, ram=ram))
                return


def release_quota_reservation(engine: Engine, instance_uuid: str) -> None:
    """Forget the reservation of a build whose instance row now exists (or never will).

    A delete that deadlocks with other builds' decisions (MariaDB chooses a victim among
    concurrent lockers) is tried again: it is idempotent, and a release given up would keep
    counting the build against its project until the reservation expires."""
    for attempt in deadlock_retries():
        with attempt:
            with _transaction(engine, write=True) as conn:
                conn.execute(sa.delete(_quota_reservations).where(
                    _quota_reservations.c.instance_uuid == instance_uuid))
