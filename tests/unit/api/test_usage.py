"""/os-simple-tenant-usage in-process (issue 24 item 13): hours from the servers' creation
and deletion clipped to the period, times the sizes of the flavor copy, per project."""

from __future__ import annotations

import datetime

import pytest
import sqlalchemy as sa

from computed.api import usage
from computed.db import instances as db_instances
from computed.db import models
from tests.unit.api.test_app import ADMIN, error_of, flavor
from tests.unit.api.test_servers import active, more_quota

T0 = datetime.datetime(2026, 11, 1)


def at(api, server_id, created, deleted=None):
    """Backdate a server: created (and deleted) at hours after T0."""
    values = {'created_at': T0 + datetime.timedelta(hours=created)}
    if deleted is not None:
        values.update(deleted_at=T0 + datetime.timedelta(hours=deleted),
                      state=models.DELETED.value)
    with api.engine.begin() as conn:
        conn.execute(sa.update(models.Instance.__table__).where(
            models.Instance.__table__.c.uuid == server_id).values(**values))


@pytest.fixture
def servers(api, engine):
    """p1: one server from hour 0, running; one from hour 10 to hour 14; p2: one from hour 5."""
    api.engine = engine
    more_quota(api)
    gold = flavor(api, flavor_id='gold')  # ram 1024, vcpus 2, disk 10
    running = active(api, gold, name='running')
    short = active(api, gold, name='short')
    other = active(api, gold, token='bob:p2', name='other')
    at(api, running, 0)
    at(api, short, 10, 14)
    at(api, other, 5)
    return {'running': running, 'short': short, 'other': other}


def period(start, end):
    return f'start={(T0 + datetime.timedelta(hours=start)).isoformat()}&' \
           f'end={(T0 + datetime.timedelta(hours=end)).isoformat()}'


def test_a_projects_usage_over_a_period(api, servers):
    shown = api('GET', f'/v2.1/os-simple-tenant-usage/p1?{period(2, 12)}').document[
        'tenant_usage']
    # running: hours 2..12 = 10; short: 10..12 = 2.
    assert shown['tenant_id'] == 'p1' and shown['total_hours'] == pytest.approx(12)
    assert shown['total_vcpus_usage'] == pytest.approx(24)
    assert shown['total_memory_mb_usage'] == pytest.approx(12 * 1024)
    assert shown['total_local_gb_usage'] == pytest.approx(120)
    items = {item['name']: item for item in shown['server_usages']}
    assert items['short']['hours'] == pytest.approx(2)
    assert (items['short']['state'], items['short']['uptime'], items['short']['flavor'],
            items['short']['vcpus'], items['short']['memory_mb'],
            items['short']['local_gb']) == ('terminated', 4 * 3600, 'bm.gold', 2, 1024, 10)
    assert items['running']['state'] == 'active' and items['running']['ended_at'] is None
    assert shown['start'].startswith('2026-11-01T02:00:00')


def test_every_projects_usage_is_an_admins(api, servers):
    admin = api.as_(ADMIN)
    listed = admin('GET', f'/v2.1/os-simple-tenant-usage?{period(0, 24)}').document[
        'tenant_usages']
    totals = {summary['tenant_id']: summary['total_hours'] for summary in listed}
    assert totals == {'p1': pytest.approx(24 + 4), 'p2': pytest.approx(19)}
    assert all('server_usages' not in summary for summary in listed)
    for value in ('1', 'True'):  # Nova's, and what openstacksdk sends
        detailed = admin('GET', f'/v2.1/os-simple-tenant-usage?{period(0, 24)}&'
                                f'detailed={value}')
        assert sum(len(s['server_usages']) for s in detailed.document['tenant_usages']) == 3
    kind, message = error_of(api('GET', '/v2.1/os-simple-tenant-usage'), 403)
    assert 'compute:usage:list' in message
    error_of(api('GET', '/v2.1/os-simple-tenant-usage/p2'), 403)


def test_servers_outside_the_period_and_projects_without_any(api, servers):
    shown = api('GET', f'/v2.1/os-simple-tenant-usage/p1?{period(15, 20)}').document
    assert [item['name'] for item in shown['tenant_usage']['server_usages']] == ['running']
    assert api.as_('carol:p3')('GET', '/v2.1/os-simple-tenant-usage/p3').document == {
        'tenant_usage': {}}


def test_paged_from_2_40(api, servers):
    admin = api.as_(ADMIN, version='2.40')
    first = admin('GET', f'/v2.1/os-simple-tenant-usage?{period(0, 24)}&limit=2&detailed=1')
    assert sum(len(s['server_usages']) for s in first.document['tenant_usages']) == 2
    link = first.document['tenant_usages_links'][0]['href']
    marker = link.split('marker=')[1]
    rest = admin('GET', f'/v2.1/os-simple-tenant-usage?{period(0, 24)}&detailed=1&'
                        f'marker={marker}').document
    assert sum(len(s['server_usages']) for s in rest['tenant_usages']) == 1
    error_of(admin('GET', f'/v2.1/os-simple-tenant-usage?marker={servers["running"][:8]}'),
             400)


@pytest.mark.parametrize('query', ['start=yesterday', 'end=2026-13-01T00:00:00',
                                   'start=2026-11-02T00:00:00&end=2026-11-01T00:00:00',
                                   'start=1', 'end='])
def test_bad_times_are_a_400(api, servers, query):
    error_of(api('GET', f'/v2.1/os-simple-tenant-usage/p1?{query}'), 400)


def test_nova_time_formats():
    now = datetime.datetime(2026, 1, 1)
    for text in ('2026-11-01T00:00:00', '2026-11-01T00:00:00.000000',
                 '2026-11-01 00:00:00.000000', '2026-11-01T01:00:00+01:00',
                 '2026-11-01T00:00:00Z'):
        assert usage.parse_time('start', text, now) == datetime.datetime(2026, 11, 1), text
    assert usage.parse_time('start', None, now) == now


def test_a_server_that_never_had_a_node_never_launched(api, servers):
    db_instances.set_instance_state(api.engine, servers['running'], models.ERROR, 'no host',
                                    release_node=True)
    items = api('GET', f'/v2.1/os-simple-tenant-usage/p1?{period(0, 24)}').document[
        'tenant_usage']['server_usages']
    assert {item['name']: item['hours'] for item in items}['running'] == 0
