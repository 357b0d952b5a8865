"""PlacementClient against the real Placement: writes, idempotence, conflicts, deletes."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid as uuidlib
from concurrent.futures import ThreadPoolExecutor

import pytest
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from computed.placement.client import DeleteOutcome, PlacementClient
from computed.placement.http import PlacementError, PlacementUnavailable
from computed.providers.state import ProviderState
from computed.runtime import keystone

HEADERS = {'OpenStack-API-Version': 'placement 1.39'}


class Recorder:
    """Records (method, url) of every request an adapter sends; ``hook`` runs before one."""

    def __init__(self, adapter):
        self.calls: list[tuple[str, str]] = []
        self.hook = None
        self._send = adapter.request
        adapter.request = self._request

    def _request(self, url, method, **kwargs):
        if self.hook is not None:
            self.hook(method, url)
        self.calls.append((method, url))
        return self._send(url, method, **kwargs)

    def writes(self) -> list[tuple[str, str]]:
        return [c for c in self.calls if c[0] != 'GET']

    def reset(self) -> None:
        self.calls.clear()


@pytest.fixture
def adapter(computed_config):
    return keystone.load_adapter(computed_config, 'placement')


@pytest.fixture
def recorder(adapter):
    return Recorder(adapter)


@pytest.fixture
def client(adapter, recorder):
    return PlacementClient(adapter)


@pytest.fixture
def other(computed_config):
    """A second client (another reporter replica), with its own cache."""
    return PlacementClient(keystone.load_adapter(computed_config, 'placement'))


def state(uid=None, rc='CUSTOM_FT_GOLD', reserved=0, traits=('CUSTOM_FT_RAID', 'HW_CPU_X86_AVX2')):
    uid = uid or str(uuidlib.uuid4())
    return ProviderState(uuid=uid, name=uid, resource_class=rc, reserved=reserved,
                         traits=tuple(sorted(traits)))


def allocate(adapter, rp_uuid: str, rc: str) -> str:
    consumer = str(uuidlib.uuid4())
    body = {'allocations': {rp_uuid: {'resources': {rc: 1}}}, 'consumer_generation': None,
            'project_id': str(uuidlib.uuid4()), 'user_id': str(uuidlib.uuid4()),
            'consumer_type': 'INSTANCE'}   # required from 1.38
    resp = adapter.put(f'/allocations/{consumer}', json=body, headers=HEADERS, raise_exc=False)
    assert resp.status_code == 204, resp.text
    return consumer


def unallocate(adapter, consumer: str) -> None:
    resp = adapter.delete(f'/allocations/{consumer}', headers=HEADERS, raise_exc=False)
    assert resp.status_code == 204, resp.text


def inventories(adapter, rp_uuid: str) -> dict:
    return adapter.get(f'/resource_providers/{rp_uuid}/inventories', headers=HEADERS).json()[
        'inventories']


def test_create_then_same_state_again_sends_nothing(client, recorder):
    s = state()
    assert client.apply(s) is True
    # GET (absent), POST provider, PUT class + inventory, PUT custom trait + provider traits.
    assert [m for m, _ in recorder.writes()] == ['POST', 'PUT', 'PUT', 'PUT', 'PUT']
    assert client.get(s.uuid) == s
    recorder.reset()
    assert client.apply(s) is False
    assert recorder.calls == []


def test_second_provider_of_known_class_and_traits_costs_three_requests(client, recorder):
    client.apply(state())
    recorder.reset()
    client.apply(state())
    assert [m for m, _ in recorder.calls] == ['GET', 'POST', 'PUT', 'PUT']


def test_assume_new_creates_without_reading_first(client, recorder):
    client.apply(state())
    recorder.reset()
    client.apply(state(), assume_new=True)
    assert [m for m, _ in recorder.calls] == ['POST', 'PUT', 'PUT']


def test_assume_new_on_an_existing_provider_reads_and_fixes_it(client, other, recorder):
    s = state()
    other.apply(dataclasses.replace(s, reserved=1))
    recorder.reset()
    assert client.apply(s, assume_new=True) is True
    # POST refused (it exists), read it, ensure the class (once per client), fix the inventory.
    assert [m for m, _ in recorder.calls] == ['POST', 'GET', 'GET', 'PUT', 'PUT']
    assert client.get(s.uuid).reserved == 0


def test_cache_miss_rereads_and_writes_nothing_when_placement_has_it(client, other, recorder):
    s = state()
    other.apply(s)
    recorder.reset()
    assert client.apply(s) is False
    assert recorder.writes() == [] and len(recorder.calls) == 2


def test_maintenance_reserves_the_node_with_one_write(client, recorder):
    s = state()
    client.apply(s)
    recorder.reset()
    reserved = state(s.uuid, reserved=1)
    assert client.apply(reserved) is True
    assert recorder.calls == [('PUT', f'/resource_providers/{s.uuid}/inventories')]
    assert client.get(s.uuid).reserved == 1
    assert client.apply(state(s.uuid, reserved=0)) is True
    assert client.get(s.uuid).reserved == 0


def test_traits_change(client, recorder):
    s = state()
    client.apply(s)
    changed = state(s.uuid, traits=('CUSTOM_FT_NEW', 'HW_CPU_X86_SSE'))
    recorder.reset()
    assert client.apply(changed) is True
    assert recorder.writes() == [('PUT', '/traits/CUSTOM_FT_NEW'),
                                 ('PUT', f'/resource_providers/{s.uuid}/traits')]
    assert client.get(s.uuid) == changed
    assert client.apply(state(s.uuid, traits=())) is True
    assert client.get(s.uuid).traits == ()


def test_resource_class_change_replaces_the_inventory(client, adapter):
    s = state()
    client.apply(s)
    silver = state(s.uuid, rc='CUSTOM_FT_SILVER')
    assert client.apply(silver) is True
    assert set(inventories(adapter, s.uuid)) == {'CUSTOM_FT_SILVER'}
    assert client.get(s.uuid) == silver


def test_resource_class_change_keeps_a_class_with_allocations(client, adapter, recorder):
    s = state()
    client.apply(s)
    consumer = allocate(adapter, s.uuid, s.resource_class)
    silver = state(s.uuid, rc='CUSTOM_FT_SILVER', reserved=1)
    assert client.apply(silver) is True
    assert set(inventories(adapter, s.uuid)) == {'CUSTOM_FT_GOLD', 'CUSTOM_FT_SILVER'}
    assert client.has_allocations(s.uuid)
    recorder.reset()
    assert client.apply(silver) is False          # the kept class does not cause writes
    assert recorder.calls == []
    unallocate(adapter, consumer)
    assert client.apply(silver, verify=True) is True      # a resync removes it once free
    assert client.get(s.uuid) == silver


def test_reserved_can_be_set_while_the_node_is_allocated(client, adapter):
    s = state()
    client.apply(s)
    allocate(adapter, s.uuid, s.resource_class)
    assert client.apply(state(s.uuid, reserved=1)) is True
    assert client.get(s.uuid).reserved == 1


def test_generation_conflict_between_read_and_write_is_retried(client, other, recorder):
    s = state()
    other.apply(s)
    # The other replica changes the traits after our read, before our inventory write.
    sneaky = state(s.uuid, traits=('CUSTOM_FT_SNEAKY',))

    def hook(method, url):
        if method == 'PUT' and url.endswith('/inventories'):
            recorder.hook = None
            other.apply(sneaky)

    recorder.hook = hook
    wanted = state(s.uuid, reserved=1)
    assert client.apply(wanted) is True
    assert client.get(s.uuid) == wanted
    # read, PUT inventories (409), read again, PUT inventories, PUT traits
    assert [m for m, _ in recorder.calls].count('GET') >= 4


def test_stale_cache_after_another_clients_write_is_retried(client, other):
    s = state()
    client.apply(s)
    other.apply(state(s.uuid, traits=('CUSTOM_FT_OTHER',)))
    wanted = state(s.uuid, reserved=1)
    assert client.apply(wanted) is True
    assert other.get(s.uuid) == wanted


def test_verify_repairs_a_change_made_by_someone_else(client, other):
    s = state()
    client.apply(s)
    other.apply(state(s.uuid, reserved=1))
    assert client.apply(s) is False              # the cache trusts itself ...
    assert client.apply(s, verify=True) is True  # ... a resync does not
    assert other.get(s.uuid) == s


def test_provider_deleted_behind_the_cache_is_recreated(client, other):
    s = state()
    client.apply(s)
    assert other.delete(s.uuid) is DeleteOutcome.DELETED
    assert client.apply(state(s.uuid, reserved=1)) is True
    assert other.get(s.uuid) == state(s.uuid, reserved=1)


def test_delete_without_allocations(client, recorder):
    s = state()
    client.apply(s)
    assert client.has_allocations(s.uuid) is False
    assert client.delete(s.uuid) is DeleteOutcome.DELETED
    assert client.get(s.uuid) is None
    assert client.delete(s.uuid) is DeleteOutcome.ABSENT
    assert client.apply(s) is True               # the cache forgot it: recreated


def test_delete_with_an_allocation_keeps_the_provider(client, adapter, caplog):
    s = state()
    client.apply(s)
    consumer = allocate(adapter, s.uuid, s.resource_class)
    assert client.has_allocations(s.uuid) is True
    assert client.delete(s.uuid) is DeleteOutcome.KEPT
    assert consumer in caplog.text and s.uuid in caplog.text
    assert client.get(s.uuid) == s
    unallocate(adapter, consumer)
    assert client.delete(s.uuid) is DeleteOutcome.DELETED


def test_unknown_provider(client):
    uid = str(uuidlib.uuid4())
    assert client.get(uid) is None
    assert client.read(uid) is None
    assert client.has_allocations(uid) is False
    assert client.delete(uid) is DeleteOutcome.ABSENT


def test_unknown_standard_trait_is_a_refusal_naming_the_provider(client):
    s = state(traits=('HW_NO_SUCH_TRAIT_FT',))
    with pytest.raises(PlacementError) as err:
        client.apply(s)
    assert not isinstance(err.value, PlacementUnavailable)
    assert err.value.uuid == s.uuid and err.value.status == 400
    assert s.uuid in str(err.value)


def test_unreachable_placement_is_unavailable():
    dead = ks_adapter.Adapter(ks_session.Session(
        auth=token_endpoint.Token('http://127.0.0.1:9', 'admin')),
        endpoint_override='http://127.0.0.1:9')
    s = state()
    with pytest.raises(PlacementUnavailable) as err:
        PlacementClient(dead).apply(s)
    assert err.value.uuid == s.uuid


def apply_retrying(client, s, attempts=20):
    # The harness Placement runs on sqlite: concurrent writers may get a 500 ("database is
    # locked"), which the client rightly reports as PlacementUnavailable for the caller to retry.
    for _ in range(attempts - 1):
        try:
            return client.apply(s)
        except PlacementUnavailable:
            time.sleep(0.05)
    return client.apply(s)


def test_threads_applying_the_same_and_different_providers(client):
    states = [state() for _ in range(20)]
    updates = [state(s.uuid, reserved=1) for s in states]
    barrier = threading.Barrier(4)

    def work(batch):
        barrier.wait()
        for s in batch:
            apply_retrying(client, s)

    with ThreadPoolExecutor(4) as pool:
        # two threads race on each provider's creation, two on its update
        list(pool.map(work, [states, states, updates, updates]))
    for s in updates:
        client.apply(s)
    for s in updates:
        assert client.get(s.uuid) == s


def test_a_request_placement_fails_with_500_is_refused_after_two_tries_not_unavailable(adapter):
    """A NUL in a provider name makes the real Placement answer 500 on PostgreSQL (sqlite
    stores it): the request is sent twice, Placement's database is probed, and the failure is
    the request's, not 'Placement unavailable' to be resent for ever (issue 23 item 7)."""
    from computed.placement import http
    recorder = Recorder(adapter)
    uuid = str(uuidlib.uuid4())
    layer = http.PlacementHTTP(adapter)
    try:
        resp = layer.request('POST', '/resource_providers', uuid,
                             body={'uuid': uuid, 'name': 'bad\x00name'})
    except http.PlacementRequestFailed as exc:
        assert not isinstance(exc, PlacementUnavailable)
        assert exc.uuid == uuid and exc.status == 500 and 'NUL' in str(exc)
        assert recorder.calls == [('POST', '/resource_providers')] * 2 + [('GET', http.PROBE)]
    else:  # Placement on sqlite: nothing to refuse
        assert resp.status_code == 200
        pytest.skip("this Placement stores a NUL (sqlite): no 500 to judge")
    assert layer.request('GET', f'/resource_providers/{uuid}', uuid).status_code == 404
