"""The config drive (issue 24 item 11): what computed.instances.configdrive makes of an
instance, and that a build hands it to the driver (the Ironic driver passes it on the
provision call: tests/unit/ironic/test_configdrive.py; what a real Ironic keeps of it:
tests/functional/test_config_drive.py)."""

from __future__ import annotations

import base64

import pytest

from computed.db import instances as db_instances
from computed.db import models
from computed.instances import configdrive, lifecycle
from tests.unit.instance.test_instance import NODE, scheduled, world  # noqa: F401 - fixture

KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDxkdq9hb1vBTZ0YdRZIHq0+vpKoNbfJLLBTDcU9Nyxs a@b'
USER_DATA = '#cloud-config\nruncmd: [touch /tmp/hi]\n'


def with_login(owner, row, **extra):
    details = dict(key_name='k1', key_type='ssh', key_data=KEY, config_drive=True,
                   user_data=base64.b64encode(USER_DATA.encode()).decode())
    details.update(extra)
    return db_instances.set_instance_details(owner.engine, row.uuid, **details)


def test_the_drive_holds_what_nova_s_metadata_holds(world):  # noqa: F811
    row = with_login(world, scheduled(world))
    row = db_instances.InstanceRow(**{**row.__dict__, 'name': 'Web_01.example', 'project_id': 'p1',
                                      'metadata': {'role': 'db'}})
    drive = configdrive.build(row)
    assert drive == {
        'meta_data': {'uuid': row.uuid, 'name': 'Web_01.example', 'hostname': 'web-01-example',
                      'availability_zone': 'nova', 'launch_index': 0, 'project_id': 'p1',
                      'meta': {'role': 'db'}, 'public_keys': {'k1': KEY},
                      'keys': [{'name': 'k1', 'type': 'ssh', 'data': KEY}]},
        'user_data': USER_DATA}


def test_no_key_no_user_data_still_a_drive_and_none_for_rows_before(world):  # noqa: F811
    row = with_login(world, scheduled(world), key_name=None, key_type=None, key_data=None,
                     user_data=None)
    drive = configdrive.build(row)
    assert set(drive) == {'meta_data'} and 'public_keys' not in drive['meta_data']
    before = db_instances.InstanceRow(**{**row.__dict__, 'config_drive': None})  # built before 0007
    assert configdrive.build(before) is None


@pytest.mark.parametrize('name, expected', [
    ('web', 'web'), ('My Server', 'my-server'), ('a_b.c', 'a-b-c'), ('--x--', 'x'),
    ('ünï', 'ünï'), ('日本', None), ('', None), ('x' * 70, 'x' * 63)])
def test_hostname_as_nova_sanitises_it(name, expected):
    uuid = '11111111-2222-3333-4444-555555555555'
    assert configdrive.hostname(name, uuid) == (expected or f'server-{uuid}')


@pytest.mark.parametrize('text', ['not base64!', 'YWJjZA',
                                  base64.b64encode(b'\xff\xfe').decode()])
def test_user_data_must_be_base64_of_text(text):
    with pytest.raises(configdrive.InvalidUserData):
        configdrive.decode_user_data(text)


def test_wrapped_base64_is_user_data():
    encoded = base64.encodebytes(USER_DATA.encode() * 10).decode()  # lines of 76
    assert '\n' in encoded.strip()
    assert configdrive.decode_user_data(encoded) == USER_DATA * 10


def test_a_build_hands_the_drive_to_the_driver(world):  # noqa: F811
    row = with_login(world, scheduled(world))
    row = lifecycle.build(world, row.uuid)
    assert row.state == models.ACTIVE
    info = world.driver.nodes[NODE]['instance_info']
    assert info['configdrive']['meta_data']['public_keys'] == {'k1': KEY}
    assert info['configdrive']['user_data'] == USER_DATA


def test_a_build_whose_stored_user_data_is_not_text_fails_naming_it(world):  # noqa: F811
    row = with_login(world, scheduled(world), user_data='//4=')
    row = lifecycle.build(world, row.uuid)
    assert row.state == models.ERROR and 'user data' in row.fault
    assert world.driver.nodes[NODE]['instance_uuid'] is None
