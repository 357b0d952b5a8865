"""Options of the ``[quota]`` group: the default per-project limits of the compute API.

Quotas are checked by counting (seed 004): a project's servers in computed's database and its
usages in Placement, against its limits; there are no reservations to leak. A project without
limits of its own (set through ``os-quota-sets``) has these; -1 is unlimited.
"""

from __future__ import annotations

from oslo_config import cfg

NAME = 'quota'


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts (see computed.conf.database).
    return cfg.OptGroup(
        NAME,
        title='Quotas',
        help='Default limits of a project, checked by counting its servers and its '
             'Placement usages before a build and again once its allocation is made. '
             '-1 is unlimited.')


ALL_OPTS = [
    cfg.IntOpt(
        'instances', default=10, min=-1,
        help='Servers a project may have (not DELETED).'),
    cfg.IntOpt(
        'resource_class', default=-1, min=-1,
        help='Units of any one resource class (a bare-metal node is one unit of its '
             'class, e.g. CUSTOM_GOLD) a project may hold in Placement, unless the '
             'project has a limit of its own for that class.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS}
