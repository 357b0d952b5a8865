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
#: Seconds waited for a ZooKeeper session to start (the defaults of the ``*_connect_timeout``
#: options): a reachable ensemble answers in milliseconds, and an operator waiting on a dead one
#: wants to hear so soon; the API waits a little longer at its start, the reporter tries again
#: after each attempt.
COMMAND_CONNECT_TIMEOUT = 10
API_CONNECT_TIMEOUT = 15
REPORTER_CONNECT_TIMEOUT = 5
#: The shortest session a one-shot command asks for (``command_session_timeout``): tooz's
#: default.
COMMAND_SESSION_TIMEOUT = int(DEFAULT_SESSION_TIMEOUT)


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
    cfg.IntOpt(
        'command_connect_timeout',
        default=COMMAND_CONNECT_TIMEOUT,
        min=1,
        max=3600,
        help='Seconds computed-manage and computed-status wait for a '
             'ZooKeeper session on backend_url. With none by then, a '
             'computed-manage command fails with one line naming the '
             'servers (exit 1) and the checks of computed-status that need '
             'ZooKeeper fail.'),
    cfg.IntOpt(
        'command_session_timeout',
        default=COMMAND_SESSION_TIMEOUT,
        min=1,
        max=600,
        help='Seconds of ZooKeeper session timeout computed-manage and '
             'computed-status ask for at least, whatever backend_url\'s '
             'timeout (the daemons\') asks. A command joins no group and '
             'holds no znode the fleet relies on, so a long session costs '
             'nothing, and a short one drops the connection when one ping '
             'goes unanswered for a fraction of it, which a loaded machine '
             'can cause mid-command. A server that accepts the connection '
             'but does not answer (frozen) may hold a command this long, '
             'even past command_connect_timeout.'),
    cfg.IntOpt(
        'api_connect_timeout',
        default=API_CONNECT_TIMEOUT,
        min=1,
        max=3600,
        help='Seconds computed-api waits at its start for a ZooKeeper '
             'session on backend_url. With none by then, it exits 1 with '
             'one line naming the servers.'),
    cfg.IntOpt(
        'reporter_connect_timeout',
        default=REPORTER_CONNECT_TIMEOUT,
        min=1,
        max=3600,
        help='Seconds one attempt of computed-reporter to start a ZooKeeper '
             'session on backend_url may take. A reporter that starts while '
             'ZooKeeper does not answer logs one line per failed attempt and '
             'tries again, the pauses doubling from 1 s up to 30 s, until '
             'ZooKeeper answers or it is stopped.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS}
