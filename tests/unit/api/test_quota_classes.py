"""The default quotas (Nova's os-quota-class-sets, the class ``default``) and the cores and
ram quotas in-process (see conftest.py): Tempest's QuotaClassesAdminTestJSON and
QuotasAdminNegativeTest."""

from __future__ import annotations

import pytest

from tests.unit.api.test_app import ADMIN, create, error_of, flavor


@pytest.mark.parametrize('version, absent, present', [
    ('2.1', {'server_groups', 'server_group_members'}, {'fixed_ips', 'injected_files'}),
    ('2.50', {'fixed_ips', 'security_groups'}, {'server_groups', 'injected_files'}),
    ('2.57', {'fixed_ips', 'injected_files'}, {'server_groups', 'cores'})])
def test_the_default_class_read_modify_write_at_each_microversion(api, version, absent,
                                                                   present):
    """Tempest's test_update_default_quotas: every value + 100, answered and shown."""
    admin = api.as_(ADMIN, version)
    shown = admin('GET', '/v2.1/os-quota-class-sets/default').document['quota_class_set']
    assert shown.pop('id') == 'default'
    assert shown['instances'] == 3 and shown['cores'] == -1  # [quota] instances; Nova's
    assert not absent & set(shown) and present <= set(shown)
    changed = {key: value + 100 for key, value in shown.items()}
    put = admin('PUT', '/v2.1/os-quota-class-sets/default', {'quota_class_set': changed})
    assert put.status_int == 200, put.text
    assert put.document == {'quota_class_set': changed}
    again = admin('GET', '/v2.1/os-quota-class-sets/default').document['quota_class_set']
    again.pop('id')
    assert again == changed


def test_the_default_class_is_every_projects_default(api):
    admin = api.as_(ADMIN)
    assert admin('PUT', '/v2.1/os-quota-class-sets/default', {'quota_class_set': {
        'instances': 1, 'metadata_items': 5}}).status_int == 200
    for path in ('/v2.1/os-quota-sets/p1', '/v2.1/os-quota-sets/p1/defaults'):
        quota_set = admin('GET', path).document['quota_set']
        assert (quota_set['instances'], quota_set['metadata_items']) == (1, 5)
    absolute = api('GET', '/v2.1/limits').document['limits']['absolute']
    assert (absolute['maxTotalInstances'], absolute['maxServerMeta']) == (1, 5)
    flavor_id = flavor(api)
    assert create(api, flavor_id).status_int == 202
    assert 'instances' in error_of(create(api, flavor_id), 403)[1]
    # A project's own limit still wins.
    assert admin('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {'instances': 2}}) \
        .status_int == 200
    assert create(api, flavor_id).status_int == 202


def test_another_class_is_kept_and_used_by_nothing(api):
    admin = api.as_(ADMIN)
    assert admin('PUT', '/v2.1/os-quota-class-sets/gold', {'quota_class_set': {
        'instances': 0}}).status_int == 200
    assert admin('GET', '/v2.1/os-quota-class-sets/gold').document['quota_class_set'][
        'instances'] == 0
    assert admin('GET', '/v2.1/os-quota-sets/p1').document['quota_set']['instances'] == 3


@pytest.mark.parametrize('version, body', [
    ('2.1', {'quota_class_set': {'instances': -2}}),
    ('2.1', {'quota_class_set': {'instances': 'many'}}),
    ('2.1', {'quota_class_set': {'networks': 1}}),
    ('2.1', {'quota_class_set': {'CUSTOM_GOLD': 1}}),
    ('2.1', {'quota_class_set': {'server_groups': 1}}),
    ('2.50', {'quota_class_set': {'fixed_ips': 1}}),
    ('2.57', {'quota_class_set': {'injected_files': 1}}),
    ('2.1', {'quota_set': {'instances': 1}})])
def test_bad_bodies_are_a_400_and_change_nothing(api, version, body):
    admin = api.as_(ADMIN, version)
    before = admin('GET', '/v2.1/os-quota-class-sets/default').document
    error_of(admin('PUT', '/v2.1/os-quota-class-sets/default', body), 400)
    assert admin('GET', '/v2.1/os-quota-class-sets/default').document == before


def test_quota_classes_are_admins(api):
    for method, body in (('GET', None), ('PUT', {'quota_class_set': {'instances': 1}})):
        kind, message = error_of(api(method, '/v2.1/os-quota-class-sets/default', body), 403)
        assert 'compute:quota_classes' in message


# -- cores and ram (Nova's legacy quotas, counted from the flavors) ---------------------------

@pytest.mark.parametrize('key', ['cores', 'ram'])
def test_a_build_over_cores_or_ram_is_a_403_naming_it(api, key):
    """Tempest's test_create_server_when_cpu_quota_is_full / memory_quota_is_full."""
    flavor_id = flavor(api)  # 2 vcpus, 1024 MB
    assert api.as_(ADMIN)('PUT', '/v2.1/os-quota-sets/p1',
                          {'quota_set': {key: 0}}).status_int == 200
    kind, message = error_of(create(api, flavor_id), 403)
    assert key in message
    assert api.as_(ADMIN)('GET', '/v2.1/servers?all_tenants=1').document['servers'] == []


def test_cores_and_ram_count_the_projects_servers_flavors(api):
    flavor_id = flavor(api)  # 2 vcpus, 1024 MB
    admin = api.as_(ADMIN)
    assert admin('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {
        'cores': 4, 'ram': 4096}}).status_int == 200
    assert create(api, flavor_id).status_int == 202
    assert create(api, flavor_id).status_int == 202
    kind, message = error_of(create(api, flavor_id), 403)
    assert 'Quota exceeded for cores: requested 2, but already used 4 of 4 cores' in message
    absolute = api('GET', '/v2.1/limits').document['limits']['absolute']
    assert (absolute['totalCoresUsed'], absolute['totalRAMUsed']) == (4, 2048)
    detail = admin('GET', '/v2.1/os-quota-sets/p1/detail').document['quota_set']
    assert (detail['cores']['in_use'], detail['ram']['in_use']) == (4, 2048)
    # max_count: as many as fit, min_count all or nothing.
    assert admin('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {
        'cores': 8, 'instances': 10}}).status_int == 200
    error_of(create(api, flavor_id, min_count=3, max_count=3), 403)
    made = create(api, flavor_id, min_count=1, max_count=5, return_reservation_id=True)
    assert made.status_int == 202
    servers = api('GET', '/v2.1/servers?reservation_id='
                  f'{made.document["reservation_id"]}').document['servers']
    assert len(servers) == 2
