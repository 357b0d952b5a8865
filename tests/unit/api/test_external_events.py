"""/os-server-external-events in-process: each event judged as Nova's (404 no such server,
422 no daemon yet, 400 a tag missing, 200 accepted), a 207 unless every one was accepted,
services' and admins' (Tempest's ServerExternalEventsTest answered 404)."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from oslo_context import context

from computed.api import external_events, policy
from computed.db import instances as db_instances
from computed.db import models
from tests.unit.api.test_app import ADMIN, error_of, flavor
from tests.unit.api.test_servers import active

PATH = '/v2.1/os-server-external-events'


@pytest.fixture
def gold(api):
    return flavor(api, flavor_id='gold')


def send(api, *events, version=None):
    return api.as_(ADMIN, version=version)('POST', PATH, {'events': list(events)})


def test_an_event_for_a_server_on_a_daemon_is_accepted_and_changes_nothing(api, gold):
    server_id = active(api, gold)
    before = db_instances.get_instance(api.engine, server_id)
    answer = send(api, {'name': 'network-changed', 'server_uuid': server_id})
    assert answer.status_int == 200, answer.text
    assert answer.document == {'events': [{'name': 'network-changed', 'server_uuid': server_id,
                                           'code': 200, 'status': 'completed'}]}
    assert db_instances.get_instance(api.engine, server_id) == before


def test_unknown_deleted_and_unplaced_servers_fail_alone_in_a_207(api, gold):
    server_id = active(api, gold)
    gone = active(api, gold)
    db_instances.set_instance_state(api.engine, gone, models.DELETED)
    unplaced = active(api, gold)
    db_instances.set_instance_state(api.engine, unplaced, models.BUILDING)
    with api.engine.begin() as conn:  # a build not placed yet: no daemon to deliver to
        conn.execute(sa.text('UPDATE instances SET host = NULL, node_uuid = NULL '
                             'WHERE uuid = :uuid'), {'uuid': unplaced})
    nobody = str(uuid.uuid4())
    answer = send(api, *({'name': 'network-vif-plugged', 'server_uuid': s, 'tag': 't',
                          'status': 'in-progress'}
                         for s in (server_id, nobody, gone, unplaced)))
    assert answer.status_int == 207, answer.text
    assert [(e['server_uuid'], e['code'], e['status'], e['tag'])
            for e in answer.document['events']] == [
        (server_id, 200, 'completed', 't'), (nobody, 404, 'failed', 't'),
        (gone, 404, 'failed', 't'), (unplaced, 422, 'failed', 't')]
    # None accepted: still a 207, as Nova's.
    assert send(api, {'name': 'network-changed', 'server_uuid': nobody}).status_int == 207


def test_volume_extended_needs_2_51_and_a_tag(api, gold):
    server_id = active(api, gold)
    event = {'name': 'volume-extended', 'server_uuid': server_id}
    error_of(send(api, event, version='2.50'), 400)
    answer = send(api, event, dict(event, tag='volume-1'), version='2.51')
    assert answer.status_int == 207, answer.text
    assert [e['code'] for e in answer.document['events']] == [400, 200]


@pytest.mark.parametrize('body', [
    {}, {'events': []}, {'events': [{'name': 'network-changed'}]},
    {'events': [{'name': 'power-update', 'server_uuid': str(uuid.uuid4())}]},
    {'events': [{'name': 'network-changed', 'server_uuid': 'not-a-uuid'}]},
    {'events': [{'name': 'network-changed', 'server_uuid': str(uuid.uuid4()),
                 'status': 'done'}]},
    {'events': [{'name': 'network-changed', 'server_uuid': str(uuid.uuid4()), 'x': 1}]},
])
def test_a_body_novas_schema_refuses_is_a_400(api, body):
    error_of(api.as_(ADMIN)('POST', PATH, body), 400)


def test_services_and_admins_send_events_and_others_are_refused(api, gold):
    server_id = active(api, gold)
    assert error_of(api('POST', PATH, {'events': [
        {'name': 'network-changed', 'server_uuid': server_id}]}), 403)
    enforcer = api.backends.enforcer
    for roles in (['service'], ['admin']):
        policy.authorize(enforcer, external_events.CREATE,
                         context.RequestContext(roles=roles, project_id='services'))
