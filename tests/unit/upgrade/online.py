"""Backend-neutral checks of the online data migrations on a real database, given its URL: run
on sqlite by tests/unit/upgrade/test_data_migrations.py, on PostgreSQL and MariaDB by
tests/functional/test_online_migrations.py."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import sqlalchemy as sa

from computed import db
from computed.db import engine as db_engine
from computed.db import instances as db_instances
from computed.db import models
from computed.upgrade import data_migrations, migrations
from computed.version import PREVIOUS_RELEASE
from tests import cli

RESERVATION = re.compile(r'r-[0-9a-f]{8}')


def manage(tmp_path, url: str, *args: str):
    """``computed-manage db *args`` in-process against ``url`` (no ZooKeeper, no broker)."""
    conf = tmp_path / 'computed.conf'
    conf.write_text(f'[DEFAULT]\ntransport_url = fake://\n[coordination]\nbackend_url = '
                    f'file://{tmp_path}/coordination\n[database]\nconnection = {url}\n')
    return cli.run('computed-manage', '--config-file', conf, 'db', *args, home=tmp_path,
                   env={'PATH': '/usr/bin:/bin'})


def expand_head() -> str:
    return migrations.expand_head(migrations.read_revisions(), PREVIOUS_RELEASE.schema_head)


def old_instances(engine, count: int) -> list[str]:
    """Instances as the previous release records them: no reservation id (0.1.0 had no such
    column; its rows hold NULL once 0006 added it)."""
    uuids = [str(uuid.uuid4()) for _ in range(count)]
    table = models.Instance.__table__
    for instance_uuid in uuids:
        db_instances.create_instance(engine, instance_uuid, 'CUSTOM_GOLD', state=models.ERROR,
                                     fault='no valid host')
    with engine.begin() as conn:
        conn.execute(sa.update(table).where(table.c.uuid.in_(uuids))
                     .values(reservation_id=None))
    return uuids


def _reservations(engine) -> dict[str, str | None]:
    table = models.Instance.__table__
    with engine.connect() as conn:
        return dict(conn.execute(sa.select(table.c.uuid, table.c.reservation_id)).all())


def check_real_migrations(url: str) -> None:
    db.sync(url)
    engine = db_engine.engine_from_url(url)
    try:
        old = old_instances(engine, 7)
        kept = str(uuid.uuid4())
        db_instances.create_instance(engine, kept, 'CUSTOM_GOLD', state=models.ERROR, fault='x',
                                     reservation_id='r-0000abcd')
        # This release records every new instance with a reservation id of its own.
        new = str(uuid.uuid4())
        assert RESERVATION.fullmatch(db_instances.create_instance(
            engine, new, 'CUSTOM_GOLD', state=models.ERROR, fault='x').reservation_id)
        assert data_migrations.pending(engine) == {'instance_reservation_ids': 7}
        bound = data_migrations.bound(engine)
        first = data_migrations.run(bound, max_count=3, batch=2)
        assert first.exit_status == data_migrations.EXIT_MORE
        assert first.totals == {'instance_reservation_ids': [3, 3]}
        assert data_migrations.pending(engine) == {'instance_reservation_ids': 4}
        rest = data_migrations.run(bound, batch=2)
        assert rest.exit_status == data_migrations.EXIT_DONE
        assert rest.totals == {'instance_reservation_ids': [4, 4]}
        values = _reservations(engine)
        assert values[kept] == 'r-0000abcd'  # a row that has one keeps it
        assert all(RESERVATION.fullmatch(values[u]) for u in old)
        assert len({values[u] for u in old}) == len(old)  # each its own, as Nova's
        assert data_migrations.pending(engine) == {'instance_reservation_ids': 0}
        again = data_migrations.run(bound)
        assert again.exit_status == data_migrations.EXIT_DONE
        assert again.totals == {'instance_reservation_ids': [0, 0]}
        assert _reservations(engine) == values
    finally:
        engine.dispose()


def check_command(url: str, manage: Callable[..., object]) -> None:
    """``computed-manage db online_data_migrations``: ``manage(*args)`` runs ``computed-manage
    db *args`` against ``url`` and returns the result (returncode, stdout, stderr)."""
    synced = manage('sync')
    assert synced.returncode == 0, synced
    engine = db_engine.engine_from_url(url)
    try:
        old_instances(engine, 5)
        limited = manage('online_data_migrations', '--max-count', '2')
        assert limited.returncode == 1, limited
        assert re.search(r'\| instance_reservation_ids +\| +2 \| +2 \|', limited.stdout)
        assert 'more may be left, run it again' in limited.stdout
        assert limited.stderr == ''
        rest = manage('online_data_migrations')
        assert rest.returncode == 0, rest
        assert re.search(r'\| instance_reservation_ids +\| +3 \| +3 \|', rest.stdout)
        assert 'nothing left to migrate' in rest.stdout
        assert all(RESERVATION.fullmatch(v) for v in _reservations(engine).values())
        done = manage('online_data_migrations')
        assert done.returncode == 0
        assert re.search(r'\| instance_reservation_ids +\| +0 \| +0 \|', done.stdout)
    finally:
        engine.dispose()
