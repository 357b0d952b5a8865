"""The capability <-> trait mapping (computed.providers.capabilities)."""

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from computed.providers import capabilities
from computed.providers.capabilities import InvalidCapability
from computed.providers.state import is_custom_name


def test_plain_pair_is_readable():
    assert capabilities.capability_trait('boot_mode', 'uefi') == 'CUSTOM_CAP_BOOT_MODE__UEFI'
    assert capabilities.parse_capability_trait('CUSTOM_CAP_BOOT_MODE__UEFI') == (
        'boot_mode', 'uefi')


def test_other_pairs_are_encoded_exactly():
    trait = capabilities.capability_trait('Boot-Mode', 'UEFI 2.0')
    assert trait.startswith(capabilities.ENCODED_PREFIX)
    assert is_custom_name(trait)
    assert capabilities.parse_capability_trait(trait) == ('Boot-Mode', 'UEFI 2.0')


def test_empty_value_is_encoded():
    trait = capabilities.capability_trait('iscsi_boot', '')
    assert capabilities.parse_capability_trait(trait) == ('iscsi_boot', '')


@pytest.mark.parametrize('trait', ['CUSTOM_GOLD', 'HW_CPU_X86_AVX', 'CUSTOM_CAP_NOSEP',
                                   'CUSTOM_CAPX_!!', 'CUSTOM_CAP___X'])
def test_other_traits_are_not_capabilities(trait):
    assert capabilities.parse_capability_trait(trait) is None


def test_too_long_is_refused_naming_the_pair():
    with pytest.raises(InvalidCapability, match='capability profile:'):
        capabilities.capability_trait('profile', 'x' * 300)


def test_capabilities_string():
    assert capabilities.parse_capabilities(' boot_mode : uefi ,secure_boot:true,') == {
        'boot_mode': 'uefi', 'secure_boot': 'true'}
    assert capabilities.parse_capabilities(None) == {}
    assert capabilities.capability_traits('secure_boot:true,boot_mode:uefi') == (
        'CUSTOM_CAP_BOOT_MODE__UEFI', 'CUSTOM_CAP_SECURE_BOOT__TRUE')


@pytest.mark.parametrize('text', ['boot_mode', ':uefi', 'a:b,c'])
def test_malformed_string_is_refused(text):
    with pytest.raises(InvalidCapability):
        capabilities.parse_capabilities(text)


@given(st.text(min_size=1, max_size=40).filter(lambda k: ':' not in k),
       st.text(max_size=40))
# Found by a suite run: 4-byte characters make 81 characters 256 once base32-encoded.
@example(key='00000000' + '\x80' * 14 + '\U00010000' * 10,
         value='0000000' + '\x80' * 14 + '\U00010000' * 10)
def test_mapping_is_reversible_or_refused_as_too_long(key, value):
    try:
        trait = capabilities.capability_trait(key, value)
    except InvalidCapability as exc:
        # Refused only when the trait cannot fit Placement's 255 characters: base32 makes
        # every 5 bytes of the UTF-8 pair 8 characters.
        encoded = math.ceil(len(f'{key}:{value}'.encode()) * 8 / 5)
        assert len(capabilities.ENCODED_PREFIX) + encoded > 255, exc
        assert 'too long for a trait' in str(exc)
        return
    assert is_custom_name(trait)
    assert capabilities.parse_capability_trait(trait) == (key, value)
