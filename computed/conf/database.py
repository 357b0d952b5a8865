"""Options of the ``[database]`` group: computed's own database, and the bounds on every call to it.

The bounds' defaults are defined here once (module constants, used as the options' defaults and
as :func:`computed.db.engine.engine_from_url`'s). Their names are oslo.db's where oslo.db has the
same setting, so an operator's habits carry over.
"""

from __future__ import annotations

from oslo_config import cfg

NAME = 'database'


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts: oslo.config keeps a group's options
    # on the OptGroup itself, so sharing one would leak options (e.g. an
    # auth plugin's) from one ConfigOpts into the next.
    return cfg.OptGroup(
        NAME,
        title='Database',
        help="computed's own database (not Ironic's nor Placement's).")


#: Seconds a statement may run on the server before it is cancelled (PostgreSQL's
#: statement_timeout, MySQL's max_execution_time / MariaDB's max_statement_time).
STATEMENT_TIMEOUT = 30
#: Seconds a thread waits for a pooled connection before its call fails.
POOL_TIMEOUT = 10
#: Connections a process keeps open, and how many more it may open under load.
MAX_POOL_SIZE = 10
MAX_OVERFLOW = 10
#: Seconds to wait for a connection to be made.
CONNECT_TIMEOUT = 10

ALL_OPTS = [
    cfg.StrOpt(
        'connection',
        secret=True,
        help='SQLAlchemy URL of the database, e.g. '
             'postgresql+psycopg2://computed:SECRET@db/computed or '
             'sqlite:////var/lib/computed/computed.sqlite. Checked for '
             'syntax and a known dialect at start-up; only the commands that '
             'use the database need it set.'),
    cfg.IntOpt(
        'statement_timeout', default=STATEMENT_TIMEOUT, min=1, max=3600,
        help='Seconds one statement may run before the database server cancels it '
             '(PostgreSQL, MySQL, MariaDB). computed\'s statements are small: one running '
             'this long is stuck behind a lock or a stalled server, and its caller gets an '
             'error rather than waiting for ever.'),
    cfg.IntOpt(
        'pool_timeout', default=POOL_TIMEOUT, min=1, max=3600,
        help='Seconds a thread waits for a free pooled connection before its call fails.'),
    cfg.IntOpt(
        'max_pool_size', default=MAX_POOL_SIZE, min=1,
        help='Connections each process keeps open to the database (the API\'s threads, '
             'the daemon\'s and the reporter\'s workers share them).'),
    cfg.IntOpt(
        'max_overflow', default=MAX_OVERFLOW, min=0,
        help='Connections a process may open beyond max_pool_size under load (closed '
             'again when returned).'),
    cfg.IntOpt(
        'connect_timeout', default=CONNECT_TIMEOUT, min=1, max=600,
        help='Seconds to wait for a new connection to the database server. Connections '
             'also use TCP keepalives, so one to a server that went away is noticed within '
             'about a minute even while idle.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS}
