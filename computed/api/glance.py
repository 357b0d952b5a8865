"""The Image service as computed-api reads it: one image by id, and a project's membership.

Owns the Glance calls of ``POST /servers`` (:mod:`computed.api.images` decides on what they
return). Which access is used, as ``[glance]``'s help says:

* ``[api] auth_strategy = keystone``: the caller's own token (keystonemiddleware's user
  plugin, ``environ['keystone.token_auth']``), as Nova reads images with the user's context:
  Glance itself decides what the caller may see, and the endpoint is the ``image`` service
  of the caller's catalog (or ``[glance] endpoint_override``). No image service in the
  catalog: Glance ids are not taken (:class:`NoImageService`).
* ``noauth2``: the service's access from ``[glance] auth_type``; unset, there is no Image
  service here.

Guarantees: one session per process (built once, no network at start); Glance's 404 is
"not found" (None), anything else that is not an answer (refused connection, timeout, 5xx,
an unexpected status) is :class:`GlanceUnavailable`, which the API answers with a 503
naming Glance, before anything is written.
"""

from __future__ import annotations

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

    def _get(self, environ: dict[str, Any], path: str) -> dict[str, Any] | None:
        adapter = self._adapter(environ)
        try:
            response = adapter.get(path, raise_exc=False)
        except ks_exc.ClientException as exc:
            raise GlanceUnavailable(f'{type(exc).__name__}: {exc}') from None
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise GlanceUnavailable(f'GET {path} answered {response.status_code}')
        try:
            return response.json()
        except ValueError:
            raise GlanceUnavailable(f'GET {path} answered something other than JSON') from None

    def image(self, environ: dict[str, Any], image_id: str) -> dict[str, Any] | None:
        """Glance's document of ``image_id``, None if Glance does not show it to the caller."""
        return self._get(environ, f'/v2/images/{image_id}')

    def is_member(self, environ: dict[str, Any], image_id: str, project_id: str) -> bool:
        """Whether ``project_id`` is a member of the shared image ``image_id``."""
        return self._get(environ, f'/v2/images/{image_id}/members/{project_id}') is not None
