"""Options of the ``[database]`` group: computed's own database."""

from __future__ import annotations

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'database',
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
    conf.register_group(GROUP)
    conf.register_opts(ALL_OPTS, group=GROUP)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {GROUP: ALL_OPTS}
