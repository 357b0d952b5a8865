"""keystoneauth sessions and adapters built from a keystoneauth section.

Owns the translation of ``[ironic]`` / ``[placement]`` (see
``computed.conf.ksa``) into keystoneauth1 objects. Guarantees: nothing here
touches the network; every configuration problem surfaces as a
``ConfigError`` naming the group and option, never as a keystoneauth
exception. The session is a plain ``keystoneauth1.session.Session``, on which
the Ironic driver builds its own adapter (version discovery included).

The environment is read once, when the session is made, not at every request:
requests, trusting the environment, looks at every variable for proxies (twice),
for a netrc file and for a CA bundle at each request, a sixth of the client's
CPU for a request to Placement (a reporter sends one or two per provider). When
the environment names no proxy and no netrc file exists, the session does not
trust it (:func:`environment_read_once`): the one thing left to take from it, a
CA bundle (``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``), is given to the session
instead, as requests would have used it. Otherwise it trusts it as before.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from oslo_config import cfg

from computed.conf.errors import ConfigError

_HINT = ('password for Keystone; none + endpoint_override or admin_token + '
         'endpoint + token for a service running without Keystone')
_INTERFACES = ('internal', 'public', 'admin')


def _auth_group(conf: cfg.ConfigOpts, group: str) -> str:
    """The group holding the auth plugin options (``auth_section`` or own)."""
    section = conf[group].auth_section
    if not section:
        return group
    if section not in conf:
        # keystoneauth reads auth_type from the referenced section, so it
        # must carry the auth options even if nothing else registered it.
        conf.register_group(cfg.OptGroup(section))
        ks_loading.register_auth_conf_options(conf, section)
    return section


def register_plugin_opts(conf: cfg.ConfigOpts, group: str) -> str | None:
    """Register the options of the chosen auth plugin; return its name.

    Plugin options only exist once ``auth_type`` is known, and must be
    registered before they can be read (and validated).
    """
    auth_group = _auth_group(conf, group)
    name = conf[auth_group].auth_type
    if not name:
        return None
    try:
        opts = ks_loading.get_auth_plugin_conf_options(name)
    except ks_exc.NoMatchingPlugin:
        raise ConfigError(auth_group, 'auth_type',
                          f'unknown auth plugin {name!r} (use {_HINT})')
    try:
        conf.register_opts(opts, group=auth_group)
    except cfg.DuplicateOptError as exc:
        # A plugin option named like a session or adapter option.
        raise ConfigError(auth_group, 'auth_type',
                          f'auth plugin {name!r} cannot be used here: {exc}')
    return name


def _check_adapter(conf: cfg.ConfigOpts, group: str) -> None:
    # keystoneauth only finds these when the adapter is built, and then
    # raises a TypeError that does not name the option.
    options = conf[group]
    for interface in options.valid_interfaces or ():
        if interface not in _INTERFACES:
            raise ConfigError(group, 'valid_interfaces',
                              f'unknown interface {interface!r} (use '
                              f'{", ".join(_INTERFACES)})')
    if options.version and (options.min_version or options.max_version):
        raise ConfigError(group, 'version',
                          'cannot be combined with min_version/max_version')


def check_section(conf: cfg.ConfigOpts, group: str,
                  required: bool = False) -> None:
    """Check that ``group`` can give a session, without network access.

    An unset ``auth_type`` is accepted unless ``required``: programs that
    do not talk to this service yet do not need it configured.
    """
    _check_adapter(conf, group)
    name = register_plugin_opts(conf, group)
    auth_group = _auth_group(conf, group)
    if name is None:
        if required:
            raise ConfigError(auth_group, 'auth_type',
                              f'required to reach the {group} service '
                              f'(use {_HINT})')
        return
    try:
        ks_loading.load_auth_from_conf_options(conf, group)
    except ks_exc.MissingRequiredOptions as exc:
        raise ConfigError(auth_group, exc.options[0].dest,
                          f'required by auth_type = {name}')
    options = conf[auth_group]
    if name == 'admin_token':
        # keystoneauth marks neither as required, but a token without an
        # endpoint (or the reverse) cannot reach anything.
        for opt in ('endpoint', 'token'):
            if not options[opt]:
                raise ConfigError(auth_group, opt,
                                  'required by auth_type = admin_token')
    if name == 'none' and not (conf[group].endpoint_override
                               or options.endpoint):
        raise ConfigError(group, 'endpoint_override',
                          'required by auth_type = none (there is no '
                          'service catalog to find the endpoint in)')


#: Where requests looks for a netrc file when ``NETRC`` is not set (requests.utils.NETRC_FILES).
NETRC_FILES = ('~/.netrc', '~/_netrc')
#: The variables requests takes a CA bundle from, in its order.
CA_BUNDLE_VARIABLES = ('REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE')


class _Trusted:
    """The environment must be read at every request (see :func:`environment_read_once`)."""


TRUSTED = _Trusted()


def environment_read_once(environ: Mapping[str, str],
                          netrc_files: Collection[str]) -> str | None | _Trusted:
    """PURE: what a session takes from the environment, when requests need not look again.

    ``netrc_files`` are the netrc files that exist. (On Linux requests takes proxies from the
    environment alone.) :data:`TRUSTED` when requests must keep
    reading the environment at every request: a proxy variable (any ``*_proxy``, in any case,
    set and not empty: ``no_proxy`` too, which is decided per URL) or a netrc file. Otherwise
    the CA bundle the environment names (None: none), the only other thing requests takes from
    it."""
    if netrc_files or any(value and name.lower().endswith('_proxy')
                          for name, value in environ.items()):
        return TRUSTED
    for name in CA_BUNDLE_VARIABLES:
        if environ.get(name):
            return environ[name]
    return None


def _netrc_files(environ: Mapping[str, str]) -> list[str]:
    """The netrc files requests would read (``NETRC``, else its defaults) that exist."""
    names = [environ['NETRC']] if environ.get('NETRC') is not None else NETRC_FILES
    return [name for name in names if os.path.exists(os.path.expanduser(name))]


def load_session(conf: cfg.ConfigOpts, group: str) -> ks_session.Session:
    """A session authenticated as ``[group]`` says (the environment read once, when it can
    be: see the module docstring)."""
    check_section(conf, group, required=True)
    auth = ks_loading.load_auth_from_conf_options(conf, group)
    session = ks_loading.load_session_from_conf_options(conf, group, auth=auth)
    found = environment_read_once(os.environ, _netrc_files(os.environ))
    if found is not TRUSTED:
        session.session.trust_env = False
        if found is not None and session.verify is True:
            session.verify = found  # what requests took from the environment at each request
    return session


def load_adapter(conf: cfg.ConfigOpts, group: str) -> ks_adapter.Adapter:
    """An adapter for ``[group]``'s service (type, interface, endpoint)."""
    session = load_session(conf, group)
    return ks_loading.load_adapter_from_conf_options(
        conf, group, session=session)
