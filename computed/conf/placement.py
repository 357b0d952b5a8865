"""Options of the ``[placement]`` group: how computed reaches Placement.

Only a keystoneauth section (see ``computed.conf.ksa``) with service type
``placement``; computed reports Ironic nodes there as resource providers.
"""

from __future__ import annotations

from oslo_config import cfg

from computed.conf import ksa

NAME = 'placement'


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts: oslo.config keeps a group's options
    # on the OptGroup itself, so sharing one would leak options (e.g. an
    # auth plugin's) from one ConfigOpts into the next.
    return cfg.OptGroup(
        NAME,
        title='Placement',
        help='Access to the OpenStack Placement API. Authentication uses '
             'keystoneauth: auth_type = password against Keystone, or '
             'auth_type = none + endpoint_override (or admin_token + '
             'endpoint + token) for a Placement running with noauth2.')


SERVICE_TYPE = 'placement'


def register_opts(conf: cfg.ConfigOpts) -> None:
    ksa.register(conf, group(), SERVICE_TYPE)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ksa.list_opts(SERVICE_TYPE)}
