"""computed.instances.scheduler with the pipeline: capability operators decided on Placement's
candidates, hints reaching filters, a broken filter never failing the request with an error."""

import logging

import pytest

from computed.instances import flavor_specs, scheduler
from computed.providers.capabilities import capability_trait
from computed.scheduling import candidates, loader
from computed.scheduling.pipeline import Pipeline
from tests.unit.instance.fakes import FakePlacement

RC = 'CUSTOM_GOLD'
A, B, C = (f'{i}' * 8 + '-0000-0000-0000-000000000000' for i in 'abc')
FIXTURES = 'tests.unit.scheduling.fixtures.downstream_plain'


def owners(node):
    return ('c1', 3)


def caps(**pairs):
    return [capability_trait(k, v) for k, v in pairs.items()]


def fleet():
    placement = FakePlacement()
    placement.add(A, RC, caps(boot_mode='uefi', memory_gb='64', raid_level='1'))
    placement.add(B, RC, caps(boot_mode='uefi', memory_gb='256', raid_level='5'))
    placement.add(C, RC, caps(boot_mode='bios', memory_gb='512', raid_level='5'))
    return placement


def build(placement, engine, specs, **kwargs):
    request = flavor_specs.placement_request(dict({f'resources:{RC}': '1'}, **specs))
    return scheduler.schedule(placement, engine, RC, request.required,
                              forbidden=request.forbidden, owner_of=owners,
                              flavor={'id': 'f', 'name': 'gold',
                                      'extra_specs': dict({f'resources:{RC}': '1'}, **specs)},
                              **kwargs)


def test_exact_capabilities_stay_traits_operators_filter_candidates(engine):
    placement = fleet()
    row = build(placement, engine, {'capabilities:boot_mode': 'uefi',
                                    'capabilities:memory_gb': '>= 128'})
    assert row.node_uuid == B
    # Placement was asked for the exact one only; the operator was decided on its candidates.
    (url,) = [u for m, u in placement.requests if u.startswith('/allocation_candidates')]
    assert f"required={capability_trait('boot_mode', 'uefi')}" in url
    assert 'MEMORY' not in url


def test_no_candidate_passes_the_filters(engine):
    with pytest.raises(scheduler.NoValidHost) as caught:
        build(fleet(), engine, {'capabilities:memory_gb': '>= 1024'})
    assert '3 candidate(s) refused by the filters' in caught.value.reason
    assert 'ComputeCapabilitiesFilter refused 3' in caught.value.reason


def test_hints_reach_the_json_filter(engine):
    row = build(fleet(), engine, {}, hints={'query': '["=", "$stats.raid_level", "1"]'})
    assert row.node_uuid == A


def test_operators_downstream_filter_and_weigher(engine):
    pipeline = Pipeline(loader.filters([f'{FIXTURES}.RaidLevelFilter'], ['RaidLevelFilter']),
                        loader.weighers(['computed.scheduling.weighers.PropertyWeigher']))
    row = build(fleet(), engine, {'raid:level': '5', 'capabilities:boot_mode': 'uefi'},
                pipeline=pipeline)
    assert row.node_uuid == B
    row = build(fleet(), engine, {'raid:level': '5'}, pipeline=pipeline,
                hints={'not_node': B})
    assert row.node_uuid == C


def test_a_broken_filter_is_no_valid_host_never_an_error(engine, caplog):
    pipeline = Pipeline(loader.filters([f'{FIXTURES}.BrokenFilter'], ['BrokenFilter']))
    with caplog.at_level(logging.WARNING), pytest.raises(scheduler.NoValidHost) as caught:
        build(fleet(), engine, {}, pipeline=pipeline)
    assert 'BrokenFilter failed 3' in caught.value.reason
    assert any('BrokenFilter' in r.getMessage() for r in caplog.records)
    assert fleet().allocations == {}


def test_a_taken_candidate_leads_to_the_next_good_one(engine):
    placement = fleet()
    # B is taken by another build between the candidates and the claim.
    placement.before_put = lambda consumer, node: (
        placement.allocations.setdefault('other', B) if node == B else None)
    row = build(placement, engine, {'capabilities:memory_gb': '>= 128'})
    assert row.node_uuid == C


def test_facts_from_placements_answer():
    body = {'allocation_requests': [{'allocations': {A: {}}}, {'allocations': {B: {}}},
                                    {'allocations': {A: {}}}],
            'provider_summaries': {
                A: {'resources': {RC: {'capacity': 1, 'used': 0}},
                    'traits': caps(boot_mode='uefi') + ['CUSTOM_X', 'HW_CPU_X86_AVX2']}}}
    facts = candidates.facts_from_body(body, RC)
    assert [f.uuid for f in facts] == [A, B]
    assert facts[0].capabilities == {'boot_mode': 'uefi'}
    assert 'CUSTOM_X' in facts[0].traits and (facts[0].total, facts[0].used) == (1, 0)
    assert facts[1].traits == frozenset() and facts[1].capabilities == {}
    assert candidates.query(RC, ['T'], ['F'], 5) == \
        f'/allocation_candidates?resources={RC}:1&limit=5&required=T,!F'


def test_a_retry_honours_the_flavors_capability_operators(engine):
    from computed.instances import reschedule
    from computed.instances.retries import NextAttempt
    placement = fleet()
    row = build(placement, engine, {'capabilities:memory_gb': '>= 128'})
    assert row.node_uuid in (B, C)
    # The build failed on its node: unwound (allocation removed), then handed on.
    placement.allocations.pop(row.uuid)
    moved = reschedule.next_node(placement, engine, row,
                                 NextAttempt(frozenset({row.node_uuid}), 'failed once'),
                                 owner_of=owners, project_id='p', user_id='u')
    assert moved is not None and moved.node_uuid == ({B, C} - {row.node_uuid}).pop()
    placement.allocations.pop(row.uuid)
    # Both nodes with memory_gb >= 128 failed: A (64) is never tried.
    assert reschedule.next_node(placement, engine, moved,
                                NextAttempt(frozenset({B, C}), 'failed twice'),
                                owner_of=owners, project_id='p', user_id='u') is None


def test_a_retry_runs_the_configured_pipeline(engine):
    from computed.instances import reschedule
    from computed.instances.retries import NextAttempt
    placement = fleet()
    pipeline = Pipeline(loader.filters([f'{FIXTURES}.RaidLevelFilter'], ['RaidLevelFilter']))
    # The flavor asks for RAID 5, a rule only the operator's filter knows: B and C have it.
    row = build(placement, engine, {'raid:level': '5'}, pipeline=pipeline)
    assert row.node_uuid in (B, C)
    placement.allocations.pop(row.uuid)
    moved = reschedule.next_node(placement, engine, row,
                                 NextAttempt(frozenset({row.node_uuid}), 'failed once'),
                                 owner_of=owners, project_id='p', user_id='u',
                                 pipeline=pipeline)
    assert moved.node_uuid == ({B, C} - {row.node_uuid}).pop()
    placement.allocations.pop(row.uuid)
    assert reschedule.next_node(placement, engine, moved,
                                NextAttempt(frozenset({B, C}), 'failed twice'),
                                owner_of=owners, project_id='p', user_id='u',
                                pipeline=pipeline) is None
