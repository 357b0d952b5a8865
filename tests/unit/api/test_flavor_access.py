"""Private flavors and their access lists (Nova's os-flavor-access) in-process (see
conftest.py): who sees, lists and builds from a private flavor, and the access list's answers
(Tempest's FlavorsAdminTestJSON, FlavorsAccessTestJSON, FlavorsAccessNegativeTestJSON)."""

from __future__ import annotations

import pytest

from tests.unit.api.test_app import ADMIN, GOLD, create, error_of

MEMBER = 'alice:p1'
STRANGER = 'bob:p2'


def private(api, name='bm.private', flavor_id='private', is_public='False'):
    admin = api.as_(ADMIN)
    made = admin('POST', '/v2.1/flavors', {'flavor': {
        'name': name, 'id': flavor_id, 'ram': 1024, 'vcpus': 2, 'disk': 10,
        'os-flavor-access:is_public': is_public}})
    assert made.status_int == 200, made.text
    assert admin('POST', f'/v2.1/flavors/{flavor_id}/os-extra_specs',
                 {'extra_specs': GOLD}).status_int == 200
    return made.document['flavor']


def listed(client, query=''):
    return [f['id'] for f in client('GET', f'/v2.1/flavors/detail{query}').document['flavors']]


def access(client, flavor_id, name, project):
    return client('POST', f'/v2.1/flavors/{flavor_id}/action', {name: {'tenant': project}})


def test_a_private_flavor_is_seen_by_admins_and_the_projects_on_its_list_only(api):
    flavor = private(api)
    assert flavor['os-flavor-access:is_public'] is False
    public = private(api, 'bm.public', 'public', is_public=True)['id']
    member, stranger, admin = api.as_(MEMBER), api.as_(STRANGER), api.as_(ADMIN)
    # Nobody is on the list at creation, not even the admin's project (Nova's rule).
    assert admin('GET', '/v2.1/flavors/private/os-flavor-access').document == \
        {'flavor_access': []}
    assert listed(member) == listed(admin) == [public]
    error_of(member('GET', '/v2.1/flavors/private'), 404)
    error_of(member('GET', '/v2.1/flavors/private/os-extra_specs'), 404)
    kind, message = error_of(create(member, 'private'), 400)
    assert 'could not be found' in message
    assert admin('GET', '/v2.1/flavors/private').status_int == 200

    added = access(admin, 'private', 'addTenantAccess', 'p1')
    assert added.status_int == 200, added.text
    assert added.document == {'flavor_access': [{'flavor_id': 'private', 'tenant_id': 'p1'}]}
    assert sorted(listed(member)) == ['private', 'public'] and listed(stranger) == [public]
    assert member('GET', '/v2.1/flavors/private').status_int == 200
    assert create(member, 'private').status_int == 202
    error_of(create(stranger, 'private'), 400)

    removed = access(admin, 'private', 'removeTenantAccess', 'p1')
    assert removed.status_int == 200 and removed.document == {'flavor_access': []}
    assert listed(member) == [public]


@pytest.mark.parametrize('value, shown', [
    *[(text, 'private') for text in ('f', 'false', 'no', '0', 'False')],
    *[(text, 'public') for text in ('t', 'true', 'yes', '1')],
    ('none', 'both')])
def test_admins_filter_on_is_public_as_nova(api, value, shown):
    """Tempest's test_is_public_string_variations."""
    private(api)
    private(api, 'bm.public', 'public', is_public='True')
    expected = {'private': ['private'], 'public': ['public'],
                'both': ['private', 'public']}[shown]
    assert sorted(listed(api.as_(ADMIN), f'?is_public={value}')) == expected
    # Non-admins see what they may, whatever they ask for.
    assert listed(api.as_(MEMBER), f'?is_public={value}') == ['public']


def test_a_bad_is_public_is_a_400(api):
    kind, message = error_of(api.as_(ADMIN)('GET', '/v2.1/flavors?is_public=maybe'), 400)
    assert 'is_public' in message


def test_the_access_lists_refusals_as_novas(api):
    private(api)
    private(api, 'bm.public', 'public', is_public=True)
    admin, member = api.as_(ADMIN), api.as_(MEMBER)
    # Admins only (Tempest's test_flavor_non_admin_add/remove): before anything is read.
    for name in ('addTenantAccess', 'removeTenantAccess'):
        kind, message = error_of(access(member, 'private', name, 'p1'), 403)
        assert 'compute:flavors:access' in message
    error_of(member('GET', '/v2.1/flavors/private/os-flavor-access'), 403)
    # A public flavor has no list.
    error_of(admin('GET', '/v2.1/flavors/public/os-flavor-access'), 404)
    error_of(access(admin, 'public', 'addTenantAccess', 'p1'), 409)
    # Twice, and absent.
    assert access(admin, 'private', 'addTenantAccess', 'p1').status_int == 200
    error_of(access(admin, 'private', 'addTenantAccess', 'p1'), 409)
    error_of(access(admin, 'private', 'removeTenantAccess', 'p2'), 404)
    # Unknown flavor, bad bodies, unknown action.
    error_of(access(admin, 'nope', 'addTenantAccess', 'p1'), 404)
    error_of(admin('GET', '/v2.1/flavors/nope/os-flavor-access'), 404)
    for body in ({'addTenantAccess': {}}, {'addTenantAccess': {'tenant': ''}},
                 {'addTenantAccess': {'tenant': 'p1', 'x': 1}}, {'fly': {}},
                 {'removeTenantAccess': {'tenant': 'a\x00'}}):
        error_of(admin('POST', '/v2.1/flavors/private/action', body), 400)
    assert admin('GET', '/v2.1/flavors/private/os-flavor-access').document == {
        'flavor_access': [{'flavor_id': 'private', 'tenant_id': 'p1'}]}


def test_deleting_a_private_flavor_forgets_its_list(api):
    private(api)
    admin = api.as_(ADMIN)
    assert access(admin, 'private', 'addTenantAccess', 'p1').status_int == 200
    assert admin('DELETE', '/v2.1/flavors/private').status_int == 202
    private(api)
    assert admin('GET', '/v2.1/flavors/private/os-flavor-access').document == \
        {'flavor_access': []}


def test_a_non_admin_marker_must_be_a_flavor_it_sees(api):
    private(api)
    private(api, 'bm.public', 'public', is_public=True)
    error_of(api.as_(MEMBER)('GET', '/v2.1/flavors?marker=private'), 400)
    assert api.as_(ADMIN)('GET', '/v2.1/flavors?marker=private&is_public=none').status_int \
        == 200
