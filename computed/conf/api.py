"""Options of the ``[api]`` group: how ``computed-api`` serves the compute API.

The API's authentication is chosen here (``auth_strategy``); keystone mode reads
keystonemiddleware's own ``[keystone_authtoken]`` section, registered by keystonemiddleware
when the middleware is built, not here.
"""

from __future__ import annotations

import ipaddress

from oslo_config import cfg

NAME = 'api'
#: Image URL schemes allowed by default, and every scheme that can be allowed.
IMAGE_URL_SCHEMES = ('http', 'https')
KNOWN_IMAGE_URL_SCHEMES = ('http', 'https', 'file')
AUTH_STRATEGIES = ('keystone', 'noauth2')


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts (see computed.conf.database).
    return cfg.OptGroup(
        NAME,
        title='Compute API',
        help='computed-api: a bare-metal subset of the OpenStack Compute API v2.1 '
             '(servers, flavors, quotas, services), for openstacksdk and '
             'python-openstackclient. docs/api.md lists what is supported.')


def _network(text: str) -> str:
    """An address or CIDR network (ValueError, which oslo.config reports naming the
    option, otherwise)."""
    ipaddress.ip_network(text.strip(), strict=False)
    return text.strip()


ALL_OPTS = [
    cfg.HostAddressOpt(
        'bind_host', default='0.0.0.0',
        help='Address computed-api listens on.'),
    cfg.PortOpt(
        'bind_port', default=8774,
        help='Port computed-api listens on (8774, as Nova\'s API).'),
    cfg.IntOpt(
        'workers', default=1, min=1,
        help='Processes serving the API, each with [api] threads threads, its own '
             'connections and its own database pool; they share the port (SO_REUSEPORT: '
             'the kernel spreads connections over them). A worker that dies is started '
             'again.'),
    cfg.IntOpt(
        'threads', default=16, min=1, max=1024,
        help='Requests one worker process serves at once (its thread pool). A request '
             'waiting on Placement, Keystone or the database holds one thread; more '
             'connections wait in the listen backlog.'),
    cfg.IntOpt(
        'client_timeout', default=30, min=1, max=3600,
        help='Seconds the server waits for a client to send the next part of a request '
             '(its headers, the rest of its body) or to read the response before it '
             'closes the connection: a body shorter than its Content-Length holds a '
             'thread this long, never longer.'),
    cfg.IntOpt(
        'max_header_size', default=65536, min=1024,
        help='Bytes of request line and headers the server reads at most; a larger '
             'request is refused before it reaches the API (keystone tokens with many '
             'roles need several kB).'),
    cfg.IntOpt(
        'graceful_shutdown_timeout', default=30, min=0,
        help='Seconds a stopping worker (SIGTERM) lets requests in flight finish before '
             'their connections are closed; it stops taking new ones at once.'),
    cfg.IntOpt(
        'backlog', default=128, min=1,
        help='Connections the kernel queues for a worker while all its threads are busy.'),
    cfg.IntOpt(
        'scheduling_threads', default=4, min=1, max=256,
        help='Threads of each worker process that place the servers a create admitted '
             '(Placement\'s candidates and claim, then the cast to the daemon), after its '
             '202 was answered. More place a burst sooner while Placement keeps up; '
             'concurrent placements of one class mostly compete for the same first '
             'candidates.'),
    cfg.IntOpt(
        'pending_build_timeout', default=120, min=10, max=86400,
        help='Seconds a server admitted by a create may wait to be placed before another '
             'worker (any computed-api process) takes it over: the process that admitted '
             'it may have died with it queued. Each worker looks for such servers every '
             'half of this. Longer than a placement ever takes (Placement\'s timeouts).'),
    cfg.StrOpt(
        'auth_strategy', default='keystone', choices=AUTH_STRATEGIES,
        help='keystone: tokens are validated by keystonemiddleware\'s auth_token, '
             'configured in [keystone_authtoken]. noauth2 (tests, a local run, never '
             'production): the token "USER:PROJECT" is taken as that user in that '
             'project, and the user "admin" has the admin role.'),
    cfg.IntOpt(
        'max_limit', default=1000, min=1,
        help='Most items one list request returns (a larger "limit" is capped).'),
    cfg.ListOpt(
        'image_url_schemes', default=list(IMAGE_URL_SCHEMES),
        item_type=cfg.types.String(choices=KNOWN_IMAGE_URL_SCHEMES),
        help='Schemes a server\'s image URL (imageRef) may have. Ironic\'s conductors '
             'fetch the URL, or read it for file://, with their own rights: add file only '
             'if any project may have the conductors read any file they can.'),
    cfg.ListOpt(
        'image_url_allowed_networks', default=[], item_type=_network,
        help='Addresses (or CIDR networks) an image URL may name although they are '
             'refused by default: link-local (169.254.0.0/16, where clouds serve instance '
             'metadata; fe80::/10), loopback (127.0.0.0/8, ::1, localhost), unspecified, '
             'multicast and reserved addresses. For example 127.0.0.1 for an image cache '
             'each conductor serves itself. Host names are not resolved by the API.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS}
