"""Options of the ``[reporter]`` group: how provider reports travel to Placement."""

from __future__ import annotations

from oslo_config import cfg

NAME = 'reporter'


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts (see computed.conf.database).
    return cfg.OptGroup(
        NAME,
        title='Reporter',
        help='Provider reports from the daemons to computed-reporter, and '
             'from there to Placement.')


ALL_OPTS = [
    cfg.StrOpt(
        'topic',
        default='computed-reporter',
        help='RPC topic the reporters consume and the daemons send to.'),
    cfg.IntOpt(
        'batch_size',
        default=100,
        min=1,
        max=10000,
        help='Most reports a daemon sends in one call.'),
    cfg.IntOpt(
        'call_timeout',
        default=120,
        min=1,
        help='Seconds a daemon waits for a reporter to answer a batch before '
             'it sends the batch again (duplicates are ignored).'),
    cfg.IntOpt(
        'max_reports_per_call',
        default=1000,
        min=1,
        help='Most reports a reporter applies from one call; the rest are '
             'answered "failed" and their daemon sends them again. Bounds how '
             'long one message can hold a reporter: keep batch_size at or '
             'below it.'),
    cfg.IntOpt(
        'max_traits',
        default=128,
        min=1,
        help='Most traits a reporter accepts in one provider report (every '
             'custom trait may cost a Placement request); a report with more '
             'is refused as invalid and logged. Ironic allows 50 per node.'),
    cfg.IntOpt(
        'max_field_length',
        default=255,
        min=36,
        help='Longest string a reporter accepts in any field of a report '
             "(Placement's names are at most 255 characters); a report with a "
             'longer one is refused as invalid and logged, cut short.'),
    cfg.IntOpt(
        'workers',
        default=4,
        min=1,
        max=64,
        help='Placement writes one reporter runs in parallel.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS}
