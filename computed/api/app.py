"""The compute API as a WSGI application: middleware, routes, dispatch.

Owns the order of the middleware and the URL map. From the outside in: ``http_proxy_to_wsgi``
(the client's URL behind a proxy), ``request_id`` (an ``x-openstack-request-id`` on every
response), CORS, the fault wrapper (:mod:`computed.api.errors`: the Compute API's error bodies,
no traceback, 500s counted), then by path: the version documents, ``/healthcheck``
(oslo.middleware's application) and ``/metrics`` (no authentication), or the authentication of
``[api] auth_strategy`` (:mod:`computed.api.auth`) and the router.

Routes are a ``routes.Mapper``; each names a controller function ``f(call) -> Response``
(:class:`computed.api.request.Call`). ``/v2.1/{project_id}/...`` is served as ``/v2.1/...``
(Keystone catalogs of Nova often carry the project in the URL); the project in the URL must be
the caller's, unless the caller is an admin. A path with a trailing slash names nothing (404),
as in Nova. The requested microversion
(:mod:`computed.api.microversion`) is parsed before dispatch and echoed on every response.
``/v2/...`` is Nova's v2.0: the same routes at microversion 2.1, whatever the headers ask, and
no microversion headers in the answers (:mod:`computed.api.versions` lists it).

Threads: one application per worker process serves all of cheroot's request threads at once
(:mod:`computed.api.httpd`). What they share is made once and then only read, or guards itself:
the URL map (``routes`` builds its regular expressions once, under its own lock, and keeps
each request's match in a thread-local), the :class:`~computed.api.backends.Backends` (see
there), the policy enforcer (:class:`computed.api.policy.Enforcer`: one check at a time),
keystonemiddleware's token cache (a pool of caches, one per request at a time) and the
response counters of :mod:`computed.api.errors` (prometheus_client's, locked). A request's
context, :class:`~computed.api.request.Call` and compiled name filter belong to its thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import prometheus_client
import routes
import webob
from oslo_config import cfg
from oslo_middleware import cors, healthcheck, http_proxy_to_wsgi, request_id

from computed.api import (
    aggregates,
    auth,
    errors,
    extensions,
    external_events,
    flavor_access,
    flavors,
    hosts,
    hypervisors,
    image_proxy,
    keypairs,
    microversion,
    migrations,
    networks,
    policy,
    quota_classes,
    quotas,
    server_actions,
    server_diagnostics,
    server_edits,
    servers,
    services,
    usage,
    usage_audit,
    versions,
    zones,
)
from computed.api.backends import Backends
from computed.api.request import PREFIX, PREFIX_KEY, PREFIX_V2_0, Call

Controller = Callable[[Call], webob.Response]

#: (method, path, controller) of every route under /v2.1.
ROUTES: list[tuple[str, str, Controller]] = [
    ('GET', '/flavors', flavors.index),
    ('GET', '/flavors/detail', flavors.detail),
    ('POST', '/flavors', flavors.create),
    ('GET', '/flavors/{flavor_id}', flavors.show),
    ('PUT', '/flavors/{flavor_id}', flavors.update),
    ('DELETE', '/flavors/{flavor_id}', flavors.delete),
    ('GET', '/flavors/{flavor_id}/os-extra_specs', flavors.extra_specs_index),
    ('POST', '/flavors/{flavor_id}/os-extra_specs', flavors.extra_specs_create),
    ('GET', '/flavors/{flavor_id}/os-extra_specs/{key}', flavors.extra_spec_show),
    ('PUT', '/flavors/{flavor_id}/os-extra_specs/{key}', flavors.extra_spec_update),
    ('DELETE', '/flavors/{flavor_id}/os-extra_specs/{key}', flavors.extra_spec_delete),
    ('GET', '/flavors/{flavor_id}/os-flavor-access', flavor_access.index),
    ('POST', '/flavors/{flavor_id}/action', flavor_access.action),
    ('GET', '/servers', servers.index),
    ('GET', '/servers/detail', servers.detail),
    ('POST', '/servers', servers.create),
    ('GET', '/servers/{server_id}', servers.show),
    ('DELETE', '/servers/{server_id}', servers.delete),
    ('POST', '/servers/{server_id}/action', server_actions.action),
    ('GET', '/servers/{server_id}/ips', servers.ips),
    ('GET', '/servers/{server_id}/ips/{network}', servers.ips_of_network),
    ('GET', '/servers/{server_id}/os-security-groups', servers.security_groups),
    ('GET', '/servers/{server_id}/os-interface', servers.interfaces),
    ('GET', '/servers/{server_id}/diagnostics', server_diagnostics.show),
    ('PUT', '/servers/{server_id}', server_edits.update),
    ('GET', '/servers/{server_id}/metadata', server_edits.metadata_index),
    ('POST', '/servers/{server_id}/metadata', server_edits.metadata_merge),
    ('PUT', '/servers/{server_id}/metadata', server_edits.metadata_replace),
    ('GET', '/servers/{server_id}/metadata/{key}', server_edits.metadata_show),
    ('PUT', '/servers/{server_id}/metadata/{key}', server_edits.metadata_set),
    ('DELETE', '/servers/{server_id}/metadata/{key}', server_edits.metadata_delete),
    ('GET', '/servers/{server_id}/tags', server_edits.tags_index),
    ('PUT', '/servers/{server_id}/tags', server_edits.tags_replace),
    ('DELETE', '/servers/{server_id}/tags', server_edits.tags_clear),
    ('GET', '/servers/{server_id}/tags/{tag}', server_edits.tag_show),
    ('PUT', '/servers/{server_id}/tags/{tag}', server_edits.tag_add),
    ('DELETE', '/servers/{server_id}/tags/{tag}', server_edits.tag_delete),
    ('GET', '/images', image_proxy.index),
    ('GET', '/images/detail', image_proxy.detail),
    ('GET', '/images/{image_id}', image_proxy.show),
    ('DELETE', '/images/{image_id}', image_proxy.delete),
    ('GET', '/images/{image_id}/metadata', image_proxy.metadata_index),
    ('POST', '/images/{image_id}/metadata', image_proxy.metadata_merge),
    ('PUT', '/images/{image_id}/metadata', image_proxy.metadata_replace),
    ('GET', '/images/{image_id}/metadata/{key}', image_proxy.metadata_show),
    ('PUT', '/images/{image_id}/metadata/{key}', image_proxy.metadata_set),
    ('DELETE', '/images/{image_id}/metadata/{key}', image_proxy.metadata_delete),
    ('GET', '/os-quota-sets/{project_id}', quotas.show),
    ('GET', '/os-quota-sets/{project_id}/defaults', quotas.defaults),
    ('GET', '/os-quota-sets/{project_id}/detail', quotas.detail),
    ('PUT', '/os-quota-sets/{project_id}', quotas.update),
    ('DELETE', '/os-quota-sets/{project_id}', quotas.reset),
    ('GET', '/limits', quotas.limits),
    ('GET', '/os-quota-class-sets/{quota_class}', quota_classes.show),
    ('PUT', '/os-quota-class-sets/{quota_class}', quota_classes.update),
    ('GET', '/os-keypairs', keypairs.index),
    ('POST', '/os-keypairs', keypairs.create),
    ('GET', '/os-keypairs/{name}', keypairs.show),
    ('DELETE', '/os-keypairs/{name}', keypairs.delete),
    ('GET', '/os-services', services.index),
    ('PUT', '/os-services/{service_id}', services.update),
    ('GET', '/os-hosts', hosts.index),
    ('GET', '/os-hosts/{host_name}', hosts.show),
    ('PUT', '/os-hosts/{host_name}', hosts.update),
    ('GET', '/os-hosts/{host_name}/startup', hosts.startup),
    ('GET', '/os-hosts/{host_name}/shutdown', hosts.shutdown),
    ('GET', '/os-hosts/{host_name}/reboot', hosts.reboot),
    ('GET', '/os-hypervisors', hypervisors.index),
    ('GET', '/os-hypervisors/detail', hypervisors.detail),
    ('GET', '/os-hypervisors/statistics', hypervisors.statistics_view),
    ('GET', '/os-hypervisors/{hypervisor_id}', hypervisors.show),
    ('GET', '/os-hypervisors/{hypervisor_id}/uptime', hypervisors.uptime),
    ('GET', '/os-hypervisors/{pattern}/search', hypervisors.search),
    ('GET', '/os-hypervisors/{pattern}/servers', hypervisors.servers),
    ('GET', '/os-availability-zone', zones.index),
    ('GET', '/os-availability-zone/detail', zones.detail),
    ('GET', '/os-aggregates', aggregates.index),
    ('POST', '/os-aggregates', aggregates.create),
    ('GET', '/os-aggregates/{aggregate_id}', aggregates.show),
    ('PUT', '/os-aggregates/{aggregate_id}', aggregates.update),
    ('DELETE', '/os-aggregates/{aggregate_id}', aggregates.delete),
    ('POST', '/os-aggregates/{aggregate_id}/action', aggregates.action),
    ('GET', '/os-simple-tenant-usage', usage.index),
    ('GET', '/os-simple-tenant-usage/{tenant_id}', usage.show),
    ('GET', '/extensions', extensions.index),
    ('GET', '/extensions/{alias}', extensions.show),
    ('GET', '/os-migrations', migrations.index),
    ('POST', '/os-server-external-events', external_events.create),
    ('GET', '/os-networks', networks.index),
    ('POST', '/os-networks', networks.gone),
    ('POST', '/os-networks/add', networks.gone),
    ('GET', '/os-networks/{network_id}', networks.show),
    ('DELETE', '/os-networks/{network_id}', networks.gone),
    ('POST', '/os-networks/{network_id}/action', networks.gone),
    ('GET', '/os-instance_usage_audit_log', usage_audit.index),
    ('GET', '/os-instance_usage_audit_log/{before}', usage_audit.show),
]

HEALTHCHECK = '/healthcheck'
#: First path segments under /v2.1 that are collections (anything else is a project id).
COLLECTIONS = frozenset(path.split('/')[1] for _method, path, _controller in ROUTES)


def _mapper() -> routes.Mapper:
    mapper = routes.Mapper()
    for method, path, controller in ROUTES:
        mapper.connect(path, controller=controller, conditions={'method': [method]})
    return mapper


class Router:
    """Dispatches an authenticated request under /v2.1 (or /v2) to its controller."""

    def __init__(self, backends: Backends):
        self.backends = backends
        self.mapper = _mapper()

    @webob.dec.wsgify
    def __call__(self, request: webob.Request) -> webob.Response:
        prefix = request.environ.get(PREFIX_KEY, PREFIX)
        # v2.0 is v2.1 at its first microversion, whatever the headers ask (as Nova's).
        legacy = prefix == PREFIX_V2_0
        version = microversion.MIN_VERSION if legacy else \
            microversion.requested(request.headers)
        context = request.environ[auth.CONTEXT]
        path = request.path_info[len(prefix):]
        segments = path.split('/')
        if len(segments) > 2 and segments[1] not in COLLECTIONS and segments[2] in COLLECTIONS:
            if segments[1] != context.project_id and \
                    not policy.is_admin(self.backends.enforcer, context):
                raise errors.Forbidden(f'Project {segments[1]} in the URL is not the '
                                       'project of the token.')
            path = '/' + '/'.join(segments[2:])
        # A trailing slash names no resource (Nova's routes neither match it):
        # /os-simple-tenant-usage/ is a project's usage without a project, a 404.
        path = path or '/'
        match = self.mapper.match(environ={'PATH_INFO': path,
                                           'REQUEST_METHOD': request.method})
        if match is None:
            allowed = [method for method in ('GET', 'POST', 'PUT', 'DELETE')
                       if self.mapper.match(environ={'PATH_INFO': path,
                                                     'REQUEST_METHOD': method})]
            if allowed:
                raise errors.MethodNotAllowed(f'{request.method} is not allowed on {path}',
                                              {'Allow': ', '.join(allowed)})
            raise errors.NotFound(f'No resource at {path}')
        controller = match.pop('controller')
        response = controller(Call(request, context, version, self.backends, match))
        if not legacy:
            for key, value in microversion.response_headers(version).items():
                response.headers[key] = value
        return response


class Dispatch:
    """The unauthenticated paths (version documents, health, metrics), else the authenticated
    API."""

    def __init__(self, api: Any, health: Any):
        self.api = api
        self.health = health

    @webob.dec.wsgify
    def __call__(self, request: webob.Request) -> Any:
        path = request.path_info
        if path == '/' and request.method == 'GET':
            return versions.versions(request)
        for prefix in (PREFIX, PREFIX_V2_0):
            if path in (prefix, prefix + '/') and request.method == 'GET':
                return versions.version(request, prefix)
        if path == HEALTHCHECK:
            return self.health
        if path == '/metrics' and request.method == 'GET':
            response = webob.Response(content_type=None)
            response.content_type = prometheus_client.CONTENT_TYPE_LATEST
            response.body = prometheus_client.generate_latest(errors.REGISTRY)
            return response
        for prefix in (PREFIX, PREFIX_V2_0):
            if path == prefix or path.startswith(prefix + '/'):
                request.environ[PREFIX_KEY] = prefix
                return self.api
        raise errors.NotFound(f'No resource at {path}')


def build(conf: cfg.ConfigOpts, backends: Backends) -> Any:
    """The whole WSGI application over ``backends``."""
    application: Any = Dispatch(auth.middleware(Router(backends), conf),
                                healthcheck.Healthcheck(None, conf))
    application = errors.FaultWrapper(application)
    application = cors.CORS(application, conf)
    application = request_id.RequestId(application)
    return http_proxy_to_wsgi.HTTPProxyToWSGI(application, conf)
