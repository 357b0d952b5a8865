"""The version documents: ``GET /`` (every version) and ``GET /v2.1`` (this one).

Owns what version discovery (keystoneauth, openstacksdk) reads: the version's id, status,
``min_version`` and ``version`` (the microversion range), and its links, built from the URL the
client used (behind a proxy, ``http_proxy_to_wsgi`` makes that the proxy's). No authentication
is needed, as in Nova.
"""

from __future__ import annotations

from typing import Any

import webob

from computed.api import microversion
from computed.api.request import PREFIX, json_response

UPDATED = '2013-07-23T11:33:21Z'
MEDIA_TYPES = [{'base': 'application/json',
                'type': 'application/vnd.openstack.compute+json;version=2.1'}]


def _version(root: str) -> dict[str, Any]:
    return {'id': 'v2.1', 'status': 'CURRENT', 'version': str(microversion.MAX_VERSION),
            'min_version': str(microversion.MIN_VERSION), 'updated': UPDATED,
            'links': [{'rel': 'self', 'href': f'{root}{PREFIX}/'},
                      {'rel': 'describedby', 'type': 'text/html',
                       'href': 'https://docs.openstack.org/'}],
            'media-types': MEDIA_TYPES}


def versions(request: webob.Request) -> webob.Response:
    """``GET /``: the versions this API serves (v2.1 only)."""
    return json_response(200, {'versions': [_version(request.application_url)]})


def version(request: webob.Request) -> webob.Response:
    """``GET /v2.1``: this version."""
    return json_response(200, {'version': _version(request.application_url)})
