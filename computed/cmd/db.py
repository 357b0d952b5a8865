"""``computed-manage db ...``: bring computed's database to the current schema, or say where it is.

``sync`` upgrades the ``[database] connection`` database to the newest migration (idempotent);
``version`` prints its current revision beside the newest one this code ships. A missing
``connection`` is the usual one-line configuration error (exit 2); a database that cannot be
reached or migrated is one line naming the URL, password hidden, and exit 1 — never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
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


def _database(url: str, doing: str, body: Callable[[], T]) -> T:
    """Run ``body``; a database or migration failure ends the process with one line."""
    # Imported here: the other computed-manage commands need neither.
    from alembic.util import CommandError
    from sqlalchemy import exc as sa_exc
    try:
        return body()
    except (sa_exc.SQLAlchemyError, CommandError) as error:
        common.fail(PROG, f'cannot {doing} database {_safe(url)}: {_one_line(url, error)}',
                    EXIT_DATABASE)


def db_sync(conf: cfg.ConfigOpts) -> int:
    from computed import db
    url = _url(conf, 'sync')
    revision = _database(url, 'sync', lambda: db.sync(url))
    print(f'database {_safe(url)} at revision {revision} (head)')
    return 0


def db_version(conf: cfg.ConfigOpts) -> int:
    from computed import db
    url = _url(conf, 'version')
    current = _database(url, 'read', lambda: db.current_revision(url))
    head = db.head_revision()
    note = '' if current == head else " (run 'computed-manage db sync')"
    print(f'current: {current or "none"}, head: {head}{note}')
    return 0
