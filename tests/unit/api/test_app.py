"""The compute API in-process: versions, microversions, errors, auth, policy, flavors,
servers, quotas (see conftest.py for what is real and what is fake)."""

from __future__ import annotations

import pytest

from tests import database
from tests.unit.api.conftest import NODES, RC

ADMIN = 'admin:admin'
IMAGE = 'http://images.example/demo.qcow2'
GOLD = {'resources:CUSTOM_GOLD': '1', 'resources:VCPU': '0', 'resources:MEMORY_MB': '0',
        'resources:DISK_GB': '0'}


def flavor(api, name='bm.gold', specs=GOLD, flavor_id=None):
    admin = api.as_(ADMIN)
    body = {'flavor': {'name': name, 'ram': 1024, 'vcpus': 2, 'disk': 10}}
    if flavor_id:
        body['flavor']['id'] = flavor_id
    made = admin('POST', '/v2.1/flavors', body)
    assert made.status_int == 200, made.text
    if specs:
        set_specs = admin('POST', f'/v2.1/flavors/{made.document["flavor"]["id"]}'
                                  '/os-extra_specs', {'extra_specs': specs})
        assert set_specs.status_int == 200, set_specs.text
    return made.document['flavor']['id']


def create(api, flavor_id, name='web', **extra):
    return api('POST', '/v2.1/servers', {'server': dict(
        {'name': name, 'flavorRef': flavor_id, 'imageRef': IMAGE, 'networks': 'none'},
        **extra)})


def error_of(response, status):
    assert response.status_int == status, response.text
    (kind, body), = response.document.items()
    assert body['code'] == status and body['message']
    return kind, body['message']


def test_version_documents_need_no_token(api):
    anonymous = api.as_(token='')
    root = anonymous('GET', '/')
    assert root.status_int == 200
    # Nova's listing: v2.0 first (Tempest's test_list_api_versions), then v2.1.
    legacy, version = root.document['versions']
    assert (version['id'], version['min_version'], version['version'], version['status']) \
        == ('v2.1', '2.1', '2.61', 'CURRENT')
    assert (legacy['id'], legacy['min_version'], legacy['version'], legacy['status']) \
        == ('v2.0', '', '', 'SUPPORTED')
    assert version['links'] == [{'rel': 'self', 'href': 'http://localhost/v2.1/'}]
    assert legacy['links'] == [{'rel': 'self', 'href': 'http://localhost/v2/'}]
    # Each listed self link is followable and shows the same self link (Tempest's
    # test_get_version_details).
    for listed in (legacy, version):
        href = listed['links'][0]['href'].removeprefix('http://localhost')
        shown = anonymous('GET', href)
        assert shown.status_int == 200, href
        assert shown.document['version']['id'] == listed['id']
        assert [link for link in shown.document['version']['links']
                if link['rel'] == 'self'] == listed['links']
        assert shown.document['version']['media-types']
    assert anonymous('GET', '/v2.1').document['version']['id'] == 'v2.1'
    assert anonymous('GET', '/v2').document['version']['id'] == 'v2.0'


def test_v2_0_is_the_api_at_microversion_2_1(api):
    flavor(api, flavor_id='gold')
    legacy = api.as_(version='2.61')('GET', '/v2/flavors/gold')
    assert legacy.status_int == 200, legacy.text
    # Microversion 2.1's document (no description, no extra specs), links under /v2.
    assert 'description' not in legacy.document['flavor']
    assert legacy.document['flavor']['links'][0]['href'] == 'http://localhost/v2/flavors/gold'
    assert 'OpenStack-API-Version' not in legacy.headers
    assert api('GET', '/v2/p1/flavors').status_int == 200
    assert error_of(api('GET', '/v2/nothing-here'), 404)


def test_unauthenticated_is_a_401_in_the_compute_format(api):
    assert error_of(api.as_(token='')('GET', '/v2.1/flavors'), 401)[0] == 'unauthorized'


def test_microversions(api):
    response = api.as_(version='2.53')('GET', '/v2.1/flavors')
    assert response.headers['OpenStack-API-Version'] == 'compute 2.53'
    assert response.headers['X-OpenStack-Nova-API-Version'] == '2.53'
    assert api('GET', '/v2.1/flavors').headers['OpenStack-API-Version'] == 'compute 2.1'
    legacy = api('GET', '/v2.1/flavors', headers={'X-OpenStack-Nova-API-Version': '2.20'})
    assert legacy.headers['OpenStack-API-Version'] == 'compute 2.20'
    latest = api.as_(version='latest')('GET', '/v2.1/flavors')
    assert latest.headers['OpenStack-API-Version'] == 'compute 2.61'
    assert error_of(api.as_(version='2.99')('GET', '/v2.1/flavors'), 406)[1] == \
        'Version 2.99 is not supported by the API. Minimum is 2.1 and maximum is 2.61.'
    assert error_of(api.as_(version='3.0')('GET', '/v2.1/flavors'), 406)
    assert error_of(api.as_(version='2.x')('GET', '/v2.1/flavors'), 400)


def test_unknown_paths_and_methods(api):
    assert error_of(api('GET', '/v2.1/p1/nothing-here'), 404)[0] == 'itemNotFound'
    assert error_of(api('GET', '/v2.1/os-fping'), 404)
    assert error_of(api('GET', '/v3'), 404)
    assert error_of(api('PUT', '/v2.1/flavors'), 405)
    # A trailing slash names nothing, as Nova's routes: Tempest reads a project's usage with
    # an empty project id as a 404.
    for path in ('/v2.1/flavors/', '/v2.1/os-simple-tenant-usage/', '/v2.1/p1/flavors/'):
        assert error_of(api.as_(ADMIN)('GET', path), 404)


def test_flavors_crud_and_policy(api):
    flavor(api, flavor_id='gold')
    assert error_of(api('POST', '/v2.1/flavors', {'flavor': {
        'name': 'x', 'ram': 1, 'vcpus': 1, 'disk': 1}}), 403)[0] == 'forbidden'
    assert error_of(api.as_(ADMIN)('POST', '/v2.1/flavors', {'flavor': {
        'name': 'bm.gold', 'ram': 1, 'vcpus': 1, 'disk': 1}}), 409)
    listed = api('GET', '/v2.1/flavors/detail').document['flavors']
    assert [f['id'] for f in listed] == ['gold'] and listed[0]['ram'] == 1024
    assert 'extra_specs' not in listed[0]
    shown = api.as_(version='2.61')('GET', '/v2.1/flavors/gold').document['flavor']
    assert shown['extra_specs'] == GOLD and shown['description'] is None
    assert api('GET', '/v2.1/flavors/gold/os-extra_specs').document['extra_specs'] == GOLD
    assert api('GET', '/v2.1/flavors/gold/os-extra_specs/resources:VCPU').document == \
        {'resources:VCPU': '0'}
    assert error_of(api('GET', '/v2.1/flavors/nope'), 404)
    assert error_of(api('DELETE', '/v2.1/flavors/gold'), 403)
    assert api.as_(ADMIN)('DELETE', '/v2.1/flavors/gold').status_int == 202
    assert error_of(api('GET', '/v2.1/flavors/gold'), 404)


@pytest.mark.parametrize('body', [
    {'flavor': {'name': 'x', 'ram': -1, 'vcpus': 1, 'disk': 1}},
    {'flavor': {'name': 'x', 'vcpus': 1, 'disk': 1}},
    {'flavor': {'name': '', 'ram': 1, 'vcpus': 1, 'disk': 1}},
    {'flavor': {'name': 'x', 'ram': 1, 'vcpus': 1, 'disk': 1, 'bogus': 1}},
    {'flavour': {}},
])
def test_malformed_flavor_bodies_are_400_and_change_nothing(api, body):
    error_of(api.as_(ADMIN)('POST', '/v2.1/flavors', body), 400)
    assert api('GET', '/v2.1/flavors').document['flavors'] == []


def test_a_body_that_is_not_json_is_400(api):
    kind, message = error_of(api.as_(ADMIN)('POST', '/v2.1/flavors', raw=b'{"flavor": '), 400)
    assert kind == 'badRequest' and 'Malformed request body' in message


def test_extra_specs_scheduling_cannot_honour_are_refused_when_set(api):
    flavor_id = flavor(api, specs=None)
    kind, message = error_of(api.as_(ADMIN)('POST', f'/v2.1/flavors/{flavor_id}/os-extra_specs',
                                            {'extra_specs': {'trait:CUSTOM_X': 'maybe'}}), 400)
    assert 'trait:CUSTOM_X=maybe' in message
    assert api('GET', f'/v2.1/flavors/{flavor_id}/os-extra_specs').document == \
        {'extra_specs': {}}


def test_server_lifecycle_and_views(api):
    flavor_id = flavor(api, specs=dict(GOLD, **{'capabilities:boot_mode': 'uefi'}))
    made = create(api.as_(version='2.61'), flavor_id, metadata={'role': 'web'})
    assert made.status_int == 202, made.text
    server_id = made.document['server']['id']
    assert made.headers['Location'] == f'http://localhost/v2.1/servers/{server_id}'
    assert api.casts.sent == [('build_instance', 'c1', server_id)]
    assert api.placement.projects[server_id] == 'p1'
    shown = api.as_(version='2.61')('GET', f'/v2.1/servers/{server_id}').document['server']
    assert (shown['status'], shown['name'], shown['tenant_id'], shown['user_id'],
            shown['metadata']) == ('BUILD', 'web', 'p1', 'alice', {'role': 'web'})
    assert shown['flavor']['original_name'] == 'bm.gold'
    assert 'OS-EXT-SRV-ATTR:host' not in shown
    old = api('GET', f'/v2.1/servers/{server_id}').document['server']
    assert old['flavor']['id'] == flavor_id
    as_admin = api.as_(ADMIN)('GET', f'/v2.1/servers/{server_id}').document['server']
    assert as_admin['OS-EXT-SRV-ATTR:host'] == 'c1'
    assert as_admin['OS-EXT-SRV-ATTR:hypervisor_hostname'] in NODES
    # Not ACTIVE yet: actions conflict, nothing cast.
    assert error_of(api('POST', f'/v2.1/servers/{server_id}/action', {'os-stop': None}),
                    409)[0] == 'conflict'
    assert len(api.casts.sent) == 1
    # Another project neither lists nor touches it, nor learns that it exists.
    other = api.as_('bob:p2')
    assert other('GET', '/v2.1/servers').document['servers'] == []
    assert error_of(other('GET', f'/v2.1/servers/{server_id}'), 404)
    assert error_of(other('DELETE', f'/v2.1/servers/{server_id}'), 404)
    assert error_of(other('GET', '/v2.1/servers?all_tenants=1'), 403)
    assert [s['id'] for s in api.as_(ADMIN)('GET', '/v2.1/servers?all_tenants=1')
            .document['servers']] == [server_id]
    assert api('DELETE', f'/v2.1/servers/{server_id}').status_int == 204
    assert api.casts.sent[-1] == ('delete_instance', 'c1', server_id)


def test_no_host_leaves_an_error_server_without_allocation(api):
    flavor_id = flavor(api, specs=dict(GOLD, **{'trait:CUSTOM_NOT_THERE': 'required'}))
    made = create(api, flavor_id)
    assert made.status_int == 202
    server_id = made.document['server']['id']
    shown = api('GET', f'/v2.1/servers/{server_id}').document['server']
    assert shown['status'] == 'ERROR'
    assert shown['fault']['message'].startswith('No valid host was found: ')
    assert api.placement.allocations == {} and api.casts.sent == []
    assert api('DELETE', f'/v2.1/servers/{server_id}').status_int == 204
    assert error_of(api('GET', f'/v2.1/servers/{server_id}'), 404)


@pytest.mark.parametrize('server, status', [
    ({'name': 'x', 'flavorRef': 'nope', 'imageRef': IMAGE, 'networks': 'none'}, 400),
    ({'name': 'x', 'flavorRef': 'gold', 'imageRef': 'not-an-url', 'networks': 'none'}, 400),
    ({'name': 'x', 'flavorRef': 'gold', 'imageRef': IMAGE, 'networks': 'bogus'}, 400),
    ({'flavorRef': 'gold', 'imageRef': IMAGE, 'networks': 'none'}, 400),
])
def test_bad_server_requests_change_nothing(api, server, status):
    flavor(api, flavor_id='gold')
    error_of(api('POST', '/v2.1/servers', {'server': server}), status)
    assert api('GET', '/v2.1/servers').document['servers'] == []
    assert api.placement.allocations == {} and api.casts.sent == []


def test_bad_uuid_and_unknown_action(api):
    assert error_of(api('GET', '/v2.1/servers/not-a-uuid'), 404)
    flavor_id = flavor(api)
    server_id = create(api, flavor_id).document['server']['id']
    assert error_of(api('POST', f'/v2.1/servers/{server_id}/action', {'os-explode': None}),
                    400)
    assert error_of(api('POST', f'/v2.1/servers/{server_id}/action',
                        {'reboot': {'type': 'GENTLE'}}), 400)


def test_quota_is_counted_and_over_quota_names_it(api):
    flavor_id = flavor(api)
    admin = api.as_(ADMIN)
    assert admin('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {'instances': 1}}) \
        .document['quota_set']['instances'] == 1
    assert api('GET', '/v2.1/os-quota-sets/p1').document['quota_set']['instances'] == 1
    assert error_of(api('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {'instances': 9}}), 403)
    assert error_of(admin('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {'bogus': 9}}), 400)
    assert create(api, flavor_id).status_int == 202
    kind, message = error_of(create(api, flavor_id), 403)
    assert message == 'Quota exceeded for instances: requested 1, but already used 1 of 1 ' \
                      'instances'
    assert len(api.placement.allocations) == 1
    limits = api('GET', '/v2.1/limits').document['limits']['absolute']
    assert (limits['maxTotalInstances'], limits['totalInstancesUsed']) == (1, 1)
    admin('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {'instances': 5, RC: 1}})
    kind, message = error_of(create(api, flavor_id), 403)
    assert message == f'Quota exceeded for {RC}: requested 1, but already used 1 of 1 {RC}'
    detail = api('GET', '/v2.1/os-quota-sets/p1/detail').document['quota_set']
    assert detail[RC] == {'limit': 1, 'in_use': 1, 'reserved': 0}


def test_a_build_admitted_elsewhere_counts_before_its_row_exists(api):
    """Another API process admitted a build of p1 (its reservation recorded) that has no row
    nor allocation yet: ours is refused rather than both staying over the limit; once that
    build's reservation is released without a row (it failed), ours fits."""
    from computed.db import quotas as db_quotas
    flavor_id = flavor(api)
    api.as_(ADMIN)('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {'instances': 1}})
    other = '99999999-9999-9999-9999-999999999999'
    db_quotas.reserve_quota(api.engine, 'p1', other, RC, lambda usage: None, ttl=600)
    kind, message = error_of(create(api, flavor_id), 403)
    assert message == 'Quota exceeded for instances: requested 1, but already used 1 of 1 ' \
                      'instances'
    assert api.placement.allocations == {} and api.casts.sent == []
    db_quotas.release_quota_reservation(api.engine, other)
    assert create(api, flavor_id).status_int == 202
    assert database.quota_reservations(api.engine, 'p1') == []


def test_a_stale_reservation_stops_counting(api):
    """The reservation of a process that died mid-build counts for RESERVATION_TTL only."""
    from computed.api import quotas
    from computed.db import quotas as db_quotas
    flavor_id = flavor(api)
    api.as_(ADMIN)('PUT', '/v2.1/os-quota-sets/p1', {'quota_set': {'instances': 1}})
    db_quotas.reserve_quota(api.engine, 'p1', '99999999-9999-9999-9999-999999999999', RC,
                            lambda usage: None, ttl=600)
    ttl, quotas.RESERVATION_TTL = quotas.RESERVATION_TTL, -1
    try:
        assert create(api, flavor_id).status_int == 202
    finally:
        quotas.RESERVATION_TTL = ttl


def test_project_in_the_url_must_be_the_callers(api):
    assert api('GET', '/v2.1/p1/flavors').status_int == 200
    assert error_of(api('GET', '/v2.1/p2/servers'), 403)
    assert api.as_(ADMIN)('GET', '/v2.1/p2/servers').status_int == 200
    # Limits of another project: admins only (compute:quotas:show on that project).
    assert error_of(api('GET', '/v2.1/limits?tenant_id=p2'), 403)
    assert api.as_(ADMIN)('GET', '/v2.1/limits?tenant_id=p2').status_int == 200


def test_healthcheck_and_metrics(api):
    assert api.as_(token='')('GET', '/healthcheck').status_int == 200
    metrics = api.as_(token='')('GET', '/metrics')
    assert metrics.status_int == 200 and b'computed_api_responses_total' in metrics.body


def test_keystone_mode_refuses_a_request_without_token_in_the_compute_format(engine, tmp_path):
    """auth_strategy = keystone puts keystonemiddleware's auth_token in front (decision
    delayed), so even its refusals have the Compute body; no Keystone is needed to refuse a
    request that has no token. Identity headers a client forges are not believed."""
    from oslo_config import cfg

    from computed import conf as computed_conf
    from computed.api import app, policy
    from computed.api.backends import Backends
    from tests.unit.api.conftest import Client
    path = tmp_path / 'computed.conf'
    path.write_text('[coordination]\nbackend_url = zookeeper://127.0.0.1:2181\n'
                    '[keystone_authtoken]\nwww_authenticate_uri = http://keystone.invalid/\n')
    conf = cfg.ConfigOpts()
    computed_conf.register_opts(conf)
    conf(['--config-file', str(path)])
    backends = Backends(conf=conf, engine=engine, placement=None, servers=None,
                        coordinator=None, zookeeper=None, enforcer=policy.enforcer(conf),
                        transport=None, builds=None)
    client = Client(app.build(conf, backends), token='')
    kind, _message = error_of(client('GET', '/v2.1/servers', headers={
        'X-Identity-Status': 'Confirmed', 'X-Project-Id': 'p1', 'X-Roles': 'admin'}), 401)
    assert kind == 'unauthorized'
    assert client('GET', '/v2.1').status_int == 200
