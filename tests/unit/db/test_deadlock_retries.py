"""Deadlocks are retried at once, DEADLOCK_RETRIES attempts in all, never after a write to
Placement began; any other database error propagates at once."""

from __future__ import annotations

import pytest
from sqlalchemy import exc as sa_exc

from computed.db import common as db_common
from computed.db import providers as db_providers
from computed.db import quotas as db_quotas


class _Orig(Exception):
    def __init__(self, pgcode):
        super().__init__(pgcode)
        self.pgcode = pgcode


def _db_error(pgcode: str) -> sa_exc.DBAPIError:
    return sa_exc.DBAPIError("SELECT 1", {}, _Orig(pgcode))


def test_a_deadlock_before_the_write_is_retried_up_to_the_limit(engine):
    calls = []

    def decide(usage):
        calls.append(usage)
        raise _db_error("40P01")  # deadlock detected

    with pytest.raises(sa_exc.DBAPIError):
        db_quotas.reserve_quota(engine, "p1", "i1", "CUSTOM_X", decide, ttl=60)
    assert len(calls) == db_common.DEADLOCK_RETRIES


def test_a_deadlock_that_goes_away_is_not_seen(engine):
    calls = []

    def decide(usage):
        calls.append(usage)
        if len(calls) < 3:
            raise _db_error("40001")  # serialization failure

    db_quotas.reserve_quota(engine, "p1", "i1", "CUSTOM_X", decide, ttl=60)
    assert len(calls) == 3


def test_another_database_error_is_not_retried(engine):
    calls = []

    def decide(usage):
        calls.append(usage)
        raise _db_error("23505")  # unique violation

    with pytest.raises(sa_exc.DBAPIError):
        db_quotas.reserve_quota(engine, "p1", "i1", "CUSTOM_X", decide, ttl=60)
    assert len(calls) == 1


def test_a_deadlock_once_apply_ran_is_the_callers(engine):
    calls = []

    def apply(newer):
        calls.append(newer)
        raise _db_error("40P01")

    with pytest.raises(sa_exc.DBAPIError):
        db_providers.apply_reports_if_newer(engine, [db_providers.ReportKey("u1", 1, 1, "c1")],
                                            apply)
    assert len(calls) == 1
