"""apply_reports_if_newer: a batch of provider reports in one transaction (issue 13 item 9)."""

import pytest

from computed.db import providers as db_providers
from tests import database

A = "aaaaaaaa-0000-0000-0000-000000000000"
B = "bbbbbbbb-0000-0000-0000-000000000000"
C = "cccccccc-0000-0000-0000-000000000000"


def key(uuid, claim_epoch=5, seq=1):
    return db_providers.ReportKey(uuid, claim_epoch, seq, "c1")


def pair(engine, uuid):
    row = database.get_provider(engine, uuid)
    return None if row is None else (row.claim_epoch, row.seq)


def test_newer_reports_go_to_one_apply_call_in_uuid_order_and_only_applied_ones_are_stored(
        engine):
    assert database.apply_report_if_newer(engine, B, 5, 3, "c1", lambda row: '{"b": 3}')
    calls = []

    def apply(newer):
        calls.append([(k.uuid, None if row is None else row.seq) for k, row in newer])
        return {A: db_providers.Applied('{"a": 1}', 7)}  # C "failed": not returned

    result = db_providers.apply_reports_if_newer(engine, [key(C), key(B, seq=2), key(A)], apply)
    assert calls == [[(A, None), (C, None)]]  # B is stale: never offered
    assert result == db_providers.BatchResult(frozenset({A}), frozenset({B}), ())
    assert (pair(engine, A), pair(engine, B), pair(engine, C)) == ((5, 1), (5, 3), None)
    assert database.get_provider(engine, A).placement_generation == 7
    assert database.get_provider(engine, A).state == '{"a": 1}'


def test_a_delete_is_stored_as_deleted(engine):
    db_providers.apply_reports_if_newer(engine, [key(A)],
                                        lambda newer: {A: db_providers.Applied('{}', 1)})
    db_providers.apply_reports_if_newer(engine, [key(A, seq=2)],
                                        lambda newer: {A: db_providers.Applied(None)})
    row = database.get_provider(engine, A)
    assert row.deleted and row.state is None and row.seq == 2


def test_apply_raising_stores_nothing(engine):
    def apply(newer):
        raise RuntimeError("placement")

    with pytest.raises(RuntimeError):
        db_providers.apply_reports_if_newer(engine, [key(A), key(B)], apply)
    assert pair(engine, A) is None and pair(engine, B) is None
    # The rows inserted to be locked are not "applied": a later report applies.
    assert db_providers.apply_reports_if_newer(engine, [key(A)],
                                               lambda newer: {A: db_providers.Applied('{}')}) \
        .applied == {A}


@pytest.mark.parametrize("reports, message", [
    ([key(A), key(A, seq=2)], "more than once"),
    ([key(A, seq=-1)], "must be >= 0"),
])
def test_bad_batches_are_refused_before_anything_is_written(engine, reports, message):
    with pytest.raises(ValueError, match=message):
        db_providers.apply_reports_if_newer(engine, reports, lambda newer: {})
    assert pair(engine, A) is None


def test_an_empty_batch_does_nothing(engine):
    assert db_providers.apply_reports_if_newer(engine, [],
                                               lambda newer: {}) == db_providers.BatchResult(
        frozenset(), frozenset(), ())


def test_the_rows_to_lock_are_inserted_by_one_statement_compiled_once(engine):
    # A multi-row VALUES statement is compiled anew for every batch size (8 % of a reporter's
    # CPU in a cold start); the insert of the rows to lock must be one compiled statement,
    # from SQLAlchemy's cache after the first batch, whatever the next batches' sizes.
    import sqlalchemy as sa

    inserts = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT"):
            inserts.append(context.compiled)

    sa.event.listen(engine, "before_cursor_execute", seen)
    uuids = [f"{i:08x}-0000-0000-0000-000000000000" for i in range(1, 10)]
    for batch in (uuids[:2], uuids[2:5], uuids[5:9]):
        result = db_providers.apply_reports_if_newer(
            engine, [key(u) for u in batch],
            lambda newer: {k.uuid: db_providers.Applied("{}") for k, _ in newer})
        assert result.applied == frozenset(batch)
    assert len(inserts) >= 3 and all(compiled is inserts[0] for compiled in inserts), inserts
    assert all(pair(engine, u) == (5, 1) for u in uuids)
