"""IronicDriver against a fake keystoneauth adapter: paging, filters, retries, bad records."""

from __future__ import annotations

import gc
import logging

import pytest
from keystoneauth1 import exceptions as ks_exc

from computed.baremetal.driver import DriverError, DriverUnavailable, Node
from computed_ironic import API_VERSION, IronicDriver
from computed_ironic.convert import LIST_FIELDS
from computed_ironic.retry import RetryPolicy
from tests.unit.ironic.fakes import FakeConnection, record


def make(records, **kwargs):
    conn = FakeConnection(records)
    slept = []
    kwargs.setdefault('retry_policy', RetryPolicy(max_retries=3, interval=1))
    driver = IronicDriver(conn.baremetal, sleep=slept.append, rand=lambda: 0.0, **kwargs)
    return driver, conn.baremetal, slept


def test_lists_every_node_once_over_pages_with_only_needed_fields():
    records = [record() for _ in range(23)]
    driver, api, _ = make(records, page_size=5)
    nodes = driver.list_nodes()
    assert sorted(n.uuid for n in nodes) == sorted(r['uuid'] for r in records)
    assert len(api.requests) == 5
    for path, params in api.requests:
        assert path == '/nodes'
        assert params['fields'].split(',') == list(LIST_FIELDS)
        assert params['limit'] == '5' and params['microversion'] == API_VERSION


def test_a_listing_reusing_known_nodes_drops_each_unchanged_copy_as_it_parses_it():
    records = [record() for _ in range(15)]
    driver, api, _ = make(records, page_size=5)
    known = {n.uuid: n for n in driver.list_nodes()}
    changed = sorted(records, key=lambda r: r['uuid'])[7]
    changed['maintenance'] = True
    alive = []  # the listing's own copies of nodes, alive when each page is asked for
    get = api.get

    def counting_get(path, *args, **kwargs):
        known_ids = {id(n) for n in known.values()}
        alive.append(sum(1 for o in gc.get_objects()
                         if isinstance(o, Node) and id(o) not in known_ids))
        return get(path, *args, **kwargs)
    api.get = counting_get
    gc.collect()
    listed = driver.list_nodes_reusing(known)
    by_uuid = {n.uuid: n for n in listed}
    assert len(listed) == 15 and by_uuid[changed['uuid']].maintenance
    assert all(by_uuid[u] is n for u, n in known.items() if u != changed['uuid'])
    # Only the changed node's copy outlives its page: never a page's worth of copies.
    assert alive == [0, 0, 1, 1]


def test_full_last_page_costs_one_empty_request():
    driver, api, _ = make([record() for _ in range(10)], page_size=5)
    assert len(driver.list_nodes()) == 10
    assert len(api.requests) == 3


def test_filters_are_sent_to_the_server():
    records = [record(conductor_group='cg1', shard='s1'), record(conductor_group='cg1'),
               record(shard='s1'), record()]
    driver, api, _ = make(records, conductor_group='cg1', shard='s1')
    assert [n.uuid for n in driver.list_nodes()] == [records[0]['uuid']]
    assert api.requests[0][1]['conductor_group'] == 'cg1'
    assert api.requests[0][1]['shard'] == 's1'


def test_empty_conductor_group_filters_on_the_default_group():
    driver, api, _ = make([record(conductor_group='cg1'), record()], conductor_group='')
    assert len(driver.list_nodes()) == 1
    assert api.requests[0][1]['conductor_group'] == ''


def test_unset_filters_are_not_sent():
    driver, api, _ = make([record()])
    driver.list_nodes()
    assert 'conductor_group' not in api.requests[0][1] and 'shard' not in api.requests[0][1]


def test_failed_page_is_retried_from_the_marker_not_from_the_start():
    records = [record() for _ in range(12)]
    driver, api, slept = make(records, page_size=5)
    api.get_real = api.get
    calls = {'n': 0}

    def flaky_get(path, params=None, **kwargs):
        calls['n'] += 1
        if calls['n'] == 2:  # the second page fails twice
            api.failures[:] = [503]
        return api.get_real(path, params, **kwargs)

    api.get = flaky_get
    nodes = driver.list_nodes()
    assert len(nodes) == 12 and len({n.uuid for n in nodes}) == 12
    markers = [p.get('marker') for _, p in api.requests]
    assert markers[0] is None and markers[1] == markers[2] is not None
    assert slept == [0.5]


@pytest.mark.parametrize('failure', [ks_exc.ConnectFailure('refused'),
                                     ks_exc.ConnectTimeout('slow'), 500, 503, 504])
def test_transient_failures_are_retried(failure):
    driver, api, slept = make([record()])
    api.failures = [failure, failure]
    assert len(driver.list_nodes()) == 1
    assert slept == [0.5, 1.0]


def test_outage_raises_driver_unavailable_after_the_retries():
    driver, api, slept = make([record()])
    api.failures = [ks_exc.ConnectFailure('refused')] * 10
    with pytest.raises(DriverUnavailable) as info:
        driver.list_nodes()
    assert info.value.attempts == 4 and len(api.requests) == 4
    assert info.value.what == 'list nodes'
    assert isinstance(info.value.cause, ks_exc.ConnectFailure)
    assert slept == [0.5, 1.0, 2.0]


@pytest.mark.parametrize('status, hint', [(400, 'HTTP 400'), (406, API_VERSION), (403, 'HTTP 403')])
def test_client_errors_are_not_retried(status, hint):
    driver, api, slept = make([record()])
    api.failures = [status]
    with pytest.raises(DriverError) as info:
        driver.list_nodes()
    assert not isinstance(info.value, DriverUnavailable)
    assert hint in str(info.value) and slept == []


def test_malformed_nodes_are_skipped_and_logged_with_their_uuid(caplog):
    good = [record() for _ in range(6)]
    bad = record(maintenance='yes')
    nameless = record(uuid=None)
    driver, _, _ = make(good + [bad, nameless], page_size=3)
    with caplog.at_level(logging.WARNING):
        nodes = driver.list_nodes()
    assert sorted(n.uuid for n in nodes) == sorted(r['uuid'] for r in good)
    assert bad['uuid'] in caplog.text and 'maintenance' in caplog.text


def test_marker_deleted_between_attempts_restarts_the_listing():
    records = [record() for _ in range(8)]
    driver, api, slept = make(records, page_size=3)
    real_get = api.get
    state = {'n': 0}

    def get(path, params=None, **kwargs):
        state['n'] += 1
        if state['n'] == 2:
            # The node the next page starts after disappears, and this
            # attempt fails: the retry must not resume from it.
            api.records = [r for r in api.records if r['uuid'] != params['marker']]
            api.failures[:] = [502]
        return real_get(path, params, **kwargs)

    api.get = get
    nodes = driver.list_nodes()
    assert sorted(n.uuid for n in nodes) == sorted(r['uuid'] for r in api.records)
    assert len(nodes) == 7


def test_get_node_returns_the_node_or_none():
    records = [record(name='a')]
    driver, api, _ = make(records)
    assert driver.get_node(records[0]['uuid']).name == 'a'
    assert driver.get_node('00000000-0000-0000-0000-000000000000') is None
    assert api.requests[0][0] == f"/nodes/{records[0]['uuid']}"


def test_get_node_retries_then_gives_up():
    driver, api, _ = make([record()])
    api.failures = [500] * 4
    with pytest.raises(DriverUnavailable) as info:
        driver.get_node('00000000-0000-0000-0000-000000000000')
    assert '00000000-0000-0000-0000-000000000000' in info.value.what


def test_detail_mode_lists_the_detail_endpoint_without_fields():
    driver, api, _ = make([record()], detail=True)
    driver.list_nodes()
    path, params = api.requests[0]
    assert path == '/nodes/detail' and 'fields' not in params


def test_close_closes_the_session():
    conn = FakeConnection([])
    with IronicDriver(conn.baremetal):
        pass
    assert conn.baremetal.session.closed


def test_version_discovery_failure_counts_as_ironic_being_down():
    # The first request of a connection discovers the API version; with
    # Ironic down that fails with DiscoveryFailure, not ConnectFailure.
    driver, api, _ = make([record()])
    api.failures = [ks_exc.DiscoveryFailure('unable to find a version discovery document')] * 4
    with pytest.raises(DriverUnavailable):
        driver.list_nodes()


def test_other_keystoneauth_errors_are_configuration_errors():
    driver, api, slept = make([record()])
    api.failures = [ks_exc.EndpointNotFound('no baremetal endpoint in the catalog')]
    with pytest.raises(DriverError) as info:
        driver.list_nodes()
    assert not isinstance(info.value, DriverUnavailable) and slept == []
    assert 'EndpointNotFound' in str(info.value)


# -- the caller's write guard: checked before every write, each retry included ---------------

I1, I2 = '11111111-2222-3333-4444-000000000001', '11111111-2222-3333-4444-000000000002'


class Revoked(Exception):
    pass


class Guard:
    """Allows the first ``allowed`` checks, then raises (the caller lost the node)."""

    def __init__(self, allowed):
        self.allowed = allowed
        self.checks = 0

    def check(self):
        self.checks += 1
        if self.checks > self.allowed:
            raise Revoked(f'check {self.checks}')


def test_a_retried_write_is_not_sent_once_the_guard_refuses():
    node = record(power_state='power on')
    driver, baremetal, slept = make([node])
    baremetal.write_failures = [503, 503]
    with pytest.raises(Revoked):
        driver.set_power(node['uuid'], 'power off', timeout=10, guard=Guard(allowed=1))
    assert [w[0] for w in baremetal.writes] == ['PUT']  # the retry was never sent
    assert len(slept) == 1


@pytest.mark.parametrize('operation', ['undeploy', 'clear_instance', 'deploy', 'set_power'])
def test_nothing_is_written_when_the_guard_refuses_from_the_start(operation):
    node = record(provision_state='active', instance_uuid=I1,
                  uuid='7f6ad5a2-6b52-4f47-9d61-0d6f1b1f2a01')
    driver, baremetal, _ = make([node])
    call = {'undeploy': lambda g: driver.undeploy(node['uuid'], timeout=10, guard=g),
            'clear_instance': lambda g: driver.clear_instance(node['uuid'], I1, timeout=10,
                                                              guard=g),
            'deploy': lambda g: driver.deploy(node['uuid'], I2, None, timeout=10, guard=g),
            'set_power': lambda g: driver.set_power(node['uuid'], 'power off', timeout=10,
                                                    guard=g)}[operation]
    if operation == 'deploy':
        node.update(instance_uuid=None, provision_state='available')
    with pytest.raises(Revoked):
        call(Guard(allowed=0))
    assert baremetal.writes == []


def test_a_wait_stops_once_the_guard_refuses():
    node = record(provision_state='deploying', instance_uuid=I1)
    driver, baremetal, slept = make([node])
    guard = Guard(allowed=3)
    with pytest.raises(Revoked):
        driver.deploy(node['uuid'], I1, None, timeout=3600, guard=guard)
    assert baremetal.writes == [] and len(slept) < 5


# -- a locked node is waited out until the operation's timeout -------------------------------

LOCKED = (409, 'Node 7f6ad5a2 is locked by host ironic-harness, please retry after the '
               'current operation is completed.')


class Clock:
    """The driver's clock, moved on by its sleeps."""

    def __init__(self):
        self.now = 0.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def locked_driver(node, answers):
    clock = Clock()
    conn = FakeConnection([node])
    conn.baremetal.write_failures = list(answers)
    driver = IronicDriver(conn.baremetal, sleep=clock.sleep, clock=clock, rand=lambda: 0.0,
                          retry_policy=RetryPolicy(max_retries=2, interval=2))
    return driver, conn.baremetal, clock


def test_a_node_locked_longer_than_the_retry_count_allows_is_waited_out():
    # Ironic holds a node's lock while it works on it (a deploy from a Glance image looks the
    # image up in Glance, through Keystone, holding it): 10 answers "locked" in a row are
    # more than max_retries=2, and not a failure while the operation has time left.
    node = record(provision_state='active', instance_uuid=I1)
    driver, baremetal, clock = locked_driver(node, [LOCKED] * 10)
    done = driver.rebuild(node['uuid'], I1, 'http://images.example/new.qcow2', timeout=60)
    assert done.provision_state == 'active'
    assert [w[0] for w in baremetal.writes] == ['PATCH'] * 11 + ['PUT']
    assert clock.slept == [2] * 10  # every api_retry_interval, as Nova's driver


def test_a_node_still_locked_at_the_operations_timeout_is_unavailable():
    node = record(provision_state='active', instance_uuid=I1)
    driver, baremetal, clock = locked_driver(node, [LOCKED] * 100)
    with pytest.raises(DriverUnavailable, match="still locked at the operation's timeout"):
        driver.rebuild(node['uuid'], I1, 'http://images.example/new.qcow2', timeout=9)
    assert clock.now <= 9
    assert [w[0] for w in baremetal.writes] == ['PATCH'] * 5  # at 0, 2, 4, 6, 8 s


def test_server_errors_between_locked_answers_keep_their_own_count():
    node = record(provision_state='active', instance_uuid=I1)
    driver, baremetal, clock = locked_driver(node, [LOCKED, 503, 503, 503])
    with pytest.raises(DriverUnavailable, match='Ironic unreachable'):
        driver.rebuild(node['uuid'], I1, 'http://images.example/new.qcow2', timeout=600)
    assert len(baremetal.writes) == 4  # 1 locked, then 3 tries of the policy's (2 retries)
