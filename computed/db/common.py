"""What computed's database modules share: their base error and the retry of one transaction.

Owns :class:`DatabaseError`, the base of every error the aggregate modules
(:mod:`.providers`, :mod:`.instances`, :mod:`.flavors`, :mod:`.quotas`, :mod:`.key_pairs`) raise on
purpose, and :func:`deadlock_retries`, the attempts of a transaction that deadlocks (or fails to
serialise): such a transaction is tried again at once, a bounded number of times; any other error
propagates unchanged.

Threads: no state; :func:`deadlock_retries` returns a new retrying object per call, used by the
calling thread only.
"""

from __future__ import annotations

from collections.abc import Callable

import tenacity
from sqlalchemy import exc as sa_exc

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

