"""Options of the ``[database]`` group: computed's own database."""

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


ALL_OPTS = [
    cfg.StrOpt(
        'connection',
        secret=True,
        help='SQLAlchemy URL of the database, e.g. '
             'postgresql+psycopg2://computed:SECRET@db/computed or '
             'sqlite:////var/lib/computed/computed.sqlite. Checked for '
             'syntax and a known dialect at start-up; only the commands that '
             'use the database need it set.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS}
