"""computed.instances.flavor_specs: extra specs -> Placement request, as Nova reads them for
Ironic."""

import pytest

from computed.instances.flavor_specs import (
    InvalidExtraSpec,
    PlacementRequest,
    check_spec,
    placement_request,
)
from computed.providers.capabilities import capability_trait

IRONIC_FLAVOR = {"resources:CUSTOM_BAREMETAL_GOLD": "1", "resources:VCPU": "0",
                 "resources:MEMORY_MB": "0", "resources:DISK_GB": "0"}


def test_an_ironic_flavor_asks_for_one_unit_of_its_class():
    assert placement_request(IRONIC_FLAVOR) == PlacementRequest("CUSTOM_BAREMETAL_GOLD")


def test_traits_and_capabilities():
    specs = dict(IRONIC_FLAVOR, **{"trait:HW_CPU_X86_AVX2": "required",
                                   "trait:CUSTOM_RAID": "forbidden",
                                   "capabilities:boot_mode": "uefi",
                                   "capabilities:Disk-Label": "gpt",
                                   "hw:cpu_policy": "dedicated"})
    request = placement_request(specs)
    assert request.required == {"HW_CPU_X86_AVX2", "CUSTOM_CAP_BOOT_MODE__UEFI",
                                capability_trait("Disk-Label", "gpt")}
    assert request.forbidden == {"CUSTOM_RAID"}


@pytest.mark.parametrize("specs, named", [
    ({}, "resources"),
    ({"resources:VCPU": "0"}, "resources"),
    ({"resources:CUSTOM_A": "1", "resources:CUSTOM_B": "1"}, "resources"),
    ({"resources:CUSTOM_A": "2"}, "resources:CUSTOM_A=2"),
    ({"resources:CUSTOM_A": "one"}, "resources:CUSTOM_A=one"),
    ({"resources:CUSTOM_A": "-1"}, "resources:CUSTOM_A=-1"),
    ({"resources:CUSTOM_A": "1", "resources:VCPU": "4"}, "resources:VCPU=4"),
    ({"resources:CUSTOM_A": "1", "trait:lower": "required"}, "trait:lower"),
    ({"resources:CUSTOM_A": "1", "trait:CUSTOM_X": "yes"}, "trait:CUSTOM_X=yes"),
    ({"resources:CUSTOM_A": "1", "trait:CUSTOM_X": "required", "capabilities:x": "<in>"},
     "capabilities:x"),
    ({"resources:CUSTOM_A": "1", "capabilities:x": ">= fast"}, "capabilities:x"),
    ({"resources:CUSTOM_A": "1", "capabilities:x::y": "<in> a"}, "capabilities:x::y"),
    ({"resources:CUSTOM_A": "1", "capabilities:": "y"}, "capabilities:=y"),
    ({"resources:CUSTOM_A": "1", "resources1:CUSTOM_B": "1"}, "resources1:CUSTOM_B"),
    ({"resources:CUSTOM_A": "1", "group_policy": "none"}, "group_policy"),
])
def test_refused_specs_name_the_spec(specs, named):
    with pytest.raises(InvalidExtraSpec) as caught:
        placement_request(specs)
    assert named in str(caught.value)


def test_a_trait_both_required_and_forbidden_is_refused():
    trait = capability_trait("boot_mode", "uefi")
    with pytest.raises(InvalidExtraSpec, match=trait):
        placement_request(dict(IRONIC_FLAVOR, **{"capabilities:boot_mode": "uefi",
                                                 f"trait:{trait}": "forbidden"}))


def test_check_spec_accepts_what_a_flavor_is_built_from():
    for key, value in dict(IRONIC_FLAVOR, **{"trait:CUSTOM_X": "required",
                                             "capabilities:boot_mode": "bios",
                                             "hw:anything": "goes"}).items():
        check_spec(key, value)


def test_capability_operators_are_left_to_the_filter():
    request = placement_request(dict(IRONIC_FLAVOR, **{
        "capabilities:boot_mode": "uefi", "capabilities:memory_gb": ">= 64",
        "capabilities:cpu_flags": "<all-in> avx2 aes", "capabilities:cpu_info:vendor": "Intel"}))
    assert request.required == {capability_trait("boot_mode", "uefi")}
    assert request.post_filtered == (("capabilities:cpu_flags", "<all-in> avx2 aes"),
                                     ("capabilities:cpu_info:vendor", "Intel"),
                                     ("capabilities:memory_gb", ">= 64"))
