"""computed's host aggregates: named groups of daemons with metadata (Nova's os-aggregates).

Owns every statement on the ``aggregates``, ``aggregate_hosts`` and ``aggregate_metadata``
tables. Each public function takes the ``Engine`` to use (from :mod:`computed.db.engine`, which
also bounds every call), runs in its own transaction and returns plain frozen dataclasses
(:class:`AggregateRow`).

Guarantees: names are unique (:class:`AggregateExists`, the unique constraint deciding between
racers); a host is in an aggregate once (:class:`HostInAggregate`, the key deciding), so two
requests adding hosts at once both land; an aggregate with hosts is not deleted
(:class:`AggregateNotEmpty`); a metadata change is applied whole or not at all.

Threads: any thread; nothing is held between calls.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid as uuidlib
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from computed.db import models
from computed.db.common import DatabaseError
from computed.db.engine import transaction as _transaction

_aggregates = models.Aggregate.__table__
_hosts = models.AggregateHost.__table__
_metadata = models.AggregateMetadata.__table__


@dataclasses.dataclass(frozen=True)
class AggregateRow:
    id: int
    uuid: str
    name: str
    hosts: tuple[str, ...]
    metadata: dict[str, str]
    created_at: datetime.datetime
    updated_at: datetime.datetime | None


class AggregateExists(DatabaseError):
    def __init__(self, name: str):
        super().__init__(f"aggregate {name!r} exists")
        self.name = name


class AggregateNotFound(DatabaseError):
    def __init__(self, aggregate_id: int):
        super().__init__(f"aggregate {aggregate_id} not found")
        self.aggregate_id = aggregate_id


class AggregateNotEmpty(DatabaseError):
    def __init__(self, aggregate_id: int):
        super().__init__(f"aggregate {aggregate_id} has hosts")
        self.aggregate_id = aggregate_id


class HostInAggregate(DatabaseError):
    def __init__(self, aggregate_id: int, host: str):
        super().__init__(f"host {host} is in aggregate {aggregate_id}")
        self.aggregate_id = aggregate_id
        self.host = host


class HostNotInAggregate(DatabaseError):
    def __init__(self, aggregate_id: int, host: str):
        super().__init__(f"host {host} is not in aggregate {aggregate_id}")
        self.aggregate_id = aggregate_id
        self.host = host


def _read(conn: Connection, rows: list[Any]) -> list[AggregateRow]:
    """The aggregates of ``rows`` with their hosts and metadata, in the rows' order."""
    ids = [row.id for row in rows]
    hosts: dict[int, list[str]] = {i: [] for i in ids}
    metadata: dict[int, dict[str, str]] = {i: {} for i in ids}
    if ids:
        for item in conn.execute(sa.select(_hosts).where(_hosts.c.aggregate_id.in_(ids))
                                 .order_by(_hosts.c.host)):
            hosts[item.aggregate_id].append(item.host)
        for item in conn.execute(sa.select(_metadata)
                                 .where(_metadata.c.aggregate_id.in_(ids))):
            metadata[item.aggregate_id][item.key] = item.value
    return [AggregateRow(id=row.id, uuid=row.uuid, name=row.name, hosts=tuple(hosts[row.id]),
                         metadata=metadata[row.id], created_at=row.created_at,
                         updated_at=row.updated_at) for row in rows]


def _one(conn: Connection, aggregate_id: int) -> AggregateRow:
    row = conn.execute(sa.select(_aggregates).where(_aggregates.c.id == aggregate_id)).first()
    if row is None:
        raise AggregateNotFound(aggregate_id)
    return _read(conn, [row])[0]


def _touch(conn: Connection, aggregate_id: int, **values: Any) -> None:
    result = conn.execute(sa.update(_aggregates).where(_aggregates.c.id == aggregate_id)
                          .values(updated_at=models.utcnow(), **values))
    if result.rowcount != 1:
        raise AggregateNotFound(aggregate_id)


def _set_metadata(conn: Connection, aggregate_id: int, changes: dict[str, str | None]) -> None:
    for key, value in changes.items():
        conn.execute(sa.delete(_metadata).where(_metadata.c.aggregate_id == aggregate_id,
                                                _metadata.c.key == key))
        if value is not None:
            conn.execute(sa.insert(_metadata).values(aggregate_id=aggregate_id, key=key,
                                                     value=value))


def create_aggregate(engine: Engine, name: str,
                     metadata: dict[str, str] | None = None) -> AggregateRow:
    """A new aggregate without hosts; :class:`AggregateExists` if the name is taken."""
    try:
        with _transaction(engine, write=True) as conn:
            if conn.execute(sa.select(_aggregates.c.id)
                            .where(_aggregates.c.name == name)).first() is not None:
                raise AggregateExists(name)
            aggregate_id = conn.execute(sa.insert(_aggregates).values(
                uuid=str(uuidlib.uuid4()), name=name, created_at=models.utcnow())
            ).inserted_primary_key[0]
            _set_metadata(conn, aggregate_id, dict(metadata or {}))
            return _one(conn, aggregate_id)
    except sa_exc.IntegrityError:
        raise AggregateExists(name) from None


def get_aggregate(engine: Engine, aggregate_id: int) -> AggregateRow:
    with _transaction(engine) as conn:
        return _one(conn, aggregate_id)


def list_aggregates(engine: Engine) -> list[AggregateRow]:
    """Every aggregate, by id."""
    with _transaction(engine) as conn:
        return _read(conn, list(conn.execute(sa.select(_aggregates)
                                             .order_by(_aggregates.c.id))))


def update_aggregate(engine: Engine, aggregate_id: int, *, name: str | None = None,
                     metadata: dict[str, str | None] | None = None) -> AggregateRow:
    """Rename it and/or change its metadata (a None value removes the key), in one
    transaction; :class:`AggregateExists` if another has the name."""
    try:
        with _transaction(engine, write=True) as conn:
            if name is not None and conn.execute(sa.select(_aggregates.c.id).where(
                    _aggregates.c.name == name, _aggregates.c.id != aggregate_id)).first():
                raise AggregateExists(name)
            _touch(conn, aggregate_id, **({} if name is None else {'name': name}))
            _set_metadata(conn, aggregate_id, dict(metadata or {}))
            return _one(conn, aggregate_id)
    except sa_exc.IntegrityError:
        raise AggregateExists(name or '') from None


def delete_aggregate(engine: Engine, aggregate_id: int) -> None:
    """Remove it and its metadata; :class:`AggregateNotEmpty` while it has hosts."""
    with _transaction(engine, write=True) as conn:
        aggregate = _one(conn, aggregate_id)
        if aggregate.hosts:
            raise AggregateNotEmpty(aggregate_id)
        conn.execute(sa.delete(_metadata).where(_metadata.c.aggregate_id == aggregate_id))
        conn.execute(sa.delete(_aggregates).where(_aggregates.c.id == aggregate_id))


def add_host(engine: Engine, aggregate_id: int, host: str) -> AggregateRow:
    """Put ``host`` in the aggregate; :class:`HostInAggregate` if it is there already."""
    try:
        with _transaction(engine, write=True) as conn:
            aggregate = _one(conn, aggregate_id)
            if host in aggregate.hosts:
                raise HostInAggregate(aggregate_id, host)
            conn.execute(sa.insert(_hosts).values(aggregate_id=aggregate_id, host=host))
            _touch(conn, aggregate_id)
            return _one(conn, aggregate_id)
    except sa_exc.IntegrityError:
        raise HostInAggregate(aggregate_id, host) from None


def remove_host(engine: Engine, aggregate_id: int, host: str) -> AggregateRow:
    """Take ``host`` out of the aggregate; :class:`HostNotInAggregate` if it is not in it."""
    with _transaction(engine, write=True) as conn:
        _one(conn, aggregate_id)
        result = conn.execute(sa.delete(_hosts).where(_hosts.c.aggregate_id == aggregate_id,
                                                      _hosts.c.host == host))
        if result.rowcount != 1:
            raise HostNotInAggregate(aggregate_id, host)
        _touch(conn, aggregate_id)
        return _one(conn, aggregate_id)
