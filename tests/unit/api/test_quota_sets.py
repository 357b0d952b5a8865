"""Quota sets as Nova's clients use them (issue 24 item 10): what GET returns, PUT takes back
(a read-modify-write round trip, as Terraform and `openstack quota set` do), at each
microversion; only instances and CUSTOM_* are enforced (docs/api.md)."""

from __future__ import annotations

import pytest

from tests.unit.api.test_app import ADMIN, create, error_of, flavor


@pytest.mark.parametrize('version', ['2.1', '2.35', '2.36', '2.56', '2.57', '2.61'])
def test_a_read_modify_write_round_trip(api, version):
    admin = api.as_(ADMIN, version=version)
    shown = admin('GET', '/v2.1/os-quota-sets/p1').document['quota_set']
    shown.pop('id')
    changed = {key: value + 1 for key, value in shown.items()}
    put = admin('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': changed})
    assert put.status_int == 200, put.text
    assert put.document['quota_set'] == changed
    again = admin('GET', '/v2.1/os-quota-sets/p1').document['quota_set']
    again.pop('id')
    assert again == changed


def test_the_keys_a_microversion_dropped_are_refused_from_it_on(api):
    admin = api.as_(ADMIN)
    before = admin('GET', '/v2.1/os-quota-sets/p1').document
    for version, key in (('2.36', 'fixed_ips'), ('2.36', 'networks'),
                         ('2.57', 'injected_files')):
        kind, message = error_of(api.as_(ADMIN, version=version)(
            'PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {key: 1}}), 400)
        assert key in message and version in message
    assert api.as_(ADMIN, version='2.35')('PUT', '/v2.1/os-quota-sets/p1',
                                          {'quota_set': {'networks': 3}}).status_int == 200
    assert admin('GET', '/v2.1/os-quota-sets/p1').document == before


def test_limits_show_what_was_set_and_instances_is_enforced(api):
    admin = api.as_(ADMIN)
    admin('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {
        'instances': 1, 'cores': 4, 'ram': 2048, 'metadata_items': 7, 'key_pairs': 3}})
    absolute = api('GET', '/v2.1/limits').document['limits']['absolute']
    assert (absolute['maxTotalInstances'], absolute['maxTotalCores'],
            absolute['maxTotalRAMSize'], absolute['maxServerMeta'],
            absolute['maxTotalKeypairs']) == (1, 4, 2048, 7, 3)
    flavor_id = flavor(api)
    assert create(api, flavor_id).status_int == 202
    assert 'instances' in error_of(create(api, flavor_id), 403)[1]
