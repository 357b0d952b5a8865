"""GET /servers/{id}/diagnostics in-process: what computed knows of a bare-metal server in
Nova's 2.48 form (Nova's Ironic driver has none: a 501 there), admins', 409 before a node
(Tempest's ServerDiagnostics tests answered 404)."""

from __future__ import annotations

import pytest

from computed.api import server_diagnostics
from computed.db import instances as db_instances
from computed.db import models
from tests.unit.api.test_app import ADMIN, create, error_of, flavor
from tests.unit.api.test_servers import active


@pytest.fixture
def gold(api):
    return flavor(api, flavor_id='gold')  # ram 1024, vcpus 2, disk 10


@pytest.mark.parametrize('version', ['2.1', '2.47', '2.48', '2.61'])
def test_an_admin_reads_what_computed_knows_at_every_microversion(api, gold, version):
    server_id = active(api, gold)
    shown = api.as_(ADMIN, version=version)('GET', f'/v2.1/servers/{server_id}/diagnostics')
    assert shown.status_int == 200, shown.text
    assert shown.document == {
        'state': 'running', 'driver': 'ironic', 'hypervisor': 'ironic', 'hypervisor_os': None,
        'uptime': None, 'config_drive': True, 'num_cpus': 2, 'num_nics': 0, 'num_disks': 1,
        'memory_details': {'maximum': 1024, 'used': None},
        'cpu_details': [], 'nic_details': [], 'disk_details': []}


@pytest.mark.parametrize('state, shown', [(models.STOPPED, 'shutdown'),
                                          (models.ERROR, 'pending'),
                                          (models.REBOOTING, 'running')])
def test_the_state_is_the_power_state_in_novas_words(api, gold, state, shown):
    server_id = active(api, gold)
    db_instances.set_instance_state(api.engine, server_id, state)
    assert server_diagnostics.diagnostics(
        db_instances.get_instance(api.engine, server_id))['state'] == shown


def test_the_owner_is_refused_a_stranger_finds_nothing_and_a_server_without_node_is_a_409(
        api, gold):
    server_id = active(api, gold)
    assert error_of(api('GET', f'/v2.1/servers/{server_id}/diagnostics'), 403)
    assert error_of(api.as_('bob:p2')('GET', f'/v2.1/servers/{server_id}/diagnostics'), 404)
    # A build that found no node (the fake Placement has three, one is server_id's).
    for _ in range(2):
        create(api.as_(ADMIN), gold)
    unplaced = create(api.as_(ADMIN), gold).document['server']['id']
    assert db_instances.get_instance(api.engine, unplaced).node_uuid is None
    assert 'not ready' in error_of(api.as_(ADMIN)(
        'GET', f'/v2.1/servers/{unplaced}/diagnostics'), 409)[1]
