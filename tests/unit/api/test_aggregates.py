"""/os-aggregates in-process over computed's database: Nova's CRUD, hosts (the daemons) and
metadata, with Nova's codes; an aggregate's zone can only be nova (Tempest's 14
AggregatesAdminNegativeTestJSON tests: 11 answered 405, creating one was not served)."""

from __future__ import annotations

import pytest

from computed.api import services
from computed.db import aggregates as db_aggregates
from tests.unit.api.test_app import ADMIN, error_of

DAEMONS = [{'host': 'c1', 'up': True, 'disabled': False, 'reason': None},
           {'host': 'c2', 'up': False, 'disabled': True, 'reason': 'r'}]
PATH = '/v2.1/os-aggregates'


@pytest.fixture
def admin(api, monkeypatch):
    monkeypatch.setattr(services, '_services', lambda backends: [dict(d) for d in DAEMONS])
    return api.as_(ADMIN)


def made(admin, name='rack1', **extra):
    answer = admin('POST', PATH, {'aggregate': dict({'name': name}, **extra)})
    assert answer.status_int == 200, answer.text
    return answer.document['aggregate']


def action(client, aggregate_id, name, **body):
    return client('POST', f'{PATH}/{aggregate_id}/action', {name: body})


def test_an_aggregate_is_created_shown_listed_renamed_and_deleted(api, admin):
    created = made(admin, availability_zone='nova')
    # A create answers without hosts and metadata, as Nova's.
    assert set(created) == {'id', 'name', 'availability_zone', 'created_at', 'updated_at',
                            'deleted_at', 'deleted'}
    assert (created['name'], created['availability_zone'], created['deleted']) == \
        ('rack1', 'nova', False)
    aggregate_id = created['id']
    shown = admin('GET', f'{PATH}/{aggregate_id}').document['aggregate']
    assert (shown['hosts'], shown['metadata']) == ([], {'availability_zone': 'nova'})
    assert 'uuid' not in shown
    assert admin.as_(version='2.41')('GET', f'{PATH}/{aggregate_id}').document[
        'aggregate']['uuid'] == db_aggregates.get_aggregate(api.engine, aggregate_id).uuid
    assert [a['name'] for a in admin('GET', PATH).document['aggregates']] == ['rack1']
    renamed = admin('PUT', f'{PATH}/{aggregate_id}', {'aggregate': {'name': ' rack2 '}})
    assert renamed.status_int == 200, renamed.text
    assert renamed.document['aggregate']['name'] == 'rack2'
    assert renamed.document['aggregate']['updated_at'] is not None
    deleted = admin('DELETE', f'{PATH}/{aggregate_id}')
    assert (deleted.status_int, deleted.body) == (200, b'')
    assert error_of(admin('GET', f'{PATH}/{aggregate_id}'), 404)[1] == \
        f'Aggregate {aggregate_id} could not be found.'


def test_hosts_are_daemons_added_once_and_an_aggregate_with_hosts_is_not_deleted(admin):
    aggregate_id = made(admin)['id']
    added = action(admin, aggregate_id, 'add_host', host='c2')  # disabled and down: a host
    assert added.status_int == 200, added.text
    assert added.document['aggregate']['hosts'] == ['c2']
    assert error_of(action(admin, aggregate_id, 'add_host', host='c2'), 409)
    assert error_of(action(admin, aggregate_id, 'add_host', host='nowhere'), 404)[1] == \
        'Compute host nowhere could not be found.'
    assert 'has hosts' in error_of(admin('DELETE', f'{PATH}/{aggregate_id}'), 400)[1]
    assert error_of(action(admin, aggregate_id, 'remove_host', host='c1'), 404)[1] == \
        f'Cannot remove host c1 in aggregate {aggregate_id}'
    removed = action(admin, aggregate_id, 'remove_host', host='c2')
    assert removed.document['aggregate']['hosts'] == []
    assert admin('DELETE', f'{PATH}/{aggregate_id}').status_int == 200


def test_metadata_is_merged_and_a_null_removes_a_key(admin):
    aggregate_id = made(admin)['id']
    first = action(admin, aggregate_id, 'set_metadata', metadata={'a': '1', 'b': '2'})
    assert first.document['aggregate']['metadata'] == {'a': '1', 'b': '2'}
    second = action(admin, aggregate_id, 'set_metadata',
                    metadata={'b': None, 'c': '3', 'availability_zone': 'nova'})
    assert second.document['aggregate']['metadata'] == {'a': '1', 'c': '3',
                                                         'availability_zone': 'nova'}
    assert second.document['aggregate']['availability_zone'] == 'nova'


@pytest.mark.parametrize('request_', [
    ('POST', PATH, {'aggregate': {'name': 'z', 'availability_zone': 'rack-zone'}}),
    ('PUT', f'{PATH}/ID', {'aggregate': {'availability_zone': 'other'}}),
    ('POST', f'{PATH}/ID/action', {'set_metadata': {'metadata': {
        'availability_zone': 'other'}}}),
])
def test_a_zone_other_than_nova_is_a_400_and_nothing_changes(admin, request_):
    aggregate_id = made(admin)['id']
    method, path, body = request_
    assert 'one availability zone' in error_of(
        admin(method, path.replace('ID', str(aggregate_id)), body), 400)[1]
    assert [a['name'] for a in admin('GET', PATH).document['aggregates']] == ['rack1']
    assert admin('GET', f'{PATH}/{aggregate_id}').document['aggregate']['metadata'] == {}


@pytest.mark.parametrize('body', [
    {}, {'aggregate': {}}, {'aggregate': {'name': ''}}, {'aggregate': {'name': 'a' * 256}},
    {'aggregate': {'name': 'x', 'extra': 1}}, {'aggregate': {'name': ' padded '}},
    {'aggregate': {'name': 'x', 'availability_zone': ''}},
])
def test_a_create_novas_schema_refuses_is_a_400(admin, body):
    error_of(admin('POST', PATH, body), 400)
    assert admin('GET', PATH).document['aggregates'] == []


def test_names_are_unique_and_ids_are_integers(admin):
    first = made(admin)['id']
    second = made(admin, name='rack2')['id']
    assert error_of(admin('POST', PATH, {'aggregate': {'name': 'rack1'}}), 409)
    assert error_of(admin('PUT', f'{PATH}/{second}', {'aggregate': {'name': 'rack1'}}), 409)
    for bad in ('-1', '99', str(2 ** 40)):
        assert error_of(admin('GET', f'{PATH}/{bad}'), 404)
        assert error_of(admin('DELETE', f'{PATH}/{bad}'), 404)
    assert error_of(admin('GET', f'{PATH}/x'), 400)
    assert error_of(action(admin, first, 'nonsense', host='c1'), 400)
    assert error_of(action(admin, first, 'add_host', host='bad host'), 400)


@pytest.mark.parametrize('request_', [
    ('GET', PATH, None), ('POST', PATH, {'aggregate': {'name': 'x'}}),
    ('GET', f'{PATH}/ID', None), ('PUT', f'{PATH}/ID', {'aggregate': {'name': 'y'}}),
    ('DELETE', f'{PATH}/ID', None),
    ('POST', f'{PATH}/ID/action', {'add_host': {'host': 'c1'}}),
    ('POST', f'{PATH}/ID/action', {'remove_host': {'host': 'c1'}}),
    ('POST', f'{PATH}/ID/action', {'set_metadata': {'metadata': {'a': '1'}}}),
])
def test_everything_is_an_admins(api, admin, request_):
    aggregate_id = made(admin)['id']
    method, path, body = request_
    assert error_of(api(method, path.replace('ID', str(aggregate_id)), body), 403)
