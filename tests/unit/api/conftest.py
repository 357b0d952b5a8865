"""The compute API in-process over a migrated sqlite database, a fake Placement and a
recording compute RPC API, with noauth2: enough for routing, bodies, errors, policy and
microversions. The real stack is the functional tests' (tests/functional/test_api*.py)."""

from __future__ import annotations

import json
from concurrent import futures

import pytest
import webob
from oslo_config import cfg

from computed import conf as computed_conf
from computed.api import app, pending, policy
from computed.api.backends import Backends
from computed.instances.rpcapi import ServerAPI
from computed.upgrade import levels
from tests.unit.instance.fakes import FakePlacement

RC = 'CUSTOM_GOLD'
NODES = [f'{i}' * 8 + '-0000-0000-0000-000000000000' for i in '123']


class Inline(futures.Executor):
    """Runs what is submitted in the caller's thread: a create's servers are placed before
    its answer, so that a test reads them placed (the product places them after it)."""

    def submit(self, fn, /, *args, **kwargs):
        future = futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


class Casts:
    """The compute RPC API, recording what it is asked to cast; ``version`` is what
    ``[upgrade_levels] instances`` allows (a method newer than it is refused, as the real
    ComputeAPI refuses it); ``options`` the casts' own arguments (rebuild's)."""

    def __init__(self):
        self.sent = []
        self.options = []
        self.version = levels.newest('instances')

    def can_send(self, method):
        return None if levels.sends(self.version, method) else self.version

    def __getattr__(self, method):
        def cast(host, uuid, member_epoch=None, **options):
            self.sent.append((method, host, uuid))
            self.options.append(options)
        return cast


class Client:
    """Requests to the app as ``USER:PROJECT``, at a microversion."""

    def __init__(self, application, token='alice:p1', version=None):
        self.application = application
        self.token = token
        self.version = version

    def __call__(self, method, path, body=None, headers=None, raw=None):
        request = webob.Request.blank(path, method=method)
        if self.token:
            request.headers['X-Auth-Token'] = self.token
        if self.version:
            request.headers['OpenStack-API-Version'] = f'compute {self.version}'
        for key, value in (headers or {}).items():
            request.headers[key] = value
        if raw is not None:
            request.body = raw
        elif body is not None:
            request.body = json.dumps(body).encode()
            request.content_type = 'application/json'
        response = request.get_response(self.application)
        response.document = json.loads(response.body) \
            if response.body and response.content_type == 'application/json' else None
        return response

    def as_(self, token=None, version=None):
        return Client(self.application, token if token is not None else self.token,
                      version or self.version)


@pytest.fixture
def api(engine, tmp_path):
    path = tmp_path / 'computed.conf'
    path.write_text('[coordination]\nbackend_url = zookeeper://127.0.0.1:2181\n')
    conf = cfg.ConfigOpts()
    computed_conf.register_opts(conf)
    conf(['--config-file', str(path)])
    conf.set_override('auth_strategy', 'noauth2', 'api')
    conf.set_override('instances', 3, 'quota')
    placement = FakePlacement()
    for node in NODES:
        placement.add(node, RC, ['CUSTOM_CAP_BOOT_MODE__UEFI'])
    casts = Casts()
    servers = ServerAPI(engine, placement, casts, lambda node: ('c1', 7))
    builds = pending.BuildQueue(servers, engine, placement, Inline(), 120)
    backends = Backends(conf=conf, engine=engine, placement=placement, servers=servers,
                        coordinator=None, zookeeper=None, enforcer=policy.enforcer(conf),
                        transport=None, builds=builds)
    client = Client(app.build(conf, backends))
    client.casts = casts
    client.backends = backends
    client.placement = placement
    client.engine = engine
    return client
