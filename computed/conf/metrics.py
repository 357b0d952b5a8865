"""Options of the ``[metrics]`` group: the Prometheus and health endpoint of each process."""

from __future__ import annotations

from oslo_config import cfg

NAME = 'metrics'


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts (see computed.conf.database).
    return cfg.OptGroup(
        NAME,
        title='Metrics',
        help='An HTTP endpoint per process with Prometheus metrics (GET '
             '/metrics) and a health check (GET /healthz: 200 when healthy, '
             '503 with the reason otherwise). The daemon and the reporter read '
             'the same file on a controller, so each has its own port.')


ALL_OPTS = [
    cfg.HostAddressOpt(
        'bind_host',
        default='127.0.0.1',
        help='Address the endpoint listens on. The default keeps it local; '
             'the endpoint has no authentication, so expose it (0.0.0.0) '
             'only on a trusted network.'),
    cfg.PortOpt(
        'port',
        default=0,
        help="Port of computed's (the daemon's) endpoint; 0 disables it. "
             'Two daemons on one host need different ports.'),
    cfg.PortOpt(
        'reporter_port',
        default=0,
        help="Port of computed-reporter's endpoint; 0 disables it."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS}
