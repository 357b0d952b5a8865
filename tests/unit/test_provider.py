"""Provider semantics: Nova's reserved rule, resource class names, validation of bus input."""

from __future__ import annotations

import pytest

from computed.baremetal.driver import Node
from computed.providers.capabilities import capability_trait, parse_capability_trait
from computed.providers.state import (
    InvalidProvider,
    ProviderState,
    inventory,
    node_reserved,
    normalise_resource_class,
    provider_from_node,
)

UUID = '1be26c0b-03f2-4d2e-ae87-c02d7f33c123'
INSTANCE = '9f1b7a52-7d1e-4bd0-8a39-1e1c2f6b1d01'


def node(**kw) -> Node:
    values = dict(uuid=UUID, resource_class='baremetal-gold', provision_state='available',
                  power_state='power off', maintenance=False)
    values.update(kw)
    return Node(**values)


def valid(**kw) -> dict:
    values = dict(uuid=UUID, name=UUID, resource_class='CUSTOM_GOLD', reserved=0,
                  traits=['CUSTOM_RAID', 'HW_CPU_X86_AVX2'])
    values.update(kw)
    return values


# -- reserved, following nova.virt.ironic.driver --------------------------------------

@pytest.mark.parametrize('kw', [
    {},
    {'power_state': 'power on'},
    {'provision_state': None},           # Ironic's NOSTATE: Nova keeps it schedulable
])
def test_available_node_is_not_reserved(kw):
    assert node_reserved(node(**kw)) == 0


@pytest.mark.parametrize('kw', [
    {'maintenance': True},
    {'power_state': 'error'},
    {'power_state': None},
    {'provision_state': 'manageable'},
    {'provision_state': 'enroll'},
    {'provision_state': 'cleaning'},
    {'provision_state': 'clean wait'},
    {'provision_state': 'clean failed'},
    {'provision_state': 'deploying'},
    {'provision_state': 'deploy failed'},
    {'provision_state': 'active'},
    {'provision_state': 'error'},
    {'provision_state': 'inspecting'},
    {'provision_state': 'rescue'},
    {'provision_state': 'servicing'},
    {'instance_uuid': INSTANCE},                          # being deployed, or active
    {'instance_uuid': INSTANCE, 'maintenance': True},
    {'provision_state': 'active', 'instance_uuid': INSTANCE},
])
def test_node_that_cannot_take_a_new_instance_is_reserved(kw):
    assert node_reserved(node(**kw)) == 1


def test_in_use_node_unreserved_with_novas_workaround_only_if_otherwise_available():
    assert node_reserved(node(instance_uuid=INSTANCE), reserve_in_use=False) == 0
    assert node_reserved(node(instance_uuid=INSTANCE, provision_state='active'),
                         reserve_in_use=False) == 1


# -- provider_from_node and inventory ----------------------------------------------------

def test_provider_from_node_like_nova():
    state = provider_from_node(node(traits=('HW_CPU_X86_AVX2', 'CUSTOM_RAID'), maintenance=True))
    assert state == ProviderState(uuid=UUID, name=UUID, resource_class='CUSTOM_BAREMETAL_GOLD',
                                  reserved=1, traits=('CUSTOM_RAID', 'HW_CPU_X86_AVX2'))
    assert inventory(state) == {'CUSTOM_BAREMETAL_GOLD': {
        'total': 1, 'reserved': 1, 'min_unit': 1, 'max_unit': 1, 'step_size': 1,
        'allocation_ratio': 1.0}}


def test_extra_traits_are_merged_sorted_and_unique():
    state = provider_from_node(node(traits=('CUSTOM_B',)),
                               extra_traits=('COMPUTE_NODE', 'CUSTOM_B'))
    assert state.traits == ('COMPUTE_NODE', 'CUSTOM_B')


@pytest.mark.parametrize('rc', [None, '', '   '])
def test_node_without_resource_class_has_no_provider(rc):
    assert provider_from_node(node(resource_class=rc)) is None


def test_node_with_an_invalid_trait_raises_naming_the_node():
    with pytest.raises(InvalidProvider) as err:
        provider_from_node(node(traits=('lower_case',)))
    assert err.value.uuid == UUID and err.value.field == 'traits'


@pytest.mark.parametrize('name,expected', [
    ('baremetal', 'CUSTOM_BAREMETAL'),
    ('baremetal-gold', 'CUSTOM_BAREMETAL_GOLD'),
    ('Bare Metal.Gold', 'CUSTOM_BARE_METAL_GOLD'),
    ('a--b', 'CUSTOM_A_B'),                  # runs of non-alphanumerics become one _
    ('gold_2', 'CUSTOM_GOLD_2'),
    ('ß-x', 'CUSTOM__X'),                    # substitution before upper() (Nova bug 1762789)
    # Nova (os_resource_classes.normalize_name) always prefixes: flavors and existing
    # allocations name CUSTOM_CUSTOM_GOLD for an Ironic class "CUSTOM_GOLD".
    ('CUSTOM_GOLD', 'CUSTOM_CUSTOM_GOLD'),
])
def test_resource_class_normalised_like_nova(name, expected):
    assert normalise_resource_class(name) == expected


# -- to_dict / from_dict -------------------------------------------------------------------

def test_round_trip():
    state = ProviderState.from_dict(valid())
    assert ProviderState.from_dict(state.to_dict()) == state
    assert state.to_dict() == valid()


def test_from_dict_sorts_and_dedupes_traits():
    state = ProviderState.from_dict(valid(traits=['CUSTOM_B', 'CUSTOM_A', 'CUSTOM_B']))
    assert state.traits == ('CUSTOM_A', 'CUSTOM_B')


@pytest.mark.parametrize('changes,field', [
    ({'uuid': 'not-a-uuid'}, 'uuid'),
    ({'uuid': UUID.upper()}, 'uuid'),                      # one provider, one spelling
    ({'uuid': UUID.replace('-', '')}, 'uuid'),
    ({'uuid': 42}, 'uuid'),
    ({'name': ''}, 'name'),
    ({'name': None}, 'name'),
    ({'name': 'x' * 201}, 'name'),
    ({'resource_class': 'GOLD'}, 'resource_class'),
    ({'resource_class': 'VCPU'}, 'resource_class'),        # standard: not a node's class
    ({'resource_class': 'CUSTOM_gold'}, 'resource_class'),
    ({'resource_class': 'CUSTOM_'}, 'resource_class'),
    ({'resource_class': 'CUSTOM_' + 'A' * 249}, 'resource_class'),
    ({'resource_class': None}, 'resource_class'),
    ({'reserved': 2}, 'reserved'),
    ({'reserved': -1}, 'reserved'),
    ({'reserved': True}, 'reserved'),
    ({'reserved': '1'}, 'reserved'),
    ({'reserved': 1.0}, 'reserved'),
    ({'traits': 'CUSTOM_A'}, 'traits'),
    ({'traits': [1]}, 'traits'),
    ({'traits': ['custom_a']}, 'traits'),
    ({'traits': ['CUSTOM-A']}, 'traits'),
    ({'traits': ['']}, 'traits'),
    ({'traits': None}, 'traits'),
])
def test_from_dict_rejects_bad_field_naming_it_and_the_uuid(changes, field):
    with pytest.raises(InvalidProvider) as err:
        ProviderState.from_dict(valid(**changes))
    assert err.value.field == field
    assert isinstance(err.value, ValueError)
    if field != 'uuid':
        assert err.value.uuid == UUID
        assert UUID in str(err.value)


@pytest.mark.parametrize('missing', ['uuid', 'name', 'resource_class', 'reserved', 'traits'])
def test_from_dict_rejects_missing_field(missing):
    data = valid()
    del data[missing]
    with pytest.raises(InvalidProvider) as err:
        ProviderState.from_dict(data)
    assert err.value.field == missing


def test_from_dict_rejects_unknown_field():
    with pytest.raises(InvalidProvider) as err:
        ProviderState.from_dict(valid(generation=3))
    assert err.value.field == 'generation' and err.value.uuid == UUID


@pytest.mark.parametrize('data', [None, [], 'x', 3])
def test_from_dict_rejects_non_object(data):
    with pytest.raises(InvalidProvider) as err:
        ProviderState.from_dict(data)
    assert err.value.uuid is None


def test_constructor_validates_too():
    with pytest.raises(InvalidProvider):
        ProviderState(UUID, UUID, 'CUSTOM_GOLD', 0, ('CUSTOM_B', 'CUSTOM_A'))   # unsorted
    with pytest.raises(InvalidProvider):
        ProviderState(UUID, UUID, 'CUSTOM_GOLD', 0, ['CUSTOM_A'])               # not a tuple


# -- capabilities as traits (issue 15 item 3) ------------------------------------------

def test_capabilities_are_reported_as_traits_beside_the_nodes_own():
    state = provider_from_node(node(traits=('CUSTOM_RAID',),
                                    properties={'capabilities': 'boot_mode:uefi, Disk-Label:GPT'}))
    assert state.traits == tuple(sorted(
        ('CUSTOM_RAID', 'CUSTOM_CAP_BOOT_MODE__UEFI', capability_trait('Disk-Label', 'GPT'))))
    assert {parse_capability_trait(t) for t in state.traits} == {
        None, ('boot_mode', 'uefi'), ('Disk-Label', 'GPT')}


@pytest.mark.parametrize('properties', [{}, {'capabilities': ''}, {'capabilities': ' , '}])
def test_a_node_without_capabilities_gets_no_capability_trait(properties):
    assert provider_from_node(node(properties=properties)).traits == ()


def test_changed_capabilities_change_the_traits():
    before = provider_from_node(node(properties={'capabilities': 'boot_mode:bios'}))
    after = provider_from_node(node(properties={'capabilities': 'boot_mode:uefi'}))
    assert before.traits == ('CUSTOM_CAP_BOOT_MODE__BIOS',)
    assert after.traits == ('CUSTOM_CAP_BOOT_MODE__UEFI',)


@pytest.mark.parametrize('capabilities', ['boot_mode', 'boot_mode:uefi,:x',
                                          'k:' + 'v' * 300])
def test_malformed_capabilities_raise_naming_the_node_and_the_field(capabilities):
    with pytest.raises(InvalidProvider) as err:
        provider_from_node(node(properties={'capabilities': capabilities}))
    assert err.value.uuid == UUID and err.value.field == 'capabilities'


def test_states_of_many_nodes_share_their_resource_class_and_carry_no_dict():
    # The daemon's outbox keeps the confirmed state of every node it holds (issue 13 item 10).
    from computed.baremetal.driver import Node
    from computed.providers.state import provider_from_node
    a, b = (provider_from_node(Node(uuid=u, resource_class="bench-gold"))
            for u in ("11111111-2222-3333-4444-555555555501",
                      "11111111-2222-3333-4444-555555555502"))
    assert a.resource_class == "CUSTOM_BENCH_GOLD" and a.resource_class is b.resource_class
    assert not hasattr(a, "__dict__")
