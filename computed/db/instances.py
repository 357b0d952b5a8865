"""computed's instances: one row per server, the node it holds and the daemon that manages it.

Owns every statement on the ``instances`` table but the quota count (:mod:`.quotas`). Each public
function takes the ``Engine`` to use (from :mod:`computed.db.engine`, which also bounds every
call), runs in its own transaction and returns plain frozen dataclasses (:class:`InstanceRow`),
not ORM objects, so results can cross threads freely.

Guarantees:

* At most one live (not DELETED) instance per node: the database refuses a
  second (see :mod:`computed.db.models`); the refusal surfaces as
  :class:`NodeInUse` carrying the node uuid.
* Every instance write that names an expected (host, member epoch) is a
  compare-and-set on it; :func:`rehome_instance` too: of two adopters racing
  for one instance, exactly one wins.
* :func:`edit_instance` changes a live instance under its row lock: two edits never lose one
  another's change.
* Every instance recorded by this release has a reservation id (Nova's: one per ``POST
  /servers``; :func:`create_instance` gives a new instance one of its own unless told; rows
  of 0.1.0 get theirs from :mod:`computed.upgrade.data_migrations`).

Threads: any thread; the compare-and-sets and row locks above are the database's, so they hold
across threads and processes alike.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import uuid as uuidlib
from collections.abc import Callable, Collection, Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from computed.db import models
from computed.db.common import DatabaseError
from computed.db.engine import transaction as _transaction
from computed.db.models import Instance, InstanceState

_instances = Instance.__table__
#: The security group of a server whose row says none (Nova's create puts servers in it).
DEFAULT_SECURITY_GROUP = "default"


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


class InstanceConflict(DatabaseError):
    """The instance is not in the state (or with the owner) the caller expected."""

    def __init__(self, instance_uuid: str, expected: str, actual: str):
        self.instance_uuid = instance_uuid
        self.expected = expected
        self.actual = actual
        super().__init__(f"instance {instance_uuid}: expected {expected}, found {actual}")


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
    # Who locked it, Nova's "owner" or "admin"; None: unlocked (revision 0009).
    locked_by: str | None = None
    # The security groups it is in, by name (revision 0009; rows before: default).
    security_groups: tuple[str, ...] = (DEFAULT_SECURITY_GROUP,)
    # The build's scheduler hints (``os:scheduler_hints``), as given (revision 0011).
    scheduler_hints: dict[str, Any] | None = None

    @property
    def live(self) -> bool:
        return self.state != models.DELETED


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
                       tags=tuple(json.loads(row.tags)) if row.tags else (),
                       locked_by=row.locked_by,
                       security_groups=tuple(json.loads(row.security_groups))
                       if row.security_groups is not None else (DEFAULT_SECURITY_GROUP,),
                       scheduler_hints=json.loads(row.scheduler_hints)
                       if row.scheduler_hints else None)


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


def new_reservation_id() -> str:
    """A reservation id of the compute API's form: ``r-`` and 8 hex digits, as Nova's."""
    return 'r-' + uuidlib.uuid4().hex[:8]


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
                    flavor: dict[str, Any] | None = None,
                    reservation_id: str | None = None) -> InstanceRow:
    """Record a new instance, managed by (``host``, ``member_epoch``), of ``project_id``, with
    ``reservation_id`` (a new one of its own when not given, as a server created alone).
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
                  flavor=json.dumps(flavor, sort_keys=True) if flavor is not None else None,
                  reservation_id=reservation_id or new_reservation_id())
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
                expect_member_epoch: int | None, expect_unplaced: bool = False) -> list[Any]:
    conditions = [_instances.c.uuid == uuid]
    if expect_unplaced:
        conditions += [_instances.c.host.is_(None), _instances.c.node_uuid.is_(None)]
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
                      node_uuid: str | None = None,
                      expect_unplaced: bool = False) -> InstanceRow:
    """Update the instance if it matches the expectations; the row after, or an error saying
    which expectation failed."""
    try:
        with _transaction(engine, write=True) as conn:
            result = conn.execute(sa.update(_instances).where(
                *_conditions(uuid, expect_state, expect_host, expect_member_epoch,
                             expect_unplaced))
                .values(**values))
            row = _select_instance(conn, uuid)
            if row is None:
                raise InstanceNotFound(uuid)
            if result.rowcount != 1:
                expected = {"state": None if expect_state is None else _describe(expect_state),
                            "host": expect_host,
                            "member epoch": expect_member_epoch,
                            "placement": "none yet" if expect_unplaced else None}
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
                       expect_unplaced: bool = False,
                       release_node: bool = False) -> InstanceRow:
    """Set the instance's state and fault (``fault`` replaces the stored one; None clears it).

    With ``expect_*`` it is a compare-and-set: raises :class:`InstanceConflict`
    when the instance is not in one of ``expect_state`` or not held by
    (``expect_host``, ``expect_member_epoch``) — how a daemon that lost an
    instance to a re-homing finds out — or (``expect_unplaced``) has a node or a host
    (a server the compute API admitted and placed meanwhile). DELETED frees the node for another
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
                             expect_member_epoch, expect_unplaced=expect_unplaced)


#: What a rebuild may change on the row besides its image and state (Nova's rebuild fields).
REBUILD_DETAILS = frozenset({"name", "metadata", "description", "access_ip_v4", "access_ip_v6",
                             "key_name", "key_type", "key_data", "user_data", "config_drive"})


def record_rebuild(engine: Engine, uuid: str, state: InstanceState, image: str | None,
                   details: dict[str, Any], *, expect_state: ExpectedStates,
                   expect_host: str, expect_member_epoch: int | None) -> InstanceRow:
    """Record a rebuild: ``state`` (REBUILDING or REBUILDING_OFF), the new ``image``, the
    fault cleared and ``details`` (:data:`REBUILD_DETAILS`; ``metadata`` a whole dict) in one
    compare-and-set on (state, host, member epoch), so a rebuild is recorded whole or not at
    all: :class:`InstanceConflict` when the instance moved meanwhile."""
    unknown = set(details) - REBUILD_DETAILS
    if unknown:
        raise ValueError(f"not rebuild details: {sorted(unknown)}")
    values = dict(details)
    if "metadata" in values:
        metadata = values.pop("metadata")
        values["user_metadata"] = json.dumps(metadata, sort_keys=True) if metadata else None
    values.update(state=_state(state), image=image, fault=None, updated_at=models.utcnow())
    return _update_expecting(engine, uuid, values, expect_state, expect_host,
                             expect_member_epoch)


def assign_node(engine: Engine, uuid: str, node_uuid: str, host: str, member_epoch: int, *,
                expect_state: ExpectedStates | None = models.BUILDING,
                expect_host: str | None = None, expect_member_epoch: int | None = None,
                expect_unplaced: bool = False, fault: str | None = None) -> InstanceRow:
    """Schedule the instance on ``node_uuid``, managed by (``host``, ``member_epoch``), with
    ``fault`` (a build retried on another node keeps its attempts there). Raises
    :class:`NodeInUse` if the node already hosts another live instance, and with
    ``expect_*`` :class:`InstanceConflict` as :func:`set_instance_state` does
    (``expect_unplaced``: no node nor host yet, a server the compute API admitted)."""
    values = dict(node_uuid=node_uuid, host=host, member_epoch=member_epoch, fault=fault,
                  updated_at=models.utcnow())
    return _update_expecting(engine, uuid, values, expect_state, expect_host,
                             expect_member_epoch, node_uuid, expect_unplaced)


def _unplaced() -> list[Any]:
    return [_instances.c.state == models.BUILDING, _instances.c.host.is_(None),
            _instances.c.node_uuid.is_(None)]


def take_admitted(engine: Engine, uuid: str, seen: datetime.datetime) -> InstanceRow | None:
    """Take an admitted instance (BUILDING, no node nor host) to place it: a compare-and-set
    of its ``updated_at`` from ``seen`` (what the taker read) to now; the row after, or None
    when it changed meanwhile (taken by another process, placed, deleted). Of two takers
    that read the same row, one gets it."""
    now = models.utcnow()
    with _transaction(engine, write=True) as conn:
        result = conn.execute(sa.update(_instances).where(
            _instances.c.uuid == uuid, _instances.c.updated_at == seen, *_unplaced())
            .values(updated_at=now))
        if result.rowcount != 1:
            return None
        return _instance_row(_select_instance(conn, uuid))


def admitted_instances(engine: Engine, untouched_since: datetime.datetime,
                       limit: int) -> list[InstanceRow]:
    """At most ``limit`` admitted instances (BUILDING, no node nor host) nobody took since
    ``untouched_since``, oldest first."""
    with _transaction(engine) as conn:
        rows = conn.execute(sa.select(_instances).where(
            *_unplaced(), _instances.c.updated_at < untouched_since)
            .order_by(_instances.c.created_at, _instances.c.uuid).limit(limit))
        return [_instance_row(row) for row in rows]


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
                              "key_name", "key_type", "key_data", "user_data", "config_drive",
                              "scheduler_hints"})


def set_instance_details(engine: Engine, uuid: str, **details: str | bool | None
                         ) -> InstanceRow:
    """Record the compute API's fields of a new instance (:data:`INSTANCE_DETAILS`: what
    Nova's create takes besides what scheduling needs); :class:`InstanceNotFound` if there is
    no such instance."""
    unknown = set(details) - INSTANCE_DETAILS
    if unknown:
        raise ValueError(f"not instance details: {sorted(unknown)}")
    if details.get("scheduler_hints") is not None:
        details["scheduler_hints"] = json.dumps(details["scheduler_hints"], sort_keys=True)
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
                      "tags", "locked_by", "security_groups"})


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
        if "security_groups" in values:  # [] is none; NULL would be default
            values["security_groups"] = json.dumps(list(values["security_groups"]))
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

