"""The compute API's servers in-process (see conftest.py for what is real and what is fake):
races between actions, hostile input, Nova's request fields and filters, the read-only
sub-resources of a server without networks."""

from __future__ import annotations

import time
import urllib.parse

import pytest

from computed.api import servers as servers_api
from computed.db import instances as db_instances
from computed.db import models
from tests.unit.api.test_app import ADMIN, IMAGE, create, error_of, flavor


@pytest.fixture
def gold(api):
    return flavor(api, flavor_id='gold')


@pytest.fixture(autouse=True)
def _engine(api, engine):
    api.engine = engine  # the same database as the application's


def active(api, flavor_id, token=None, **extra):
    made = create(api.as_(token) if token else api, flavor_id, **extra)
    assert made.status_int == 202, made.text
    server_id = made.document['server']['id']
    db_instances.set_instance_state(api.engine, server_id, models.ACTIVE)
    return server_id


def more_quota(api, instances=10):
    assert api.as_(ADMIN)('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {
        'instances': instances}}).status_int == 200


def nothing_changed(api, before=0):
    assert len(api.as_(ADMIN)('GET', '/v2.1/servers?all_tenants=1').document['servers']) \
        == before


# -- issue 23 item 2: no 500 ------------------------------------------------------------------

@pytest.mark.parametrize('first, second', [('delete', 'reboot'), ('reboot', 'os-stop'),
                                           ('delete', 'os-stop'), ('os-stop', 'reboot')])
def test_a_request_racing_another_on_the_same_server_is_a_409(api, gold, monkeypatch,
                                                              first, second):
    """Both requests read the server ACTIVE; the first records its action; the second's
    compare-and-set then fails: a 409 in the Compute body, not a 500."""
    server_id = active(api, gold)
    stale = servers_api.get

    def read_before_the_other(call, server):
        row = stale(call, server)
        return db_instances.InstanceRow(**{**row.__dict__, 'state': models.ACTIVE.value})

    def send(action):
        if action == 'delete':
            return api('DELETE', f'/v2.1/servers/{server_id}')
        body = {'reboot': {'type': 'SOFT'}} if action == 'reboot' else {action: None}
        return api('POST', f'/v2.1/servers/{server_id}/action', body)

    assert send(first).status_int in (202, 204)
    cast = len(api.casts.sent)
    monkeypatch.setattr(servers_api, 'get', read_before_the_other)
    kind, message = error_of(send(second), 409)
    assert kind == 'conflict' and server_id in message
    assert len(api.casts.sent) == cast


@pytest.mark.parametrize('field, value', [
    ('flavorRef', 'go\x00ld'), ('imageRef', 'http://images.example/a\x00.qcow2'),
    ('name', 'web\x00'), ('availability_zone', 'no\x00va')])
def test_nul_in_a_create_body_is_a_400(api, gold, field, value):
    server = {'name': 'web', 'flavorRef': gold, 'imageRef': IMAGE, 'networks': 'none',
              field: value}
    kind, message = error_of(api('POST', '/v2.1/servers', {'server': server}), 400)
    assert field in message
    nothing_changed(api)


@pytest.mark.parametrize('query', ['name=we\x00b', 'marker=\x00', 'status=ACT\x00IVE',
                                   'flavor=go\x00ld', 'image=http://x/\x00', 'sort_key=\x00',
                                   'project_id=\x00&all_tenants=1'])
def test_nul_in_a_list_query_is_a_400(api, gold, query):
    active(api, gold)
    for path in ('/v2.1/servers', '/v2.1/servers/detail'):
        kind, message = error_of(api.as_(ADMIN)('GET', f'{path}?{query}'), 400)
        assert query.split('=')[0] in message


# -- issue 24 item 4: os-stop/os-start with {} -------------------------------------------------

@pytest.mark.parametrize('body', [None, {}])
def test_os_stop_and_os_start_take_null_or_an_empty_object(api, gold, body):
    server_id = active(api, gold)
    assert api('POST', f'/v2.1/servers/{server_id}/action', {'os-stop': body}).status_int \
        == 202
    db_instances.set_instance_state(api.engine, server_id, models.STOPPED)
    assert api('POST', f'/v2.1/servers/{server_id}/action', {'os-start': body}).status_int \
        == 202
    assert [sent[0] for sent in api.casts.sent[-2:]] == ['stop_instance', 'start_instance']
    error_of(api('POST', f'/v2.1/servers/{server_id}/action', {'os-start': {'x': 1}}), 400)


# -- issue 24 item 6: another project's server is not found; all_tenants= ---------------------

def test_another_projects_server_is_a_404_as_if_it_did_not_exist(api, gold):
    server_id = active(api, gold)
    stranger = api.as_('bob:p2')
    missing = '00000000-0000-0000-0000-00000000beef'
    for method, suffix, body in (('GET', '', None), ('DELETE', '', None),
                                 ('POST', '/action', {'os-stop': None})):
        theirs = error_of(stranger(method, f'/v2.1/servers/{server_id}{suffix}', body), 404)
        nobody = error_of(stranger(method, f'/v2.1/servers/{missing}{suffix}', body), 404)
        assert theirs[0] == nobody[0] == 'itemNotFound'
        assert theirs[1] == nobody[1].replace(missing, server_id)
    assert api('GET', f'/v2.1/servers/{server_id}').status_int == 200
    assert len(api.casts.sent) == 1


@pytest.mark.parametrize('value, listed', [('', True), ('1', True), ('true', True),
                                           ('0', False), ('false', False)])
def test_all_tenants_with_an_empty_value_means_all(api, gold, value, listed):
    mine = active(api, gold)
    theirs = active(api, gold, 'bob:p2')
    found = {s['id'] for s in api.as_(ADMIN)('GET', f'/v2.1/servers?all_tenants={value}')
             .document['servers']}
    assert found == ({mine, theirs} if listed else set())


def test_all_tenants_with_a_value_that_is_not_a_boolean_is_a_400(api):
    kind, message = error_of(api.as_(ADMIN)('GET', '/v2.1/servers?all_tenants=sideways'), 400)
    assert 'all_tenants' in message
    error_of(api('GET', '/v2.1/servers?all_tenants='), 403)


# -- issue 24 item 14: the sub-resources of a server without networks --------------------------

@pytest.mark.parametrize('suffix, document', [
    ('/ips', {'addresses': {}}),
    ('/os-security-groups', {'security_groups': []}),
    ('/os-interface', {'interfaceAttachments': []}),
])
def test_network_sub_resources_are_empty_not_missing(api, gold, suffix, document):
    server_id = active(api, gold)
    shown = api('GET', f'/v2.1/servers/{server_id}{suffix}')
    assert shown.status_int == 200, shown.text
    assert shown.document == document
    error_of(api.as_('bob:p2')('GET', f'/v2.1/servers/{server_id}{suffix}'), 404)
    error_of(api('GET', f'/v2.1/servers/00000000-0000-0000-0000-00000000beef{suffix}'), 404)


def test_ips_of_a_network_that_is_not_there_is_a_404(api, gold):
    server_id = active(api, gold)
    kind, message = error_of(api('GET', f'/v2.1/servers/{server_id}/ips/public'), 404)
    assert 'public' in message


# -- issue 23 item 6: refused instead of ignored ----------------------------------------------

def test_forcing_a_host_is_an_admins_and_not_supported(api, gold):
    kind, message = error_of(create(api, gold, availability_zone='nova:c1'), 403)
    assert 'compute:servers:create:forced_host' in message
    for zone in ('nova:c1', 'nova::node-1', 'nova:c1:node-1'):
        kind, message = error_of(create(api.as_(ADMIN), gold, availability_zone=zone), 400)
        assert zone in message and 'not supported' in message
    nothing_changed(api)


def test_an_unknown_availability_zone_is_a_400_and_nova_is_the_zone(api, gold):
    kind, message = error_of(create(api, gold, availability_zone='moon'), 400)
    assert 'moon' in message
    nothing_changed(api)
    assert create(api, gold, availability_zone='nova').status_int == 202


@pytest.mark.parametrize('query, word', [
    ('sort_dir=sideways&sort_key=display_name', 'sort_dir'),
    ('sort_key=flavour', 'sort_key'), ('sort_dir=asc', 'sort_dir'),
    ('sort_key=uuid&sort_dir=asc&sort_dir=desc', 'sort_dir'), ('limit=%C2%B2', 'limit'),
    ('limit=-1', 'limit')])
def test_bad_sort_and_limit_values_are_a_400(api, gold, query, word):
    active(api, gold)
    kind, message = error_of(api('GET', f'/v2.1/servers?{query}'), 400)
    assert word in message


def test_servers_are_listed_in_the_order_asked_for_and_paged_in_it(api, gold):
    ids = {name: active(api, gold, name=name) for name in ('b', 'c', 'a')}

    def names(query):
        return [s['name'] for s in api('GET', f'/v2.1/servers/detail?{query}')
                .document['servers']]
    assert names('') == ['a', 'c', 'b']  # newest first
    assert names('sort_key=display_name&sort_dir=asc') == ['a', 'b', 'c']
    assert names('sort_key=display_name&sort_dir=desc') == ['c', 'b', 'a']
    assert names('sort_key=display_name') == ['c', 'b', 'a']  # Nova's default: desc
    assert names('sort_key=display_name&sort_dir=asc&limit=2') == ['a', 'b']
    first = api('GET', '/v2.1/servers?sort_key=display_name&sort_dir=asc&limit=2').document
    following = first['servers_links'][0]['href']
    assert 'sort_key=display_name' in following and f'marker={ids["b"]}' in following
    assert names(f'sort_key=display_name&sort_dir=asc&marker={ids["b"]}') == ['c']
    assert names('sort_key=vcpus&sort_dir=asc') == ['b', 'c', 'a']  # ignored, as Nova


# -- issue 24 items 2, 3: name (a regular expression), flavor, image ---------------------------

def test_name_is_a_regular_expression(api, gold):
    more_quota(api)
    for name in ('web-1', 'web-2', 'db-1', 'webby'):
        active(api, gold, name=name)

    def names(pattern):
        response = api('GET', '/v2.1/servers?' + urllib.parse.urlencode({'name': pattern}))
        assert response.status_int == 200, response.text
        return sorted(s['name'] for s in response.document['servers'])
    assert names('^web-[0-9]$') == ['web-1', 'web-2']
    assert names('-1') == ['db-1', 'web-1']
    assert names('web') == ['web-1', 'web-2', 'webby']
    assert names('^(db-1|webby)$') == ['db-1', 'webby']


@pytest.mark.parametrize('pattern', ['(', 'a' * 256, '(a)\\1', 'a{5000}'])
def test_a_name_filter_that_cannot_be_one_is_a_400(api, gold, pattern):
    active(api, gold)
    kind, message = error_of(api('GET', '/v2.1/servers?' + urllib.parse.urlencode(
        {'name': pattern})), 400)
    assert 'name' in message


def test_a_catastrophic_name_filter_answers_quickly(api, gold):
    """(a+)+$ backtracks exponentially in Python's re: 30 characters take minutes there."""
    active(api, gold, name='a' * 40 + '!')
    started = time.monotonic()
    response = api('GET', '/v2.1/servers?' + urllib.parse.urlencode({'name': '(a+)+$'}))
    assert response.status_int == 200 and response.document['servers'] == []
    assert time.monotonic() - started < 5


def test_a_name_scan_over_its_budget_pages(api, gold, monkeypatch):
    more_quota(api)
    ids = [active(api, gold, name=f'n{i}') for i in range(4)]
    monkeypatch.setattr(servers_api, 'NAME_FILTER_BUDGET', 0)
    first = api('GET', '/v2.1/servers?name=n.').document
    assert [s['id'] for s in first['servers']] == [ids[-1]]
    assert 'servers_links' in first
    seen = [s['id'] for s in first['servers']]
    link = first['servers_links'][0]['href']
    while link:
        page = api('GET', link.replace('http://localhost', '')).document
        seen += [s['id'] for s in page['servers']]
        link = page.get('servers_links', [{}])[0].get('href')
    assert seen == ids[::-1]


def test_flavor_and_image_filters(api, gold):
    silver = flavor(api, name='bm.silver', flavor_id='silver')
    on_gold = active(api, gold)
    other_image = 'http://images.example/other.qcow2'
    on_silver = active(api, silver, imageRef=other_image)

    def ids(query):
        return {s['id'] for s in api('GET', f'/v2.1/servers?{query}').document['servers']}
    assert ids('flavor=gold') == {on_gold}
    assert ids('flavor=silver') == {on_silver}
    assert ids('flavor=nope') == set()
    assert ids(f'image={IMAGE}') == {on_gold}
    assert ids(f'image={other_image}') == {on_silver}
    assert ids(f'image={other_image}&flavor=gold') == set()


# -- issue 24 item 8: Nova's create fields ----------------------------------------------------

def test_nova_create_fields_are_accepted_and_admin_pass_never_answered(api, gold):
    # As Nova with enable_instance_password off (Tempest's schema for that setting refuses an
    # adminPass in the answer): nothing on bare metal sets the password, so none is shown.
    made = create(api, gold, adminPass='s3cret!', accessIPv4='192.0.2.1',
                  accessIPv6='2001:db8::1', **{'OS-DCF:diskConfig': 'AUTO'})
    assert made.status_int == 202, made.text
    assert 'adminPass' not in made.document['server']
    assert 's3cret!' not in made.text
    shown = api('GET', f'/v2.1/servers/{made.document["server"]["id"]}').document['server']
    assert 's3cret!' not in str(shown)
    assert 'adminPass' not in create(api, gold).document['server']


@pytest.mark.parametrize('field, value', [
    ('accessIPv4', '2001:db8::1'), ('accessIPv4', '300.1.1.1'), ('accessIPv6', '192.0.2.1'),
    ('accessIPv6', 'fe80::1%eth0x'), ('OS-DCF:diskConfig', 'auto'), ('adminPass', 7),
    ('adminPass', 'x' * 256)])
def test_bad_nova_create_fields_are_a_400(api, gold, field, value):
    kind, message = error_of(create(api, gold, **{field: value}), 400)
    assert field in message
    nothing_changed(api)


# -- issue 23 item 5: image URLs ----------------------------------------------------------------

@pytest.mark.parametrize('ref', [
    'file:///etc/shadow', 'http://169.254.169.254/latest/meta-data/iam/', 'http:x',
    'http://[fe80::1]/x', 'http://127.0.0.1/x', 'http://2852039166/x',
    'http://images.example/' + 'x' * 2030])
def test_image_urls_a_conductor_must_not_fetch_are_a_400(api, gold, ref):
    kind, message = error_of(create(api, gold, imageRef=ref), 400)
    assert 'imageRef' in message and len(message) < 400
    nothing_changed(api)


def test_credentials_in_an_image_url_are_refused_and_never_echoed(api, gold):
    kind, message = error_of(create(api, gold, imageRef='http://bob:hunter2@images.example/x'),
                             400)
    assert 'credentials' in message and 'hunter2' not in message
    nothing_changed(api)


def test_credentials_stored_before_are_not_shown(api, gold):
    server_id = active(api, gold)
    with api.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE instances SET image = 'http://bob:hunter2@images.example/x'"
                             " WHERE uuid = ?", (server_id,))
    for token, path in (('alice:p1', f'/v2.1/servers/{server_id}'),
                        ('alice:p1', '/v2.1/servers/detail'),
                        (ADMIN, '/v2.1/servers/detail?all_tenants=1')):
        shown = api.as_(token)('GET', path)
        assert 'hunter2' not in shown.text and 'images.example/x' in shown.text


def test_an_operator_may_allow_file_urls_and_a_local_network(api, gold):
    conf = api.backends.conf
    conf.set_override('image_url_schemes', ['http', 'https', 'file'], 'api')
    conf.set_override('image_url_allowed_networks', ['127.0.0.1'], 'api')
    assert create(api, gold, imageRef='file:///var/lib/images/a.img').status_int == 202
    assert create(api, gold, imageRef='http://127.0.0.1/a.img').status_int == 202
    error_of(create(api, gold, imageRef='http://169.254.169.254/x'), 400)


# -- issue 24 item 9: min_count/max_count ------------------------------------------------------

def servers_of(api):
    return api.as_(ADMIN)('GET', '/v2.1/servers/detail?all_tenants=1').document['servers']


def test_several_servers_in_one_request_are_named_as_novas(api, gold):
    more_quota(api)
    made = create(api, gold, min_count=2, max_count=3)
    assert made.status_int == 202, made.text
    listed = servers_of(api)
    assert sorted(s['name'] for s in listed) == ['web-1', 'web-2', 'web-3']
    assert made.document['server']['id'] in {s['id'] for s in listed}
    assert sorted(sent[2] for sent in api.casts.sent) == sorted(s['id'] for s in listed)
    assert len(api.placement.allocations) == 3


def test_return_reservation_id(api, gold):
    made = create(api, gold, max_count='2', return_reservation_id=True)
    assert made.status_int == 202, made.text
    assert made.document['reservation_id'].startswith('r-')
    assert len(servers_of(api)) == 2


def test_the_quota_bounds_max_count_and_min_count_is_all_or_nothing(api, gold):
    more_quota(api, 2)
    assert create(api, gold, min_count=1, max_count=3).status_int == 202
    assert len(servers_of(api)) == 2  # as many as the quota admits, as Nova
    more_quota(api, 3)
    kind, message = error_of(create(api, gold, min_count=2, max_count=2), 403)
    assert 'Quota exceeded for instances' in message
    assert len(servers_of(api)) == 2
    assert create(api, gold).status_int == 202  # nothing of the refused request is held


def test_too_few_hosts_for_all_builds_none(api, gold):
    more_quota(api)
    made = create(api, gold, min_count=4, max_count=4)  # 3 nodes
    assert made.status_int == 202, made.text
    listed = servers_of(api)
    assert len(listed) == 4 and {s['status'] for s in listed} == {'ERROR'}
    assert all(s['fault']['message'].startswith('No valid host was found') for s in listed)
    assert api.placement.allocations == {} and api.casts.sent == []
    # The nodes are free again: a build of one takes one.
    assert create(api, gold).status_int == 202 and len(api.placement.allocations) == 1


@pytest.mark.parametrize('counts', [{'min_count': 3, 'max_count': 2}, {'min_count': 0},
                                    {'max_count': 101}, {'min_count': 'two'},
                                    {'max_count': -1}, {'return_reservation_id': 'maybe'}])
def test_bad_counts_are_a_400(api, gold, counts):
    kind, message = error_of(create(api, gold, **counts), 400)
    assert any(key in message for key in counts)
    nothing_changed(api)


def test_description_access_ips_and_reservation_id_are_kept(api, gold):
    more_quota(api)
    made = create(api.as_(version='2.19'), gold, description='the web tier',
                  accessIPv4='192.0.2.1', accessIPv6='2001:db8::1', max_count=2,
                  return_reservation_id='true')
    assert made.status_int == 202, made.text
    reservation = made.document['reservation_id']
    other = create(api, gold).document['server']['id']
    found = api.as_(version='2.19')('GET', f'/v2.1/servers/detail?reservation_id={reservation}')
    servers = found.document['servers']
    assert len(servers) == 2 and other not in {s['id'] for s in servers}
    assert {(s['description'], s['accessIPv4'], s['accessIPv6']) for s in servers} == \
        {('the web tier', '192.0.2.1', '2001:db8::1')}
    shown = api.as_(ADMIN, '2.3')('GET', f'/v2.1/servers/{servers[0]["id"]}').document['server']
    assert shown['OS-EXT-SRV-ATTR:reservation_id'] == reservation
    plain = api.as_(version='2.19')('GET', f'/v2.1/servers/{other}').document['server']
    assert (plain['description'], plain['accessIPv4']) == (None, '')
    assert 'OS-EXT-SRV-ATTR:reservation_id' not in plain


#: Nova's sort keys (VALID_SORT_KEYS of its servers query schema, before 2.73).
NOVA_SORT_KEYS = [
    'access_ip_v4', 'access_ip_v6', 'auto_disk_config', 'availability_zone', 'config_drive',
    'created_at', 'display_description', 'display_name', 'host', 'hostname', 'image_ref',
    'instance_type_id', 'kernel_id', 'key_name', 'launch_index', 'launched_at', 'locked_by',
    'node', 'power_state', 'progress', 'project_id', 'ramdisk_id', 'root_device_name',
    'task_state', 'terminated_at', 'updated_at', 'user_id', 'uuid', 'vm_state',
    'architecture', 'cell_name', 'cleaned', 'default_ephemeral_device', 'default_swap_device',
    'deleted', 'deleted_at', 'disable_terminate', 'ephemeral_gb', 'ephemeral_key_uuid', 'id',
    'key_data', 'launched_on', 'locked', 'memory_mb', 'os_type', 'reservation_id', 'root_gb',
    'shutdown_terminate', 'user_data', 'vcpus', 'vm_mode']


def test_every_sort_key_nova_takes_is_taken_and_pages(api, gold):
    more_quota(api)
    ids = {active(api, gold, name=name, accessIPv4=ip) for name, ip in
           (('a', '192.0.2.3'), ('b', '192.0.2.1'), ('c', ''))}
    for key in NOVA_SORT_KEYS:
        for direction in ('asc', 'desc'):
            seen, link = [], f'/v2.1/servers?sort_key={key}&sort_dir={direction}&limit=1'
            while link:
                page = api('GET', link.replace('http://localhost', ''))
                assert page.status_int == 200, (key, page.text)
                seen += [s['id'] for s in page.document['servers']]
                link = page.document.get('servers_links', [{}])[0].get('href')
            assert sorted(seen) == sorted(ids), key
    names = [s['name'] for s in api('GET', '/v2.1/servers?sort_key=access_ip_v4&sort_dir=asc')
             .document['servers']]
    assert names == ['c', 'b', 'a']
