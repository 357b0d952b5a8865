"""computed's record of the provider reports it applied to Placement: one row per node.

Owns every statement on the ``providers`` table. Each public function takes the ``Engine`` to
use (from :mod:`computed.db.engine`, which also bounds every call), runs in its own transaction
and returns plain frozen dataclasses (:class:`ProviderRow`), not ORM objects.

Guarantees:

* :func:`apply_reports_if_newer` applies the reports of each provider in strictly increasing
  (claim_epoch, seq) order, across threads and processes: the batch's rows are locked (in uuid
  order) for the whole read-compare-apply-store (``SELECT ... FOR UPDATE SKIP LOCKED`` on
  PostgreSQL and MySQL; on sqlite the database write lock, taken up front by ``BEGIN
  IMMEDIATE``), so two reporters never both apply one report, and an older report is never
  applied after a newer one. A row another transaction holds is skipped (never waited for)
  and answered busy; rows are inserted beforehand in a short transaction of their own, so the
  batch's transaction waits on no other.
* :func:`record_placement_generation` (the resync's repair) runs under the same row lock and
  changes nothing unless the row still holds the (claim_epoch, seq) the caller read: a repair
  never overtakes, nor undoes, a report.

Threads: any thread; the ordering above holds across threads because it is the database's row
lock that decides, not anything in this process.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Collection, Iterator, Set
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from computed.db import models
from computed.db.common import deadlock_retries, insert_missing
from computed.db.engine import transaction as _transaction
from computed.db.models import Provider

#: (claim_epoch, seq) of a provider row inserted only to be locked; real reports have both >= 0
#: (public for what reads the table directly: bench.report_bench counts the applied rows).
UNAPPLIED = -1
#: Most providers :func:`applied_states` looks up by key; more are read in one pass.
LOOKUP_AT_MOST = 5000

_providers = Provider.__table__


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
    """What the ``apply`` callback of :func:`apply_reports_if_newer` answers for each report it
    applied: the new state's JSON (None: the provider was deleted) and Placement's generation
    after the write."""

    state: str | None
    placement_generation: int | None = None


def _provider_row(row: Any) -> ProviderRow:
    return ProviderRow(uuid=row.uuid, claim_epoch=row.claim_epoch, seq=row.seq, host=row.host,
                       state=row.state, deleted=bool(row.deleted), updated_at=row.updated_at,
                       placement_generation=row.placement_generation)


def _insert_unapplied(conn: Connection, uuid: str, host: str) -> None:
    """Make sure the provider has a row to lock, without failing if a racer made it first."""
    values = dict(uuid=uuid, claim_epoch=UNAPPLIED, seq=UNAPPLIED, host=host, state=None,
                  deleted=True, updated_at=models.utcnow())
    insert_missing(conn, _providers, "uuid", values)


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
    """Rows to lock for every report's provider that has none, in one round trip where the
    backend allows (in the order given)."""
    now = models.utcnow()
    values = [dict(uuid=report.uuid, claim_epoch=UNAPPLIED, seq=UNAPPLIED, host=report.host,
                   state=None, deleted=True, updated_at=now) for report in reports]
    dialect = conn.dialect.name
    # One statement executed with many parameter sets, not ``.values(values)``: SQLAlchemy
    # compiles a multi-row VALUES statement anew for every batch (the rows are part of it), 8 %
    # of a reporter's CPU in a cold start; this one is compiled once and cached. SQLAlchemy
    # still sends the rows as one multi-row INSERT ("insertmanyvalues"), but with ON CONFLICT
    # only for a statement that has RETURNING (without, one round trip per row): hence the
    # RETURNING, whose rows nobody reads.
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql
        conn.execute(postgresql.insert(_providers).on_conflict_do_nothing()
                     .returning(_providers.c.uuid), values)
    elif dialect == "sqlite":
        from sqlalchemy.dialects import sqlite
        conn.execute(sqlite.insert(_providers).on_conflict_do_nothing()
                     .returning(_providers.c.uuid), values)
    else:
        for report in reports:
            _insert_unapplied(conn, report.uuid, report.host)


def apply_reports_if_newer(
        engine: Engine, reports: Collection[ReportKey],
        apply: Callable[[list[tuple[ReportKey, ProviderRow | None]]], dict[str, Applied]],
) -> BatchResult:
    """Apply a batch of reports, each only if newer (a strictly greater (claim_epoch, seq)) than
    its provider's last applied one, in ONE transaction.

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
    attempts = deadlock_retries(lambda: not applied)
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
                    row = None if raw.claim_epoch == UNAPPLIED else _provider_row(raw)
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

    In one transaction, with the provider's row locked (``FOR UPDATE``, waiting for a batch of
    :func:`apply_reports_if_newer` that holds it): when the row is gone, deleted, or holds
    another (claim_epoch, seq) (a report was applied since the caller read it), return False
    without calling ``repair``. Otherwise call ``repair(row)`` — it makes Placement hold the
    row's state again and returns Placement's generation after that — and store the
    generation; the report columns are left as they are.
    If ``repair`` raises, nothing is stored and the exception propagates.
    """
    repaired = False
    attempts = deadlock_retries(lambda: not repaired)
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
            _providers.c.claim_epoch != UNAPPLIED).order_by(_providers.c.uuid))
        return [_provider_row(row) for row in rows]


def applied_states(engine: Engine, page: int = 1000,
                   uuids: Set[str] | None = None) -> Iterator[tuple[str, str | None]]:
    """``(uuid, state)`` of every provider a report was applied to (state None for a deleted
    one), as the JSON text stored, read ``page`` rows at a time (a server-side cursor on
    PostgreSQL): the fleet-wide listing compares 50,000 of them without holding them all. The
    transaction lasts until the iterator is exhausted or closed.

    ``uuids``: only those providers (a round confirming what the last one found). Up to
    :data:`LOOKUP_AT_MOST` of them are looked up by key, ``page`` at a time; more are read in one
    pass over the table, skipping the others (tens of thousands of lookups by key cost the
    database more than one scan)."""
    applied = _providers.c.claim_epoch != UNAPPLIED
    columns = (_providers.c.uuid, _providers.c.state)
    if uuids is not None and len(uuids) <= LOOKUP_AT_MOST:
        wanted = sorted(uuids)
        with _transaction(engine) as conn:
            for start in range(0, len(wanted), page):
                rows = conn.execute(sa.select(*columns).where(
                    applied, _providers.c.uuid.in_(wanted[start:start + page])))
                for row in rows:
                    yield row.uuid, row.state
        return
    with _transaction(engine) as conn:
        result = conn.execution_options(stream_results=True, yield_per=page).execute(
            sa.select(*columns).where(applied))
        for row in result:
            if uuids is None or row.uuid in uuids:
                yield row.uuid, row.state


def provider_uuids(engine: Engine) -> set[str]:
    """Uuids of the providers applied and not deleted."""
    with _transaction(engine) as conn:
        rows = conn.execute(sa.select(_providers.c.uuid).where(
            _providers.c.deleted == sa.false(), _providers.c.claim_epoch != UNAPPLIED))
        return {row.uuid for row in rows}


def live_providers(engine: Engine) -> list[ProviderRow]:
    """The providers applied and not deleted, with their last applied state, in uuid order:
    the nodes as the compute API shows them (``os-hypervisors``)."""
    with _transaction(engine) as conn:
        rows = conn.execute(sa.select(_providers).where(
            _providers.c.deleted == sa.false(), _providers.c.claim_epoch != UNAPPLIED)
            .order_by(_providers.c.uuid))
        return [_provider_row(row) for row in rows]
