"""Options of the ``[glance]`` group: how computed-api reaches the Image service.

A keystoneauth section (see ``computed.conf.ksa``) with service type ``image``. It is read by
``computed-api`` only, to check that an ``imageRef`` naming a Glance image exists, is active
and is visible to the caller's project (:mod:`computed.api.images`); the daemons never talk
to Glance (Ironic fetches the image itself). With ``[api] auth_strategy = keystone`` the
caller's own token is used, as Nova does, and only the session and adapter options here count
(the endpoint comes from the caller's catalog unless ``endpoint_override`` is set); with
``noauth2``, ``auth_type`` here (``none`` + ``endpoint_override`` for a Glance without
Keystone) turns Glance ids on and the service's own access is used. Unset, with noauth2,
``imageRef`` must be an image URL.
"""

from __future__ import annotations

from oslo_config import cfg

from computed.conf import ksa

NAME = 'glance'
SERVICE_TYPE = 'image'


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts (see computed.conf.placement).
    return cfg.OptGroup(
        NAME,
        title='Glance',
        help='Access to the OpenStack Image service, where computed-api checks the Glance '
             'images servers are built from. In keystone mode the caller\'s token is used '
             '(the session and adapter options still apply); with noauth2, set auth_type '
             '(none + endpoint_override for a Glance without Keystone) to accept Glance ids.')


def register_opts(conf: cfg.ConfigOpts) -> None:
    ksa.register(conf, group(), SERVICE_TYPE)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ksa.list_opts(SERVICE_TYPE)}
