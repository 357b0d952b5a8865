"""The rebuild action in-process (see conftest.py for what is real and what is fake): Nova's
schema of each microversion, what is recorded and cast, Nova's answer, and every refusal with
Nova's code and nothing changed (issue 24: Tempest's rebuild tests answered "no such action")."""

from __future__ import annotations

import base64

import pytest

from computed.api import server_rebuild
from computed.api import servers as servers_api
from computed.db import instances as db_instances
from computed.db import models
from tests.unit.api.test_app import ADMIN, IMAGE, create, error_of, flavor
from tests.unit.api.test_server_images import ACTIVE, FakeGlance, image
from tests.unit.api.test_server_keys import key_pair

NEW_IMAGE = 'http://images.example/new.qcow2'


@pytest.fixture
def gold(api):
    return flavor(api, flavor_id='gold')


@pytest.fixture(autouse=True)
def _engine(api, engine):
    api.engine = engine


def server(api, gold, state=models.ACTIVE, version=None, **extra):
    made = create(api.as_(version=version) if version else api, gold, **extra)
    assert made.status_int == 202, made.text
    server_id = made.document['server']['id']
    db_instances.set_instance_state(api.engine, server_id, state)
    api.casts.sent.clear()
    api.casts.options.clear()
    return server_id


def rebuild(api, server_id, version=None, **fields):
    client = api.as_(version=version) if version else api
    return client('POST', f'/v2.1/servers/{server_id}/action',
                  {'rebuild': dict({'imageRef': NEW_IMAGE}, **fields)})


def unchanged(api, server_id, before):
    """Nothing recorded nor cast."""
    assert db_instances.get_instance(api.engine, server_id) == before
    assert api.casts.sent == []


# -- the schema of each microversion --------------------------------------------------------

@pytest.mark.parametrize('field, value, before, since', [
    ('description', 'd', '2.18', '2.19'),
    ('key_name', None, '2.53', '2.54'),
    ('user_data', None, '2.56', '2.57'),
])
def test_later_fields_are_refused_before_their_microversion(api, gold, field, value, before,
                                                            since):
    server_id = server(api, gold)
    row = db_instances.get_instance(api.engine, server_id)
    kind, message = error_of(rebuild(api, server_id, before, **{field: value}), 400)
    assert field in message
    unchanged(api, server_id, row)
    assert rebuild(api, server_id, since, **{field: value}).status_int == 202


@pytest.mark.parametrize('body', [
    {'rebuild': {}},                                             # imageRef is required
    {'rebuild': {'imageRef': NEW_IMAGE, 'personality': []}},     # injected files: no
    {'rebuild': {'imageRef': NEW_IMAGE, 'trusted_image_certificates': ['a']}},  # 2.63
    {'rebuild': {'imageRef': NEW_IMAGE, 'preserve_ephemeral': 'maybe'}},
    {'rebuild': {'imageRef': NEW_IMAGE, 'name': ' padded '}},
    {'rebuild': {'imageRef': NEW_IMAGE, 'metadata': {'k': 1}}},
    {'rebuild': {'imageRef': NEW_IMAGE, 'OS-DCF:diskConfig': 'auto'}},
    {'rebuild': {'imageRef': NEW_IMAGE, 'accessIPv4': '2001:db8::1'}},
    {'rebuild': {'imageRef': NEW_IMAGE, 'accessIPv6': '192.0.2.1'}},
    {'rebuild': {'imageRef': 'http://127.0.0.1/x.qcow2'}},      # loopback: a build's refusal
    {'rebuild': {'imageRef': 'bad\x00ref'}},
    {'rebuild': None},
])
def test_a_bad_body_is_a_400_and_changes_nothing(api, gold, body):
    server_id = server(api, gold)
    row = db_instances.get_instance(api.engine, server_id)
    response = api.as_(version='2.61')('POST', f'/v2.1/servers/{server_id}/action', body)
    error_of(response, 400)
    unchanged(api, server_id, row)


def test_the_schema_grows_as_novas_and_is_pure():
    fields = server_rebuild.schema((2, 1))['properties']['rebuild']['properties']
    assert set(fields) == {'imageRef', 'name', 'metadata', 'adminPass', 'preserve_ephemeral',
                           'OS-DCF:diskConfig', 'accessIPv4', 'accessIPv6'}
    later = server_rebuild.schema((2, 61))['properties']['rebuild']['properties']
    assert set(later) - set(fields) == {'description', 'key_name', 'user_data'}
    assert [server_rebuild.flag(v) for v in (True, 'yes', 'ON', '1', False, 'no', '0')] == \
        [True, True, True, True, False, False, False]


# -- what is recorded, cast and answered ------------------------------------------------------

def test_an_active_server_is_recorded_rebuilding_with_the_new_fields_and_cast(api, gold):
    server_id = server(api, gold, metadata={'old': '1'}, accessIPv4='192.0.2.1')
    response = rebuild(api, server_id, name='web-2', metadata={'rebuild': 'server'},
                       adminPass='rebuildPassw0rd', accessIPv4='192.0.2.9',
                       preserve_ephemeral=True, **{'OS-DCF:diskConfig': 'AUTO'})
    assert response.status_int == 202, response.text
    shown = response.document['server']
    assert (shown['id'], shown['status'], shown['name'], shown['metadata'],
            shown['accessIPv4']) == (server_id, 'REBUILD', 'web-2', {'rebuild': 'server'},
                                     '192.0.2.9')
    assert shown['image']['id'] == NEW_IMAGE
    assert 'adminPass' not in shown and 'rebuildPassw0rd' not in response.text
    row = db_instances.get_instance(api.engine, server_id)
    assert (row.state, row.image, row.name, row.metadata, row.access_ip_v4, row.fault) == \
        (models.REBUILDING, NEW_IMAGE, 'web-2', {'rebuild': 'server'}, '192.0.2.9', None)
    assert api.casts.sent == [('rebuild_instance', 'c1', server_id)]
    assert api.casts.options == [{'preserve_ephemeral': True}]
    # What everyone reads now: Nova's REBUILD with its task.
    detail = api.as_(ADMIN)('GET', f'/v2.1/servers/{server_id}').document['server']
    assert (detail['status'], detail['OS-EXT-STS:vm_state'], detail['OS-EXT-STS:task_state'],
            detail['OS-EXT-STS:power_state']) == ('REBUILD', 'active', 'rebuilding', 1)


def test_fields_not_given_are_kept(api, gold):
    server_id = server(api, gold, name='keep', metadata={'k': 'v'}, description='d',
                       version='2.19')
    assert rebuild(api, server_id).status_int == 202
    row = db_instances.get_instance(api.engine, server_id)
    assert (row.name, row.metadata, row.description, row.image) == \
        ('keep', {'k': 'v'}, 'd', NEW_IMAGE)
    assert api.casts.options == [{'preserve_ephemeral': False}]


def test_a_stopped_server_is_rebuilt_to_stay_stopped(api, gold):
    server_id = server(api, gold, models.STOPPED)
    assert rebuild(api, server_id).status_int == 202
    assert db_instances.get_instance(api.engine, server_id).state == models.REBUILDING_OFF
    detail = api.as_(ADMIN)('GET', f'/v2.1/servers/{server_id}').document['server']
    assert (detail['status'], detail['OS-EXT-STS:vm_state'], detail['OS-EXT-STS:task_state'],
            detail['OS-EXT-STS:power_state']) == ('REBUILD', 'stopped', 'rebuilding', 4)


def test_a_server_in_error_with_a_node_is_rebuilt_and_its_fault_cleared(api, gold):
    server_id = server(api, gold)
    db_instances.set_instance_state(api.engine, server_id, models.ERROR, 'reboot failed: boom')
    assert rebuild(api, server_id).status_int == 202
    row = db_instances.get_instance(api.engine, server_id)
    assert (row.state, row.fault) == (models.REBUILDING, None)


# Nova's rebuild answer (its response schemas below 2.75; Tempest's are the same): no OS-EXT-*
BASE = {'id', 'name', 'status', 'image', 'flavor', 'user_id', 'tenant_id', 'created', 'updated',
        'progress', 'metadata', 'links', 'addresses', 'hostId', 'OS-DCF:diskConfig',
        'accessIPv4', 'accessIPv6'}


@pytest.mark.parametrize('version, more', [
    ('2.1', set()), ('2.9', {'locked'}), ('2.19', {'locked', 'description'}),
    ('2.26', {'locked', 'description', 'tags'}),
    ('2.54', {'locked', 'description', 'tags', 'key_name'}),
    ('2.57', {'locked', 'description', 'tags', 'key_name', 'user_data'}),
    ('2.61', {'locked', 'description', 'tags', 'key_name', 'user_data'}),
])
def test_the_answer_has_novas_fields_of_each_microversion(api, gold, version, more):
    server_id = server(api, gold)
    response = rebuild(api.as_(ADMIN), server_id, version)  # an admin sees no more here
    assert response.status_int == 202, response.text
    assert set(response.document['server']) == BASE | more
    if tuple(map(int, version.split('.'))) >= (2, 47):
        assert response.document['server']['flavor']['original_name'] == 'bm.gold'


def test_key_and_user_data_are_replaced_or_removed(api, gold):
    old_key = key_pair(api, 'old')
    new_key = key_pair(api, 'new')
    user_data = base64.b64encode(b'#cloud-config\n').decode()
    server_id = server(api, gold, key_name='old', user_data=user_data)
    assert db_instances.get_instance(api.engine, server_id).key_data == old_key

    again = base64.b64encode(b'#!/bin/sh\necho rebuilt\n').decode()
    response = rebuild(api, server_id, '2.57', key_name='new', user_data=again)
    assert response.status_int == 202, response.text
    assert (response.document['server']['key_name'],
            response.document['server']['user_data']) == ('new', again)
    row = db_instances.get_instance(api.engine, server_id)
    assert (row.key_name, row.key_data, row.user_data, row.config_drive) == \
        ('new', new_key, again, True)

    db_instances.set_instance_state(api.engine, server_id, models.ACTIVE)
    assert rebuild(api, server_id, '2.57', key_name=None, user_data=None).status_int == 202
    row = db_instances.get_instance(api.engine, server_id)
    assert (row.key_name, row.key_type, row.key_data, row.user_data) == (None,) * 4

    # Not given: kept.
    db_instances.set_instance_state(api.engine, server_id, models.ACTIVE)
    assert rebuild(api, server_id, '2.57', key_name='new').status_int == 202
    assert rebuild_kept(api, server_id) == ('new', None)


def rebuild_kept(api, server_id):
    row = db_instances.get_instance(api.engine, server_id)
    return row.key_name, row.user_data


# -- refusals: Nova's codes, nothing changed -------------------------------------------------

@pytest.mark.parametrize('state', [models.BUILDING, models.REBOOTING, models.STOPPING,
                                   models.STARTING, models.DELETING, models.REBUILDING,
                                   models.REBUILDING_OFF])
def test_a_server_with_a_task_in_progress_is_a_409(api, gold, state):
    server_id = server(api, gold, state)
    row = db_instances.get_instance(api.engine, server_id)
    kind, message = error_of(rebuild(api, server_id), 409)
    assert "Cannot 'rebuild'" in message and server_id in message
    unchanged(api, server_id, row)


def test_a_server_whose_build_found_no_node_is_a_409(api, gold):
    server_id = server(api, gold)
    db_instances.set_instance_state(api.engine, server_id, models.ERROR, 'No valid host was found',
                              release_node=True)
    row = db_instances.get_instance(api.engine, server_id)
    kind, message = error_of(rebuild(api, server_id), 409)
    assert 'no node' in message
    unchanged(api, server_id, row)


def test_an_unknown_or_anothers_server_is_a_404(api, gold):
    error_of(rebuild(api, '00000000-0000-0000-0000-00000000dead'), 404)
    server_id = server(api, gold)
    row = db_instances.get_instance(api.engine, server_id)
    error_of(rebuild(api.as_('bob:p2'), server_id), 404)
    unchanged(api, server_id, row)


def test_a_key_pair_the_caller_does_not_have_and_bad_user_data_are_400s(api, gold):
    server_id = server(api, gold)
    row = db_instances.get_instance(api.engine, server_id)
    kind, message = error_of(rebuild(api, server_id, '2.54', key_name='nope'), 400)
    assert 'nope' in message
    kind, message = error_of(rebuild(api, server_id, '2.57', user_data='not base64!'), 400)
    assert 'user_data' in message
    unchanged(api, server_id, row)


def test_a_glance_image_the_servers_flavor_cannot_hold_is_a_400(api, gold):
    # As Nova's rebuild: the new image is checked against the server's flavor (1024 MB).
    server_id = server(api, gold)
    row = db_instances.get_instance(api.engine, server_id)
    api.backends.glance = FakeGlance({ACTIVE: image(min_ram=2048)})
    assert error_of(rebuild(api, server_id, imageRef=ACTIVE), 400)[1] == \
        "Flavor's memory is too small for requested image."
    unchanged(api, server_id, row)
    api.backends.glance.images[ACTIVE] = image(min_ram=1024)
    assert rebuild(api, server_id, imageRef=ACTIVE).status_int == 202


def test_more_metadata_items_than_the_quota_is_a_403(api, gold):
    server_id = server(api, gold)
    assert api.as_(ADMIN)('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {
        'metadata_items': 2}}).status_int == 200
    row = db_instances.get_instance(api.engine, server_id)
    error_of(rebuild(api, server_id, metadata={'a': '1', 'b': '2', 'c': '3'}), 403)
    unchanged(api, server_id, row)
    assert rebuild(api, server_id, metadata={'a': '1', 'b': '2'}).status_int == 202


@pytest.mark.parametrize('version', ['1.0', '1.1'])
def test_below_rpc_1_2_the_rebuild_is_a_409_asking_for_every_daemon_upgraded(api, gold,
                                                                          version):
    """[upgrade_levels] instances pinned (or auto with an old daemon live) below 1.2: a daemon
    of the release before would refuse the cast, so none is sent and nothing recorded."""
    server_id = server(api, gold)
    row = db_instances.get_instance(api.engine, server_id)
    api.casts.version = version
    kind, message = error_of(rebuild(api, server_id), 409)
    assert 'upgraded' in message and version in message and '1.2' in message
    unchanged(api, server_id, row)
    # The other actions are still served at that version.
    assert api('POST', f'/v2.1/servers/{server_id}/action',
               {'reboot': {'type': 'HARD'}}).status_int == 202


def test_a_rebuild_racing_another_request_is_a_409(api, gold, monkeypatch):
    """The server is read ACTIVE, then rebooted by another request before the rebuild is
    recorded: the compare-and-set fails, a 409, nothing cast."""
    server_id = server(api, gold)
    stale = servers_api.get

    def read_then_lose_the_race(call, server_id):
        row = stale(call, server_id)
        db_instances.set_instance_state(api.engine, server_id, models.REBOOTING)
        return row
    monkeypatch.setattr(servers_api, 'get', read_then_lose_the_race)
    kind, message = error_of(rebuild(api, server_id), 409)
    assert 'changed' in message
    row = db_instances.get_instance(api.engine, server_id)
    assert (row.state, row.image) == (models.REBOOTING, IMAGE)
    assert api.casts.sent == []


def test_a_locked_server_is_a_409_for_its_owner_and_rebuilt_by_an_admin(api, gold):
    server_id = server(api, gold)
    assert api('POST', f'/v2.1/servers/{server_id}/action', {'lock': None}).status_int == 202
    row = db_instances.get_instance(api.engine, server_id)
    kind, message = error_of(rebuild(api, server_id), 409)
    assert 'locked' in message
    unchanged(api, server_id, row)
    assert rebuild(api.as_(ADMIN), server_id).status_int == 202  # Nova's: admins may


def test_the_policy_rule_is_the_owners(api, gold):
    server_id = server(api, gold)
    assert rebuild(api.as_(ADMIN), server_id).status_int == 202  # an admin may
