"""/os-hypervisors, /os-availability-zone and /os-aggregates in-process (issue 24 item 13): the
nodes as the reporters wrote them to the database, the servers on them, the daemons as
/os-services lists them (fixed here: ZooKeeper is the functional tests')."""

from __future__ import annotations

import json

import pytest

from computed.api import hypervisors, microversion, services
from computed.db import instances as db_instances
from computed.providers.state import ProviderState
from tests import database
from tests.unit.api.conftest import NODES, RC
from tests.unit.api.test_app import ADMIN, error_of, flavor
from tests.unit.api.test_servers import active

DAEMONS = [{'host': 'c1', 'up': True, 'disabled': False, 'reason': None},
           {'host': 'c2', 'up': False, 'disabled': True, 'reason': 'maintenance'}]


def report(engine, node, host, reserved=0):
    state = ProviderState(uuid=node, name=node, resource_class=RC, reserved=reserved)
    assert database.apply_report_if_newer(engine, node, 1, 1, host,
                                          lambda _previous: json.dumps(state.to_dict()))


@pytest.fixture
def fleet(api, engine, monkeypatch):
    """Three nodes: the first hosts a server (reserved, as the daemons report it), the second
    free, the third reserved without a server (maintenance); c2 is down and disabled."""
    api.engine = engine
    monkeypatch.setattr(services, '_services', lambda backends: [dict(d) for d in DAEMONS])
    server_id = active(api, flavor(api, flavor_id='gold'))
    node = db_instances.get_instance(engine, server_id).node_uuid
    others = [n for n in NODES if n != node]
    report(engine, node, 'c1', reserved=1)
    report(engine, others[0], 'c1')
    report(engine, others[1], 'c2', reserved=1)
    return {'server': server_id, 'busy': node, 'free': others[0], 'maintenance': others[1]}


def by_name(documents):
    return {doc['hypervisor_hostname']: doc for doc in documents}


def test_each_node_is_a_hypervisor(api, fleet):
    admin = api.as_(ADMIN, version='2.53')
    listed = by_name(admin('GET', '/v2.1/os-hypervisors').document['hypervisors'])
    assert sorted(listed) == sorted(NODES)
    assert listed[fleet['free']] == {'id': fleet['free'], 'hypervisor_hostname': fleet['free'],
                                     'state': 'up', 'status': 'enabled'}
    assert (listed[fleet['busy']]['state'], listed[fleet['busy']]['status']) == \
        ('up', 'enabled')
    # Reserved without a server (maintenance), and its daemon down and disabled.
    assert (listed[fleet['maintenance']]['state'], listed[fleet['maintenance']]['status']) \
        == ('down', 'disabled')


def test_detail_and_show_read_as_novas_ironic_hypervisors(api, fleet):
    admin = api.as_(ADMIN, version='2.53')
    detailed = by_name(admin('GET', '/v2.1/os-hypervisors/detail').document['hypervisors'])
    busy = detailed[fleet['busy']]
    assert (busy['hypervisor_type'], busy['hypervisor_version'], busy['running_vms'],
            busy['vcpus'], busy['memory_mb'], busy['local_gb'], busy['cpu_info']) == \
        ('ironic', 1, 1, 0, 0, 0, {})
    assert busy['service']['host'] == 'c1'
    assert busy['service']['id'] == services.service_id(
        type('C', (), {'at_least': lambda self, *v: True})(), api.backends.group, 'c1', 1)
    assert detailed[fleet['maintenance']]['service']['disabled_reason'] == 'maintenance'
    shown = admin('GET', f'/v2.1/os-hypervisors/{fleet["busy"]}?with_servers=true').document
    assert shown['hypervisor']['servers'] == [{'uuid': fleet['server'], 'name': 'web'}]
    assert 'servers' not in admin('GET', f'/v2.1/os-hypervisors/{fleet["free"]}?'
                                         'with_servers=1').document['hypervisor']
    with_servers = by_name(admin('GET', '/v2.1/os-hypervisors?with_servers=yes').document[
        'hypervisors'])
    assert with_servers[fleet['busy']]['servers'][0]['uuid'] == fleet['server']
    assert admin('GET', '/v2.1/os-hypervisors/statistics').document == {
        'hypervisor_statistics': {'count': 3, 'running_vms': 1, **{
            size: 0 for size in hypervisors.SIZES}}}


def test_before_2_53_ids_are_numbers_and_cpu_info_text(api, fleet):
    admin = api.as_(ADMIN, version='2.27')
    listed = by_name(admin('GET', '/v2.1/os-hypervisors/detail').document['hypervisors'])
    busy = listed[fleet['busy']]
    assert busy['id'] == hypervisors.legacy_id(fleet['busy']) and busy['cpu_info'] == ''
    assert admin('GET', f'/v2.1/os-hypervisors/{busy["id"]}').document['hypervisor'][
        'hypervisor_hostname'] == fleet['busy']
    error_of(admin('GET', f'/v2.1/os-hypervisors/{fleet["busy"]}'), 404)
    found = admin('GET', f'/v2.1/os-hypervisors/{fleet["busy"][:8]}/servers').document
    assert found['hypervisors'][0]['servers'][0]['uuid'] == fleet['server']
    assert len(admin('GET', '/v2.1/os-hypervisors/0000/search').document['hypervisors']) == 3
    error_of(admin('GET', '/v2.1/os-hypervisors/nothing/search'), 404)
    error_of(api.as_(ADMIN, version='2.53')('GET', '/v2.1/os-hypervisors/0000/search'), 404)


def test_paging_and_the_hostname_pattern(api, fleet):
    admin = api.as_(ADMIN, version='2.53')
    first = admin('GET', '/v2.1/os-hypervisors?limit=2').document
    assert len(first['hypervisors']) == 2 and first['hypervisors_links'][0]['rel'] == 'next'
    marker = first['hypervisors'][-1]['id']
    rest = admin('GET', f'/v2.1/os-hypervisors?marker={marker}').document['hypervisors']
    assert [h['id'] for h in first['hypervisors'] + rest] == sorted(NODES)
    matched = admin('GET', f'/v2.1/os-hypervisors?hypervisor_hostname_pattern='
                           f'{fleet["free"][:8]}').document['hypervisors']
    assert [h['id'] for h in matched] == [fleet['free']]
    error_of(admin('GET', '/v2.1/os-hypervisors?hypervisor_hostname_pattern=zzz'), 404)


@pytest.mark.parametrize('version, path', [
    ('2.53', '/os-hypervisors?bogus=1'), ('2.53', '/os-hypervisors?with_servers=maybe'),
    ('2.53', '/os-hypervisors?limit=-1'), ('2.53', '/os-hypervisors?limit=x'),
    ('2.53', '/os-hypervisors?marker=00000000-0000-0000-0000-000000000000'),
    ('2.53', '/os-hypervisors?hypervisor_hostname_pattern=1&limit=1'),
    ('2.53', '/os-hypervisors/detail?hypervisor_hostname_pattern=1&marker=x'),
    ('2.53', '/os-hypervisors/not-a-uuid'), ('2.53', '/os-hypervisors/{busy}?bogus=1'),
    ('2.33', '/os-hypervisors?marker=12')])
def test_bad_queries_are_a_400(api, fleet, version, path):
    error_of(api.as_(ADMIN, version=version)('GET', '/v2.1' + path.format(**fleet)), 400)


def test_unknown_hypervisors_are_a_404_and_uptime_a_501_as_novas_ironic(api, fleet):
    admin = api.as_(ADMIN, version='2.53')
    error_of(admin('GET', '/v2.1/os-hypervisors/00000000-0000-0000-0000-000000000000'), 404)
    kind, _message = error_of(admin('GET', f'/v2.1/os-hypervisors/{fleet["busy"]}/uptime'),
                              501)
    assert kind == 'notImplemented'


def test_hypervisors_are_an_admins(api, fleet):
    for path in ('', '/detail', '/statistics', f'/{fleet["busy"]}'):
        kind, message = error_of(api.as_(version='2.53')('GET', '/v2.1/os-hypervisors' + path),
                                 403)
        assert 'compute:hypervisors' in message


def test_from_2_88_the_reduced_fields_and_no_statistics(api, fleet, monkeypatch):
    monkeypatch.setattr(microversion, 'MAX_VERSION', microversion.Version(2, 88))
    admin = api.as_(ADMIN, version='2.88')
    shown = admin('GET', f'/v2.1/os-hypervisors/{fleet["busy"]}').document['hypervisor']
    assert 'vcpus' not in shown and 'running_vms' not in shown and shown['uptime'] is None
    error_of(admin('GET', '/v2.1/os-hypervisors/statistics'), 404)


# -- zones and aggregates -------------------------------------------------------------------

def test_one_zone_nova_available_while_a_daemon_is_up_and_enabled(api, fleet, monkeypatch):
    zones = api('GET', '/v2.1/os-availability-zone').document
    assert zones == {'availabilityZoneInfo': [{'zoneName': 'nova',
                                               'zoneState': {'available': True},
                                               'hosts': None}]}
    detail = api.as_(ADMIN)('GET', '/v2.1/os-availability-zone/detail').document
    (zone,) = detail['availabilityZoneInfo']
    assert zone['hosts'] == {
        'c1': {'nova-compute': {'available': True, 'active': True, 'updated_at': None}},
        'c2': {'nova-compute': {'available': False, 'active': False, 'updated_at': None}}}
    kind, message = error_of(api('GET', '/v2.1/os-availability-zone/detail'), 403)
    assert 'compute:availability_zones:detail' in message
    monkeypatch.setattr(services, '_services', lambda backends: [dict(DAEMONS[1])])
    assert api('GET', '/v2.1/os-availability-zone').document['availabilityZoneInfo'][0][
        'zoneState'] == {'available': False}


def test_there_are_no_aggregates(api):
    assert api.as_(ADMIN)('GET', '/v2.1/os-aggregates').document == {'aggregates': []}
    error_of(api('GET', '/v2.1/os-aggregates'), 403)
