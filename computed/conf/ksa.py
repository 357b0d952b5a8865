"""Shared shape of the keystoneauth sections (``[ironic]``, ``[placement]``).

A keystoneauth section holds three option sets, all owned by keystoneauth1:
the session (TLS, timeouts), the auth plugin (``auth_type`` and the chosen
plugin's own options, registered only once the plugin is known) and the
adapter (service type, interfaces, ``endpoint_override``, retries). This
module registers and lists them the same way for every section so the sample
file and the running daemon agree. It defines no options of its own, but gives
keystoneauth's ``timeout`` a default (:data:`HTTP_TIMEOUT`) and a lower bound:
keystoneauth's own default is no timeout at all, and a service that accepts a
connection and never answers would hold its caller (and the database row lock
a reporter holds while it writes to Placement) for ever.
"""

from __future__ import annotations

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

#: Auth plugins documented in the sample: ``password`` for a real Keystone,
#: ``admin_token`` and ``none`` for services running with noauth.
SAMPLE_AUTH_PLUGINS = ('password', 'admin_token', 'none')

# Reaching a service from a controller node: prefer the internal endpoint.
_VALID_INTERFACES = ['internal', 'public']

#: Seconds every request to Ironic or Placement may wait for the connection and then for each
#: part of the answer. Their slowest answers computed asks for (a page of 1,000 Ironic nodes,
#: Placement's listing of 10,000 providers) take a few seconds; 30 s is far above that, and below
#: ``[reporter] call_timeout`` (120 s), so that a reporter whose Placement hangs answers its
#: batch (``failed``, resent later) before the daemon gives up on the call.
HTTP_TIMEOUT = 30.0


def _timeout_opt() -> cfg.Opt:
    return cfg.FloatOpt(
        'timeout', default=HTTP_TIMEOUT, min=1,
        help='Seconds a request to this service may wait to connect, and then for each part '
             'of the answer, before it fails (the request is then retried as for a service '
             'that is down). The slowest answers computed asks for (a page of 1,000 Ironic '
             'nodes, a listing of every provider from Placement) take a few seconds; the '
             f'default of {HTTP_TIMEOUT:g} s is far above that and below [reporter] '
             'call_timeout, so a reporter whose Placement hangs still answers its batch in '
             'time. There is no way to wait for ever: a service that accepts connections and '
             'never answers must not hold computed.')


def session_opts() -> list[cfg.Opt]:
    """keystoneauth's session options, with computed's ``timeout`` (:data:`HTTP_TIMEOUT`)."""
    return [_timeout_opt() if opt.dest == 'timeout' else opt
            for opt in ks_loading.get_session_conf_options()]


def adapter_opts(service_type: str) -> list[cfg.Opt]:
    """Adapter options with this section's service type as default.

    Built here rather than through ``register_adapter_conf_options`` because
    the default ``service_type`` must also show in the generated sample.
    """
    opts = ks_loading.get_adapter_conf_options(include_deprecated=False)
    cfg.set_defaults(opts, service_type=service_type,
                     valid_interfaces=_VALID_INTERFACES)
    return opts


def register(conf: cfg.ConfigOpts, group: cfg.OptGroup,
             service_type: str) -> None:
    """Register session, auth and adapter options under ``group``."""
    conf.register_group(group)
    conf.register_opts(session_opts(), group=group.name)
    ks_loading.register_auth_conf_options(conf, group.name)
    conf.register_opts(adapter_opts(service_type), group=group.name)


def list_opts(service_type: str) -> list[cfg.Opt]:
    """Every option a keystoneauth section may hold, for the sample file."""
    opts: list[cfg.Opt] = []
    opts += session_opts()
    opts += ks_loading.get_auth_common_conf_options()
    for plugin in SAMPLE_AUTH_PLUGINS:
        opts += ks_loading.get_auth_plugin_conf_options(plugin)
    opts += adapter_opts(service_type)
    # Plugins share some options (admin_token and none both take
    # 'endpoint'); the generator wants each name once.
    unique: dict[str, cfg.Opt] = {}
    for opt in opts:
        unique.setdefault(opt.dest, opt)
    return list(unique.values())
