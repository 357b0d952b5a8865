"""Options of the ``[fleet]`` group: how a daemon shares nodes with its peers."""

from __future__ import annotations

from oslo_config import cfg

NAME = 'fleet'


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts (see computed.conf.database).
    return cfg.OptGroup(
        NAME,
        title='Fleet',
        help='Membership of the hash ring, node claims and handover.')


ALL_OPTS = [
    cfg.IntOpt(
        'weight',
        default=1,
        min=1,
        max=1000,
        help='Share of the ring this daemon takes, relative to its peers: a '
             'daemon of weight 2 manages twice the nodes of one of weight 1.'),
    cfg.FloatOpt(
        'node_refresh_interval',
        default=30.0,
        min=0.5,
        help='Seconds between two full listings of the Ironic nodes by each '
             "daemon while Ironic's notifications cannot be trusted: "
             '[ironic] notifications off, or the event stream down or lagging '
             '(its heartbeat not back within [ironic] max_event_lag). Also the '
             'interval of the fleet-wide listing after one that found changes '
             'no event announced.'),
    cfg.FloatOpt(
        'fleet_listing_interval',
        default=600.0,
        min=1.0,
        help="Seconds between two fleet-wide listings while Ironic's "
             'notifications flow: one daemon per round lists every node and '
             'has the nodes whose provider differs from what computed reported '
             '(changes no event announced) re-read by their owners. Changes '
             'reach Placement by their events; this catches what events miss.'),
    cfg.IntOpt(
        'drain_timeout',
        default=60,
        min=0,
        help='On SIGTERM, seconds to wait for peers to take over this '
             "daemon's free nodes before it leaves anyway (its claims then "
             'go with it and peers take the nodes at once).'),
    cfg.FloatOpt(
        'rehome_grace',
        default=120.0,
        min=0,
        help='Seconds an instance whose daemon left the group stays with it '
             'before a live daemon adopts it (its node then moves to the '
             'adopter). Long enough for a restart or a short partition to '
             'heal; a daemon that comes back after it finds its instances '
             're-homed and leaves them alone.'),
    cfg.FloatOpt(
        'resume_interval',
        default=60.0,
        min=1.0,
        help='Seconds between two looks for instances of this daemon left in '
             'a transitional state (BUILDING, DELETING, STOPPING, STARTING, '
             'REBOOTING, REBUILDING, REBUILDING_OFF) with nothing working on '
             'them, which it then resumes: '
             'a request whose cast was lost on the bus is carried out at the '
             'latest this long after it was made. Also done after every join '
             'and adoption.'),
    cfg.StrOpt(
        'audit_log',
        help='File to append one JSON line to for every claim, release and '
             'action on a node, with host and fencing epoch (evidence for '
             'audits and chaos tests). Unset: no audit log.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS}
