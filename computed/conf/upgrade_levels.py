"""Options of the ``[upgrade_levels]`` group: the RPC version each sender may use.

Owns the pins of a rolling upgrade (Nova's ``[upgrade_levels]``): one option per RPC interface,
``auto`` or one of its versions (:data:`computed.upgrade.levels.HISTORY`), defaulting to ``auto``
here and nowhere else. What a pin means is decided in :mod:`computed.upgrade.levels`; who reads
the peers in :mod:`computed.upgrade.records`. Anything else is refused at start as one line
naming the option (``[upgrade_levels] reports: invalid value: ...``).
"""

from __future__ import annotations

from oslo_config import cfg

from computed.upgrade import levels

NAME = 'upgrade_levels'
#: Every sender follows its live peers unless the operator pins it.
DEFAULT = levels.AUTO


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts (see computed.conf.database).
    return cfg.OptGroup(
        NAME,
        title='Upgrade levels',
        help='The RPC version each sender uses, for a rolling upgrade (docs/upgrades.md). '
             '"auto": the lowest version any live peer serves, as the peers publish it in '
             'ZooKeeper (looked at again every 30 seconds); a version: exactly that one, '
             'whatever the peers serve. Either way a message of an older version leaves out '
             'what that version does not have, so a peer of the previous release never '
             'refuses it.')


ALL_OPTS = [
    cfg.StrOpt(
        'reports',
        default=DEFAULT,
        choices=levels.choices('reports'),
        help='Provider reports, daemons -> computed-reporter. 1.0 names the claim epoch '
             '"epoch"; 1.1 "claim_epoch". "auto" follows the live reporters.'),
    cfg.StrOpt(
        'instances',
        default=DEFAULT,
        choices=levels.choices('instances'),
        help='Instance casts to a daemon (from computed-api, computed-manage server and the '
             'daemons). 1.0 carries the instance only; 1.1 adds the member epoch the daemon '
             'checks (a cast meant for a previous session of the daemon is refused). "auto" '
             'follows the live daemons.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS}
