"""What the tests read and write of computed's database that the product does not need.

Owns three shortcuts over the public query modules (:mod:`computed.db.providers`,
:mod:`computed.db.quotas`), kept out of the product because no service calls them:
:func:`apply_report_if_newer` applies ONE report the way the reporter applies batches (through
:func:`computed.db.providers.apply_reports_if_newer`, so the tests exercise the product's path),
:func:`get_provider` reads one provider's applied row, :func:`quota_reservations` lists a
project's build reservations.

Threads: any thread; nothing is shared between calls.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from computed.db import models
from computed.db import providers as db_providers

#: Seconds between two tries of a report whose row another transaction holds.
BUSY_PAUSE = 0.01


def apply_report_if_newer(
        engine: Engine, uuid: str, claim_epoch: int, seq: int, host: str,
        apply: Callable[[db_providers.ProviderRow | None], str | db_providers.Applied | None],
) -> bool:
    """Apply one report of ``uuid`` if it is newer than the last applied; True if applied.

    A batch of one: ``apply(row)`` gets the last applied row (None: never applied) and returns
    the new state's JSON (None: the provider was deleted) or an
    :class:`~computed.db.providers.Applied`. A row another transaction holds is tried again
    (the batch path skips it, answering it busy), so the call returns once the report was
    compared with the stored one, as the reporter's resend would."""
    report = db_providers.ReportKey(uuid, claim_epoch, seq, host)

    def apply_batch(newer: list[tuple[db_providers.ReportKey, db_providers.ProviderRow | None]]
                    ) -> dict[str, db_providers.Applied]:
        [(_report, row)] = newer
        result = apply(row)
        return {uuid: result if isinstance(result, db_providers.Applied)
                else db_providers.Applied(result)}

    while True:
        outcome = db_providers.apply_reports_if_newer(engine, [report], apply_batch)
        if not outcome.busy:
            return uuid in outcome.applied
        time.sleep(BUSY_PAUSE)


def get_provider(engine: Engine, uuid: str) -> db_providers.ProviderRow | None:
    """The provider's last applied report, deleted or not; None if never applied."""
    return next((row for row in db_providers.applied_providers(engine) if row.uuid == uuid),
                None)


def quota_reservations(engine: Engine, project_id: str) -> list[str]:
    """The instance uuids of the project's build reservations."""
    table = models.QuotaReservation.__table__
    with engine.connect() as conn:
        return [row.instance_uuid for row in conn.execute(
            sa.select(table.c.instance_uuid).where(table.c.project_id == project_id))]


def copy_sqlite(template: Path, path: Path) -> str:
    """A copy of the sqlite database ``template`` at ``path`` (SQLite's online backup: a
    consistent copy, whatever the template's journal holds); its URL. What the unit tests'
    ``engine`` fixtures hand each test instead of running every migration again."""
    with contextlib.closing(sqlite3.connect(template)) as source, \
            contextlib.closing(sqlite3.connect(path)) as copy:
        source.backup(copy)
    return f"sqlite:///{path}"
