"""Options of the ``[ironic]`` group: how computed reaches the Bare Metal API.

A keystoneauth section (see ``computed.conf.ksa``) with service type
``baremetal``, plus the filters that decide which Ironic nodes this fleet
manages and the retry policy for conflicting requests.
"""

from __future__ import annotations

from oslo_config import cfg

from computed.conf import ksa

NAME = 'ironic'


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts: oslo.config keeps a group's options
    # on the OptGroup itself, so sharing one would leak options (e.g. an
    # auth plugin's) from one ConfigOpts into the next.
    return cfg.OptGroup(
        NAME,
        title='Ironic',
        help='Access to the OpenStack Bare Metal (Ironic) API. Authentication '
             'uses keystoneauth: auth_type = password (+ auth_url, username, '
             'password, project_name, user_domain_name, project_domain_name) '
             'against Keystone, or auth_type = none + endpoint_override for '
             'an Ironic running with noauth.')


SERVICE_TYPE = 'baremetal'

OPTS = [
    cfg.StrOpt(
        'conductor_group',
        help='Manage only the nodes of this Ironic conductor group. Unset: '
             'nodes of every group. Set to an empty value: only nodes in '
             "Ironic's default (unnamed) group."),
    cfg.StrOpt(
        'shard',
        help='Manage only the nodes of this Ironic shard. Unset: nodes of '
             'every shard.'),
    cfg.IntOpt(
        'api_max_retries',
        default=5,
        min=0,
        help='How many times to retry an Ironic request that fails with a '
             'server error or a connection error, with exponential backoff '
             'from api_retry_interval (capped at 30 s). 0: try once. While '
             'Ironic is unreachable the daemon keeps using its last good node '
             'list. A write to a node that is locked by a conductor is not '
             'counted here: it is retried every api_retry_interval until the '
             'operation\'s own timeout (a lock is a conductor at work on the '
             'node, which ends).'),
    cfg.IntOpt(
        'api_retry_interval',
        default=2,
        min=1,
        help='Seconds between two retries of a write to a node locked by a '
             'conductor, and the first backoff of other retries.'),
    cfg.BoolOpt(
        'notifications',
        default=True,
        help="Listen to Ironic's versioned notifications so that a change to "
             'a node reaches Placement within a second. The listener uses '
             '[oslo_messaging_notifications] transport_url (default: the '
             'RPC transport_url). Off: changes are seen at the next full '
             'listing ([fleet] node_refresh_interval).'),
    cfg.StrOpt(
        'notification_topic',
        default='ironic_versioned_notifications',
        help="Ironic's [DEFAULT] versioned_notifications_topics."),
    cfg.StrOpt(
        'notification_exchange',
        default='ironic',
        help="The exchange Ironic publishes to (its control_exchange). A "
             'listener bound to another exchange silently receives nothing.'),
    cfg.StrOpt(
        'heartbeat_topic',
        default='computed_heartbeat',
        help="Topic (in computed's own control_exchange) each daemon sends a "
             'heartbeat to, every heartbeat_interval, and hears it back on the '
             "queue Ironic's notifications arrive on: while it comes back on "
             'time, full listings are rare ([fleet] fleet_listing_interval).'),
    cfg.FloatOpt(
        'heartbeat_interval',
        default=5.0,
        min=0.5,
        help='Seconds between two heartbeats on the notification stream.'),
    cfg.FloatOpt(
        'max_event_lag',
        default=5.0,
        min=0.5,
        help='Seconds a heartbeat may take to come back (and a gap between two '
             'may exceed heartbeat_interval) before the event stream is in '
             'doubt: each daemon then lists every node every [fleet] '
             'node_refresh_interval until it is back, and once more after.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    ksa.register(conf, group(), SERVICE_TYPE)
    conf.register_opts(OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): OPTS + ksa.list_opts(SERVICE_TYPE)}
