"""A fake keystoneauth adapter for Ironic that answers ``GET /nodes`` like Ironic.

Pages by ``limit``/``marker`` in uuid order and adds ``next`` when a page is
full, as Ironic does; ``failures`` is a list of what the next calls do
instead of answering (an exception to raise or an HTTP status to return).
Records every request so tests can check parameters and page counts.
"""

from __future__ import annotations

import json
import types
import uuid as uuidlib


class FakeResponse:
    def __init__(self, status_code: int, body):
        self.status_code = status_code
        self._body = body
        self.text = json.dumps(body) if not isinstance(body, str) else body

    def json(self):
        if isinstance(self._body, str):
            raise ValueError('not JSON')
        return self._body


class FakeSession:
    def __init__(self):
        self.closed = False

    def close(self):
        self.closed = True


class FakeBaremetal:
    """The adapter's surface the driver uses: get, put, patch, and its session."""

    def __init__(self, records: list[dict]):
        self.session = FakeSession()
        self.records = sorted(records, key=lambda r: str(r.get('uuid')))
        self.failures: list = []
        self.requests: list[tuple[str, dict]] = []
        # What the next writes answer instead: a status, or (status, Ironic's message).
        self.write_failures: list[int | tuple[int, str]] = []
        self.writes: list[tuple[str, str, object]] = []

    def get_endpoint_data(self):
        return types.SimpleNamespace(url='http://ironic.invalid/v1/')

    def get(self, path, params=None, microversion=None, raise_exc=True,
            endpoint_override=None):
        params = dict(params or {})
        self.requests.append((path, dict(params, microversion=microversion)))
        if self.failures:
            failure = self.failures.pop(0)
            if isinstance(failure, BaseException):
                raise failure
            return FakeResponse(failure, {'error_message': 'injected'})
        if path in ('/nodes', '/nodes/detail'):
            return self._list(params)
        uuid = path.rsplit('/', 1)[1]
        for record in self.records:
            if record.get('uuid') == uuid:
                return FakeResponse(200, record)
        return FakeResponse(404, {'error_message': 'not found'})

    def put(self, path, json=None, microversion=None, raise_exc=True, endpoint_override=None):
        return self._write('PUT', path, json)

    def patch(self, path, json=None, microversion=None, raise_exc=True,
              endpoint_override=None):
        return self._write('PATCH', path, json)

    def _write(self, method, path, body):
        self.writes.append((method, path, body))
        if self.write_failures:
            failure = self.write_failures.pop(0)
            status, message = failure if isinstance(failure, tuple) else (failure, 'injected')
            return FakeResponse(status, {'error_message': message})
        return FakeResponse(202, {})

    def _list(self, params):
        records = [r for r in self.records
                   if all(r.get(k) == params[k] for k in ('conductor_group', 'shard')
                          if k in params)]
        marker = params.get('marker')
        if marker:
            uuids = [str(r.get('uuid')) for r in records]
            if marker not in uuids:
                return FakeResponse(404, {'error_message': f'Node {marker} could not be found'})
            records = records[uuids.index(marker) + 1:]
        limit = int(params.get('limit', 1000))
        page = records[:limit]
        body = {'nodes': page}
        if len(page) == limit:
            body['next'] = 'http://unreachable.invalid/v1/nodes?marker=x'
        return FakeResponse(200, body)


class FakeConnection:
    """What tests hold: ``baremetal`` is the adapter the driver gets."""

    def __init__(self, records: list[dict]):
        self.baremetal = FakeBaremetal(records)


def record(**fields) -> dict:
    """An Ironic node record as ``GET /v1/nodes?fields=`` returns it."""
    base = {'uuid': str(uuidlib.uuid4()), 'name': None, 'resource_class': 'baremetal',
            'provision_state': 'available', 'target_provision_state': None,
            'power_state': 'power off', 'maintenance': False, 'instance_uuid': None,
            'traits': [], 'conductor_group': '', 'shard': None, 'last_error': None,
            'properties': {}}
    base.update(fields)
    return base
