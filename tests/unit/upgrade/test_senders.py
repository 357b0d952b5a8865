"""Senders pinned by [upgrade_levels] talk to peers of the previous API version, which refuse
nothing they send (oslo.messaging's fake driver, computed's signed clients and servers)."""

from __future__ import annotations

import threading

import oslo_messaging
import pytest
from oslo_config import cfg

from computed.instances.rpcapi import ComputeAPI
from computed.providers.outbox import RpcSender
from computed.providers.report import Outcome, Report
from computed.runtime import rpc
from tests.unit.report.fakes import U1, state

STATE = state().to_dict()


class OldReporter:
    """A reporter of API 1.0: it knows the claim epoch as "epoch" only, and refuses the rest."""

    target = oslo_messaging.Target(version='1.0')

    def __init__(self):
        self.seen = []

    def apply_reports(self, ctxt, reports=None):
        self.seen.extend(reports)
        for wire in reports:
            assert set(wire) == {'uuid', 'epoch', 'seq', 'host', 'state'}, wire
        return [[wire['uuid'], wire['seq'], Outcome.APPLIED.value] for wire in reports]


class OldDaemon:
    """A daemon's instance endpoint of API 1.0: casts carry the instance only."""

    target = oslo_messaging.Target(version='1.0')

    def __init__(self):
        self.seen = []
        self.done = threading.Event()

    def build_instance(self, ctxt, instance_uuid):
        self.seen.append(instance_uuid)
        self.done.set()


@pytest.fixture
def bus():
    transport = rpc.get_transport(cfg.ConfigOpts(), "test", url='fake:/')
    servers = []

    def serve(endpoint, topic, server):
        running = rpc.get_server(transport, topic, server, [endpoint])
        running.start()
        servers.append(running)

    yield transport, serve
    for running in servers:
        running.stop()
        running.wait()
    transport.cleanup()


def test_reports_pinned_at_1_0_reach_a_1_0_reporter_as_it_reads_them(bus):
    transport, serve = bus
    reporter = OldReporter()
    serve(reporter, 'reports', 'r1')
    report = Report(U1, 7, 3, 'c1', STATE)
    sender = RpcSender(rpc.get_client(transport, 'reports', timeout=10), version=lambda: '1.0')
    assert sender.send([report]) == {(U1, 3): Outcome.APPLIED}
    assert reporter.seen[0]['epoch'] == 7


def test_reports_unpinned_still_ask_for_the_newest(bus):
    transport, serve = bus
    serve(OldReporter(), 'reports', 'r1')
    sender = RpcSender(rpc.get_client(transport, 'reports', timeout=10))
    with pytest.raises(oslo_messaging.UnsupportedVersion):
        sender.send([Report(U1, 7, 3, 'c1', STATE)])


def test_a_cast_pinned_at_1_0_reaches_a_1_0_daemon_without_the_member_epoch(bus):
    transport, serve = bus
    daemon = OldDaemon()
    serve(daemon, 'computed', 'c1')
    ComputeAPI(transport, version=lambda: '1.0').build_instance('c1', U1, member_epoch=42)
    assert daemon.done.wait(10)
    assert daemon.seen == [U1]


def test_the_cap_is_oslo_messagings_version_cap_too(bus):
    transport, _serve = bus
    client = rpc.get_client(transport, 'computed', server='c1').prepare(version='1.1',
                                                                       version_cap='1.0')
    with pytest.raises(oslo_messaging.RPCVersionCapError):
        client.cast({}, 'build_instance', instance_uuid=U1)
