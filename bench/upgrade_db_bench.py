"""The database steps of a rolling upgrade from 0.1.0, timed at a fleet's size.

Makes a fresh database on a running server (``--url``: the server's, without a database name;
PostgreSQL or MariaDB/MySQL), brings it to the previous release's schema head
(:data:`computed.version.PREVIOUS_RELEASE`), fills it as 0.1.0 leaves it at ``--nodes`` nodes
(a provider row per node, a live instance on ``--instances`` of them and as many deleted ones,
none with a reservation id: 0.1.0 had no such column), then times, ``--rounds`` times each on
a fresh copy:

* ``db sync``: the expansions of this release (what the runbook's "database expand" step runs);
* the database checks of ``computed-status upgrade check`` (revision, schema vs code, the
  rows the online data migrations have left);
* ``computed-manage db online_data_migrations`` (batches of 50, as the command runs them).

Prints each step's median and range in seconds, with the 1-minute load average at the start
and end (the figures of docs/upgrades.md's runbook).

    .venv/bin/python -m bench.upgrade_db_bench [--url postgresql+psycopg2://postgres@127.0.0.1:5432]
        [--nodes 10000] [--instances 5000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable

import sqlalchemy as sa

from computed import db
from computed.db import engine as db_engine
from computed.upgrade import data_migrations, migrations
from computed.version import PREVIOUS_RELEASE

BATCH_ROWS = 1000


def _admin(url: str) -> sa.Engine:
    base = sa.engine.make_url(url)
    maintenance = 'postgres' if base.get_backend_name() == 'postgresql' else 'mysql'
    return sa.create_engine(base.set(database=maintenance), isolation_level='AUTOCOMMIT')


def _create(url: str) -> tuple[str, Callable[[], None]]:
    name = f'upgrade_bench_{uuid.uuid4().hex[:8]}'
    admin = _admin(url)
    quote = '"' if sa.engine.make_url(url).get_backend_name() == 'postgresql' else '`'
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE {quote}{name}{quote}')

    def drop() -> None:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS {quote}{name}{quote}')
        admin.dispose()

    target = sa.engine.make_url(url).set(database=name)
    if target.get_backend_name() != 'postgresql':
        target = target.update_query_dict({'charset': 'utf8mb4'})
    return target.render_as_string(hide_password=False), drop


def _fill(url: str, nodes: int, instances: int) -> None:
    """Rows as 0.1.0 writes them, into its schema (reflected: this code's models are newer)."""
    engine = db_engine.engine_from_url(url)
    try:
        meta = sa.MetaData()
        meta.reflect(engine, only=('providers', 'instances'))
        providers, rows = meta.tables['providers'], meta.tables['instances']
        now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        node_uuids = [str(uuid.uuid4()) for _ in range(nodes)]
        state = json.dumps({'resource_class': 'CUSTOM_GOLD', 'traits': []})
        with engine.begin() as conn:
            for start in range(0, nodes, BATCH_ROWS):
                conn.execute(sa.insert(providers), [
                    {'uuid': node, 'claim_epoch': 1, 'seq': 1, 'host': f'c{i % 3}',
                     'state': state, 'deleted': False, 'updated_at': now}
                    for i, node in enumerate(node_uuids[start:start + BATCH_ROWS])])
            made = []
            for i in range(instances * 2):
                live = i < instances
                made.append({
                    'uuid': str(uuid.uuid4()), 'node_uuid': node_uuids[i % nodes],
                    'host': f'c{i % 3}', 'member_epoch': 1,
                    'state': 'ACTIVE' if live else 'DELETED', 'resource_class': 'CUSTOM_GOLD',
                    'traits': '[]', 'created_at': now, 'updated_at': now,
                    'deleted_at': None if live else now, 'project_id': 'p', 'user_id': 'u',
                    'name': f'server-{i}'})
            for start in range(0, len(made), BATCH_ROWS):
                conn.execute(sa.insert(rows), made[start:start + BATCH_ROWS])
    finally:
        engine.dispose()


def _timed(body: Callable[[], object]) -> float:
    start = time.monotonic()
    body()
    return time.monotonic() - start


def _checks(url: str) -> None:
    from computed.cmd import status
    engine = db_engine.engine_from_url(url)
    try:
        revisions = migrations.read_revisions()
        current = db.current_revision(url)
        assert migrations.at_least(revisions, current, migrations.expand_head(
            revisions, PREVIOUS_RELEASE.schema_head))
        missing, _ = status.schema_vs_code(engine)
        assert not missing, missing
        data_migrations.pending(engine)
    finally:
        engine.dispose()


def _migrate(url: str) -> None:
    engine = db_engine.engine_from_url(url)
    try:
        outcome = data_migrations.run(data_migrations.bound(engine))
        assert outcome.exit_status == data_migrations.EXIT_DONE, outcome
        assert not any(data_migrations.pending(engine).values())
    finally:
        engine.dispose()


def one_round(url: str, nodes: int, instances: int) -> dict[str, float]:
    scratch, drop = _create(url)
    try:
        db.sync(scratch, PREVIOUS_RELEASE.schema_head)
        _fill(scratch, nodes, instances)
        return {'db sync (expand)': _timed(lambda: db.sync(scratch)),
                'upgrade check, database checks': _timed(lambda: _checks(scratch)),
                'online_data_migrations': _timed(lambda: _migrate(scratch))}
    finally:
        drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument('--url', default='postgresql+psycopg2://postgres@127.0.0.1:5432',
                        help="the database server's URL, without a database")
    parser.add_argument('--nodes', type=int, default=10000)
    parser.add_argument('--instances', type=int, default=5000,
                        help='live instances (as many deleted ones are added)')
    parser.add_argument('--rounds', type=int, default=3)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    results: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for step, seconds in one_round(args.url, args.nodes, args.instances).items():
            results.setdefault(step, []).append(seconds)
    print(f'{sa.engine.make_url(args.url).get_backend_name()}: {args.nodes} nodes, '
          f'{args.instances} live + {args.instances} deleted instances from '
          f'{PREVIOUS_RELEASE.version}; load {load:.1f} -> {os.getloadavg()[0]:.1f}')
    for step, values in results.items():
        print(f'  {step}: median {statistics.median(values):.2f} s '
              f'({min(values):.2f}-{max(values):.2f}, {len(values)} rounds)')


if __name__ == '__main__':
    main()
