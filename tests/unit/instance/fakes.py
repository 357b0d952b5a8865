"""Test doubles for the instance lifecycle: an in-memory bare metal driver and Placement."""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any
from urllib import parse

from computed.baremetal.driver import (
    POWER_OFF,
    POWER_ON,
    REBOOT,
    BaremetalDriver,
    DeployFailed,
    DriverError,
    Node,
)


class FakeDriver(BaremetalDriver):
    """Nodes as dicts; ``fail_deploy[node] = reason`` makes deploys of that node fail the way
    Ironic's do (the node left in ``deploy failed`` with the instance associated)."""

    def __init__(self, *uuids: str):
        self.nodes = {u: dict(provision_state='available', instance_uuid=None,
                              power_state=POWER_OFF, instance_info={}, last_error=None)
                      for u in uuids}
        self.fail_deploy: dict[str, str] = {}
        self.fail_power: dict[str, str] = {}
        self.fail_undeploy: dict[str, str] = {}
        self.calls: list[tuple] = []
        self.lock = threading.Lock()

    def _node(self, uuid: str) -> Node:
        n = self.nodes[uuid]
        return Node(uuid=uuid, provision_state=n['provision_state'],
                    instance_uuid=n['instance_uuid'], power_state=n['power_state'],
                    last_error=n['last_error'])

    def list_nodes(self):
        return [self._node(u) for u in self.nodes]

    def get_node(self, uuid):
        return self._node(uuid) if uuid in self.nodes else None

    @staticmethod
    def _check(guard):
        if guard is not None:
            guard.check()

    def deploy(self, node_uuid, instance_uuid, image_source, *, timeout, guard=None,
               configdrive=None):
        self._check(guard)
        self.calls.append(('deploy', node_uuid, instance_uuid))
        n = self.nodes[node_uuid]
        if n['instance_uuid'] not in (None, instance_uuid):
            raise DeployFailed(node_uuid, f"node hosts instance {n['instance_uuid']}")
        if n['instance_uuid'] == instance_uuid and n['provision_state'] == 'active':
            return self._node(node_uuid)
        n.update(instance_uuid=instance_uuid, instance_info={'image_source': image_source})
        if configdrive is not None:  # as Ironic keeps it (instance_info.configdrive)
            n['instance_info']['configdrive'] = configdrive
        if node_uuid in self.fail_deploy:
            n.update(provision_state='deploy failed', last_error=self.fail_deploy[node_uuid])
            raise DeployFailed(node_uuid, self.fail_deploy[node_uuid])
        n.update(provision_state='active', power_state=POWER_ON)
        return self._node(node_uuid)

    def rebuild(self, node_uuid, instance_uuid, image_source, *, timeout, guard=None,
                configdrive=None, preserve_ephemeral=False):
        """As Ironic's rebuild: the node keeps its instance and takes the new image (and
        config drive); ``fail_deploy`` fails it the same way (``deploy failed``)."""
        self._check(guard)
        self.calls.append(('rebuild', node_uuid, instance_uuid, image_source,
                           preserve_ephemeral))
        n = self.nodes[node_uuid]
        if n['instance_uuid'] != instance_uuid:
            raise DeployFailed(node_uuid, f"node hosts instance {n['instance_uuid']}, not "
                                          f'{instance_uuid}: not rebuilt')
        n['instance_info'].update(image_source=image_source,
                                  preserve_ephemeral=preserve_ephemeral)
        if configdrive is not None:
            n['instance_info']['configdrive'] = configdrive
        if node_uuid in self.fail_deploy:
            n.update(provision_state='deploy failed', last_error=self.fail_deploy[node_uuid])
            raise DeployFailed(node_uuid, self.fail_deploy[node_uuid])
        n.update(provision_state='active', power_state=POWER_ON, last_error=None)
        return self._node(node_uuid)

    def undeploy(self, node_uuid, *, timeout, guard=None):
        self._check(guard)
        self.calls.append(('undeploy', node_uuid))
        if node_uuid in self.fail_undeploy:
            raise DriverError(f'node {node_uuid}', self.fail_undeploy[node_uuid])
        self.nodes[node_uuid].update(provision_state='available', instance_uuid=None,
                                     instance_info={}, power_state=POWER_OFF)
        return self._node(node_uuid)

    def set_power(self, node_uuid, target, *, timeout, guard=None):
        self._check(guard)
        self.calls.append(('power', node_uuid, target))
        if node_uuid in self.fail_power:
            raise DriverError(f'node {node_uuid}', self.fail_power[node_uuid])
        self.nodes[node_uuid]['power_state'] = POWER_ON if target == REBOOT else target
        return self._node(node_uuid)

    def clear_instance(self, node_uuid, instance_uuid=None, *, timeout, guard=None):
        self._check(guard)
        self.calls.append(('clear', node_uuid, instance_uuid))
        n = self.nodes[node_uuid]
        if instance_uuid is not None and n['instance_uuid'] not in (None, instance_uuid):
            return self._node(node_uuid)
        if n['provision_state'] != 'available':
            self.undeploy(node_uuid, timeout=timeout, guard=guard)
        n.update(instance_uuid=None, instance_info={})
        return self._node(node_uuid)


class NotOurs(Exception):
    pass


class Guard:
    """A write guard that allows the first ``allowed`` checks, then raises :class:`NotOurs` (the
    daemon lost the node meanwhile)."""

    def __init__(self, allowed=None):
        self.allowed = allowed
        self.checks = 0

    def check(self):
        self.checks += 1
        if self.allowed is not None and self.checks > self.allowed:
            raise NotOurs(f'check {self.checks}')


@dataclasses.dataclass
class Response:
    status_code: int
    body: Any = None

    def json(self):
        return self.body

    @property
    def text(self):
        return json.dumps(self.body) if self.body is not None else ''


class FakePlacement:
    """Enough of Placement for scheduling: providers with one unit of one class, traits,
    allocation candidates, allocations with the capacity check. Thread-safe."""

    def __init__(self):
        self.providers: dict[str, tuple[str, frozenset[str]]] = {}
        self.allocations: dict[str, str] = {}  # consumer -> provider
        self.consumers: dict[str, tuple[str, str]] = {}  # consumer -> (project, user)
        self.projects: dict[str, str] = {}  # consumer -> project
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []
        self.before_put = lambda consumer, node: None  # a hook to interleave racers

    def add(self, node: str, rc: str, traits=()) -> None:
        self.providers[node] = (rc, frozenset(traits))

    def used(self, node: str) -> bool:
        return node in self.allocations.values()

    def request(self, url, method, headers=None, raise_exc=True, json=None):
        path, _, query = url.partition('?')
        assert headers['OpenStack-API-Version'] == \
            ('placement 1.9' if path == '/usages' else 'placement 1.39')
        self.requests.append((method, url))
        if method == 'GET' and path == '/allocation_candidates':
            return self._candidates(dict(parse.parse_qsl(query)))
        if method == 'GET' and path == '/usages':
            project = dict(parse.parse_qsl(query))['project_id']
            usages: dict[str, int] = {}
            with self.lock:
                for consumer, node in self.allocations.items():
                    if self.projects.get(consumer) == project:
                        rc = self.providers[node][0]
                        usages[rc] = usages.get(rc, 0) + 1
            return Response(200, {'usages': usages})
        consumer = path.rsplit('/', 1)[-1]
        if method == 'PUT':
            for key in ('consumer_type', 'project_id', 'user_id'):
                assert json[key]
            (node, alloc), = json['allocations'].items()
            self.before_put(consumer, node)
            with self.lock:
                if self.used(node) and self.allocations.get(consumer) != node:
                    return Response(409, {'errors': [{'code': 'placement.undefined_code',
                                                      'detail': 'capacity exceeded'}]})
                self.allocations[consumer] = node
                self.consumers[consumer] = (json['project_id'], json['user_id'])
                self.projects[consumer] = json['project_id']
            return Response(204)
        if method == 'DELETE':
            with self.lock:
                return Response(204 if self.allocations.pop(consumer, None) else 404)
        if method == 'GET':
            node = self.allocations.get(consumer)
            rc = self.providers[node][0] if node else None
            if not node:
                return Response(200, {'allocations': {}})
            project, user = self.consumers[consumer]
            return Response(200, {'allocations': {node: {'resources': {rc: 1}}},
                                  'project_id': project, 'user_id': user})
        raise AssertionError((method, url))

    def _candidates(self, params):
        rc, _ = params['resources'].split(':')
        if rc not in {p[0] for p in self.providers.values()}:
            return Response(400, {'errors': [{'detail': f'No such resource class {rc}'}]})
        wanted = set(params['required'].split(',')) if 'required' in params else set()
        required = {t for t in wanted if not t.startswith('!')}
        forbidden = {t[1:] for t in wanted if t.startswith('!')}
        with self.lock:
            free = [n for n, (prc, traits) in self.providers.items()
                    if prc == rc and required <= traits and not forbidden & traits
                    and not self.used(n)]
        free = free[:int(params.get('limit', 1000))]
        return Response(200, {'allocation_requests': [
            {'allocations': {n: {'resources': {rc: 1}}}} for n in free],
            'provider_summaries': {
                n: {'resources': {rc: {'capacity': 1, 'used': 0}},
                    'traits': sorted(self.providers[n][1])} for n in free}})
