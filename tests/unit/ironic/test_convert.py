"""Ironic node records to ``Node``: the happy path and every malformed field."""

from __future__ import annotations

import pytest

from computed.baremetal.driver import MalformedNode, Node
from computed_ironic.convert import node_from_api
from tests.unit.ironic.fakes import record


def test_complete_record_converts_with_sorted_traits_and_capabilities_only():
    raw = record(name='n1', traits=['CUSTOM_B', 'CUSTOM_A'], conductor_group='cg1',
                 shard='s1', maintenance=True, instance_uuid='AAAAAAAA-0000-0000-0000-000000000001',
                 properties={'capabilities': 'boot_mode:uefi', 'cpus': 8, 'memory_mb': 1024},
                 updated_at='2026-01-01T00:00:00+00:00')
    node = node_from_api(raw)
    assert node == Node(uuid=raw['uuid'], name='n1', resource_class='baremetal',
                        provision_state='available', power_state='power off', maintenance=True,
                        instance_uuid='aaaaaaaa-0000-0000-0000-000000000001',
                        traits=('CUSTOM_A', 'CUSTOM_B'), conductor_group='cg1', shard='s1',
                        updated_at='2026-01-01T00:00:00+00:00',
                        properties={'capabilities': 'boot_mode:uefi'})
    assert node.capabilities == 'boot_mode:uefi'
    hash(node)  # usable in sets although properties is a dict


def test_missing_optional_fields_take_defaults():
    node = node_from_api({'uuid': '11111111-2222-3333-4444-555555555555'})
    assert node.traits == () and node.properties == {} and node.conductor_group == ''
    assert node.maintenance is False and node.updated_at is None


@pytest.mark.parametrize('field, value', [
    ('maintenance', 'false'), ('traits', 'CUSTOM_A'), ('traits', ['ok', 3]),
    ('name', 5), ('provision_state', ['active']), ('instance_uuid', 'not-a-uuid'),
    ('properties', []), ('properties', {'capabilities': {'boot_mode': 'uefi'}}),
    ('conductor_group', 1),
])
def test_malformed_field_names_the_node_and_field(field, value):
    raw = record(**{field: value})
    with pytest.raises(MalformedNode) as info:
        node_from_api(raw)
    assert info.value.uuid == raw['uuid']
    assert info.value.field.split('.')[0] == field
    assert raw['uuid'] in str(info.value)


@pytest.mark.parametrize('raw', [None, [], {'uuid': None}, {'uuid': 'xyz'}, {'uuid': 7}])
def test_record_without_a_usable_uuid_is_malformed(raw):
    with pytest.raises(MalformedNode) as info:
        node_from_api(raw)
    assert info.value.uuid is None


def test_nodes_of_a_listing_share_their_repeated_values_and_carry_no_dict():
    # A daemon keeps every node of the fleet (issue 13 item 10: 50,000 nodes in 150 MB): values
    # that thousands of nodes repeat are one object, and a node has no per-instance dict.
    import json
    page = json.loads(json.dumps([record(uuid=f'11111111-2222-3333-4444-5555555555{i:02d}',
                                         name=f'n{i}', traits=['CUSTOM_A'])
                                  for i in range(2)]))
    first, second = (node_from_api(raw) for raw in page)
    for field in ('resource_class', 'provision_state', 'power_state'):
        assert getattr(first, field) is getattr(second, field), field
    assert first.traits[0] is second.traits[0]
    assert first.properties is second.properties  # no capabilities: one shared empty mapping
    assert not hasattr(first, '__dict__')


def test_a_uuid_is_one_string_however_often_it_is_parsed():
    # Each listing parses a new copy of every uuid: the daemon keeps one (shared_uuid).
    text = '11111111-2222-4333-8444-555555555555'
    first = node_from_api({'uuid': ''.join(list(text))})
    again = node_from_api({'uuid': ''.join(list(text))})
    upper = node_from_api({'uuid': text.upper()})
    assert first.uuid == text and first.uuid is again.uuid is upper.uuid
