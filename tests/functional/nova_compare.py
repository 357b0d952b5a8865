"""Run inside a virtualenv with Nova installed, the repository on sys.path: computed's
scheduling decisions against Nova's own, on one synthetic node set. Prints one JSON document.

Used by tests/functional/test_nova_compat.py. For every case (a flavor's extra specs and the
scheduler hints of a build) it computes:

* Nova: Nova's HostFilterHandler with Nova's ComputeCapabilitiesFilter and JsonFilter on every
  node, then Nova's HostWeightHandler with Nova's RAMWeigher and a downstream weigher derived
  from Nova's BaseHostWeigher; Nova's choice is the best weighed node.
* computed: the nodes Placement would return (every node holding the traits the flavor's exact
  capability specs become), then computed's pipeline with its built-in filters and the same two
  weighers, loaded by dotted path.
* computed running Nova's filter classes, loaded by dotted path from
  ``nova.scheduler.filters.all_filters``, plus the downstream RackFilter derived from Nova's
  BaseHostFilter.

And the answers of Nova's ``extra_specs_ops.match`` on the unit tests' cases.
"""

from __future__ import annotations

import json
import random
import sys

import computed  # noqa: F401  (first, as in every computed process)
from computed.instances import flavor_specs
from computed.providers.capabilities import capability_traits
from computed.scheduling import extra_specs_ops, loader
from computed.scheduling.host_state import HostState, NodeFacts, RequestSpec
from computed.scheduling.pipeline import Pipeline
from tests.unit.scheduling.cases import CASES

RC = 'CUSTOM_GOLD'
DOWNSTREAM = 'tests.unit.scheduling.fixtures.downstream_nova'
WEIGHERS = ['nova.scheduler.weights.ram.RAMWeigher', f'{DOWNSTREAM}.DiskCountWeigher']

FLAVORS = [
    {},
    {'capabilities:boot_mode': 'uefi'},
    {'capabilities:boot_mode': 'uefi', 'capabilities:memory_gb': '>= 256'},
    {'capabilities:memory_gb': '= 128'},
    {'capabilities:memory_gb': '== 512', 'capabilities:raid_level': 's!= 0'},
    {'capabilities:memory_gb': '<= 128', 'capabilities:boot_mode': 's== bios'},
    {'capabilities:memory_gb': '!= 64'},
    {'capabilities:cpu_flags': '<in> avx2'},
    {'capabilities:cpu_flags': '<all-in> aes avx2'},
    {'capabilities:raid_level': '<or> 1 <or> 5', 'capabilities:boot_mode': 'uefi'},
    {'capabilities:rack': 's>= r2'},
    {'capabilities:rack': 's> r2', 'capabilities:disk_count': '>= 6'},
    {'capabilities:rack': 's< r2'},
    {'capabilities:rack': 's<= r2', 'capabilities:gpu': '<in> a100'},
    {'capabilities:gpu': 'a100'},
    {'cpu_arch': 'x86_64', 'capabilities:boot_mode': 'bios'},
    {'capabilities:memory_gb': '>= 4096'},
]
HINTS = [
    {},
    {'query': json.dumps(['>=', '$free_ram_mb', 200000])},
    {'query': json.dumps(['and', ['=', '$stats.boot_mode', 'uefi'],
                          ['not', ['=', '$stats.raid_level', '0']]])},
    {'rack': 'r3'},
]


def nodes(count: int, seed: int) -> list[NodeFacts]:
    rand = random.Random(seed)
    made = []
    for index in range(count):
        capabilities = {
            'boot_mode': rand.choice(['uefi', 'bios']),
            'memory_gb': rand.choice(['64', '128', '256', '512']),
            'cpu_flags': '/'.join(sorted(rand.sample(['avx2', 'aes', 'sse4', 'avx512'], 2))),
            'raid_level': rand.choice(['0', '1', '5']),
            'rack': f'r{rand.randint(1, 4)}',
            'disk_count': str(rand.randint(1, 12)),
        }
        if rand.random() < 0.2:
            capabilities['gpu'] = rand.choice(['a100', 'h100'])
        uuid = f'00000000-0000-0000-0000-{index:012d}'
        traits = frozenset(capability_traits(','.join(f'{k}:{v}'
                                                       for k, v in capabilities.items())))
        # Distinct memory sizes: weights never tie, so "the best node" is one node.
        properties = {'cpu_arch': rand.choice(['x86_64', 'aarch64']),
                      'memory_mb': str(131072 + index * 997 + rand.randint(0, 996))}
        made.append(NodeFacts(uuid, RC, traits=traits, capabilities=capabilities,
                              properties=properties))
    return made


def spec(specs: dict[str, str], hints: dict[str, str], traits: frozenset[str]) -> RequestSpec:
    extra_specs = dict({f'resources:{RC}': '1'}, **specs)
    return RequestSpec({'id': 'f', 'name': 'f', 'extra_specs': extra_specs}, hints=hints,
                       project_id='p', instance_uuid='11111111-2222-3333-4444-555555555555',
                       resource_class=RC, traits=traits)


def main() -> None:
    from nova.scheduler import filters as nova_filters
    from nova.scheduler import weights as nova_weights
    from nova.scheduler.filters import extra_specs_ops as nova_ops
    from nova.scheduler.filters.compute_capabilities_filter import ComputeCapabilitiesFilter
    from nova.scheduler.filters.json_filter import JsonFilter

    facts = nodes(int(sys.argv[1]) if len(sys.argv) > 1 else 300, seed=26)
    ours = Pipeline(loader.filters(['computed.scheduling.filters.all_filters',
                                    f'{DOWNSTREAM}.RackFilter'],
                                   ['ComputeCapabilitiesFilter', 'JsonFilter', 'RackFilter']),
                    loader.weighers(WEIGHERS), time_budget=None)
    theirs_in_ours = Pipeline(loader.filters(['nova.scheduler.filters.all_filters',
                                              f'{DOWNSTREAM}.RackFilter'],
                                             ['ComputeCapabilitiesFilter', 'JsonFilter',
                                              'RackFilter']),
                              loader.weighers(WEIGHERS), time_budget=None)
    rack = loader.filters([f'{DOWNSTREAM}.RackFilter'], ['RackFilter'])[0]
    results = []
    for specs in FLAVORS:
        request = flavor_specs.placement_request(dict({f'resources:{RC}': '1'}, **specs))
        for hints in HINTS:
            every = [HostState(f) for f in facts]
            nova_spec = spec(specs, hints, request.required)
            kept = nova_filters.HostFilterHandler().get_filtered_objects(
                [ComputeCapabilitiesFilter(), JsonFilter(), rack], every, nova_spec, 0) or []
            ranked = nova_weights.HostWeightHandler().get_weighed_objects(
                [loader.make(cls) for cls in loader.classes(WEIGHERS)], kept, nova_spec)
            nova_first = ranked[0].obj.uuid if ranked else None
            # What Placement returns: the nodes with every required trait.
            candidates = [HostState(f) for f in facts if request.required <= f.traits]
            ours_decision = ours.run(candidates, spec(specs, hints, request.required))
            mixed = theirs_in_ours.run([HostState(f) for f in facts
                                        if request.required <= f.traits],
                                       spec(specs, hints, request.required))
            results.append({
                'specs': specs, 'hints': hints,
                'placement_candidates': len(candidates),
                'nova': sorted(h.uuid for h in kept), 'nova_first': nova_first,
                'computed': sorted(h.uuid for h in ours_decision.hosts),
                'computed_first': (ours_decision.hosts[0].uuid if ours_decision.hosts
                                   else None),
                'nova_classes_in_computed': sorted(h.uuid for h in mixed.hosts),
                'nova_classes_in_computed_first': mixed.hosts[0].uuid if mixed.hosts else None,
                'refused_with_errors': sorted({r.error for r in ours_decision.refused.values()
                                               if r.error}
                                              | {r.error for r in mixed.refused.values()
                                                 if r.error}),
            })
    ops = [{'value': value, 'requirement': requirement, 'expected': expected,
            'nova': nova_ops.match(value, requirement),
            'computed': extra_specs_ops.match(value, requirement)}
           for value, requirement, expected in CASES]
    json.dump({'cases': results, 'operators': ops}, sys.stdout)


if __name__ == '__main__':
    main()
