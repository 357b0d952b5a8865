"""The Ironic driver passes the config drive on the provision call to ``active`` (issue 24
item 11), as the JSON object Ironic builds the ISO from, and sends none when there is none.
Against a real Ironic: tests/functional/test_config_drive.py."""

from __future__ import annotations

import json
import types

from computed_ironic.driver import IronicDriver

NODE = '11111111-2222-3333-4444-555555555555'
INSTANCE = '99999999-8888-7777-6666-555555555555'
DRIVE = {'meta_data': {'uuid': INSTANCE, 'public_keys': {'k1': 'ssh-ed25519 AAAA a@b'}},
         'user_data': '#cloud-config\n'}


class Answer:
    def __init__(self, status: int, body: dict):
        self.status_code = status
        self.text = json.dumps(body)
        self._body = body

    def json(self) -> dict:
        return self._body


class Ironic:
    """The calls the driver makes to deploy, answered as an Ironic whose deploys end at
    once; every write recorded."""

    def __init__(self):
        self.node = {'uuid': NODE, 'name': None, 'resource_class': 'baremetal',
                     'provision_state': 'available', 'target_provision_state': None,
                     'power_state': 'power off', 'maintenance': False, 'instance_uuid': None,
                     'traits': [], 'conductor_group': '', 'shard': None, 'last_error': None,
                     'properties': {}}
        self.writes: list[tuple[str, str, object]] = []

    @property
    def baremetal(self) -> Ironic:  # an openstacksdk connection's proxy, or the adapter
        return self

    def get_endpoint_data(self):
        return types.SimpleNamespace(url='http://ironic.invalid/v1')

    def get(self, path, params=None, **_kwargs):
        return Answer(200, self.node)

    def patch(self, path, json=None, **_kwargs):
        self.writes.append(('PATCH', path, json))
        for op in json:
            if op['path'] == '/instance_uuid':
                self.node['instance_uuid'] = op['value']
        return Answer(200, self.node)

    def put(self, path, json=None, **_kwargs):
        self.writes.append(('PUT', path, json))
        self.node['provision_state'] = 'active'
        return Answer(202, {})


def deploy(configdrive):
    ironic = Ironic()
    driver = IronicDriver(ironic, sleep=lambda _s: None, poll_interval=0)
    node = driver.deploy(NODE, INSTANCE, 'http://img', timeout=5, configdrive=configdrive)
    assert node.provision_state == 'active'
    return [body for method, path, body in ironic.writes
            if path.endswith(f'/nodes/{NODE}/states/provision')]


def test_the_drive_rides_on_the_provision_call():
    assert deploy(DRIVE) == [{'target': 'active', 'configdrive': DRIVE}]


def test_no_drive_no_configdrive_key():
    assert deploy(None) == [{'target': 'active'}]
