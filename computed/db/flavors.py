"""computed's flavors, their extra specs and the access lists of private flavors, as the
compute API lists and edits them.

Owns every statement on the ``flavors``, ``flavor_extra_specs`` and ``flavor_projects``
tables. Each public function
takes the ``Engine`` to use (from :mod:`computed.db.engine`, which also bounds every call), runs
in its own transaction and returns plain frozen dataclasses (:class:`FlavorRow`).

Guarantees: a flavor's id and name are unique (:class:`FlavorExists`, the unique constraints
deciding between racers); changes to a flavor's extra specs and its deletion take the flavor's
row lock first, so they never deadlock with one another and a check of the specs
(:func:`set_extra_specs`' ``check``) holds for what is written. Changes to an access list
take the flavor's row lock first too. A project sees a private flavor only while it is on its
access list (``visible_to``, Nova's non-admin flavor query): listing, showing and building
alike.

Threads: any thread; the locks are the database's.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Collection
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from computed.db import models
from computed.db.common import DatabaseError
from computed.db.engine import transaction as _transaction
from computed.db.models import Flavor, FlavorExtraSpec, FlavorProject

_flavors = Flavor.__table__
_extra_specs = FlavorExtraSpec.__table__
_projects = FlavorProject.__table__


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


def _visible(project_id: str) -> Any:
    """The flavors ``project_id`` may see and build from: the public ones, and the private
    ones whose access list has it."""
    return sa.or_(_flavors.c.is_public == sa.true(), sa.exists().where(
        _projects.c.flavor_id == _flavors.c.id, _projects.c.project_id == project_id))


def _lock_flavor(conn: Connection, flavor_id: str) -> None:
    """Lock the flavor's row for this transaction; FlavorNotFound. Every change of a flavor's
    extra specs, and its deletion, takes this lock first: they never deadlock one another."""
    if conn.execute(sa.select(_flavors.c.id).where(_flavors.c.id == flavor_id)
                    .with_for_update()).first() is None:
        raise FlavorNotFound(flavor_id)


def _select_flavor(conn: Connection, flavor_id: str, visible_to: str | None = None) -> Any:
    query = sa.select(_flavors).where(_flavors.c.id == flavor_id)
    if visible_to is not None:
        query = query.where(_visible(visible_to))
    return conn.execute(query).first()


def get_flavor(engine: Engine, flavor_id: str, *, visible_to: str | None = None) -> FlavorRow:
    """The flavor with its extra specs; :class:`FlavorNotFound`, also when ``visible_to`` (a
    project) is given and may not see it (a private flavor it is not on the list of)."""
    with _transaction(engine) as conn:
        row = _select_flavor(conn, flavor_id, visible_to)
        if row is None:
            raise FlavorNotFound(flavor_id)
        return _flavor_row(row, _specs_of(conn, [flavor_id])[flavor_id])


#: Columns flavors can be listed in the order of (:func:`list_flavors`' ``sort_key``).
FLAVOR_SORT_COLUMNS = frozenset({"id", "name", "ram", "vcpus", "disk", "ephemeral", "swap",
                                 "created_at"})


def list_flavors(engine: Engine, *, marker: str | None = None, limit: int | None = None,
                 min_ram: int | None = None, min_disk: int | None = None,
                 sort_key: str = "id", ascending: bool = True, is_public: bool | None = None,
                 project_id: str | None = None,
                 visible_to: str | None = None) -> list[FlavorRow]:
    """Flavors in the order of ``sort_key`` (one of :data:`FLAVOR_SORT_COLUMNS`), then by id,
    after ``marker`` (:class:`FlavorNotFound` if no such flavor), with at least ``min_ram`` MB
    of RAM and ``min_disk`` GB of disk. Nova's filters: ``is_public`` True, the public
    flavors and the private ones ``project_id`` (if given) is on the list of; False, the
    private ones; None, both. ``visible_to``: only what that project may see (the marker
    too)."""
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
        if is_public is False:
            query = query.where(_flavors.c.is_public == sa.false())
        elif is_public:
            query = query.where(_flavors.c.is_public == sa.true() if project_id is None
                                else _visible(project_id))
        if visible_to is not None:
            query = query.where(_visible(visible_to))
        if marker is not None:
            start = _select_flavor(conn, marker, visible_to)
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
        _lock_flavor(conn, flavor_id)
        conn.execute(sa.delete(_extra_specs).where(_extra_specs.c.flavor_id == flavor_id))
        conn.execute(sa.delete(_projects).where(_projects.c.flavor_id == flavor_id))
        if conn.execute(sa.delete(_flavors).where(_flavors.c.id == flavor_id)).rowcount != 1:
            raise FlavorNotFound(flavor_id)


def set_extra_specs(engine: Engine, flavor_id: str, specs: dict[str, str],
                    check: Callable[[dict[str, str]], None] | None = None) -> dict[str, str]:
    """Add or replace the given extra specs of the flavor; all its specs after. ``check`` gets
    what the flavor's specs would be, under the flavor's lock (a concurrent writer cannot slip
    in between), and raises to refuse: then nothing is written."""
    with _transaction(engine, write=True) as conn:
        _lock_flavor(conn, flavor_id)
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


# -- access lists of private flavors (revision 0009) ----------------------------------------

class FlavorAccessExists(DatabaseError):
    def __init__(self, flavor_id: str, project_id: str):
        self.flavor_id, self.project_id = flavor_id, project_id
        super().__init__(f"project {project_id} is on flavor {flavor_id}'s access list already")


class FlavorAccessNotFound(DatabaseError):
    def __init__(self, flavor_id: str, project_id: str):
        self.flavor_id, self.project_id = flavor_id, project_id
        super().__init__(f"project {project_id} is not on flavor {flavor_id}'s access list")


def _projects_of(conn: Connection, flavor_id: str) -> list[str]:
    return [row.project_id for row in conn.execute(
        sa.select(_projects.c.project_id).where(_projects.c.flavor_id == flavor_id)
        .order_by(_projects.c.project_id))]


def flavor_access(engine: Engine, flavor_id: str) -> list[str]:
    """The projects on the flavor's access list, in order; FlavorNotFound."""
    with _transaction(engine) as conn:
        if _select_flavor(conn, flavor_id) is None:
            raise FlavorNotFound(flavor_id)
        return _projects_of(conn, flavor_id)


def add_flavor_access(engine: Engine, flavor_id: str, project_id: str) -> list[str]:
    """Put ``project_id`` on the flavor's access list; the list after. FlavorNotFound,
    FlavorAccessExists (the primary key decides between racers)."""
    try:
        with _transaction(engine, write=True) as conn:
            _lock_flavor(conn, flavor_id)
            if project_id in _projects_of(conn, flavor_id):
                raise FlavorAccessExists(flavor_id, project_id)
            conn.execute(sa.insert(_projects).values(flavor_id=flavor_id,
                                                     project_id=project_id))
            return _projects_of(conn, flavor_id)
    except sa_exc.IntegrityError:
        raise FlavorAccessExists(flavor_id, project_id) from None


def remove_flavor_access(engine: Engine, flavor_id: str, project_id: str) -> list[str]:
    """Take ``project_id`` off the flavor's access list; the list after. FlavorNotFound,
    FlavorAccessNotFound."""
    with _transaction(engine, write=True) as conn:
        _lock_flavor(conn, flavor_id)
        removed = conn.execute(sa.delete(_projects).where(
            _projects.c.flavor_id == flavor_id, _projects.c.project_id == project_id)).rowcount
        if not removed:
            raise FlavorAccessNotFound(flavor_id, project_id)
        return _projects_of(conn, flavor_id)
