"""The report wire format: validation names the field, API 1.0 reports still read, upgrades safe."""

import oslo_messaging
import pytest
from oslo_config import cfg

from computed.providers.outbox import RpcSender
from computed.providers.report import (
    API_VERSION,
    MAX_SEQ_AHEAD_MS,
    MalformedReport,
    Outcome,
    Report,
)
from computed.runtime import rpc
from tests.unit.report.fakes import U1, U2, state

STATE = state().to_dict()


@pytest.mark.parametrize("bad, field", [
    ("nope", "expected an object"),
    ({"uuid": "x", "epoch": 1, "seq": 1, "host": "h", "state": None}, "'uuid'"),
    ({"uuid": U1, "epoch": -1, "seq": 1, "host": "h", "state": None}, "'epoch'"),
    ({"uuid": U1, "claim_epoch": -1, "seq": 1, "host": "h", "state": None}, "'claim_epoch'"),
    ({"uuid": U1, "seq": 1, "host": "h", "state": None}, "'epoch'"),
    ({"uuid": U1, "claim_epoch": 2, "epoch": 1, "seq": 1, "host": "h", "state": None},
     "'claim_epoch' and 'epoch' disagree"),
    ({"uuid": U1, "epoch": 1, "seq": True, "host": "h", "state": None}, "'seq'"),
    ({"uuid": U1, "epoch": 1, "seq": 1, "host": "", "state": None}, "'host'"),
    ({"uuid": U1, "epoch": 1, "seq": 1, "host": "h", "state": []}, "'state'"),
    ({"uuid": U1, "epoch": 1, "seq": 1, "host": "h", "state": state(U2).to_dict()},
     "describes"),
])
def test_malformed_reports_name_the_field(bad, field):
    with pytest.raises(MalformedReport, match=field):
        Report.from_dict(bad)


NOW = 1_700_000_000.0  # a reporter's wall clock, in seconds
NOW_MS = int(NOW * 1000)


def test_a_seq_too_far_ahead_of_the_clock_is_refused_naming_the_field_and_uuid():
    forged = {"uuid": U1, "claim_epoch": 7, "seq": 2**62, "host": "c1", "state": None}
    with pytest.raises(MalformedReport, match=rf"report {U1}: field 'seq'") as err:
        Report.from_dict(forged, clock=lambda: NOW)
    assert "\n" not in str(err.value)
    limit = NOW_MS + MAX_SEQ_AHEAD_MS
    with pytest.raises(MalformedReport, match="'seq'"):
        Report.from_dict(dict(forged, seq=limit + 1), clock=lambda: NOW)
    assert Report.from_dict(dict(forged, seq=limit), clock=lambda: NOW).seq == limit


def test_the_seq_bound_leaves_room_for_clock_skew_and_a_cold_start():
    # A sender starts its seq at its own time.time()*1000 and adds one per report: one whose
    # clock is a minute ahead and that offered 50,000 reports at once is still accepted.
    seq = NOW_MS + 60_000 + 50_000
    wire = {"uuid": U1, "claim_epoch": 7, "seq": seq, "host": "c1", "state": None}
    assert Report.from_dict(wire, clock=lambda: NOW).seq == seq
    assert MAX_SEQ_AHEAD_MS >= 3_600_000


def test_report_round_trip():
    report = Report(U1, 7, 3, "c1", STATE)
    assert Report.from_dict(report.to_dict()) == report


def test_the_claim_epoch_travels_as_claim_epoch():
    wire = Report(U1, 7, 3, "c1", None).to_dict()
    assert wire == {"uuid": U1, "claim_epoch": 7, "seq": 3, "host": "c1", "state": None}


def test_a_report_from_a_daemon_before_api_1_1_still_reads():
    old = {"uuid": U1, "epoch": 7, "seq": 3, "host": "c1", "state": STATE}
    assert Report.from_dict(old) == Report(U1, 7, 3, "c1", STATE)
    both = dict(old, claim_epoch=7)  # the same epoch under both keys is not ambiguous
    assert Report.from_dict(both).claim_epoch == 7


class Endpoint:
    """A reporter's endpoint at ``version`` that applies every report."""

    def __init__(self, version):
        self.target = oslo_messaging.Target(version=version)

    def apply_reports(self, ctxt, reports=None):
        return [[Report.from_dict(r).uuid, r["seq"], Outcome.APPLIED.value] for r in reports]


@pytest.fixture
def bus():
    """An in-process oslo.messaging bus (the fake driver) and a way to serve one endpoint on it."""
    transport = rpc.get_transport(cfg.ConfigOpts(), "test", url="fake:/")
    servers = []

    def serve(endpoint, topic):
        server = rpc.get_server(transport, topic, "reporter", [endpoint])
        server.start()
        servers.append(server)

    yield transport, serve
    for server in servers:
        server.stop()
        server.wait()
    transport.cleanup()


def test_rolling_upgrade_reporters_first_is_safe(bus):
    # A 1.1 reporter serves daemons of both versions; a 1.1 daemon's call to a 1.0 reporter
    # fails (the outbox keeps and resends it) instead of being answered "invalid" and dropped.
    transport, serve = bus
    report = Report(U1, 7, 3, "c1", STATE)
    serve(Endpoint(API_VERSION), "new")
    serve(Endpoint("1.0"), "old")

    old_daemon = rpc.get_client(transport, "new", timeout=10)  # asks for 1.0, sends "epoch"
    old_wire = {"uuid": U1, "epoch": 7, "seq": 3, "host": "c1", "state": STATE}
    assert old_daemon.call({}, "apply_reports", reports=[old_wire]) == [[U1, 3, "applied"]]

    new_daemon = RpcSender(rpc.get_client(transport, "new", timeout=10))
    assert new_daemon.send([report]) == {(U1, 3): Outcome.APPLIED}

    too_early = RpcSender(rpc.get_client(transport, "old", timeout=10))
    with pytest.raises(oslo_messaging.UnsupportedVersion):
        too_early.send([report])
