"""/os-hosts in-process (Nova's deprecated host API, 2.1 to 2.42), over a fixed list of
daemons (ZooKeeper is the functional tests'): each daemon a compute host; what the servers on
it use; enabling and disabling it as /os-services does; maintenance mode and power actions
answered 501 as Nova's Ironic driver answers them, after policy and the host's lookup."""

from __future__ import annotations

import pytest

from computed.api import services
from tests.unit.api.test_app import ADMIN, error_of, flavor
from tests.unit.api.test_servers import active, more_quota

DAEMONS = [{'host': 'c1', 'up': True, 'disabled': False, 'reason': None},
           {'host': 'c2', 'up': False, 'disabled': False, 'reason': None},
           {'host': 'c3', 'up': True, 'disabled': True, 'reason': 'maintenance'}]


@pytest.fixture
def changed(api, monkeypatch):
    """The daemons of DAEMONS; what set_disabled was asked (host, disable, reason)."""
    asked = []
    monkeypatch.setattr(services, '_services', lambda backends: [dict(d) for d in DAEMONS])

    def set_disabled(call, host, disable, reason):
        asked.append((host, disable, reason))
        return {}
    monkeypatch.setattr(services, 'set_disabled', set_disabled)
    return asked


@pytest.fixture
def admin(api, changed):
    return api.as_(ADMIN)


def test_the_enabled_daemons_are_the_compute_hosts_of_the_one_zone(admin):
    listed = admin('GET', '/v2.1/os-hosts')
    assert listed.status_int == 200, listed.text
    # As Nova: disabled services are not listed.
    assert listed.document == {'hosts': [
        {'host_name': 'c1', 'service': 'compute', 'zone': 'nova'},
        {'host_name': 'c2', 'service': 'compute', 'zone': 'nova'}]}
    for zone in ('nova', ''):  # an empty zone is no filter (Nova's)
        assert admin('GET', f'/v2.1/os-hosts?zone={zone}').document == listed.document
    assert admin('GET', '/v2.1/os-hosts?zone=xxx').document == {'hosts': []}


def test_a_hosts_resources_are_what_its_servers_use(api, admin):
    more_quota(api)
    gold = flavor(api)  # ram 1024, vcpus 2, disk 10
    active(api, gold)
    active(api, gold)
    active(api, gold, token='bob:p2')
    shown = admin('GET', '/v2.1/os-hosts/c1')
    assert shown.status_int == 200, shown.text
    resources = {r['resource']['project']: r['resource'] for r in shown.document['host']}
    # A node's capacity is one unit of its class (as /os-hypervisors): no CPU, memory, disk.
    assert resources['(total)'] == {'host': 'c1', 'project': '(total)', 'cpu': 0,
                                    'memory_mb': 0, 'disk_gb': 0}
    assert resources['(used_now)']['cpu'] == 0
    assert resources['(used_max)'] == {'host': 'c1', 'project': '(used_max)', 'cpu': 6,
                                       'memory_mb': 3072, 'disk_gb': 30}
    assert resources['p1'] == {'host': 'c1', 'project': 'p1', 'cpu': 4, 'memory_mb': 2048,
                               'disk_gb': 20}
    assert resources['p2']['cpu'] == 2
    assert [r['resource']['project'] for r in shown.document['host']][:3] == \
        ['(total)', '(used_now)', '(used_max)']
    # A host without servers (a disabled one is still a host).
    empty = admin('GET', '/v2.1/os-hosts/c3').document['host']
    assert [r['resource']['project'] for r in empty] == ['(total)', '(used_now)', '(used_max)']


def test_enabling_and_disabling_a_host_is_its_services(admin, changed):
    for status, answer in (('disable', 'disabled'), ('ENABLE', 'enabled')):
        updated = admin('PUT', '/v2.1/os-hosts/c1', {'status': status})
        assert updated.status_int == 200, updated.text
        assert updated.document == {'host': 'c1', 'status': answer}
    assert changed == [('c1', True, None), ('c1', False, None)]


@pytest.mark.parametrize('body', [
    {}, {'status': 'invalid'}, {'status': 'enable', 'maintenance_mode': 'invalid'},
    {'status': 'enable', 'other': 1}, {'status': None}, [], 'enable'])
def test_a_bad_update_is_a_400_that_changes_nothing(admin, changed, body):
    kind, message = error_of(admin('PUT', '/v2.1/os-hosts/c1', body), 400)
    assert kind == 'badRequest' and 'Invalid input' in message
    assert changed == []


def test_maintenance_mode_and_power_actions_are_not_implemented(admin, changed):
    # Nova's Ironic driver has neither (Nova answers 501); nothing is changed first.
    kind, message = error_of(admin('PUT', '/v2.1/os-hosts/c1', {
        'status': 'disable', 'maintenance_mode': 'enable'}), 501)
    assert 'maintenance' in message
    for action in ('startup', 'shutdown', 'reboot'):
        kind, message = error_of(admin('GET', f'/v2.1/os-hosts/c1/{action}'), 501)
        assert kind == 'notImplemented' and 'power' in message
    assert changed == []


@pytest.mark.parametrize('method, path, body', [
    ('GET', '/v2.1/os-hosts/nonexistent', None),
    ('PUT', '/v2.1/os-hosts/nonexistent', {'status': 'enable', 'maintenance_mode': 'enable'}),
    ('GET', '/v2.1/os-hosts/nonexistent/startup', None),
    ('GET', '/v2.1/os-hosts/nonexistent/shutdown', None),
    ('GET', '/v2.1/os-hosts/nonexistent/reboot', None)])
def test_an_unknown_host_is_a_404(admin, changed, method, path, body):
    kind, message = error_of(admin(method, path, body), 404)
    assert 'nonexistent' in message
    assert changed == []


@pytest.mark.parametrize('method, path, body', [
    ('GET', '/v2.1/os-hosts', None), ('GET', '/v2.1/os-hosts/c1', None),
    ('PUT', '/v2.1/os-hosts/c1', {'status': 'enable'}),
    ('GET', '/v2.1/os-hosts/c1/startup', None), ('GET', '/v2.1/os-hosts/c1/reboot', None)])
def test_hosts_are_an_admins(api, changed, method, path, body):
    kind, message = error_of(api(method, path, body), 403)
    assert 'compute:hosts' in message
    assert changed == []


def test_removed_at_2_43(admin):
    for path in ('/v2.1/os-hosts', '/v2.1/os-hosts/c1', '/v2.1/os-hosts/c1/reboot'):
        assert admin.as_(version='2.42')('GET', path).status_int != 404
        error_of(admin.as_(version='2.43')('GET', path), 404)
