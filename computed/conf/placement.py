"""Options of the ``[placement]`` group: how computed reaches Placement.

A keystoneauth section (see ``computed.conf.ksa``) with service type
``placement``, where computed reports Ironic nodes as resource providers, and
the reporter's resync of Placement (:mod:`computed.reporter.resync`).
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

OPTS = [
    cfg.IntOpt('resync_interval', default=300, min=0,
               help='Seconds between two resyncs of Placement by computed-reporter: '
                    'Placement\'s providers (one listing, with their generations) are '
                    'compared with what computed last applied, and every difference made '
                    'by someone else (a provider deleted or lost in a restore, traits or '
                    'inventory changed by hand) is repaired, ordered and fenced like a '
                    'report. One reporter replica resyncs at a time. 0 turns it off.'),
    cfg.IntOpt('resync_max_repairs', default=1000, min=1,
               help='At most this many providers repaired per resync round; the rest are '
                    'found again by the next round (logged when the cap is hit).'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    ksa.register(conf, group(), SERVICE_TYPE)
    conf.register_opts(OPTS, group=NAME)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): OPTS + ksa.list_opts(SERVICE_TYPE)}
