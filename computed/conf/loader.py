"""Parse and eagerly validate computed's configuration.

Owns the path from argv to a ready ``cfg.ConfigOpts``. Guarantees: when
``load`` returns, every registered option of every group has been read (so
unparsable values fail now, not hours later when first used), required
options are set, URLs have a supported scheme with an installed driver, and
the keystoneauth sections that are configured can build a session. When
something is wrong, ``load`` ends the process with exactly one line on
stderr, ``<prog>: error: [group] option: reason``, and exit status 2.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import sys
from collections.abc import Collection, Sequence

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_log import log as logging

from computed import conf as computed_conf
from computed.conf import checks, messaging, unknown
from computed.conf.errors import ConfigError
from computed.runtime import keystone
from computed.version import VERSION

PROJECT = 'computed'
EXIT_CONFIG = 2
KEYSTONE_SECTIONS = ('ironic', 'placement', 'glance')


def register_all(conf: cfg.ConfigOpts) -> None:
    """Register computed's options and those of the libraries it configures.

    oslo.messaging would register its options lazily, on first use; doing
    it now lets ``transport_url`` and friends be validated up front (and
    computed's defaults for some of them apply: ``messaging.LIBRARY_DEFAULTS``).
    """
    computed_conf.register_opts(conf)
    logging.register_options(conf)
    messaging.set_library_defaults(conf)


def _group_name(group: cfg.OptGroup | str | None) -> str:
    if group is None:
        return 'DEFAULT'
    return getattr(group, 'name', group)


# What oslo.config writes before exiting 1 when a config file gives a
# command-line option (e.g. debug) a value of the wrong type.
_CLI_VALUE_ERROR = re.compile(
    r'argument --(?P<dest>\S+): Invalid (?P<type>.*) value: (?P<value>.*)')


def _call(conf: cfg.ConfigOpts, argv: Sequence[str], prog: str,
          usage: str | None = None) -> None:
    """Run oslo.config's parser, turning its own stderr-and-exit for a bad
    command-line option value into a ConfigError, and argparse's usage
    errors into their one ``prog: error: ...`` line."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            conf(args=list(argv), project=PROJECT, prog=prog,
                 version=VERSION, usage=usage)
    except SystemExit as exc:
        written = captured.getvalue().strip()
        match = _CLI_VALUE_ERROR.match(written)
        if match is not None:
            raise ConfigError('DEFAULT', match['dest'],
                              f'invalid value {match["value"]!r} '
                              f'(expected a {match["type"].lower()} value)')
        if exc.code in (0, None) or not written:
            sys.stderr.write(captured.getvalue())
            raise
        # argparse writes its usage (the whole command list for
        # computed-manage) before the error: keep the error line, which
        # names the command it is about.
        print(f'{written.splitlines()[-1]} (see --help)', file=sys.stderr)
        raise
    # Anything else written while parsing still reaches the user.
    sys.stderr.write(captured.getvalue())


# An option string in argparse's help: "--name" not inside a longer word.
_OPTION_STRING = re.compile(r'(?<![\w-])--[A-Za-z0-9][\w-]*')


def refuse_abbreviations(conf: cfg.ConfigOpts, argv: Sequence[str],
                         commands: Collection[str] = ()) -> None:
    """Refuse an option of the top-level parser that is not written in full.

    argparse expands unambiguous prefixes (``--deb`` for ``--debug``, and in
    tools/run-local ``--daemon 4`` for ``--daemons 4``); oslo.config builds
    that parser without ``allow_abbrev=False``, so the options argparse
    accepted are compared, after parsing, with the option strings its help
    lists. Only the tokens before the first of ``commands`` belong to that
    parser (sub-command parsers are built with ``allow_abbrev=False``).
    """
    helped = io.StringIO()
    conf.print_help(helped)
    known = set(_OPTION_STRING.findall(helped.getvalue()))
    for arg in argv:
        if arg in commands or arg == '--':
            return
        name = arg.split('=', 1)[0]
        if name.startswith('--') and name not in known:
            raise ConfigError(None, None, f'unrecognized arguments: {name} (options are '
                                          'not abbreviated; see --help)')


def parse(conf: cfg.ConfigOpts, argv: Sequence[str], prog: str,
          usage: str | None = None) -> None:
    """Parse the command line and the config files it names (or defaults).

    argparse itself still handles --help and malformed command lines.
    """
    try:
        _call(conf, argv, prog, usage)
    except (cfg.ConfigFilesNotFoundError,
            cfg.ConfigFilesPermissionDeniedError) as exc:
        raise ConfigError(None, None, 'config file '
                          f'{", ".join(exc.config_files)}: not found or '
                          'not readable')
    except cfg.ConfigDirNotFoundError as exc:
        raise ConfigError(None, None,
                          f'config directory {exc.config_dir}: not found')
    except cfg.ConfigFileParseError as exc:
        raise ConfigError(None, None, f'config file {exc.config_file}: '
                          f'cannot parse: {exc.msg}')
    except cfg.RequiredOptError as exc:
        # Report the name as written in a file (keystoneauth's options
        # are named with dashes, e.g. auth-url for auth_url).
        group = _group_name(exc.group)
        # A mistyped line ("backend_url zookeeper://..." lacks its "=") is
        # the likely cause when the same section has an unknown key.
        strays = unknown.unknown_keys(conf, group)
        raise ConfigError(group, exc.opt_name.replace('-', '_'),
                          'required but not set' + (
                              f' (the section has an unknown key {strays[0]!r})'
                              if strays else ''))
    except UnicodeDecodeError as exc:
        raise ConfigError(None, None, f'config file {_undecodable(argv)}: cannot parse: '
                                      f'not UTF-8 text ({exc.reason} at byte {exc.start})')
    except (cfg.Error, ValueError) as exc:
        raise ConfigError(None, None, str(exc))


def _undecodable(argv: Sequence[str]) -> str:
    """The first config file named in ``argv`` that is not UTF-8 text."""
    files = [arg.split('=', 1)[1] for arg in argv if arg.startswith('--config-file=')]
    files += [value for flag, value in zip(argv, argv[1:]) if flag == '--config-file']
    for path in files:
        try:
            with open(path, encoding='utf-8') as text:
                text.read()
        except UnicodeDecodeError:
            return path
        except OSError:
            continue
    return '(in --config-dir)'


def _value_error(group: str, option: str, exc: Exception) -> ConfigError:
    # oslo.config's message starts with where the value came from and may
    # quote it; keep only the reason, which names the offending value for
    # typed options (secret options are strings and cannot fail to parse).
    reason = str(exc).rpartition(' is not valid: ')[2]
    return ConfigError(group, option, f'invalid value: {reason}')


def _check_number(group: str, option: str, value: object) -> None:
    # oslo.config's FloatOpt takes "inf" and "nan" and its bounds let them through (nan
    # compares false with min): an infinite refresh interval or grace never elapses.
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(group, option, f'invalid value: {value} is not a finite number')


def read_all(conf: cfg.ConfigOpts) -> None:
    """Read every option of every group, forcing oslo.config to parse it."""
    for name in list(conf):
        try:
            value = conf[name]
        except (cfg.Error, ValueError) as exc:
            raise _value_error('DEFAULT', name, exc)
        if not isinstance(value, cfg.ConfigOpts.GroupAttr):
            _check_number('DEFAULT', name, value)
            continue
        for option in list(value):
            try:
                _check_number(name, option, value[option])
            except (cfg.Error, ValueError) as exc:
                raise _value_error(name, option, exc)


# Options naming a file read at start, by group: a missing CA bundle was only found at the
# first TLS handshake.
_READ_FILES = {
    **{group: ('cafile', 'certfile', 'keyfile') for group in KEYSTONE_SECTIONS},
    'oslo_messaging_rabbit': ('ssl_ca_file', 'ssl_cert_file', 'ssl_key_file'),
}
# Options naming a file created at start, whose directory must exist.
_CREATED_FILES = (('DEFAULT', 'log_file'), ('fleet', 'audit_log'))
# keystoneauth's session and adapter numbers, which it takes negative and then fails (or
# retries never) at the first request.
_NON_NEGATIVE = ('timeout', 'connect_retries', 'connect_retry_delay', 'status_code_retries',
                 'status_code_retry_delay')
# Names that must not be set empty (their defaults are names).
_NAMES = (('reporter', 'topic'), ('ironic', 'notification_topic'),
          ('ironic', 'notification_exchange'))
# keystoneauth endpoints: a URL without a scheme fails only at the first request.
_ENDPOINTS = ('endpoint_override', 'auth_url', 'endpoint')


def _plugin_opts(conf: cfg.ConfigOpts) -> list[tuple[str, cfg.Opt]]:
    """The options of the auth plugins chosen in the keystoneauth sections, by group."""
    found = []
    for group in KEYSTONE_SECTIONS:
        name = keystone.register_plugin_opts(conf, group)
        if name is not None:
            auth_group = conf[group].auth_section or group
            found += [(auth_group, opt)
                      for opt in ks_loading.get_auth_plugin_conf_options(name)]
    return found


def validate(conf: cfg.ConfigOpts) -> None:
    """Check a parsed configuration; raise ``ConfigError`` on the first fault.
    """
    # Auth plugin options exist only once the plugin is known; registering
    # them first lets read_all parse them and the unknown check know them.
    plugin_opts = _plugin_opts(conf)
    read_all(conf)
    unknown.check(conf, plugin_opts)
    written = set(conf.list_all_sections())
    for group in KEYSTONE_SECTIONS:
        auth_section = conf[group].auth_section
        if auth_section and auth_section not in written:
            # keystoneauth would read an empty section: no auth, silently.
            raise ConfigError(group, 'auth_section',
                              f'names [{auth_section}], which no config file has')
        keystone.check_section(conf, group)
        options = conf[auth_section or group]
        for option in _ENDPOINTS:
            if option in options:
                checks.check_http_url(group, option, options[option])
        for option in _NON_NEGATIVE:
            value = conf[group][option]
            if value is not None and value < 0:
                raise ConfigError(group, option, f'invalid value: {value} is negative')
    checks.check_host(conf.host)
    checks.check_group(conf.coordination.group)
    checks.check_entry_point('DEFAULT', 'baremetal_driver', 'computed.baremetal.drivers',
                             conf.baremetal_driver)
    checks.check_backend_url(conf.coordination.backend_url)
    for group, options in _READ_FILES.items():
        for option in options:
            checks.check_readable_file(group, option, conf[group][option])
    checks.check_log_levels(conf.default_log_levels)
    if conf.log_dir and not os.path.isdir(conf.log_dir):
        raise ConfigError('DEFAULT', 'log_dir', f'directory {conf.log_dir} does not exist')
    for group, option in _CREATED_FILES:
        value = conf[option] if group == 'DEFAULT' else conf[group][option]
        checks.check_writable_directory(group, option, value)
    for group, option in _NAMES:
        checks.check_not_empty(group, option, conf[group][option])
    checks.require_transport_url(conf)
    checks.check_signing_keys(conf.messaging.signing_keys)
    checks.check_transport_url('DEFAULT', conf.transport_url)
    if conf.get_location('batch_size', 'reporter').location is not cfg.Locations.opt_default:
        # Only a batch size the operator chose: a reporter's own file may lower
        # max_reports_per_call below the default batch size it never uses.
        checks.check_batch_size(conf.reporter.batch_size, conf.reporter.max_reports_per_call)
    notifications_url = conf.oslo_messaging_notifications.transport_url
    if notifications_url:
        checks.check_transport_url('oslo_messaging_notifications',
                                   notifications_url)
    if conf.database.connection:
        checks.check_database_connection(conf.database.connection)


# oslo.config's own options, which an operator writes after a sub-command (``computed-manage
# config check --config-file X``) as often as before it; oslo.config reads them only before.
_CONFIG_OPTIONS = ('--config-file', '--config-dir')


def config_options_first(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--config-file``/``--config-dir`` (and their values) moved to the front,
    in their order; everything else keeps its order."""
    first: list[str] = []
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg in _CONFIG_OPTIONS:
            first.append(arg)
            value = next(args, None)
            if value is not None:
                first.append(value)
        elif arg.startswith(tuple(f'{option}=' for option in _CONFIG_OPTIONS)):
            first.append(arg)
        else:
            rest.append(arg)
    return first + rest


def load(argv: Sequence[str], prog: str,
         conf: cfg.ConfigOpts | None = None, usage: str | None = None,
         commands: Collection[str] = ()) -> cfg.ConfigOpts:
    """Register, parse and validate; exit with status 2 on bad configuration.

    Pass ``conf`` to add command-line options (e.g. sub-commands) first,
    ``usage`` to head ``--help``, ``commands`` for the names that end the
    top-level options (see :func:`refuse_abbreviations`).
    """
    conf = conf if conf is not None else cfg.ConfigOpts()
    register_all(conf)
    try:
        parse(conf, argv, prog, usage)
        refuse_abbreviations(conf, argv, commands)
        validate(conf)
    except ConfigError as exc:
        print(f'{prog}: error: {exc}', file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    return conf
