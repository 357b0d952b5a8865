"""``key_name``, ``user_data`` and ``config_drive`` in ``POST /servers`` (issue 24 item 11):
the key pair must be the caller's, user data Nova's base64 within Nova's bound; both are kept
with the server (a copy of the key: deleting the key pair changes no server) and shown back
as Nova shows them; bad input is a 400 naming the field and creates nothing."""

from __future__ import annotations

import base64

import pytest

from computed.db import instances as db_instances
from tests.unit.api.test_app import ADMIN, create, error_of, flavor
from tests.unit.api.test_keypairs import public_key


@pytest.fixture
def gold(api):
    return flavor(api, flavor_id='gold')


def key_pair(api, name='k1', token=None):
    key = public_key()
    made = (api.as_(token) if token else api)('POST', '/v2.1/os-keypairs', {
        'keypair': {'name': name, 'public_key': key}})
    assert made.status_int == 200, made.text
    return key


def nothing_created(api):
    assert api.as_(ADMIN)('GET', '/v2.1/servers?all_tenants=1').document['servers'] == []
    assert api.casts.sent == []


def test_a_server_keeps_its_key_pair_and_user_data(api, gold):
    key = key_pair(api)
    user_data = base64.b64encode(b'#cloud-config\nruncmd: [touch /tmp/hello]\n').decode()
    made = create(api, gold, key_name='k1', user_data=user_data, config_drive=True)
    assert made.status_int == 202, made.text
    server_id = made.document['server']['id']
    row = db_instances.get_instance(api.engine, server_id)
    assert (row.key_name, row.key_type, row.key_data, row.user_data, row.config_drive) == \
        ('k1', 'ssh', key, user_data, True)
    shown = api('GET', f'/v2.1/servers/{server_id}').document['server']
    assert shown['key_name'] == 'k1' and shown['config_drive'] == 'True'
    assert 'OS-EXT-SRV-ATTR:user_data' not in shown
    admin = api.as_(ADMIN, '2.3')('GET', f'/v2.1/servers/{server_id}').document['server']
    assert admin['OS-EXT-SRV-ATTR:user_data'] == user_data
    assert 'OS-EXT-SRV-ATTR:user_data' not in \
        api.as_(ADMIN, '2.2')('GET', f'/v2.1/servers/{server_id}').document['server']
    # The server keeps its copy once the key pair is gone.
    assert api('DELETE', '/v2.1/os-keypairs/k1').status_int == 202
    assert db_instances.get_instance(api.engine, server_id).key_data == key


def test_without_a_key_every_server_still_gets_a_config_drive(api, gold):
    made = create(api, gold, config_drive=False)
    assert made.status_int == 202, made.text
    shown = api('GET', f'/v2.1/servers/{made.document["server"]["id"]}').document['server']
    assert shown['key_name'] is None and shown['config_drive'] == 'True'


def test_the_key_pair_must_be_the_callers(api, gold):
    key_pair(api, 'bobs', token='bob:p1')
    kind, message = error_of(create(api, gold, key_name='bobs'), 400)
    assert kind == 'badRequest' and 'bobs' in message and 'key_name' in message
    kind, message = error_of(create(api, gold, key_name='nope'), 400)
    assert 'nope' in message
    nothing_created(api)


@pytest.mark.parametrize('user_data, why', [
    ('not base64!', 'base64'), ('YWJj\x00', 'user_data'), ('YWJjZA', 'base64'),
    ('A' * 65536, 'user_data'),
    (base64.b64encode(b'\xff\xfe\x00binary').decode(), 'UTF-8'),
])
def test_bad_user_data_is_a_400(api, gold, user_data, why):
    kind, message = error_of(create(api, gold, user_data=user_data), 400)
    assert kind == 'badRequest' and why in message and '\n' not in message
    nothing_created(api)


def test_user_data_at_nova_s_bound_is_taken(api, gold):
    # Nova's schema bounds the base64 text to 65,535 characters: 65,532 here.
    made = create(api, gold, user_data=base64.b64encode(b'a' * 49_149).decode())
    assert made.status_int == 202, made.text


@pytest.mark.parametrize('value', ['maybe', 3, None])
def test_config_drive_is_a_boolean(api, gold, value):
    kind, message = error_of(create(api, gold, config_drive=value), 400)
    assert 'config_drive' in message
    nothing_created(api)


def test_servers_sort_by_key_name(api, gold):
    for name in ('b', 'a'):
        key_pair(api, name)
    made = {name: create(api, gold, name=f'web-{name}', key_name=name).document['server']['id']
            for name in ('b', 'a')}
    for direction, order in (('asc', ['a', 'b']), ('desc', ['b', 'a'])):
        listed = api('GET', f'/v2.1/servers?sort_key=key_name&sort_dir={direction}')
        assert [s['id'] for s in listed.document['servers']] == [made[k] for k in order]


def test_admins_see_nova_s_extended_attributes_from_2_3(api, gold):
    """What Nova shows admins from 2.3 beside the reservation id and the user data; the
    hostname is the one the config drive gives the node."""
    made = create(api, gold, name='Web Server_1')
    server_id = made.document['server']['id']
    shown = api.as_(ADMIN, '2.3')('GET', f'/v2.1/servers/{server_id}').document['server']
    assert (shown['OS-EXT-SRV-ATTR:hostname'], shown['OS-EXT-SRV-ATTR:launch_index'],
            shown['OS-EXT-SRV-ATTR:kernel_id'], shown['OS-EXT-SRV-ATTR:ramdisk_id'],
            shown['OS-EXT-SRV-ATTR:root_device_name'], shown['OS-EXT-SRV-ATTR:user_data']) == \
        ('web-server-1', 0, '', '', None, None)
    before = api.as_(ADMIN, '2.2')('GET', f'/v2.1/servers/{server_id}').document['server']
    assert 'OS-EXT-SRV-ATTR:hostname' not in before
