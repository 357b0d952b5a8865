"""Who is calling: keystone tokens or noauth2, turned into an oslo.context request context.

Owns authentication of the compute API, chosen by ``[api] auth_strategy``:

* ``keystone``: keystonemiddleware's ``auth_token`` validates the ``X-Auth-Token`` against
  Keystone (configured in ``[keystone_authtoken]``) and sets the identity headers. Its decision
  is delayed (``delay_auth_decision``) so that a refused token gets the Compute API's own 401
  body from :class:`ContextMiddleware`, like every other error.
* ``noauth2`` (tests, a local run; never production): the token ``USER:PROJECT`` is taken as
  that user in that project (a token without ``:`` is both); the user ``admin`` has the roles
  admin, member and reader, anyone else member and reader. Identity headers a client sent are
  dropped first, as auth_token drops them.

Either way :class:`ContextMiddleware` builds the request's
:class:`oslo_context.context.RequestContext` from the identity headers (``environ[CONTEXT]``),
and refuses an unauthenticated request with a 401.
"""

from __future__ import annotations

from typing import Any

from oslo_config import cfg
from oslo_context import context as oslo_context

from computed.api import errors

CONTEXT = 'computed.context'
ADMIN_USER = 'admin'
_IDENTITY = ('HTTP_X_USER_ID', 'HTTP_X_USER_NAME', 'HTTP_X_PROJECT_ID', 'HTTP_X_PROJECT_NAME',
             'HTTP_X_ROLES', 'HTTP_X_IDENTITY_STATUS', 'HTTP_X_SERVICE_ROLES',
             'HTTP_X_IS_ADMIN_PROJECT', 'HTTP_X_SYSTEM_SCOPE', 'HTTP_X_DOMAIN_ID')


class NoAuth2:
    """WSGI middleware: ``X-Auth-Token: USER:PROJECT`` -> identity headers."""

    def __init__(self, application: Any):
        self.application = application

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        for key in _IDENTITY:
            environ.pop(key, None)
        token = environ.get('HTTP_X_AUTH_TOKEN', '').strip()
        if token:
            user, _sep, project = token.partition(':')
            project = project or user
            roles = ['admin', 'member', 'reader'] if user == ADMIN_USER else ['member', 'reader']
            environ.update({'HTTP_X_USER_ID': user, 'HTTP_X_USER_NAME': user,
                            'HTTP_X_PROJECT_ID': project, 'HTTP_X_PROJECT_NAME': project,
                            'HTTP_X_ROLES': ','.join(roles),
                            'HTTP_X_IDENTITY_STATUS': 'Confirmed'})
        return self.application(environ, start_response)


class ContextMiddleware:
    """WSGI middleware: the request context from the identity headers; 401 without them."""

    def __init__(self, application: Any):
        self.application = application

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get('HTTP_X_IDENTITY_STATUS') != 'Confirmed' or \
                not environ.get('HTTP_X_PROJECT_ID'):
            raise errors.Unauthorized('The request you have made requires authentication.',
                                      {'WWW-Authenticate': 'Keystone uri="unknown"'})
        environ[CONTEXT] = oslo_context.RequestContext.from_environ(environ)
        return self.application(environ, start_response)


def middleware(application: Any, conf: cfg.ConfigOpts) -> Any:
    """``application`` behind the authentication ``[api] auth_strategy`` names."""
    with_context = ContextMiddleware(application)
    if conf.api.auth_strategy == 'noauth2':
        return NoAuth2(with_context)
    from keystonemiddleware import auth_token
    return auth_token.AuthProtocol(with_context, {'oslo_config_config': conf,
                                                  'delay_auth_decision': True})
