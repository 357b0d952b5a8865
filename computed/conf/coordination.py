"""Options of the ``[coordination]`` group: where the fleet meets.

Every computed joins one tooz group on one backend; the group's members are
the nodes of the consistent hash ring.
"""

from __future__ import annotations

from urllib import parse

from oslo_config import cfg

NAME = 'coordination'

#: Seconds of ZooKeeper session timeout asked for when the backend URL names none (tooz's
#: ZooKeeper driver's own default). Also the longest any computed process waits for
#: ZooKeeper's answer to one request, or one pipelined batch (computed.fleet.zookeeper.answer).
DEFAULT_SESSION_TIMEOUT = 10.0


def session_timeout(backend_url: str) -> float:
    """The ZooKeeper session timeout, in seconds, a tooz URL asks for (``?timeout=N``)."""
    values = parse.parse_qs(parse.urlsplit(backend_url).query).get('timeout')
    return float(values[-1]) if values else DEFAULT_SESSION_TIMEOUT


def with_session_of_at_least(url: str, seconds: float) -> str:
    """The tooz URL ``url`` asking for a ZooKeeper session of at least ``seconds``: its own
    ``timeout`` when that is longer, else ``seconds``; every other part unchanged."""
    if session_timeout(url) >= seconds:
        return url
    parts = parse.urlsplit(url)
    query = [(key, value) for key, value in parse.parse_qsl(parts.query, keep_blank_values=True)
             if key != 'timeout']
    query.append(('timeout', f'{seconds:g}'))
    return parse.urlunsplit(parts._replace(query=parse.urlencode(query)))


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts: oslo.config keeps a group's options
    # on the OptGroup itself, so sharing one would leak options (e.g. an
    # auth plugin's) from one ConfigOpts into the next.
    return cfg.OptGroup(
        NAME,
        title='Coordination',
        help='The tooz backend shared by all computed daemons of a fleet.')


#: URL schemes accepted for ``backend_url``; both need only tooz + kazoo.
SCHEMES = ('zookeeper', 'kazoo', 'file')


ALL_OPTS = [
    cfg.StrOpt(
        'backend_url',
        required=True,
        secret=True,
        help='Required. tooz backend URL. ZooKeeper in production, e.g. '
             'zookeeper://10.0.0.1:2181,10.0.0.2:2181?timeout=10 (timeout '
             'is the session timeout in seconds asked for: a daemon that '
             'stops heartbeating leaves the ring after the one ZooKeeper '
             'grants). With credentials, zookeeper://USER:PASSWORD@HOST:2181, '
             'every znode computed creates is readable and writable by that '
             'user only (ZooKeeper digest ACLs; give every daemon, reporter '
             'and computed-manage the same ones); the URL is then a secret, '
             'masked in logs. TLS: ?use_ssl=true&ca=FILE (and certfile=, '
             'keyfile= for client certificates). See docs/security.md. '
             'file:///var/lib/computed/coordination works for a single '
             'machine only (tests, development).'),
    cfg.StrOpt(
        'group',
        default='computed',
        help='Name of the tooz group the daemons of one fleet join. Daemons '
             'in different groups never share nodes.'),
    cfg.IntOpt(
        'join_timeout',
        default=30,
        min=0,
        help='Seconds to keep retrying to join the group while a member with '
             'this host name is still present (e.g. the ZooKeeper session of '
             'a previous run of this daemon that has not expired yet).'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS}
