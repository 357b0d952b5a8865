"""The Image service as computed-api reads it: one image by id, a project's membership, and
for the ``/images`` proxy a listing, a change of an image's properties and a deletion.

Owns the Glance calls of ``POST /servers`` (:mod:`computed.api.images` decides on what they
return) and of the ``/images`` proxy (:mod:`computed.api.image_proxy`). Which access is used,
as ``[glance]``'s help says:

* ``[api] auth_strategy = keystone``: the caller's own token (keystonemiddleware's user
  plugin, ``environ['keystone.token_auth']``), as Nova reads images with the user's context:
  Glance itself decides what the caller may see, and the endpoint is the ``image`` service
  of the caller's catalog (or ``[glance] endpoint_override``). No image service in the
  catalog: Glance ids are not taken (:class:`NoImageService`).
* ``noauth2``: the service's access from ``[glance] auth_type``; unset, there is no Image
  service here.

Guarantees: one session per process (built once, no network at start); Glance's 404 is
"not found" (None), its refusals of a request (400, 403, 409, 413) are :class:`GlanceRefused`
with Glance's status and words, anything else that is not an answer (refused connection,
timeout, 5xx, an unexpected status) is :class:`GlanceUnavailable`, which the API answers
with a 503 naming Glance, before anything is written.
"""

from __future__ import annotations

import re
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from computed.runtime import keystone

#: keystonemiddleware's key for the caller's auth plugin in the WSGI environment.
TOKEN_AUTH = 'keystone.token_auth'
GROUP = 'glance'


class NoImageService(LookupError):
    """No Image service is known to this API (for this caller)."""


class GlanceUnavailable(RuntimeError):
    """Glance did not answer (the message says how)."""


class GlanceRefused(RuntimeError):
    """Glance refused the request (``status``: 400, 403, 409 or 413; the message is
    Glance's)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


#: Glance's answers that refuse a request rather than fail.
REFUSALS = frozenset({400, 403, 409, 413})
#: Images asked of Glance per page when listing.
PAGE = 200
PATCH_TYPE = 'application/openstack-images-v2.1-json-patch'


def _glance_message(response: Any) -> str:
    """Glance's words of a refusal (its JSON ``message``, else its text without markup)."""
    try:
        document = response.json()
        text = str(document.get('message') or document.get('title') or document)
    except (ValueError, AttributeError):
        text = re.sub(r'<[^>]*>', ' ', response.text or '')
    return ' '.join(text.split())[:300]


class Glance:
    """Reads images from Glance for ``computed-api`` (thread-safe: one keystoneauth session)."""

    def __init__(self, conf: cfg.ConfigOpts):
        self.conf = conf
        self.user_tokens = conf.api.auth_strategy == 'keystone'
        plugin = keystone.register_plugin_opts(conf, GROUP)
        auth = None
        if plugin and not self.user_tokens:
            keystone.check_section(conf, GROUP)
            auth = ks_loading.load_auth_from_conf_options(conf, GROUP)
        self.enabled = self.user_tokens or auth is not None
        self.session = ks_loading.load_session_from_conf_options(conf, GROUP, auth=auth)

    def _adapter(self, environ: dict[str, Any]) -> ks_adapter.Adapter:
        if not self.enabled:
            raise NoImageService('no Image service is configured ([glance])')
        auth = environ.get(TOKEN_AUTH) if self.user_tokens else None
        adapter = ks_loading.load_adapter_from_conf_options(self.conf, GROUP,
                                                            session=self.session, auth=auth)
        try:
            endpoint = adapter.get_endpoint()
        except ks_exc.EndpointNotFound:
            endpoint = None
        except ks_exc.ClientException as exc:
            raise GlanceUnavailable(f'{type(exc).__name__}: {exc}') from None
        if not endpoint:
            raise NoImageService('the service catalog has no Image service')
        return adapter

    def _call(self, environ: dict[str, Any], method: str, path: str,
              **kwargs: Any) -> dict[str, Any] | None:
        """Glance's JSON answer (``{}`` for none), None for its 404; :class:`GlanceRefused`,
        :class:`GlanceUnavailable` otherwise."""
        adapter = self._adapter(environ)
        try:
            response = adapter.request(path, method, raise_exc=False, **kwargs)
        except ks_exc.ClientException as exc:
            raise GlanceUnavailable(f'{type(exc).__name__}: {exc}') from None
        status = response.status_code
        if status == 404:
            return None
        if status in REFUSALS:
            raise GlanceRefused(status, _glance_message(response))
        if status not in (200, 201, 204):
            raise GlanceUnavailable(f'{method} {path} answered {status}')
        if status == 204 or not response.content:
            return {}
        try:
            return response.json()
        except ValueError:
            raise GlanceUnavailable(f'{method} {path} answered something other than '
                                    'JSON') from None

    def _get(self, environ: dict[str, Any], path: str) -> dict[str, Any] | None:
        return self._call(environ, 'GET', path)

    def endpoint(self, environ: dict[str, Any]) -> str:
        """The Image service's URL (the catalog's, or ``[glance] endpoint_override``)."""
        return str(self._adapter(environ).get_endpoint()).rstrip('/')

    def images(self, environ: dict[str, Any], query: dict[str, str], limit: int,
               marker: str | None = None) -> list[dict[str, Any]]:
        """Up to ``limit`` images Glance lists to the caller with ``query`` (Glance's filters),
        after ``marker``, following Glance's pages. An unknown marker is Glance's 400."""
        found: list[dict[str, Any]] = []
        while len(found) < limit:
            page = min(limit - len(found), PAGE)
            params = dict(query, limit=str(page), **({'marker': marker} if marker else {}))
            document = self._call(environ, 'GET', '/v2/images', params=params)
            if document is None:
                raise GlanceRefused(400, f'marker {marker} could not be found')
            batch = document.get('images') or []
            found.extend(batch)
            if len(batch) < page or not document.get('next'):
                break
            marker = batch[-1]['id']
        return found[:limit]

    def update(self, environ: dict[str, Any], image_id: str,
               changes: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Apply JSON-patch ``changes`` (Glance's v2.1 patch) to ``image_id``; the image as
        Glance answers it, None if Glance does not show it to the caller."""
        return self._call(environ, 'PATCH', f'/v2/images/{image_id}', json=changes,
                          headers={'Content-Type': PATCH_TYPE})

    def delete(self, environ: dict[str, Any], image_id: str) -> bool:
        """Delete ``image_id``; False if Glance does not show it to the caller."""
        return self._call(environ, 'DELETE', f'/v2/images/{image_id}') is not None

    def image(self, environ: dict[str, Any], image_id: str) -> dict[str, Any] | None:
        """Glance's document of ``image_id``, None if Glance does not show it to the caller."""
        return self._get(environ, f'/v2/images/{image_id}')

    def is_member(self, environ: dict[str, Any], image_id: str, project_id: str) -> bool:
        """Whether ``project_id`` is a member of the shared image ``image_id``."""
        return self._get(environ, f'/v2/images/{image_id}/members/{project_id}') is not None
