"""Options of the ``[DEFAULT]`` group that belong to computed itself.

``transport_url`` also lives in ``[DEFAULT]`` but is owned and registered by
oslo.messaging (see ``computed.conf.messaging``); oslo.log owns the logging
options there.
"""

from __future__ import annotations

import socket

from oslo_config import cfg

host = cfg.StrOpt(
    'host',
    default=socket.gethostname(),
    sample_default='<current hostname>',
    help='Name of this computed daemon: its member id in the coordination '
         'group and its identity on the hash ring. Must be unique in the '
         'fleet. The daemon normalises it to lower case (and drops '
         'surrounding blanks and a trailing dot), so "Ctl-1.Example.org." '
         'and "ctl-1.example.org" are the same host.')

baremetal_driver = cfg.StrOpt(
    'baremetal_driver',
    default='ironic',
    help='Name of the bare metal driver the daemon manages nodes with: an entry '
         'point in the group computed.baremetal.drivers. computed ships '
         '"ironic" (OpenStack Ironic, configured in [ironic]).')

ALL_OPTS = [host, baremetal_driver]


def normalise_host(value: str) -> str:
    """Return the canonical form of a host name.

    Host names are case-insensitive in DNS, but the hash ring and the
    coordination group compare strings, so two spellings of one host would
    otherwise count as two members.
    """
    return value.strip().rstrip('.').lower()


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(ALL_OPTS)


def list_opts() -> dict[str, list[cfg.Opt]]:
    return {'DEFAULT': ALL_OPTS}
