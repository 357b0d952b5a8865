"""Online data migrations: rows the previous release wrote that this release's code fills in.

Owns the registry (:data:`MIGRATIONS`) and the way ``computed-manage db online_data_migrations``
runs it (:func:`run`, shaped as ``nova-manage db online_data_migrations``). A schema revision
only expands (:mod:`computed.upgrade.migrations`): a value the new code writes for every new row
is left empty in rows the previous release wrote, and is filled here, while the services run,
in batches, after every service runs the new release (before that, old code keeps writing rows
without it). The next release may then rely on it (a blocker revision that checks nothing is
left, then NOT NULL), as Nova does.

Each migration is a :class:`DataMigration`: ``migrate(engine, count)`` rewrites at most
``count`` rows in one transaction and returns ``(found, done)`` (rows it looked at, rows it
rewrote); ``pending(engine)`` counts the rows left (``computed-status upgrade check``). Each
is resumable and safe beside the services and beside another run: it selects rows that still
need it and rewrites each only if it still does (``WHERE ... IS NULL``), so an interrupted run
is simply run again.

:func:`run` is the loop (no I/O of its own: it calls the migrations it is given): batches of
``batch`` rows per migration per pass, passes until one rewrites nothing, or until
``max_count`` rows are rewritten. A migration that raises is not called again in that run;
the others go on. Exit status (nova-manage's): 0 nothing left to do, 1 ``max_count`` was
reached and more may be left (run it again), 2 a migration failed and the last pass rewrote
nothing.

The migrations (this release, from 0.1.0):

* ``instance_reservation_ids``: every instance has a reservation id (Nova's ``r-xxxxxxxx``,
  one per ``POST /servers``, which ``?reservation_id=`` finds and admins see as
  ``OS-EXT-SRV-ATTR:reservation_id`` from 2.3); instances 0.1.0 recorded (revision 0006 added
  the column) have none: each gets one of its own, as Nova gives a server created alone (and
  as this release records every new instance with one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from computed.db import instances as db_instances
from computed.db import models

#: Rows per migration per pass (nova-manage's default batch).
BATCH = 50

EXIT_DONE = 0
EXIT_MORE = 1
EXIT_ERRORS = 2


@dataclass(frozen=True)
class DataMigration:
    name: str
    #: ``(engine, count) -> (found, done)``: at most ``count`` rows, one transaction.
    migrate: Callable[[Engine, int], tuple[int, int]]
    #: ``engine -> rows left``.
    pending: Callable[[Engine], int]


# -- the migrations ------------------------------------------------------------------------

_instances = models.Instance.__table__


def _reservation_ids(engine: Engine, count: int) -> tuple[int, int]:
    missing = _instances.c.reservation_id.is_(None)
    with engine.begin() as conn:
        uuids = conn.execute(sa.select(_instances.c.uuid).where(missing)
                             .order_by(_instances.c.uuid).limit(count)).scalars().all()
        done = 0
        for instance_uuid in uuids:
            # Only if still missing: the API may have set it since (its create writes the row,
            # then its details), and another run may be at it too.
            done += conn.execute(sa.update(_instances).where(
                _instances.c.uuid == instance_uuid, missing).values(
                reservation_id=db_instances.new_reservation_id())).rowcount
    return len(uuids), done


def _reservation_ids_pending(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(_instances).where(
            _instances.c.reservation_id.is_(None))).scalar_one()


#: This release's online data migrations, in the order they run.
MIGRATIONS: tuple[DataMigration, ...] = (
    DataMigration('instance_reservation_ids', _reservation_ids, _reservation_ids_pending),
)


# -- the loop ------------------------------------------------------------------------------

@dataclass
class Outcome:
    #: name -> [found, done], summed over the passes.
    totals: dict[str, list[int]] = field(default_factory=dict)
    #: name -> the one line its failure said.
    errors: dict[str, str] = field(default_factory=dict)
    exit_status: int = EXIT_DONE


def run(migrations: Mapping[str, Callable[[int], tuple[int, int]]],
        max_count: int | None = None, batch: int = BATCH) -> Outcome:
    """Run ``migrations`` (name -> ``count -> (found, done)``) in passes until a pass rewrites
    nothing, or ``max_count`` rows are rewritten; see the module's docstring."""
    if max_count is not None and max_count < 1:
        raise ValueError(f'max_count must be at least 1, not {max_count}')
    if batch < 1:
        raise ValueError(f'batch must be at least 1, not {batch}')
    outcome = Outcome(totals={name: [0, 0] for name in migrations})
    total = 0
    while True:
        ran = 0
        for name, migrate in migrations.items():
            if name in outcome.errors:
                continue
            count = batch if max_count is None else min(batch, max_count - total - ran)
            if count <= 0:
                break
            try:
                found, done = migrate(count)
            except Exception as exc:  # one migration's failure: named, the others go on
                outcome.errors[name] = f'{type(exc).__name__}: {" ".join(str(exc).split())}'
                continue
            outcome.totals[name][0] += found
            outcome.totals[name][1] += done
            ran += done
        total += ran
        if ran == 0:
            outcome.exit_status = EXIT_ERRORS if outcome.errors else EXIT_DONE
            return outcome
        if max_count is not None and total >= max_count:
            outcome.exit_status = EXIT_MORE
            return outcome


def bound(engine: Engine, migrations: Sequence[DataMigration] = MIGRATIONS
          ) -> dict[str, Callable[[int], tuple[int, int]]]:
    """``migrations`` bound to ``engine``, as :func:`run` takes them."""
    return {m.name: (lambda count, m=m: m.migrate(engine, count)) for m in migrations}


def pending(engine: Engine, migrations: Sequence[DataMigration] = MIGRATIONS
            ) -> dict[str, int]:
    """Rows each migration has left."""
    return {m.name: m.pending(engine) for m in migrations}
