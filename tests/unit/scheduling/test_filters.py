"""computed.scheduling.filters and host_state: the built-in filters on Nova-shaped objects."""

import json

import pytest

from computed.scheduling import filters
from computed.scheduling.host_state import HostState, NodeFacts, RequestSpec

GOLD = {'resources:CUSTOM_GOLD': '1'}


def host(uuid='n1', **capabilities):
    properties = capabilities.pop('properties', {})
    zone = capabilities.pop('zone', 'nova')
    return HostState(NodeFacts(uuid, 'CUSTOM_GOLD', capabilities=capabilities,
                               properties=properties, availability_zone=zone))


def spec(hints=None, zone=None, **specs):
    return RequestSpec({'id': 'f', 'name': 'gold', 'extra_specs': dict(GOLD, **specs)},
                       hints=hints, availability_zone=zone, project_id='p')


def capabilities_pass(node, **specs):
    return filters.ComputeCapabilitiesFilter().host_passes(
        node, spec(**{f'capabilities:{k}': v for k, v in specs.items()}))


def test_host_state_is_shaped_as_novas_for_an_ironic_node():
    node = host('n1', boot_mode='uefi', properties={'cpu_arch': 'x86_64', 'memory_mb': '4096',
                                                   'local_gb': '10', 'cpus': '8'})
    assert (node.nodename, node.uuid, node.hypervisor_type) == ('n1', 'n1', 'ironic')
    assert node.stats == {'boot_mode': 'uefi', 'cpu_arch': 'x86_64'}
    assert (node.free_ram_mb, node.free_disk_mb, node.vcpus_total) == (4096, 10240, 8)
    assert node.properties['capabilities'] == 'boot_mode:uefi'
    assert node.supported_instances == [('x86_64', 'baremetal', 'hvm')]
    used = HostState(NodeFacts('n2', 'CUSTOM_GOLD', properties={'memory_mb': '4096'}, used=1))
    assert (used.free_ram_mb, used.free) == (0, 0)


def test_request_spec_is_shaped_as_novas():
    request = spec(hints={'query': '["=", 1, 1]', 'group': ['a', 'b'], 'n': 3})
    assert 'extra_specs' in request.flavor and 'scheduler_hints' in request
    assert request.obj_attr_is_set('flavor') and not request.obj_attr_is_set('instance_group')
    assert request.scheduler_hints == {'query': ['["=", 1, 1]'], 'group': ['a', 'b'],
                                       'n': ['3']}
    assert request.get_scheduler_hint('query') == '["=", 1, 1]'
    assert request.get_scheduler_hint('group') == ['a', 'b']
    assert request.get_scheduler_hint('missing', 'x') == 'x'
    assert request.flavor['extra_specs'] == GOLD
    assert request.to_legacy_filter_properties_dict()['instance_type'] is request.flavor


@pytest.mark.parametrize('requirement, passes', [
    ('uefi', True), ('bios', False), ('s== uefi', True), ('<in> uef', True),
    ('<or> bios <or> uefi', True), ('s!= uefi', False)])
def test_capabilities_operators(requirement, passes):
    assert capabilities_pass(host(boot_mode='uefi'), boot_mode=requirement) is passes


def test_capabilities_numbers_and_missing_keys():
    node = host(memory_gb='128', cpu_flags='avx2,aes')
    assert capabilities_pass(node, memory_gb='>= 64')
    assert not capabilities_pass(node, memory_gb='>= 256')
    assert capabilities_pass(node, cpu_flags='<all-in> aes avx2')
    assert not capabilities_pass(node, gpu='<in> a100')  # the node lacks it: refused, as Nova


def test_capabilities_nested_scopes_read_json():
    node = host(cpu_info=json.dumps({'vendor': 'Intel', 'features': ['avx2']}))
    assert capabilities_pass(node, **{'cpu_info:vendor': 's== Intel'})
    assert not capabilities_pass(node, **{'cpu_info:vendor': 'AMD'})
    assert not capabilities_pass(host(cpu_info='not json'), **{'cpu_info:vendor': 'Intel'})


def test_capabilities_attributes_before_stats_and_unscoped_keys():
    node = host(properties={'cpu_arch': 'x86_64'})
    check = filters.ComputeCapabilitiesFilter()
    # Unscoped keys count when the host has them (Nova's backward compatibility)...
    assert check.host_passes(node, spec(cpu_arch='x86_64'))
    assert not check.host_passes(node, spec(cpu_arch='aarch64'))
    assert check.host_passes(node, spec(hypervisor_type='s== ironic'))  # an attribute
    # ...and are ignored otherwise, as are other namespaces.
    assert check.host_passes(node, spec(nothing_like_it='x', **{'hw:cpu_policy': 'dedicated'}))


def json_pass(node, query):
    return filters.JsonFilter().host_passes(node, spec(hints={'query': json.dumps(query)}))


def test_json_filter_grammar():
    node = host(properties={'memory_mb': '4096'}, boot_mode='uefi')
    assert json_pass(node, ['>=', '$free_ram_mb', 1024])
    assert not json_pass(node, ['>=', '$free_ram_mb', 8192])
    assert json_pass(node, ['and', ['=', '$stats.boot_mode', 'uefi'], ['<', '$free_ram_mb', 5000]])
    assert json_pass(node, ['or', ['=', '$stats.boot_mode', 'bios'], ['in', '$nodename', 'n1']])
    assert json_pass(node, ['not', ['=', '$stats.boot_mode', 'bios']])
    assert not json_pass(node, ['=', '$stats.missing', 'x'])  # a missing term is dropped
    assert json_pass(node, [])  # an empty query passes
    assert filters.JsonFilter().host_passes(node, spec())  # no query: passes


def test_json_filter_bad_query_raises_naming_it():
    with pytest.raises(filters.JsonQueryError, match='nope'):
        json_pass(host(), ['nope', 1, 2])
    with pytest.raises(filters.JsonQueryError, match='not a list'):
        json_pass(host(), {'=': 1})
    with pytest.raises(filters.JsonQueryError, match='not a command'):
        json_pass(host(), [['='], 1])
    with pytest.raises(filters.JsonQueryError, match='not JSON'):
        filters.JsonFilter().host_passes(host(), spec(hints={'query': '[oops'}))


def test_availability_zone_filter():
    check = filters.AvailabilityZoneFilter()
    assert check.host_passes(host(zone='az1'), spec())
    assert check.host_passes(host(zone='az1'), spec(zone='az1'))
    assert check.host_passes(host(zone='az1'), spec(zone='az1:ctl-1:n1'))
    assert not check.host_passes(host(zone='az1'), spec(zone='az2'))
    assert not check.host_passes(host(zone='az1'), spec(hints={'availability_zone': 'az2'}))


def test_base_filter_has_novas_interface():
    class Odd(filters.BaseHostFilter):
        run_filter_once_per_request = True

        def host_passes(self, host_state, spec_obj):
            return host_state.nodename.endswith('1')
    hosts = [host('n1'), host('n2')]
    assert [h.nodename for h in Odd().filter_all(hosts, spec())] == ['n1']
    assert Odd().run_filter_for_index(0) and not Odd().run_filter_for_index(1)
    assert filters.AllHostsFilter().host_passes(hosts[0], spec())
    assert set(filters.all_filters()) >= {filters.ComputeCapabilitiesFilter, filters.JsonFilter}
