"""PlacementClient.create and set_new_inventories (POST /reshaper) against a scripted adapter:
what is sent, what a refusal leaves to the caller, when the client stops asking."""

import pytest

from computed.placement.client import PlacementClient
from computed.placement.http import PlacementUnavailable
from computed.providers.state import ProviderState, inventory
from tests.unit.instance.fakes import Response
from tests.unit.placement.test_http import ScriptedAdapter

A = "aaaaaaaa-0000-0000-0000-000000000000"
B = "bbbbbbbb-0000-0000-0000-000000000000"


def st(uuid, reserved=0):
    return ProviderState(uuid=uuid, name=uuid, resource_class="CUSTOM_GOLD", reserved=reserved)


def created(*uuids):
    return [Response(200, {"uuid": u, "name": u, "generation": 0}) for u in uuids]


def test_one_reshaper_sets_every_new_inventory_and_the_next_apply_writes_nothing():
    adapter = ScriptedAdapter(*created(A, B), Response(201), Response(204),
                              Response(200, {"generation": 2}))
    client = PlacementClient(adapter)
    assert client.create(st(A)) and client.create(st(B, reserved=1))
    assert client.set_new_inventories([st(A), st(B, reserved=1)]) == []
    method, url, _, _, body = adapter.requests[3]
    assert (method, url) == ("POST", "/reshaper")
    assert body == {"allocations": {}, "inventories": {
        A: {"resource_provider_generation": 0, "inventories": inventory(st(A))},
        B: {"resource_provider_generation": 0, "inventories": inventory(st(B, reserved=1))}}}
    sent = len(adapter.requests)
    assert client.apply(st(A), last_applied=None) is False
    assert len(adapter.requests) == sent  # inventory set, no traits: nothing left to write
    assert client.generation(A) == 2


def test_a_refused_reshaper_returns_every_provider_of_the_request():
    conflict = Response(409, {"errors": [{"code": "placement.concurrent_update"}]})
    adapter = ScriptedAdapter(*created(A, B), Response(201), conflict)
    client = PlacementClient(adapter)
    client.create(st(A)), client.create(st(B))
    assert client.set_new_inventories([st(A), st(B)]) == [st(A), st(B)]


@pytest.mark.parametrize("status", [403, 404])
def test_a_forbidden_or_unknown_reshaper_is_not_asked_again(status):
    adapter = ScriptedAdapter(*created(A, B), Response(201), Response(status))
    client = PlacementClient(adapter)
    client.create(st(A)), client.create(st(B))
    assert client.set_new_inventories([st(A)]) == [st(A)]
    sent = len(adapter.requests)
    assert client.set_new_inventories([st(B)]) == [st(B)]
    assert len(adapter.requests) == sent


def test_only_providers_this_client_just_created_are_reshaped():
    adapter = ScriptedAdapter(Response(409, {"errors": [{"code": "placement.duplicate_name"}]}))
    client = PlacementClient(adapter)
    assert client.create(st(A)) is False  # exists already
    assert client.set_new_inventories([st(A), st(B)]) == [st(A), st(B)]
    assert len(adapter.requests) == 1


def test_no_answer_to_the_reshaper_forgets_its_providers():
    adapter = ScriptedAdapter(*created(A), Response(201),
                              Response(503, {"errors": [{"detail": "down"}]}))
    client = PlacementClient(adapter)
    client.create(st(A))
    with pytest.raises(PlacementUnavailable):
        client.set_new_inventories([st(A)])
    assert client.generation(A) is None


def traited(uuid):
    return ProviderState(uuid=uuid, name=uuid, resource_class="CUSTOM_GOLD", reserved=0,
                         traits=("CUSTOM_FAST", "HW_CPU_X86_AVX2"))


def test_a_new_provider_gets_its_traits_before_its_inventory_makes_it_schedulable():
    # Seen in the suite: a provider listed with inventory and no traits yet. A provider without
    # inventory cannot be scheduled on, so traits go first.
    traits_set = Response(200, {"resource_provider_generation": 1,
                                "traits": ["CUSTOM_FAST", "HW_CPU_X86_AVX2"]})
    adapter = ScriptedAdapter(*created(A), Response(204), traits_set, Response(201),
                              Response(204), Response(200, {"generation": 3}))
    client = PlacementClient(adapter)
    assert client.create(traited(A))
    assert client.set_new_inventories([traited(A)]) == []
    sent = [(method, url) for method, url, *_ in adapter.requests]
    assert sent.index(("PUT", f"/resource_providers/{A}/traits")) < sent.index(
        ("POST", "/reshaper"))
    assert adapter.requests[sent.index(("POST", "/reshaper"))][4]["inventories"][A][
        "resource_provider_generation"] == 1
    count = len(adapter.requests)
    assert client.apply(traited(A), last_applied=None) is False  # complete: nothing to write
    assert len(adapter.requests) == count


def test_applied_one_by_one_a_new_provider_also_gets_traits_first():
    traits_set = Response(200, {"resource_provider_generation": 1,
                                "traits": ["CUSTOM_FAST", "HW_CPU_X86_AVX2"]})
    inventory_set = Response(200, {"resource_provider_generation": 2,
                                   "inventories": inventory(traited(A))})
    adapter = ScriptedAdapter(*created(A), Response(204), traits_set, Response(201),
                              inventory_set)
    client = PlacementClient(adapter)
    assert client.apply(traited(A), assume_new=True) is True
    sent = [(method, url) for method, url, *_ in adapter.requests]
    assert sent.index(("PUT", f"/resource_providers/{A}/traits")) < sent.index(
        ("PUT", f"/resource_providers/{A}/inventories"))
