"""/os-services in-process, over a fixed list of daemons (ZooKeeper is the functional
tests'): the names the daemons answer to."""

from __future__ import annotations

import pytest

from computed.api import services
from tests.unit.api.test_app import ADMIN, error_of

DAEMONS = [{'host': 'c1', 'up': True, 'disabled': False, 'reason': None},
           {'host': 'c2', 'up': False, 'disabled': True, 'reason': 'maintenance'}]


@pytest.fixture
def admin(api, monkeypatch):
    monkeypatch.setattr(services, '_services', lambda backends: [dict(d) for d in DAEMONS])
    return api.as_(ADMIN)


@pytest.mark.parametrize('binary', ['computed', 'nova-compute'])
def test_the_daemons_answer_to_their_name_and_novas(admin, binary):
    listed = admin('GET', f'/v2.1/os-services?binary={binary}').document['services']
    assert [(s['host'], s['binary'], s['state']) for s in listed] == \
        [('c1', binary, 'up'), ('c2', binary, 'down')]
    assert admin('GET', f'/v2.1/os-services?binary={binary}&host=c2').document[
        'services'][0]['disabled_reason'] == 'maintenance'


def test_without_a_binary_they_are_computed_and_other_binaries_have_none(admin):
    assert {s['binary'] for s in admin('GET', '/v2.1/os-services').document['services']} \
        == {'computed'}
    assert admin('GET', '/v2.1/os-services?binary=nova-scheduler').document == \
        {'services': []}


def test_the_legacy_update_takes_novas_binary_name(admin, monkeypatch):
    changed = []
    monkeypatch.setattr(services, 'set_disabled', lambda call, host, disable, reason:
                        changed.append((host, disable, reason)))
    response = admin('PUT', '/v2.1/os-services/disable',
                     {'host': 'c1', 'binary': 'nova-compute'})
    assert response.status_int == 200, response.text
    assert response.document['service'] == {'host': 'c1', 'binary': 'nova-compute',
                                            'status': 'disabled'}
    assert changed == [('c1', True, None)]
    error_of(admin('PUT', '/v2.1/os-services/disable', {'host': 'c1', 'binary': 'nova-api'}),
             404)
    assert len(changed) == 1
