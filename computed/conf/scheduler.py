"""Options of the ``[scheduler]`` group: how builds are placed and retried."""

from __future__ import annotations

from oslo_config import cfg

NAME = 'scheduler'


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts (see computed.conf.database).
    return cfg.OptGroup(
        NAME,
        title='Scheduler',
        help='Placing new instances on nodes, and retrying failed builds.')


ALL_OPTS = [
    cfg.IntOpt(
        'max_attempts',
        default=3,
        min=1,
        help='Nodes a build is tried on before the instance goes to ERROR (as '
             "Nova's [scheduler] max_attempts): a deploy that fails on one node "
             'is unwound (node cleared, allocation removed) and the build handed '
             'to another candidate, never one that failed it before. 1: no retry.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS}
