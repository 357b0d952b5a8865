"""Scheduling against the real Placement (issue 26): exact capabilities as traits, Nova's
operators and hints decided on Placement's candidates, a broken filter never an error."""

from __future__ import annotations

import uuid as uuidlib

import pytest

from computed import db
from computed.db import engine as db_engine
from computed.instances import flavor_specs, scheduler
from computed.placement import allocations
from computed.placement.client import PlacementClient
from computed.providers.capabilities import capability_traits
from computed.providers.state import ProviderState
from computed.runtime import keystone
from computed.scheduling import candidates, loader
from computed.scheduling.pipeline import Pipeline

FIXTURES = 'tests.unit.scheduling.fixtures.downstream_plain'
NODES = {
    'n1': 'boot_mode:uefi,memory_gb:64,raid_level:1',
    'n2': 'boot_mode:uefi,memory_gb:256,raid_level:5',
    'n3': 'boot_mode:bios,memory_gb:512,raid_level:5',
    'n4': 'boot_mode:uefi,memory_gb:512,raid_level:0',
}


@pytest.fixture
def fleet(computed_config, tmp_path):
    """Four providers of a class of their own with their capabilities as traits (as the
    daemons report them), a database, and what a build needs; everything removed after."""
    adapter = keystone.load_adapter(computed_config, 'placement')
    client = PlacementClient(adapter)
    rc = f'CUSTOM_SCHED_{uuidlib.uuid4().hex[:8].upper()}'
    uuids = {name: str(uuidlib.uuid4()) for name in NODES}
    for name, capabilities in NODES.items():
        assert client.apply(ProviderState(uuid=uuids[name], name=uuids[name],
                                          resource_class=rc, reserved=0,
                                          traits=capability_traits(capabilities)))
    url = f"sqlite:///{tmp_path / 'computed.sqlite'}"
    db.sync(url)
    engine = db_engine.engine_from_url(url)
    built: list[str] = []

    def build(specs, **kwargs):
        extra_specs = dict({f'resources:{rc}': '1'}, **specs)
        request = flavor_specs.placement_request(extra_specs)
        instance = str(uuidlib.uuid4())
        built.append(instance)
        row = scheduler.schedule(adapter, engine, rc, request.required,
                                 forbidden=request.forbidden, instance_uuid=instance,
                                 owner_of=lambda node: ('test-host', 1),
                                 flavor={'id': 'f', 'name': 'f', 'extra_specs': extra_specs},
                                 **kwargs)
        return {v: k for k, v in uuids.items()}[row.node_uuid]

    build.adapter = adapter
    build.rc = rc
    build.built = built
    try:
        yield build
    finally:
        for instance in built:
            allocations.remove(adapter, instance)
        for uuid in uuids.values():
            client.delete(uuid)
        engine.dispose()


def test_candidates_carry_the_capabilities_read_back_from_traits(fleet):
    facts = candidates.read(fleet.adapter, fleet.rc, limit=10)
    assert sorted(dict(f.capabilities)['memory_gb'] for f in facts) == ['256', '512', '512',
                                                                        '64']
    assert all((f.total, f.used) == (1, 0) for f in facts)


def test_operators_and_exact_capabilities(fleet):
    specs = {'capabilities:boot_mode': 'uefi', 'capabilities:memory_gb': '>= 128'}
    first, second = fleet(specs), fleet(specs)
    assert {first, second} == {'n2', 'n4'}
    with pytest.raises(scheduler.NoValidHost) as caught:
        fleet(specs)
    # Placement returned the one uefi node left (n1); the filter refused it.
    assert 'ComputeCapabilitiesFilter refused 1' in caught.value.reason
    assert fleet({'capabilities:raid_level': '<or> 5 <or> 0'}) == 'n3'


def test_hints_reach_the_filters(fleet):
    query = '["and", ["=", "$stats.raid_level", "5"], ["=", "$hypervisor_type", "ironic"]]'
    assert fleet({'capabilities:boot_mode': 'uefi'}, hints={'query': query}) == 'n2'


def test_operators_own_filter_by_dotted_path_and_a_broken_one(fleet, computed_config):
    computed_config.set_override('available_filters', [f'{FIXTURES}.raid_filters'],
                                 'filter_scheduler')
    computed_config.set_override('enabled_filters', ['RaidLevelFilter'], 'filter_scheduler')
    pipeline = loader.pipeline_from_conf(computed_config)
    assert fleet({'raid:level': '0'}, pipeline=pipeline) == 'n4'
    broken = Pipeline(loader.filters([f'{FIXTURES}.BrokenFilter'], ['BrokenFilter']))
    with pytest.raises(scheduler.NoValidHost) as caught:
        fleet({}, pipeline=broken)
    assert 'BrokenFilter failed 3' in caught.value.reason
    assert allocations.read(fleet.adapter, fleet.built[-1]) == {}
