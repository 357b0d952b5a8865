"""Hostile input (issue 23 items 2 and 6): every request issue 23 answered with a 5xx, or
accepted silently, is a 400 (413 for a body too large) in the Compute error body, naming what
is wrong, and changes nothing (computed/api/limits.py)."""

from __future__ import annotations

import json

import pytest

from tests.unit.api.test_app import ADMIN, error_of, flavor

LONG = 'p' * 600


def snapshot(api):
    """What a refused request must not change: flavors, their specs, quotas, servers."""
    admin = api.as_(ADMIN, version='2.61')
    flavors = admin('GET', '/v2.1/flavors/detail').document['flavors']
    quotas = admin('GET', '/v2.1/os-quota-sets/p1').document['quota_set']
    servers = admin('GET', '/v2.1/servers/detail?all_tenants=1').document['servers']
    return flavors, quotas, [(s['id'], s['status']) for s in servers]


@pytest.mark.parametrize('path', [
    '/v2.1/flavors?limit=%C2%B2',           # '²': a digit to isdigit(), not to int()
    '/v2.1/flavors/detail?limit=%D9%A3',     # Arabic-Indic three
    '/v2.1/servers?limit=%C2%B2',
    '/v2.1/servers/detail?limit=' + '9' * 5000,
    '/v2.1/flavors?limit=-1',
    '/v2.1/flavors?marker=a%00b',
    '/v2.1/servers?marker=a%00b',
    '/v2.1/servers?name=we%00b',
    '/v2.1/flavors/go%00ld',
    '/v2.1/flavors/go%00ld/os-extra_specs',
    '/v2.1/os-quota-sets/p%001',
    '/v2.1/limits?tenant_id=p%001',
    '/v2.1/flavors?sort_dir=sideways',
    '/v2.1/servers?sort_dir=sideways',
    '/v2.1/servers/detail?sort_key=name&sort_dir=up',
    '/v2.1/flavors%FF',
    '/v2.1/flavors?marker=%FF',
    f'/v2.1/os-quota-sets/{LONG}',
])
def test_hostile_query_and_path_are_400(api, path):
    kind, message = error_of(api.as_(ADMIN)('GET', path), 400)
    assert kind == 'badRequest' and '\n' not in message


def test_a_unicode_digit_limit_names_the_parameter(api):
    assert "limit must be an integer from 0 to 2147483647, not '²'" in \
        error_of(api('GET', '/v2.1/flavors?limit=%C2%B2'), 400)[1]
    assert 'sort_dir must be asc or desc' in \
        error_of(api('GET', '/v2.1/servers?sort_dir=sideways'), 400)[1]


def test_a_deep_body_is_400_not_a_recursion(api):
    flavor(api, flavor_id='gold')
    before = snapshot(api)
    deepest = b'[' * 100_000 + b']' * 100_000  # issue 23's: past the size limit, too
    deep = b'[' * 50_000 + b']' * 50_000  # within it
    for method, path in (('POST', '/v2.1/flavors'), ('POST', '/v2.1/servers'),
                         ('PUT', '/v2.1/os-quota-sets/p1'),
                         ('POST', '/v2.1/flavors/gold/os-extra_specs')):
        assert error_of(api.as_(ADMIN)(method, path, raw=deepest), 413)[0] == 'overLimit'
        kind, message = error_of(api.as_(ADMIN)(method, path, raw=deep), 400)
        assert 'nested deeper than 32' in message
    assert snapshot(api) == before


@pytest.mark.parametrize('raw', [
    b'{"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 1, "rxtx_factor": NaN}}',
    b'{"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 1, "rxtx_factor": Infinity}}',
    b'{"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 1, "rxtx_factor": -Infinity}}',
    b'{"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 1, "rxtx_factor": 1e999}}',
    b'{"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 1, "id": "\\u0000"}}',
    b'{"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 1, "description": "a\\u0000"}}',
    b'{"flavor": {"name": "x", "ram": 2147483648, "vcpus": 1, "disk": 1}}',
    b'{"flavor": {"name": "x", "ram": "2147483648", "vcpus": 1, "disk": 1}}',
    b'{"flavor": {"name": "x", "ram": 1, "vcpus": 99999999999999999999, "disk": 1}}',
    b'{"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 1, "swap": "9999999999"}}',
    b'{"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 1, '
    b'"OS-FLV-EXT-DATA:ephemeral": 4294967296}}',
    b'{"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": "1' + b'0' * 5000 + b'"}}',
])
def test_bad_flavor_bodies_are_400_and_create_nothing(api, raw):
    before = snapshot(api)
    kind, message = error_of(api.as_(ADMIN, version='2.61')('POST', '/v2.1/flavors', raw=raw),
                             400)
    assert kind == 'badRequest'
    assert snapshot(api) == before


@pytest.mark.parametrize('body', [
    {'quota_set': {'instances': 2**31}},
    {'quota_set': {'instances': str(2**31)}},
    {'quota_set': {'CUSTOM_' + 'X' * 300: 1}},
    {'quota_set': {'CUSTOM_GOLD': 2**40}},
    {'quota_set': {'instances': '1\x00'}},
])
def test_bad_quota_bodies_are_400_and_change_nothing(api, body):
    before = snapshot(api)
    error_of(api.as_(ADMIN)('PUT', '/v2.1/os-quota-sets/p1', body), 400)
    assert snapshot(api) == before


def test_nul_and_length_in_paths_and_ids_are_400(api):
    admin = api.as_(ADMIN)
    flavor(api, flavor_id='gold')
    before = snapshot(api)
    assert 'NUL' in error_of(admin('PUT', '/v2.1/os-quota-sets/p%001',
                                   {'quota_set': {'instances': 1}}), 400)[1]
    assert '600 characters' in error_of(admin('PUT', f'/v2.1/os-quota-sets/{LONG}',
                                              {'quota_set': {'instances': 1}}), 400)[1]
    assert error_of(admin('DELETE', f'/v2.1/os-quota-sets/{LONG}'), 400)
    assert error_of(admin('POST', '/v2.1/flavors/gold/os-extra_specs',
                          {'extra_specs': {'hw:x': 'a\x00b'}}), 400)
    assert error_of(admin('PUT', '/v2.1/flavors/gold/os-extra_specs/hw:x',
                          {'hw:x': 'a\x00b'}), 400)
    assert error_of(admin('DELETE', '/v2.1/flavors/gold/os-extra_specs/hw%00x'), 400)
    assert snapshot(api) == before


def test_a_600_character_project_in_a_noauth2_token_is_400(api):
    flavor(api, flavor_id='gold')
    before = snapshot(api)
    long_project = api.as_(f'alice:{LONG}')
    kind, message = error_of(long_project('POST', '/v2.1/servers', {'server': {
        'name': 'x', 'flavorRef': 'gold', 'imageRef': 'http://images.example/a.qcow2',
        'networks': 'none'}}), 400)
    assert "token's project_id is 600 characters long" in message
    assert error_of(long_project('GET', '/v2.1/limits'), 400)
    assert error_of(api.as_(f'{LONG}:p1')('GET', '/v2.1/servers'), 400)
    assert snapshot(api) == before
    assert api.placement.allocations == {}


def test_a_body_over_the_size_limit_is_413(api):
    before = snapshot(api)
    big = json.dumps({'flavor': {'name': 'x', 'ram': 1, 'vcpus': 1, 'disk': 1,
                                 'description': 'd' * 200_000}}).encode()
    kind, message = error_of(api.as_(ADMIN, version='2.55')('POST', '/v2.1/flavors', raw=big),
                             413)
    assert kind == 'overLimit' and '114688' in message
    assert snapshot(api) == before
