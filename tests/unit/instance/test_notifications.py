"""computed.instances.notifications: which event each operation emits, the payload's shape, and
the notifier's oslo.messaging plumbing (the ``log`` driver, a ``fake://`` transport)."""

import datetime
import json
import logging

import oslo_messaging
import pytest
from oslo_config import cfg

from computed.db import models
from computed.db.instances import InstanceRow
from computed.instances import notifications
from computed.instances.notifications import InstanceNotifier, event_for, payload

NOW = datetime.datetime(2026, 11, 23, 7, 0, 0)
UUID = '9f1b7a52-7d1e-4bd0-8a39-1e1c2f6b1d01'
NODE = '11111111-1111-1111-1111-111111111111'


def row(state, fault=None, **kw):
    values = dict(uuid=UUID, node_uuid=NODE, host='c1', member_epoch=7, state=str(state),
                  resource_class='CUSTOM_GOLD', traits=('CUSTOM_CAP_BOOT_MODE__UEFI',),
                  image='http://img', fault=fault, created_at=NOW, updated_at=NOW,
                  deleted_at=None)
    values.update(kw)
    return InstanceRow(**values)


@pytest.mark.parametrize('operation,after,expected', [
    ('build_instance', row(models.ACTIVE), ('instance.create.end', 'INFO')),
    ('build_instance', row(models.ACTIVE, fault='attempt 1 on node x: y'),
     ('instance.create.end', 'INFO')),  # succeeded on another node: the attempts stay listed
    ('build_instance', row(models.ERROR, fault='boom'), ('instance.create.error', 'ERROR')),
    ('build_instance', row(models.BUILDING, fault='attempt 1'), None),  # handed over
    ('delete_instance', row(models.DELETED), ('instance.delete.end', 'INFO')),
    ('delete_instance', row(models.ERROR, fault='delete failed'),
     ('instance.delete.error', 'ERROR')),
    ('reboot_instance', row(models.ACTIVE), ('instance.reboot.end', 'INFO')),
    ('stop_instance', row(models.STOPPED), ('instance.power_off.end', 'INFO')),
    ('stop_instance', row(models.ACTIVE, fault='power off failed: BMC'),
     ('instance.power_off.error', 'ERROR')),
    ('start_instance', row(models.ACTIVE), ('instance.power_on.end', 'INFO')),
    ('rebuild_instance', row(models.ACTIVE), ('instance.rebuild.end', 'INFO')),
    ('rebuild_instance', row(models.STOPPED), ('instance.rebuild.end', 'INFO')),  # was stopped
    ('rebuild_instance', row(models.ERROR, fault='rebuild failed: x'),
     ('instance.rebuild.error', 'ERROR')),
    ('rebuild_instance', row(models.ACTIVE, fault='power off after the rebuild failed: BMC'),
     ('instance.rebuild.error', 'ERROR')),
])
def test_the_end_event_follows_the_outcome(operation, after, expected):
    assert event_for(operation, after, 'end') == expected


@pytest.mark.parametrize('operation,action', sorted(notifications.ACTIONS.items()))
def test_every_operation_starts_with_its_start_event(operation, action):
    assert event_for(operation, row(models.ACTIVE), 'start') == (f'instance.{action}.start',
                                                                 'INFO')


FLAVOR = {'id': 'f1', 'name': 'bm.gold', 'vcpus': 2, 'ram': 1024, 'disk': 10, 'ephemeral': 0,
          'swap': 0, 'extra_specs': {'resources:CUSTOM_GOLD': '1',
                                     'capabilities:boot_mode': 'uefi'}}


@pytest.mark.parametrize('state, vm_state', [(models.REBUILDING, 'active'),
                                             (models.REBUILDING_OFF, 'stopped')])
def test_a_rebuilding_instance_is_novas_rebuilding_task(state, vm_state):
    data = payload(row(state), 'rebuild')['nova_object.data']
    assert (data['state'], data['task_state']) == (vm_state, 'rebuilding')


def test_the_payload_has_novas_versioned_shape():
    body = payload(row(models.STOPPING, project_id='p1', user_id='u1', name='web-1'),
                   'power_off')
    assert body['nova_object.name'] == 'InstanceActionPayload'
    assert body['nova_object.namespace'] == 'nova' and body['nova_object.version']
    data = body['nova_object.data']
    assert (data['uuid'], data['state'], data['task_state'], data['host'], data['node']) == (
        UUID, 'active', 'powering-off', 'c1', NODE)
    assert (data['tenant_id'], data['user_id'], data['image_uuid'], data['display_name']) == (
        'p1', 'u1', 'http://img', 'web-1')
    assert data['flavor']['nova_object.data']['extra_specs'] == {
        'resources:CUSTOM_GOLD': '1', 'trait:CUSTOM_CAP_BOOT_MODE__UEFI': 'required'}
    assert data['fault'] is None and data['created_at'] == '2026-11-23T07:00:00Z'
    json.dumps(body)  # serialisable as it goes on the wire


def test_a_fault_is_an_exception_payload_and_create_has_its_own_name():
    body = payload(row(models.ERROR, fault='attempt 1 on node x: boom'), 'create')
    assert body['nova_object.name'] == 'InstanceCreatePayload'
    fault = body['nova_object.data']['fault']
    assert fault['nova_object.name'] == 'ExceptionPayload'
    assert fault['nova_object.data']['exception_message'] == 'attempt 1 on node x: boom'


def transport(driver):
    conf = cfg.ConfigOpts()
    conf([])
    transport = oslo_messaging.get_notification_transport(conf, url='fake://')
    conf.set_override('driver', driver, group='oslo_messaging_notifications')
    return transport


def test_the_notifier_sends_through_the_configured_driver(caplog):
    notifier = InstanceNotifier(transport(['log']), 'c1')
    assert notifier.enabled
    with caplog.at_level(logging.INFO, logger='oslo.messaging.notification'):
        notifier.start('build_instance', row(models.BUILDING))
        notifier.end('build_instance', row(models.ERROR, fault='boom'))
        notifier.end('build_instance', row(models.BUILDING))  # handed over: nothing
    sent = [json.loads(r.getMessage()) for r in caplog.records]
    assert [(m['event_type'], m['priority'], m['publisher_id']) for m in sent] == [
        ('instance.create.start', 'INFO', 'computed:c1'),
        ('instance.create.error', 'ERROR', 'computed:c1')]
    assert sent[1]['payload']['nova_object.data']['fault']['nova_object.data'][
        'exception_message'] == 'boom'


def test_no_driver_sends_nothing(caplog):
    notifier = InstanceNotifier(transport([]), 'c1')
    assert not notifier.enabled
    with caplog.at_level(logging.DEBUG, logger='oslo.messaging.notification'):
        notifier.start('build_instance', row(models.BUILDING))
    assert caplog.records == []


def test_the_noop_driver_sends_nothing_either():
    assert not InstanceNotifier(transport(['noop']), 'c1').enabled


def test_the_flavor_is_the_instances_copy_when_it_has_one():
    data = payload(row(models.ACTIVE, flavor=FLAVOR), 'create')['nova_object.data']['flavor']
    assert data['nova_object.name'] == 'FlavorPayload'
    assert data['nova_object.data'] == {
        'flavorid': 'f1', 'name': 'bm.gold', 'vcpus': 2, 'memory_mb': 1024, 'root_gb': 10,
        'ephemeral_gb': 0, 'swap': 0, 'extra_specs': FLAVOR['extra_specs']}
