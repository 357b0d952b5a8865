"""``/os-networks``: Nova's network proxy (microversions 2.1 to 2.35), over servers that have no
networks.

Owns the two answers computed gives it. Nova's lists the networks its project sees in Neutron;
computed's servers are built without networks (docs/api.md "Not supported": no ports, no
addresses), and computed reads no network service, so the list is empty and every network is
a 404 (``Network not found``, Nova's words), for anyone authenticated (Nova's
``os_compute_api:os-networks:list`` and ``:show`` defaults: the readers of the caller's own
project, which is anyone with a token). As
Nova's, the proxy is gone from 2.36 (a 404), and its writes (creating, deleting, associating
networks: nova-network's) are a 410 Gone at every microversion, as Nova answers them since
nova-network was removed.
"""

from __future__ import annotations

import webob

from computed.api import errors, policy
from computed.api.request import Call, json_response

READ = 'compute:networks:read'


def _allowed(call: Call) -> None:
    if call.at_least(2, 36):
        raise errors.NotFound('No resource at /os-networks from 2.36 on (Nova removed its '
                              'network proxy: use the Networking API)')
    policy.authorize(call.backends.enforcer, READ, call.context)


def index(call: Call) -> webob.Response:
    _allowed(call)
    return json_response(200, {'networks': []})


def show(call: Call) -> webob.Response:
    _allowed(call)
    raise errors.NotFound('Network not found')


def gone(call: Call) -> webob.Response:
    """nova-network's writes: 410, as Nova's."""
    raise errors.Gone('nova-network is gone: computed (as Nova) manages no networks')
