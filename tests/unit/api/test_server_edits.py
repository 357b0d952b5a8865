"""What a server's owner changes after creating it, in-process: PUT /servers/{id}, the
metadata sub-resource and its ``metadata_items`` limit (a 403, as Nova's), and the admins'
os-resetState (issue 24 items 5 and 13)."""

from __future__ import annotations

import pytest

from computed.db import instances as db_instances
from computed.db import models
from tests.unit.api.test_app import ADMIN, create, error_of, flavor
from tests.unit.api.test_servers import active


@pytest.fixture
def gold(api):
    return flavor(api, flavor_id='gold')


@pytest.fixture(autouse=True)
def _engine(api, engine):
    api.engine = engine


def url(server_id, suffix=''):
    return f'/v2.1/servers/{server_id}{suffix}'


def row(api, server_id):
    return db_instances.get_instance(api.engine, server_id)


# -- PUT /servers/{id} ----------------------------------------------------------------------

def test_put_server_changes_name_description_and_access_addresses(api, gold):
    server_id = active(api, gold)
    at = api.as_(version='2.19')
    response = at('PUT', url(server_id), {'server': {
        'name': 'renamed', 'description': 'a note', 'accessIPv4': '192.0.2.7',
        'accessIPv6': '2001:db8::7', 'OS-DCF:diskConfig': 'AUTO'}})
    assert response.status_int == 200, response.text
    server = response.document['server']
    assert (server['id'], server['name'], server['description'], server['accessIPv4'],
            server['accessIPv6']) == (server_id, 'renamed', 'a note', '192.0.2.7',
                                      '2001:db8::7')
    assert at('GET', url(server_id)).document['server']['name'] == 'renamed'
    assert at('PUT', url(server_id), {'server': {'description': None}}).document[
        'server']['description'] is None
    assert at('PUT', url(server_id), {'server': {}}).status_int == 200


@pytest.mark.parametrize('body, version', [
    ({'server': {'name': ''}}, None), ({'server': {'name': 'x' * 256}}, None),
    ({'server': {'name': ' padded '}}, None), ({'server': {'name': 'a\x00b'}}, None),
    ({'server': {'description': 'd'}}, '2.18'), ({'server': {'description': 'x' * 256}}, '2.19'),
    ({'server': {'accessIPv4': '2001:db8::1'}}, None), ({'server': {'accessIPv6': '1.2.3.4'}},
                                                        None),
    ({'server': {'hostname': 'h'}}, None), ({'server': {'OS-DCF:diskConfig': 'X'}}, None),
    ({'name': 'x'}, None), ({'server': 'x'}, None)])
def test_bad_updates_are_a_400_and_change_nothing(api, gold, body, version):
    server_id = active(api, gold)
    before = row(api, server_id)
    error_of(api.as_(version=version)('PUT', url(server_id), body), 400)
    assert row(api, server_id) == before


def test_updating_another_projects_server_or_none_is_a_404(api, gold):
    server_id = active(api, gold)
    error_of(api.as_('bob:p2')('PUT', url(server_id), {'server': {'name': 'mine'}}), 404)
    error_of(api('PUT', url('00000000-0000-0000-0000-000000000000'),
                 {'server': {'name': 'x'}}), 404)
    assert row(api, server_id).name == 'web'


# -- /servers/{id}/metadata -----------------------------------------------------------------

def test_metadata_list_merge_replace_show_set_delete(api, gold):
    server_id = active(api, gold, metadata={'a': '1', 'b': '2'})
    assert api('GET', url(server_id, '/metadata')).document == {
        'metadata': {'a': '1', 'b': '2'}}
    merged = api('POST', url(server_id, '/metadata'), {'metadata': {'b': '3', 'c': '4'}})
    assert merged.status_int == 200 and merged.document == {
        'metadata': {'a': '1', 'b': '3', 'c': '4'}}
    assert api('POST', url(server_id, '/metadata'), {'metadata': {}}).document == {
        'metadata': {'a': '1', 'b': '3', 'c': '4'}}
    replaced = api('PUT', url(server_id, '/metadata'), {'metadata': {'z': '9'}})
    assert replaced.status_int == 200 and replaced.document == {'metadata': {'z': '9'}}
    assert api('GET', url(server_id, '/metadata/z')).document == {'meta': {'z': '9'}}
    assert api('PUT', url(server_id, '/metadata/y'), {'meta': {'y': '8'}}).document == \
        {'meta': {'y': '8'}}
    assert api('DELETE', url(server_id, '/metadata/z')).status_int == 204
    assert api('GET', url(server_id)).document['server']['metadata'] == {'y': '8'}
    error_of(api('GET', url(server_id, '/metadata/z')), 404)
    error_of(api('DELETE', url(server_id, '/metadata/z')), 404)


@pytest.mark.parametrize('method, suffix, body', [
    ('POST', '/metadata', {'metadata': {'': 'x'}}),
    ('POST', '/metadata', {'metadata': {'k' * 256: 'x'}}),
    ('POST', '/metadata', {'metadata': {'k': 'v' * 256}}),
    ('POST', '/metadata', {'metadata': {'k': 1}}),
    ('PUT', '/metadata', {'meta': {'k': 'v'}}),
    ('PUT', '/metadata', {}),
    ('PUT', '/metadata/k', {'meta': {'other': 'v'}}),
    ('PUT', '/metadata/k', {'meta': {'k': 'v', 'l': 'w'}}),
    ('PUT', '/metadata/k', {'meta': {}}),
    ('PUT', '/metadata/k', {'metadata': {'k': 'v'}})])
def test_bad_metadata_bodies_are_a_400_and_change_nothing(api, gold, method, suffix, body):
    server_id = active(api, gold, metadata={'a': '1'})
    error_of(api(method, url(server_id, suffix), body), 400)
    assert row(api, server_id).metadata == {'a': '1'}


def test_more_metadata_items_than_the_quota_is_a_403_as_novas(api, gold):
    """Issue 24 item 5: Tempest's test_metadata_items_limit sends quota + 1 items."""
    admin = api.as_(ADMIN)
    limit = admin('GET', '/v2.1/os-quota-sets/p1').document['quota_set']['metadata_items']
    assert limit == 128
    server_id = active(api, gold, metadata={'a': '1'})
    many = {f'k{i}': 'v' for i in range(limit + 1)}
    for method in ('POST', 'PUT'):
        kind, message = error_of(api(method, url(server_id, '/metadata'), {'metadata': many}),
                                 403)
        assert kind == 'forbidden' and '128' in message
    assert row(api, server_id).metadata == {'a': '1'}
    error_of(create(api, gold, metadata=many), 403)
    # The project's own limit, merged items counted with the ones there.
    admin('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {'metadata_items': 2}})
    assert api('POST', url(server_id, '/metadata'), {'metadata': {'b': '2'}}).status_int \
        == 200
    error_of(api('PUT', url(server_id, '/metadata/c'), {'meta': {'c': '3'}}), 403)
    assert row(api, server_id).metadata == {'a': '1', 'b': '2'}
    admin('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {'metadata_items': -1}})
    assert api('PUT', url(server_id, '/metadata'), {'metadata': many}).status_int == 200


def test_metadata_of_a_server_in_a_transition_or_error_is_a_409(api, gold):
    server_id = active(api, gold, metadata={'a': '1'})
    for state in (models.REBOOTING, models.ERROR):
        db_instances.set_instance_state(api.engine, server_id, state)
        kind, message = error_of(api('POST', url(server_id, '/metadata'),
                                     {'metadata': {'b': '2'}}), 409)
        assert server_id in message
        error_of(api('DELETE', url(server_id, '/metadata/a')), 409)
    assert api('GET', url(server_id, '/metadata')).document == {'metadata': {'a': '1'}}
    db_instances.set_instance_state(api.engine, server_id, models.STOPPED)
    assert api('POST', url(server_id, '/metadata'), {'metadata': {'b': '2'}}).status_int \
        == 200


def test_another_projects_metadata_is_a_404(api, gold):
    server_id = active(api, gold, metadata={'a': '1'})
    bob = api.as_('bob:p2')
    for method, suffix, body in [('GET', '/metadata', None), ('GET', '/metadata/a', None),
                                 ('POST', '/metadata', {'metadata': {'b': '2'}}),
                                 ('DELETE', '/metadata/a', None)]:
        error_of(bob(method, url(server_id, suffix), body), 404)
    assert row(api, server_id).metadata == {'a': '1'}


# -- os-resetState --------------------------------------------------------------------------

def reset(client, server_id, state):
    return client('POST', url(server_id, '/action'), {'os-resetState': {'state': state}})


def test_reset_state_is_an_admins_and_sets_active_or_error(api, gold):
    server_id = active(api, gold)
    db_instances.set_instance_state(api.engine, server_id, models.REBOOTING)
    admin = api.as_(ADMIN)
    assert reset(admin, server_id, 'error').status_int == 202
    shown = admin('GET', url(server_id)).document['server']
    assert (shown['status'], shown['OS-EXT-STS:task_state']) == ('ERROR', None)
    assert reset(admin, server_id, 'active').status_int == 202
    assert admin('GET', url(server_id)).document['server']['status'] == 'ACTIVE'
    kind, message = error_of(reset(api, server_id, 'error'), 403)
    assert 'compute:servers:reset_state' in message
    error_of(reset(api.as_('bob:p2'), server_id, 'error'), 404)
    assert row(api, server_id).state == models.ACTIVE.value


@pytest.mark.parametrize('body', [
    {'os-resetState': {'state': 'stopped'}}, {'os-resetState': {}},
    {'os-resetState': {'state': 'active', 'x': 1}}, {'os-resetState': None},
    {'os-resetState': {'state': 'ACTIVE'}}])
def test_bad_reset_state_bodies_are_a_400(api, gold, body):
    server_id = active(api, gold)
    error_of(api.as_(ADMIN)('POST', url(server_id, '/action'), body), 400)
    assert row(api, server_id).state == models.ACTIVE.value


def test_reset_to_active_needs_a_node(api, gold):
    server_id = active(api, gold)
    db_instances.set_instance_state(api.engine, server_id, models.ERROR, 'No valid host',
                                    release_node=True)
    error_of(reset(api.as_(ADMIN), server_id, 'active'), 409)
    assert row(api, server_id).state == models.ERROR.value


# -- tags (2.26) ----------------------------------------------------------------------------

def test_tags_as_novas_from_2_26(api, gold):
    server_id = active(api, gold)
    at = api.as_(version='2.26')
    assert at('GET', url(server_id, '/tags')).document == {'tags': []}
    replaced = at('PUT', url(server_id, '/tags'), {'tags': ['b', 'a', 'b']})
    assert replaced.status_int == 200 and replaced.document == {'tags': ['b', 'a']}
    added = at('PUT', url(server_id, '/tags/c'))
    assert added.status_int == 201
    assert added.headers['Location'].endswith(f'/servers/{server_id}/tags/c')
    assert at('PUT', url(server_id, '/tags/c')).status_int == 204
    assert at('GET', url(server_id, '/tags/c')).status_int == 204
    assert at('GET', url(server_id)).document['server']['tags'] == ['b', 'a', 'c']
    assert at('DELETE', url(server_id, '/tags/a')).status_int == 204
    error_of(at('GET', url(server_id, '/tags/a')), 404)
    error_of(at('DELETE', url(server_id, '/tags/a')), 404)
    assert at('DELETE', url(server_id, '/tags')).status_int == 204
    assert row(api, server_id).tags == ()
    error_of(api.as_(version='2.25')('GET', url(server_id, '/tags')), 404)


@pytest.mark.parametrize('method, suffix, body', [
    ('PUT', '/tags', {'tags': ['x' * 61]}), ('PUT', '/tags', {'tags': ['a,b']}),
    ('PUT', '/tags', {'tags': ['']}), ('PUT', '/tags', {'tags': [f't{i}' for i in range(51)]}),
    ('PUT', '/tags', {'tags': 'a'}), ('PUT', '/tags', {}), ('PUT', '/tags', {'tags': [1]}),
    ('PUT', '/tags/' + 'x' * 61, None), ('PUT', '/tags/a%2Cb', None),
    ('PUT', '/tags/a', {'tag': 'a'})])
def test_bad_tags_are_a_400_and_change_nothing(api, gold, method, suffix, body):
    server_id = active(api, gold)
    at = api.as_(version='2.26')
    at('PUT', url(server_id, '/tags'), {'tags': ['keep']})
    error_of(at(method, url(server_id, suffix), body), 400)
    assert row(api, server_id).tags == ('keep',)


def test_the_fifty_first_tag_is_a_400(api, gold):
    server_id = active(api, gold)
    at = api.as_(version='2.26')
    at('PUT', url(server_id, '/tags'), {'tags': [f't{i}' for i in range(50)]})
    kind, message = error_of(at('PUT', url(server_id, '/tags/one-more')), 400)
    assert '50' in message
    assert len(row(api, server_id).tags) == 50


def test_tags_of_another_project_or_a_server_in_error(api, gold):
    server_id = active(api, gold)
    at = api.as_(version='2.26')
    error_of(api.as_('bob:p2', version='2.26')('PUT', url(server_id, '/tags/x')), 404)
    db_instances.set_instance_state(api.engine, server_id, models.ERROR)
    error_of(at('PUT', url(server_id, '/tags/x')), 409)
    assert row(api, server_id).tags == ()


def test_listing_by_tags(api, gold):
    from tests.unit.api.test_servers import more_quota
    more_quota(api)
    at = api.as_(version='2.26')
    made = {}
    for name, tags in (('ab', ['a', 'b']), ('a', ['a']), ('c', ['c']), ('none', [])):
        made[name] = active(api, gold, name=name)
        at('PUT', url(made[name], '/tags'), {'tags': tags})

    def names(query):
        return sorted(s['name'] for s in at('GET', f'/v2.1/servers?{query}').document[
            'servers'])
    assert names('tags=a') == ['a', 'ab']
    assert names('tags=a,b') == ['ab']
    assert names('tags-any=b,c') == ['ab', 'c']
    assert names('not-tags=a,b') == ['a', 'c', 'none']
    assert names('not-tags-any=a') == ['c', 'none']
    assert names('tags=a&not-tags-any=b') == ['a']
    # Before 2.26 the filters are not Nova's yet: ignored.
    assert len(api('GET', '/v2.1/servers?tags=zzz').document['servers']) == 4


def test_tags_at_creation_from_2_52(api, gold):
    from tests.unit.api.test_servers import more_quota, nothing_changed
    more_quota(api)
    at = api.as_(version='2.52')
    made = create(at, gold, tags=['a', 'b', 'a'], min_count=2)
    assert made.status_int == 202, made.text
    listed = at('GET', '/v2.1/servers/detail').document['servers']
    assert [s['tags'] for s in listed] == [['a', 'b'], ['a', 'b']]
    before = len(listed)
    error_of(create(api.as_(version='2.51'), gold, tags=['a']), 400)
    for tags in (['a,b'], ['x' * 61], [f't{i}' for i in range(51)], 'a'):
        error_of(create(at, gold, tags=tags), 400)
    nothing_changed(api, before)
