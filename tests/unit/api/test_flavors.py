"""Flavors as Nova's clients and Tempest use them (issue 24 items 1, 2, 6) and flavors that could
never be built refused when they are written (issue 23 item 4)."""

from __future__ import annotations

import pytest

from tests.unit.api.test_app import ADMIN, GOLD, error_of, flavor


def make(api, name, ram=1024, disk=10, **extra):
    return api.as_(ADMIN, version='2.61')('POST', '/v2.1/flavors', {'flavor': dict(
        {'name': name, 'ram': ram, 'vcpus': 2, 'disk': disk}, **extra)})


def ids(response, key='flavors'):
    assert response.status_int == 200, response.text
    return [item['id'] for item in response.document[key]]


def test_a_second_resource_class_is_refused_when_it_is_set(api):
    flavor(api, flavor_id='gold')
    admin = api.as_(ADMIN)
    kind, message = error_of(admin('POST', '/v2.1/flavors/gold/os-extra_specs',
                                   {'extra_specs': {'resources:CUSTOM_SILVER': '1'}}), 400)
    assert 'CUSTOM_SILVER' in message and 'CUSTOM_GOLD' in message and 'gold' in message
    error_of(admin('PUT', '/v2.1/flavors/gold/os-extra_specs/resources:CUSTOM_SILVER',
                   {'resources:CUSTOM_SILVER': '1'}), 400)
    # Two at once, on a flavor without any: refused too.
    flavor(api, name='bare', flavor_id='bare', specs=None)
    error_of(admin('POST', '/v2.1/flavors/bare/os-extra_specs', {'extra_specs': {
        'resources:CUSTOM_A': '1', 'resources:CUSTOM_B': '1'}}), 400)
    # A trait both required and forbidden, across two requests.
    admin('POST', '/v2.1/flavors/gold/os-extra_specs',
          {'extra_specs': {'trait:CUSTOM_FAST': 'required'}})
    # (trait:X twice is one key: required then forbidden replaces it; no conflict there.)
    assert api('GET', '/v2.1/flavors/gold/os-extra_specs').document['extra_specs'] == \
        dict(GOLD, **{'trait:CUSTOM_FAST': 'required'})
    assert api('GET', '/v2.1/flavors/bare/os-extra_specs').document['extra_specs'] == {}
    # Moving a flavor to another class: the old one to 0 first, or both in one request.
    assert admin('POST', '/v2.1/flavors/gold/os-extra_specs', {'extra_specs': {
        'resources:CUSTOM_GOLD': '0', 'resources:CUSTOM_SILVER': '1'}}).status_int == 200


@pytest.mark.parametrize('flavor_id', ['detail', '.', '..'])
def test_an_id_the_api_routes_elsewhere_is_refused(api, flavor_id):
    kind, message = error_of(make(api, 'x', id=flavor_id), 400)
    assert repr(flavor_id) in message
    assert ids(api('GET', '/v2.1/flavors')) == []


def test_an_integer_id_is_its_string(api):
    made = make(api, 'tempest', id=42)
    assert made.status_int == 200, made.text
    assert made.document['flavor']['id'] == '42'
    assert api('GET', '/v2.1/flavors/42').document['flavor']['name'] == 'tempest'
    error_of(make(api, 'neg', id=-1), 400)
    error_of(make(api, 'float', id=1.5), 400)


def test_min_ram_and_min_disk_filter(api):
    make(api, 'small', ram=512, disk=5, id='s')
    make(api, 'medium', ram=2048, disk=20, id='m')
    make(api, 'large', ram=8192, disk=10, id='l')
    assert ids(api('GET', '/v2.1/flavors?minRam=2048')) == ['l', 'm']
    assert ids(api('GET', '/v2.1/flavors/detail?minDisk=10')) == ['l', 'm']
    assert ids(api('GET', '/v2.1/flavors?minRam=1000&minDisk=15')) == ['m']
    for bad in ('minRam=x', 'minDisk=-1', 'minRam=%C2%B2', 'minDisk=99999999999'):
        assert bad.split('=')[0] in error_of(api('GET', f'/v2.1/flavors?{bad}'), 400)[1]
    # Paging keeps the filters in the next link.
    page = api('GET', '/v2.1/flavors?minRam=1000&limit=1').document
    assert 'minRam=1000' in page['flavors_links'][0]['href']


def test_deleting_an_extra_spec_is_200(api):
    flavor(api, flavor_id='gold')
    response = api.as_(ADMIN)('DELETE', '/v2.1/flavors/gold/os-extra_specs/resources:VCPU')
    assert response.status_int == 200
    assert 'resources:VCPU' not in \
        api('GET', '/v2.1/flavors/gold/os-extra_specs').document['extra_specs']


def test_the_description_is_updated_at_2_55(api):
    make(api, 'gold', id='gold', description='old')
    admin = api.as_(ADMIN, version='2.55')
    updated = admin('PUT', '/v2.1/flavors/gold', {'flavor': {'description': 'new'}})
    assert updated.status_int == 200, updated.text
    assert updated.document['flavor']['description'] == 'new'
    assert api.as_(version='2.55')('GET', '/v2.1/flavors/gold') \
        .document['flavor']['description'] == 'new'
    assert admin('PUT', '/v2.1/flavors/gold', {'flavor': {'description': None}}) \
        .document['flavor']['description'] is None
    # Before 2.55 there is no such method; nothing but the description; admins only.
    error_of(api.as_(ADMIN, version='2.54')('PUT', '/v2.1/flavors/gold',
                                            {'flavor': {'description': 'x'}}), 405)
    error_of(admin('PUT', '/v2.1/flavors/gold', {'flavor': {'description': 'x', 'ram': 1}}),
             400)
    error_of(admin('PUT', '/v2.1/flavors/gold', {'flavor': {'description': 'a\x00'}}), 400)
    error_of(api.as_(version='2.55')('PUT', '/v2.1/flavors/gold',
                                     {'flavor': {'description': 'x'}}), 403)
    error_of(admin('PUT', '/v2.1/flavors/nope', {'flavor': {'description': 'x'}}), 404)
    assert api.as_(version='2.55')('GET', '/v2.1/flavors/gold') \
        .document['flavor']['description'] is None


def test_sort_key_and_sort_dir_as_nova_with_paging(api):
    make(api, 'small', ram=512, disk=5, id='c')
    make(api, 'medium', ram=2048, disk=20, id='a')
    make(api, 'large', ram=8192, disk=10, id='b')
    make(api, 'twin', ram=2048, disk=1, id='d')
    assert ids(api('GET', '/v2.1/flavors')) == ['a', 'b', 'c', 'd']
    assert ids(api('GET', '/v2.1/flavors?sort_dir=desc')) == ['d', 'c', 'b', 'a']
    assert ids(api('GET', '/v2.1/flavors/detail?sort_key=memory_mb')) == ['c', 'a', 'd', 'b']
    assert ids(api('GET', '/v2.1/flavors?sort_key=memory_mb&sort_dir=desc')) == \
        ['b', 'd', 'a', 'c']
    assert ids(api('GET', '/v2.1/flavors?sort_key=name')) == ['b', 'a', 'c', 'd']
    # Pages follow the order, ties included (a and d both have 2048 MB).
    seen, url = [], '/v2.1/flavors?sort_key=memory_mb&limit=1'
    while url:
        page = api('GET', url).document
        seen += [item['id'] for item in page['flavors']]
        links = page.get('flavors_links')
        url = links[0]['href'].replace('http://localhost', '') if links else None
    assert seen == ['c', 'a', 'd', 'b']
    assert 'sort_key' in error_of(api('GET', '/v2.1/flavors?sort_key=colour'), 400)[1]
    assert 'sort_dir' in error_of(api('GET', '/v2.1/flavors?sort_dir=sideways'), 400)[1]
