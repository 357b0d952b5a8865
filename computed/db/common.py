"""What computed's database modules share: their base error, the retry of one transaction, and
the insert of a row to lock.

Owns :class:`DatabaseError`, the base of every error the aggregate modules
(:mod:`.providers`, :mod:`.instances`, :mod:`.flavors`, :mod:`.quotas`, :mod:`.key_pairs`) raise on
purpose; :func:`deadlock_retries`, the attempts of a transaction that deadlocks (or fails to
serialise): such a transaction is tried again at once, a bounded number of times; any other error
propagates unchanged; and :func:`insert_missing`, which makes sure a row exists (to be locked
next) on every dialect, a racer inserting it meanwhile being no error.

Threads: no state; :func:`deadlock_retries` returns a new retrying object per call, used by the
calling thread only; :func:`insert_missing` runs on the caller's connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
import tenacity
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection

from computed.db.engine import is_deadlock

DEADLOCK_RETRIES = 5  # attempts of one transaction that deadlocks (or fails to serialise)


def deadlock_retries(may_retry: Callable[[], bool] = lambda: True) -> tenacity.Retrying:
    """The attempts of one transaction: one that deadlocks (or fails to serialise) is tried
    again at once while ``may_retry()`` says so, up to :data:`DEADLOCK_RETRIES` attempts in all;
    any other error, or the last attempt's, propagates."""
    return tenacity.Retrying(
        stop=tenacity.stop_after_attempt(DEADLOCK_RETRIES), reraise=True,
        retry=tenacity.retry_if_exception(lambda error: isinstance(error, sa_exc.DBAPIError)
                                          and is_deadlock(error) and may_retry()))


class DatabaseError(Exception):
    """Base of the errors computed's database modules raise on purpose."""


def insert_missing(conn: Connection, table: sa.Table, key: str, values: dict[str, Any]) -> None:
    """Insert the row ``values`` unless ``table`` has one with the same ``key`` column already,
    without failing if a racer inserts it meanwhile: the row exists after, for the caller to
    lock."""
    dialect = conn.dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql
        stmt = postgresql.insert(table).values(**values).on_conflict_do_nothing()
    elif dialect == "sqlite":
        from sqlalchemy.dialects import sqlite
        stmt = sqlite.insert(table).values(**values).on_conflict_do_nothing()
    elif dialect in ("mysql", "mariadb"):
        from sqlalchemy.dialects import mysql
        insert = mysql.insert(table).values(**values)
        # A no-op update rather than INSERT IGNORE: on a duplicate it takes the row's exclusive
        # lock at once; IGNORE would take a shared one, and two transactions upgrading shared
        # locks for the caller's FOR UPDATE deadlock.
        stmt = insert.on_duplicate_key_update({key: insert.inserted[key]})
    else:
        if conn.execute(sa.select(table.c[key]).where(table.c[key] == values[key])
                        .with_for_update()).first() is not None:
            return
        stmt = sa.insert(table).values(**values)
    conn.execute(stmt)
