"""``computed-manage db ...``: bring computed's database to the current schema, or say where it is.

``sync`` upgrades the ``[database] connection`` database (idempotent): to the newest migration,
except that this release's contractions wait for ``sync --contract`` (run once no service of the
previous release is live; :mod:`computed.upgrade.migrations`), and an empty database gets
everything. ``version`` prints its current revision beside the newest one this code ships.
``online_data_migrations [--max-count N]`` rewrites, in batches, the rows the previous release
wrote that this release fills in (:mod:`computed.upgrade.data_migrations`): a table of rows
found and rewritten per migration, exit 0 nothing left, 1 ``--max-count`` reached and more may
be left, 2 a migration failed (one line each on stderr).

A missing ``connection`` is the usual one-line configuration error (exit 2); a database that
cannot be reached or migrated is one line naming the URL, password hidden, and exit 1 (2 for
``online_data_migrations``, whose 1 means "run again") — never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from oslo_config import cfg

from computed.cmd import common
from computed.conf.errors import ConfigError

PROG = 'computed-manage'
EXIT_DATABASE = 1

T = TypeVar('T')


def _url(conf: cfg.ConfigOpts, command: str) -> str:
    url = conf.database.connection
    if not url:
        raise ConfigError('database', 'connection', f'required by db {command}')
    return url


def _safe(url: str) -> str:
    from sqlalchemy.engine import make_url
    return make_url(url).render_as_string(hide_password=True)


def _one_line(url: str, error: Exception) -> str:
    from sqlalchemy.engine import make_url
    # The driver's own message may span lines and, in theory, echo the password.
    text = ' '.join(str(getattr(error, 'orig', None) or error).split())
    password = make_url(url).password
    if password:
        text = text.replace(str(password), '***')
    return text


def _database(url: str, doing: str, body: Callable[[], T], status: int = EXIT_DATABASE) -> T:
    """Run ``body``; a database or migration failure ends the process with one line and
    ``status``."""
    # Imported here: the other computed-manage commands need neither.
    from alembic.util import CommandError
    from sqlalchemy import exc as sa_exc
    try:
        return body()
    except (sa_exc.SQLAlchemyError, CommandError) as error:
        common.fail(PROG, f'cannot {doing} database {_safe(url)}: {_one_line(url, error)}',
                    status)


def db_sync(conf: cfg.ConfigOpts) -> int:
    from computed import db
    from computed.upgrade import migrations
    from computed.version import PREVIOUS_RELEASE
    url = _url(conf, 'sync')
    contract = conf.category.contract
    revisions = migrations.read_revisions()
    base = PREVIOUS_RELEASE.schema_head

    def sync() -> str | None:
        target = migrations.sync_target(revisions, base, db.current_revision(url), contract)
        return db.sync(url, target)

    revision = _database(url, 'sync', sync)
    head = db.head_revision()
    if revision == head:
        print(f'database {_safe(url)} at revision {revision} (head)')
        return 0
    waiting = [r for r in migrations.contractions(revisions, base) if r != revision]
    print(f'database {_safe(url)} at revision {revision}, every expansion applied; '
          f'contraction(s) {", ".join(waiting)} wait until no service of '
          f'{PREVIOUS_RELEASE.version} is live: then run \'{PROG} db sync --contract\' '
          f'(computed-status upgrade check says when)')
    return 0


def db_version(conf: cfg.ConfigOpts) -> int:
    from computed import db
    url = _url(conf, 'version')
    current = _database(url, 'read', lambda: db.current_revision(url))
    head = db.head_revision()
    note = '' if current == head else " (run 'computed-manage db sync')"
    print(f'current: {current or "none"}, head: {head}{note}')
    return 0


def db_online_data_migrations(conf: cfg.ConfigOpts) -> int:
    from computed import db
    from computed.db import engine as db_engine
    from computed.upgrade import data_migrations, migrations
    from computed.version import PREVIOUS_RELEASE
    url = _url(conf, 'online_data_migrations')
    max_count = conf.category.max_count
    # 1 means "run again" here: a database that cannot be read is an error, 2.
    current = _database(url, 'read', lambda: db.current_revision(url),
                        data_migrations.EXIT_ERRORS)
    revisions = migrations.read_revisions()
    needed = migrations.expand_head(revisions, PREVIOUS_RELEASE.schema_head)
    if not migrations.at_least(revisions, current, needed):
        common.fail(PROG, f'database {_safe(url)} is at revision {current or "none"}, the '
                          f'migrations need {needed}: run \'{PROG} db sync\' first',
                    data_migrations.EXIT_ERRORS)
    engine = db_engine.engine_from_url(url)
    try:
        outcome = data_migrations.run(data_migrations.bound(engine), max_count)
    finally:
        engine.dispose()
    print(migrations_table(outcome.totals))
    for name, error in outcome.errors.items():
        print(f'{PROG}: error: migration {name} failed: {_one_line(url, Exception(error))}',
              file=sys.stderr)
    if outcome.exit_status == data_migrations.EXIT_MORE:
        print(f'{max_count} row(s) rewritten (--max-count): more may be left, run it again')
    elif outcome.exit_status == data_migrations.EXIT_DONE:
        print('nothing left to migrate')
    return outcome.exit_status


def migrations_table(totals: Mapping[str, Sequence[int]]) -> str:
    """nova-manage's table: each migration's rows found and rewritten (pure)."""
    name_width = max([len('Migration')] + [len(name) for name in totals])
    rows = [('Migration', 'Total Found', 'Completed')] + \
        [(name, str(found), str(done)) for name, (found, done) in totals.items()]
    rule = f"+-{'-' * name_width}-+-------------+-----------+"
    lines = [rule]
    for index, (name, found, done) in enumerate(rows):
        lines.append(f'| {name.ljust(name_width)} | {found.rjust(11)} | {done.rjust(9)} |')
        if index == 0:
            lines.append(rule)
    lines.append(rule)
    return '\n'.join(lines)
