"""The version documents: ``GET /`` (every version), ``GET /v2.1`` and ``GET /v2``.

Owns what version discovery (keystoneauth, openstacksdk, Tempest) reads: each version's id,
status, ``min_version`` and ``version`` (the microversion range), and its links, built from the
URL the client used (behind a proxy, ``http_proxy_to_wsgi`` makes that the proxy's). No
authentication is needed, as in Nova.

Two versions, listed in Nova's order: ``v2.0`` (``SUPPORTED``, no microversions: served under
``/v2`` as the v2.1 API at microversion 2.1, which is what Nova's v2.0 is) and ``v2.1``
(``CURRENT``, microversions 2.1 to :data:`computed.api.microversion.MAX_VERSION`).
"""

from __future__ import annotations

from typing import Any

import webob

from computed.api import microversion
from computed.api.request import PREFIX, PREFIX_V2_0, json_response

UPDATED = '2013-07-23T11:33:21Z'
UPDATED_V2_0 = '2011-01-21T11:33:21Z'
MEDIA_TYPES = {
    PREFIX: [{'base': 'application/json',
              'type': 'application/vnd.openstack.compute+json;version=2.1'}],
    PREFIX_V2_0: [{'base': 'application/json',
                   'type': 'application/vnd.openstack.compute+json;version=2'}],
}


def _version(root: str, prefix: str, detail: bool) -> dict[str, Any]:
    links = [{'rel': 'self', 'href': f'{root}{prefix}/'}]
    if detail:
        links.append({'rel': 'describedby', 'type': 'text/html',
                      'href': 'https://docs.openstack.org/'})
    if prefix == PREFIX_V2_0:
        doc = {'id': 'v2.0', 'status': 'SUPPORTED', 'version': '', 'min_version': '',
               'updated': UPDATED_V2_0, 'links': links}
    else:
        doc = {'id': 'v2.1', 'status': 'CURRENT', 'version': str(microversion.MAX_VERSION),
               'min_version': str(microversion.MIN_VERSION), 'updated': UPDATED,
               'links': links}
    if detail:
        doc['media-types'] = MEDIA_TYPES[prefix]
    return doc


def versions(request: webob.Request) -> webob.Response:
    """``GET /``: the versions this API serves, v2.0 first (as Nova lists them)."""
    return json_response(200, {'versions': [
        _version(request.application_url, prefix, detail=False)
        for prefix in (PREFIX_V2_0, PREFIX)]})


def version(request: webob.Request, prefix: str) -> webob.Response:
    """``GET /v2.1`` or ``GET /v2``: that version."""
    return json_response(200, {'version': _version(request.application_url, prefix,
                                                   detail=True)})
