"""Checks of option values that oslo.config types cannot express.

Each check takes the value, returns nothing and raises ``ConfigError``
naming the option when the value cannot work: a URL scheme computed does not
support or has no installed driver for, a URL that does not parse, a database
driver that cannot be imported, a host or group name that cannot be a
ZooKeeper node name, a session timeout ZooKeeper cannot use, a backend URL
query key tooz would ignore (or a path it would drop), an RPC transport the
operator never set, a file that is
not there. None of them touches the network; the file checks only look at
the local file system.
"""

from __future__ import annotations

import importlib.metadata
import os
from urllib import parse

from oslo_config import cfg

from computed.conf import coordination
from computed.conf.default import normalise_host
from computed.conf.errors import ConfigError

#: oslo.messaging drivers computed supports: RabbitMQ, and the in-process
#: fake driver for tests (kafka only carries notifications, not RPC).
TRANSPORT_SCHEMES = ('rabbit', 'fake')

#: What oslo.log accepts as a level in default_log_levels.
_LOG_LEVELS = ('CRITICAL', 'ERROR', 'WARNING', 'WARN', 'INFO', 'DEBUG', 'TRACE', 'NOTSET')

#: kazoo connection handlers computed runs with: its processes are native threads (tooz would
#: also take eventlet and gevent, which need a monkey-patched process computed never is).
ZOOKEEPER_HANDLERS = ('threading',)

#: The query keys tooz 9's ZooKeeper driver reads from a backend URL (KazooDriver.__init__ and
#: _make_client: kazoo's options, tooz's namespace and the kazoo handler); any other key is
#: ignored by tooz, so a typo would silently keep a default.
ZOOKEEPER_QUERY_KEYS = ('ca', 'certfile', 'handler', 'hosts', 'keyfile', 'keyfile_password',
                        'namespace', 'randomize_hosts', 'timeout', 'use_ssl', 'verify_certs')
#: Keys tooz passes to kazoo that a URL cannot express (kazoo wants a retry object or dict).
ZOOKEEPER_UNSETTABLE_KEYS = ('connection_retry', 'command_retry')
#: Keys tooz reads with oslo.utils' bool_from_string, which takes anything unknown as false.
ZOOKEEPER_BOOLEAN_KEYS = ('randomize_hosts', 'use_ssl', 'verify_certs')
_BOOLEANS = ('1', '0', 'true', 'false', 'yes', 'no', 'on', 'off', 't', 'f', 'y', 'n')


def _has_entry_point(group: str, name: str) -> bool:
    return any(ep.name == name
               for ep in importlib.metadata.entry_points(group=group))


def _schemes(schemes: tuple[str, ...]) -> str:
    return ' or '.join(f'{s}://' for s in schemes)


def _check_name(group: str, option: str, value: str | None) -> None:
    """A name that becomes one ZooKeeper node name (a member, a group)."""
    if not value:
        raise ConfigError(group, option, 'must not be empty')
    if '/' in value:
        # ZooKeeper would read it as a path: another folder, not this name.
        raise ConfigError(group, option, f"{value!r} must not contain '/'")
    if any(c.isspace() or not c.isprintable() for c in value):
        raise ConfigError(group, option,
                          f'{value!r} must not contain blanks or control characters')


def check_host(value: str) -> None:
    from computed.db.models import HOST_LENGTH  # the column instances record it in
    host = normalise_host(value or '')
    _check_name('DEFAULT', 'host', host)
    if len(host) > HOST_LENGTH:
        raise ConfigError('DEFAULT', 'host', f'longer than {HOST_LENGTH} characters')


def check_log_levels(values: list[str]) -> None:
    """``[DEFAULT] default_log_levels``: ``logger=LEVEL`` pairs; oslo.log raised a ValueError
    at start for anything else."""
    for pair in values:
        logger, sep, level = pair.partition('=')
        if not (logger and sep) or level.upper() not in _LOG_LEVELS:
            raise ConfigError('DEFAULT', 'default_log_levels',
                              f'{pair!r} is not logger=LEVEL (LEVEL one of '
                              f'{", ".join(_LOG_LEVELS)})')


def check_group(value: str) -> None:
    """``[coordination] group``: the tooz group, also a folder name in ZooKeeper."""
    _check_name('coordination', 'group', value)


def check_not_empty(group: str, option: str, value: str | None) -> None:
    """A string option whose default is a name (a topic, an exchange): set empty it names
    nothing, and the messaging library would take it anyway."""
    if value is not None and not value.strip():
        raise ConfigError(group, option, 'must not be empty')


def check_readable_file(group: str, option: str, path: str | None) -> None:
    """A file read at start (a CA bundle, a certificate, a key): unset is fine."""
    if not path:
        return
    if not os.path.isfile(path):
        raise ConfigError(group, option, f'{path}: not found')
    if not os.access(path, os.R_OK):
        raise ConfigError(group, option, f'{path}: not readable by this user')


def check_writable_directory(group: str, option: str, path: str | None) -> None:
    """A file created at start (a log, the audit log): its directory must exist."""
    if not path:
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ConfigError(group, option, f'directory {directory} does not exist')
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError(group, option, f'directory {directory} is not writable by this user')


def check_batch_size(batch_size: int, max_reports_per_call: int) -> None:
    """A daemon's batches must fit what a reporter applies from one call: a larger batch has its
    tail answered "failed" and sent again on every call."""
    if batch_size > max_reports_per_call:
        raise ConfigError('reporter', 'batch_size',
                          f'{batch_size} is above max_reports_per_call '
                          f'({max_reports_per_call}): a reporter would refuse the rest of every '
                          'batch; lower batch_size or raise max_reports_per_call')


def check_http_url(group: str, option: str, value: str | None) -> None:
    """An endpoint keystoneauth will send requests to: unset is fine."""
    if not value:
        return
    url = parse.urlsplit(value)
    if url.scheme not in ('http', 'https') or not url.hostname:
        raise ConfigError(group, option,
                          f'{value!r} is not an http:// or https:// URL with a host')


def check_entry_point(group: str, option: str, entry_point_group: str,
                      value: str) -> None:
    """A plugin named by ``value`` must be installed in ``entry_point_group``."""
    if not _has_entry_point(entry_point_group, value):
        names = sorted(ep.name for ep in importlib.metadata.entry_points(
            group=entry_point_group))
        raise ConfigError(group, option, f'no {entry_point_group} plugin named {value!r} '
                                         f'(installed: {", ".join(names) or "none"})')


def _check_servers(group: str, option: str, netloc: str) -> None:
    """Check a ``[user:pass@]host[:port],...`` list, as tooz and
    oslo.messaging both accept several servers in one URL."""
    for server in netloc.split(','):
        # Credentials are dropped unread: they must not reach a message.
        hostport = server.rpartition('@')[2]
        # A bracketed IPv6 address without a port ends with ']'.
        if hostport.endswith(']') or ':' not in hostport:
            host, port = hostport, ''
        else:
            host, _, port = hostport.rpartition(':')
        if not host:
            raise ConfigError(group, option,
                              f'server {hostport!r} has no host name')
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise ConfigError(group, option,
                              f'server {hostport!r} has an invalid port')


def check_backend_url(value: str) -> None:
    """``[coordination] backend_url``: a tooz URL computed can use."""
    url = parse.urlsplit(value)
    if url.scheme not in coordination.SCHEMES:
        raise ConfigError('coordination', 'backend_url',
                          f'unsupported scheme {url.scheme!r} '
                          '(use zookeeper:// or file://)')
    if not _has_entry_point('tooz.backends', url.scheme):
        raise ConfigError('coordination', 'backend_url',
                          f'no tooz driver installed for {url.scheme}://')
    if url.scheme == 'file':
        if url.netloc or not url.path.startswith('/'):
            raise ConfigError('coordination', 'backend_url',
                              'file:// needs an absolute directory, e.g. '
                              'file:///var/lib/computed/coordination')
        return
    if not url.netloc:
        raise ConfigError('coordination', 'backend_url',
                          'names no ZooKeeper server (e.g. '
                          'zookeeper://127.0.0.1:2181)')
    _check_servers('coordination', 'backend_url', url.netloc)
    if url.path not in ('', '/'):
        # tooz builds kazoo's hosts from the URL's netloc alone: a path is dropped, not
        # made a chroot, and every znode would land at the ensemble's root unsaid.
        raise ConfigError('coordination', 'backend_url',
                          f'path {url.path!r} is ignored by tooz (no chroot): computed keeps '
                          'its znodes under /computed/<group> and tooz its group under '
                          '/<namespace>; keep fleets apart with [coordination] group (and '
                          '?namespace=NAME), and remove the path')
    for key, values in parse.parse_qs(url.query, keep_blank_values=True).items():
        if key in ZOOKEEPER_UNSETTABLE_KEYS:
            raise ConfigError('coordination', 'backend_url',
                              f'{key}= cannot be given in a URL (kazoo takes a retry policy '
                              'there, a URL only carries text): remove it')
        if key not in ZOOKEEPER_QUERY_KEYS:
            # tooz ignores a key it does not know: ?tiemout=10 left the default timeout.
            raise ConfigError('coordination', 'backend_url',
                              f'unknown query key {key!r} (tooz\'s ZooKeeper driver reads '
                              f'{", ".join(ZOOKEEPER_QUERY_KEYS)}): it would be ignored')
        value = values[-1]
        if key in ZOOKEEPER_BOOLEAN_KEYS and value.lower() not in _BOOLEANS:
            # tooz reads anything else as false: use_ssl=ture would connect in plain text.
            raise ConfigError('coordination', 'backend_url',
                              f'{key}={value!r} is not true or false')
        if key == 'hosts':
            _check_servers('coordination', 'backend_url', value)
        # tooz raises a bare ValueError for other kazoo handlers.
        if key == 'handler' and value not in ZOOKEEPER_HANDLERS:
            raise ConfigError('coordination', 'backend_url',
                              f'handler={value!r}: computed runs on native threads; '
                              f'remove handler= or use handler=threading')
        # tooz reads this one as the ZooKeeper session timeout in seconds;
        # a fraction or inf passed this check once and then failed (or
        # never expired) in kazoo at start.
        if key == 'timeout':
            if not (value.isdigit() and int(value) > 0):
                raise ConfigError('coordination', 'backend_url',
                                  f'timeout={value!r} is not a '
                                  'positive whole number of seconds')


def require_transport_url(conf: cfg.ConfigOpts) -> None:
    """``[DEFAULT] transport_url`` must be written: oslo.messaging's default, ``rabbit://``,
    is guest@localhost:5672, which silently becomes some other broker or none."""
    if conf.get_location('transport_url').location is cfg.Locations.opt_default:
        raise ConfigError('DEFAULT', 'transport_url',
                          'required but not set (the RPC bus, e.g. '
                          'rabbit://USER:PASSWORD@HOST:5672/VHOST)')


def check_transport_url(group: str, value: str) -> None:
    """An oslo.messaging ``transport_url`` computed can use."""
    # Never echo the value: it carries the broker password.
    try:
        url = parse.urlsplit(value)
    except ValueError:
        raise ConfigError(group, 'transport_url', 'not a URL')
    scheme = url.scheme.split('+')[0]
    if scheme not in TRANSPORT_SCHEMES:
        raise ConfigError(group, 'transport_url',
                          f'unsupported scheme {url.scheme!r} '
                          f'(use {_schemes(TRANSPORT_SCHEMES)})')
    if not _has_entry_point('oslo.messaging.drivers', scheme):
        raise ConfigError(group, 'transport_url',
                          f'no oslo.messaging driver installed for '
                          f'{scheme}://')
    if url.netloc:
        _check_servers(group, 'transport_url', url.netloc)
    elif scheme != 'fake':
        raise ConfigError(group, 'transport_url',
                          f'{url.scheme}:// names no broker (oslo.messaging would try '
                          'guest@localhost:5672): write USER:PASSWORD@HOST:PORT')


def check_database_connection(value: str) -> None:
    """``[database] connection``: an SQLAlchemy URL of a known dialect."""
    # Imported here: only this check needs SQLAlchemy, and it is costly.
    from sqlalchemy import create_engine
    from sqlalchemy import exc as sa_exc
    from sqlalchemy.engine import make_url

    try:
        url = make_url(value)
    except (sa_exc.ArgumentError, ValueError):
        # The message would repeat the value, password included.
        raise ConfigError('database', 'connection',
                          'not an SQLAlchemy URL (e.g. '
                          'postgresql+psycopg2://user:pass@host/computed)')
    try:
        url.get_dialect()
    except sa_exc.NoSuchModuleError:
        raise ConfigError('database', 'connection',
                          f'unknown SQLAlchemy dialect {url.drivername!r}')
    try:
        # create_engine imports the DBAPI driver and connects to nothing.
        create_engine(url).dispose()
    except ImportError as exc:
        raise ConfigError('database', 'connection',
                          f'the driver of {url.drivername}:// is not installed '
                          f'(No module named {exc.name!r})')
    except (sa_exc.ArgumentError, TypeError, ValueError) as exc:
        raise ConfigError('database', 'connection',
                          f'{url.drivername}:// cannot use this URL: '
                          f'{type(exc).__name__}')


def check_signing_keys(keys: list[str]) -> None:
    """``[messaging] signing_keys``: each long enough to be a secret (never echoed)."""
    from computed.runtime.signing import MIN_KEY_LENGTH
    for index, key in enumerate(keys, 1):
        if len(key.strip()) < MIN_KEY_LENGTH:
            raise ConfigError('messaging', 'signing_keys',
                              f'key {index} has {len(key.strip())} characters, at least '
                              f'{MIN_KEY_LENGTH} are needed (e.g. openssl rand -hex 32)')
        if key != key.strip():
            raise ConfigError('messaging', 'signing_keys',
                              f'key {index} has blanks around it (write the list as KEY1,KEY2)')
