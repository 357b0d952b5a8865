"""IronicDriver.rebuild against the fake adapter: what it writes (the new image and
preserve_ephemeral in instance_info, then Ironic's ``rebuild`` provision action with the config
drive), and what it refuses to write (another instance's node, a refused guard); a rebuild
already under way is waited for, not sent again. Ironic's own state machine is the functional
tests' (tests/functional/test_api_rebuild.py)."""

from __future__ import annotations

import pytest

from computed.baremetal.driver import DeployFailed
from computed_ironic import IronicDriver
from computed_ironic.retry import RetryPolicy
from tests.unit.ironic.fakes import FakeConnection, record

I1, I2 = '11111111-2222-3333-4444-000000000001', '11111111-2222-3333-4444-000000000002'
NEW = 'http://images.example/new.qcow2'
DRIVE = {'meta_data': {'uuid': I1, 'name': 'web'}, 'user_data': '#cloud-config\n'}


class Revoked(Exception):
    pass


class Refusing:
    def check(self):
        raise Revoked('the claim is gone')


def make(node, sleep=None):
    conn = FakeConnection([node])
    driver = IronicDriver(conn.baremetal, sleep=sleep or (lambda s: None), rand=lambda: 0.0,
                          retry_policy=RetryPolicy(max_retries=2, interval=1))
    return driver, conn.baremetal


def test_the_image_goes_to_instance_info_then_ironic_rebuilds_with_the_config_drive():
    node = record(provision_state='active', instance_uuid=I1,
                  instance_info={'image_source': 'http://images.example/old.qcow2'})
    driver, baremetal = make(node)
    done = driver.rebuild(node['uuid'], I1, NEW, timeout=10, configdrive=DRIVE,
                          preserve_ephemeral=True)
    assert done.provision_state == 'active'
    patch, put = baremetal.writes
    assert patch == ('PATCH', f"/nodes/{node['uuid']}", [
        {'op': 'add', 'path': '/instance_info/preserve_ephemeral', 'value': True},
        {'op': 'add', 'path': '/instance_info/image_source', 'value': NEW}])
    assert put == ('PUT', f"/nodes/{node['uuid']}/states/provision",
                   {'target': 'rebuild', 'configdrive': DRIVE})


def test_another_instances_node_is_not_touched():
    node = record(provision_state='active', instance_uuid=I2)
    driver, baremetal = make(node)
    with pytest.raises(DeployFailed) as exc:
        driver.rebuild(node['uuid'], I1, NEW, timeout=10)
    assert I2 in exc.value.reason and 'not rebuilt' in exc.value.reason
    assert baremetal.writes == []


def test_a_refusal_is_the_error_with_ironics_reason():
    node = record(provision_state='active', instance_uuid=I1)
    driver, baremetal = make(node)
    baremetal.write_failures = [202, 400]  # the PATCH lands, the rebuild is refused
    with pytest.raises(DeployFailed) as exc:
        driver.rebuild(node['uuid'], I1, NEW, timeout=10)
    assert 'rebuild refused' in exc.value.reason and 'injected' in exc.value.reason


def test_a_refused_answer_to_a_rebuild_already_running_is_not_a_failure():
    """The first PUT landed, its answer was lost (retried on the 503), and Ironic refuses the
    retry because the node is deploying: that rebuild is waited for."""
    node = record(provision_state='active', instance_uuid=I1)
    refused = []

    def sleep(_seconds):
        if refused:  # polled after the refusal: the rebuild it started finishes
            node.update(provision_state='active', target_provision_state=None)
    driver, baremetal = make(node, sleep)
    baremetal.write_failures = [202, 503, 400]
    original = baremetal._write

    def write(method, path, body):
        response = original(method, path, body)
        if method == 'PUT' and response.status_code == 503:
            node.update(provision_state='deploying', target_provision_state='active')
        refused.extend([1] if response.status_code == 400 else [])
        return response
    baremetal._write = write
    assert driver.rebuild(node['uuid'], I1, NEW, timeout=10).provision_state == 'active'
    assert [w[0] for w in baremetal.writes] == ['PATCH', 'PUT', 'PUT']


def test_a_rebuild_of_the_same_image_under_way_is_waited_for_not_sent_again():
    node = record(provision_state='deploying', target_provision_state='active',
                  instance_uuid=I1, instance_info={'image_source': NEW})

    def sleep(_seconds):
        node.update(provision_state='active', target_provision_state=None)
    driver, baremetal = make(node, sleep)
    assert driver.rebuild(node['uuid'], I1, NEW, timeout=10).provision_state == 'active'
    assert baremetal.writes == []


def test_nothing_is_written_when_the_guard_refuses():
    node = record(provision_state='active', instance_uuid=I1)
    driver, baremetal = make(node)
    with pytest.raises(Revoked):
        driver.rebuild(node['uuid'], I1, NEW, timeout=10, guard=Refusing())
    assert baremetal.writes == []
