"""computed's key pairs: the public keys users record for their servers.

Owns every statement on the ``key_pairs`` table. Each public function takes the ``Engine`` to use
(from :mod:`computed.db.engine`, which also bounds every call), runs in its own transaction and
returns plain frozen dataclasses (:class:`KeyPairRow`).

Guarantees: a user's key pair names are unique (:class:`KeyPairExists`, the unique constraint
deciding between racers); servers built with a key pair keep their own copy of it.

Threads: any thread; nothing is held between calls.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from computed.db import models
from computed.db.common import DatabaseError
from computed.db.engine import transaction as _transaction
from computed.db.models import KeyPair

_key_pairs = KeyPair.__table__


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
