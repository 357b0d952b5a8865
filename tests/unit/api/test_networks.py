"""/os-networks in-process: Nova's network proxy (2.1-2.35) over servers without networks: an
empty list, every network a 404, nova-network's writes a 410 (Tempest's network tests answered
404 on the list)."""

from __future__ import annotations

import pytest

from tests.unit.api.test_app import ADMIN, error_of


def test_there_are_no_networks_for_anyone_before_2_36(api):
    for client in (api, api.as_(ADMIN), api.as_(version='2.35')):
        listed = client('GET', '/v2.1/os-networks')
        assert (listed.status_int, listed.document) == (200, {'networks': []})
    assert error_of(api('GET', '/v2.1/os-networks/net-1'), 404)[1] == 'Network not found'


def test_from_2_36_the_proxy_is_gone_as_novas(api):
    for path in ('/v2.1/os-networks', '/v2.1/os-networks/net-1'):
        assert error_of(api.as_(version='2.36')('GET', path), 404)


@pytest.mark.parametrize('method, path, body', [
    ('POST', '/v2.1/os-networks', {'network': {'label': 'x'}}),
    ('POST', '/v2.1/os-networks/add', {'id': 'net-1'}),
    ('DELETE', '/v2.1/os-networks/net-1', None),
    ('POST', '/v2.1/os-networks/net-1/action', {'disassociate_host': None}),
])
def test_nova_networks_writes_are_gone(api, method, path, body):
    assert error_of(api.as_(ADMIN)(method, path, body), 410)[0] == 'computeFault'
