"""The server actions of computed.api.server_actions in-process (see conftest.py): lock and
unlock, a server's security groups, forceDelete, and the answers to Nova's actions computed
does not serve (Tempest's ServerActionsTest, ServersAdminNegativeTest); and the answer of
PUT /servers/{id} and the access addresses as Nova shows them (Tempest's ServersTestJSON)."""

from __future__ import annotations

import uuid

import pytest

from computed.db import instances as db_instances
from computed.db import models
from tests.unit.api.test_app import ADMIN, create, error_of, flavor


@pytest.fixture
def gold(api):
    return flavor(api, flavor_id='gold')


def active(api, flavor_id, **extra):
    made = create(api, flavor_id, **extra)
    assert made.status_int == 202, made.text
    server_id = made.document['server']['id']
    db_instances.set_instance_state(api.engine, server_id, models.ACTIVE)
    return server_id


def act(client, server_id, body):
    return client('POST', f'/v2.1/servers/{server_id}/action', body)


def state(api, server_id):
    return db_instances.get_instance(api.engine, server_id).state


# -- Nova's actions computed does not serve -------------------------------------------------

@pytest.mark.parametrize('name', ['migrate', 'restore', 'os-migrateLive', 'pause', 'shelve',
                                  'createImage', 'resize'])
def test_an_unsupported_action_on_an_unknown_server_is_a_404(api, name):
    """Nova looks the server up first (Tempest's test_migrate_non_existent_server)."""
    kind, message = error_of(act(api.as_(ADMIN), str(uuid.uuid4()), {name: None}), 404)
    assert kind == 'itemNotFound' and 'could not be found' in message


def test_restore_of_a_server_that_is_not_soft_deleted_is_a_409(api, gold):
    """Tempest's test_restore_server_invalid_state: computed never soft deletes."""
    server_id = active(api, gold)
    kind, message = error_of(act(api, server_id, {'restore': None}), 409)
    assert kind == 'conflict' and "'restore'" in message and 'active' in message
    assert state(api, server_id) == models.ACTIVE.value


def test_migrate_in_a_state_nova_takes_is_a_400_saying_why_and_changes_nothing(api, gold):
    server_id = active(api, gold)
    cast = list(api.casts.sent)
    kind, message = error_of(act(api.as_(ADMIN), server_id, {'migrate': None}), 400)
    assert "'migrate' is not supported" in message and 'node' in message
    assert state(api, server_id) == models.ACTIVE.value and api.casts.sent == cast
    # A state Nova refuses migrate in is a 409 first (rebooting: a task).
    db_instances.set_instance_state(api.engine, server_id, models.REBOOTING)
    error_of(act(api.as_(ADMIN), server_id, {'migrate': None}), 409)


def test_another_projects_server_is_a_404_for_these_actions_too(api, gold):
    server_id = active(api, gold)
    for body in ({'migrate': None}, {'lock': None},
                 {'removeSecurityGroup': {'name': 'default'}}):
        error_of(act(api.as_('mallory:p2'), server_id, body), 404)


def test_a_name_nova_does_not_know_is_still_no_such_action(api, gold):
    server_id = active(api, gold)
    assert 'no such action' in error_of(act(api, server_id, {'fly': None}), 400)[1]


def test_force_delete_deletes(api, gold):
    server_id = active(api, gold)
    response = act(api, server_id, {'forceDelete': None})
    assert response.status_int == 202, response.text
    assert ('delete_instance', 'c1', server_id) in api.casts.sent


# -- security groups -------------------------------------------------------------------------

def test_removing_and_adding_the_default_group_is_shown(api, gold):
    """Tempest's test_remove_server_all_security_groups: the server shows the group the
    create answer names; once removed, no security groups at all (as Nova's)."""
    made = create(api, gold)
    server_id = made.document['server']['id']
    (group,) = made.document['server']['security_groups']
    db_instances.set_instance_state(api.engine, server_id, models.ACTIVE)
    shown = api('GET', f'/v2.1/servers/{server_id}').document['server']
    assert shown['security_groups'] == [group] == [{'name': 'default'}]
    response = act(api, server_id, {'removeSecurityGroup': {'name': group['name']}})
    assert response.status_int == 202, response.text
    assert 'security_groups' not in api('GET', f'/v2.1/servers/{server_id}').document['server']
    listed = api('GET', '/v2.1/servers/detail').document['servers']
    assert 'security_groups' not in listed[0]
    # Not in it any more: removing again is Nova's 400 "not associated".
    assert 'not associated' in error_of(
        act(api, server_id, {'removeSecurityGroup': {'name': 'default'}}), 400)[1]
    assert act(api, server_id, {'addSecurityGroup': {'name': 'default'}}).status_int == 202
    assert api('GET', f'/v2.1/servers/{server_id}').document['server'][
        'security_groups'] == [{'name': 'default'}]
    assert 'already associated' in error_of(
        act(api, server_id, {'addSecurityGroup': {'name': 'default'}}), 400)[1]


@pytest.mark.parametrize('body, status', [
    ({'removeSecurityGroup': {'name': 'web'}}, 404),
    ({'addSecurityGroup': {'name': 'web'}}, 404),
    ({'removeSecurityGroup': {'name': ''}}, 400),
    ({'removeSecurityGroup': {}}, 400),
    ({'addSecurityGroup': {'name': 'a\x00'}}, 400),
    ({'addSecurityGroup': 'default'}, 400)])
def test_other_groups_and_bad_bodies_are_refused(api, gold, body, status):
    server_id = active(api, gold)
    error_of(act(api, server_id, body), status)


# -- lock / unlock ---------------------------------------------------------------------------

def test_a_locked_server_refuses_its_owner_actions_until_unlocked(api, gold):
    """Tempest's test_lock_unlock_server: locked, os-stop is a 409; unlocked, it works."""
    server_id = active(api, gold)
    cast = list(api.casts.sent)
    for body in ({'lock': {}}, {'lock': None}):
        assert act(api, server_id, body).status_int == 202
    shown = api.as_(version='2.9')('GET', f'/v2.1/servers/{server_id}').document['server']
    assert shown['locked'] is True and shown['status'] == 'ACTIVE'
    for body in ({'os-stop': None}, {'reboot': {'type': 'SOFT'}}):
        kind, message = error_of(act(api, server_id, body), 409)
        assert 'locked' in message
    error_of(api('DELETE', f'/v2.1/servers/{server_id}'), 409)
    error_of(api('PUT', f'/v2.1/servers/{server_id}/metadata/k', {'meta': {'k': 'v'}}), 409)
    assert state(api, server_id) == models.ACTIVE.value and api.casts.sent == cast
    assert act(api, server_id, {'unlock': {}}).status_int == 202
    assert api.as_(version='2.9')('GET', f'/v2.1/servers/{server_id}').document['server'][
        'locked'] is False
    assert act(api, server_id, {'os-stop': None}).status_int == 202


def test_an_admin_acts_on_a_locked_server_and_an_owner_cannot_undo_an_admins_lock(api, gold):
    server_id = active(api, gold)
    assert act(api.as_(ADMIN), server_id, {'lock': None}).status_int == 202
    assert db_instances.get_instance(api.engine, server_id).locked_by == 'admin'
    # The owner locking again does not make it the owner's lock.
    assert act(api, server_id, {'lock': None}).status_int == 202
    assert db_instances.get_instance(api.engine, server_id).locked_by == 'admin'
    kind, message = error_of(act(api, server_id, {'unlock': None}), 403)
    assert 'compute:servers:unlock:override' in message
    assert act(api.as_(ADMIN), server_id, {'reboot': {'type': 'HARD'}}).status_int == 202
    assert act(api.as_(ADMIN), server_id, {'unlock': None}).status_int == 202
    assert db_instances.get_instance(api.engine, server_id).locked_by is None


@pytest.mark.parametrize('body', [{'lock': {'locked_reason': 'x'}}, {'lock': 1},
                                  {'unlock': 'now'}])
def test_bad_lock_bodies_are_a_400_and_lock_nothing(api, gold, body):
    server_id = active(api, gold)
    error_of(act(api, server_id, body), 400)
    assert db_instances.get_instance(api.engine, server_id).locked_by is None


# -- PUT /servers/{id} and the access addresses ------------------------------------------------

def test_the_update_answer_is_novas_without_the_extension_attributes(api, gold):
    server_id = active(api, gold)
    for token, version in (('alice:p1', '2.1'), (ADMIN, '2.3'), ('alice:p1', '2.61')):
        response = api.as_(token, version)('PUT', f'/v2.1/servers/{server_id}',
                                           {'server': {'name': 'renamed'}})
        assert response.status_int == 200, response.text
        server = response.document['server']
        assert server['name'] == 'renamed' and server['id'] == server_id
        extras = [key for key in server
                  if key.startswith(('OS-EXT-', 'OS-SRV-USG:', 'os-extended-volumes:'))
                  or key in ('key_name', 'config_drive')]
        assert extras == [], version
        assert {'accessIPv4', 'accessIPv6', 'addresses', 'hostId', 'OS-DCF:diskConfig',
                'progress', 'metadata', 'links', 'flavor', 'image'} <= set(server)
    assert 'locked' in server and 'description' in server and 'tags' in server
    # GET still shows them all.
    shown = api.as_(ADMIN, '2.3')('GET', f'/v2.1/servers/{server_id}').document['server']
    assert 'OS-EXT-STS:vm_state' in shown and 'OS-EXT-SRV-ATTR:host' in shown


def test_progress_is_shown_in_novas_progress_statuses_only(api, gold):
    server_id = active(api, gold)
    assert api('GET', f'/v2.1/servers/{server_id}').document['server']['progress'] == 100
    db_instances.set_instance_state(api.engine, server_id, models.STOPPED)
    assert 'progress' not in api('GET', f'/v2.1/servers/{server_id}').document['server']


def test_access_addresses_are_shown_in_their_normal_form(api, gold):
    """Tempest's ServersTestJSON: accessIPv6 '0000:...:babe:220.12.22.2' shows as netaddr
    prints it."""
    made = create(api, gold, accessIPv4='192.0.2.1',
                  accessIPv6='0000:0000:0000:0000:0000:babe:220.12.22.2')
    assert made.status_int == 202, made.text
    server_id = made.document['server']['id']
    shown = api('GET', f'/v2.1/servers/{server_id}').document['server']
    assert (shown['accessIPv4'], shown['accessIPv6']) == ('192.0.2.1', '::babe:dc0c:1602')
    db_instances.set_instance_state(api.engine, server_id, models.ACTIVE)
    updated = api('PUT', f'/v2.1/servers/{server_id}',
                  {'server': {'accessIPv6': '2001:0DB8:0000::0001'}}).document['server']
    assert updated['accessIPv6'] == '2001:db8::1'
