"""What services publish about themselves: daemons in their membership, reporters in a record."""

from __future__ import annotations

import json
import threading

from tooz import utils as tooz_utils

from computed.fleet import membership
from computed.fleet.membership import MemberInfo, member_from_znode
from computed.upgrade import levels, records
from computed.version import VERSION


def test_a_daemon_publishes_its_version_and_the_instance_api_it_serves():
    assert membership.capabilities("c1", 2) == {
        "host": "c1", "weight": 2, "version": VERSION,
        "rpc": {"instances": levels.newest("instances")}}
    data = tooz_utils.dumps(membership.capabilities("c1", 2))
    member = member_from_znode("c1", data, 1, 42, False)
    assert member.version == VERSION and member.serves("instances") == "1.2"


def test_a_daemon_of_release_0_1_0_publishes_nothing():
    member = member_from_znode("c1", tooz_utils.dumps({"host": "c1", "weight": 1}), 1, 42,
                               False)
    assert member == MemberInfo("c1", 1, False, 42)
    assert member.version is None and member.serves("instances") is None


def test_unreadable_versions_are_kept_as_unknown_not_a_reason_to_ignore_the_member():
    data = tooz_utils.dumps({"host": "c1", "weight": 1, "version": 7, "rpc": ["x"]})
    member = member_from_znode("c1", data, 1, 42, False)
    assert isinstance(member, MemberInfo)
    assert member.version is None and member.serves("instances") is None


def test_a_reporter_record_round_trips():
    data = records.reporter_record("r1")
    assert json.loads(data) == {"binary": "computed-reporter", "host": "r1",
                                "version": VERSION, "rpc": {"reports": "1.1"}}
    record = records.parse_record("r1-0000000003", data)
    assert record == records.ServiceRecord("computed-reporter", "r1", VERSION,
                                           (("reports", "1.1"),))
    assert record.serves("reports") == "1.1"
    for junk in (b"", b"\xff", b"[1]", b'{"host": 3}'):
        assert records.parse_record("x", junk) == records.ServiceRecord(
            "computed-reporter", "x", None, ())


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_levels_look_at_the_peers_again_after_the_ttl_and_keep_the_last_on_a_failure():
    served = [["1.0"]]
    calls = []

    def peers():
        calls.append(1)
        if served[0] is None:
            raise OSError("ZooKeeper away")
        return served[0]

    clock = Clock()
    pinned = records.Levels("instances", "auto", peers, ttl=30.0, clock=clock)
    assert pinned() == "1.0"
    served[0] = ["1.1"]
    assert pinned() == "1.0" and len(calls) == 1  # cached
    clock.now = 31
    assert pinned() == "1.1"
    served[0] = None
    clock.now = 62
    assert pinned() == "1.1"  # the last known, not an error


def test_levels_with_no_answer_ever_send_the_oldest():
    def peers():
        raise OSError("ZooKeeper away")

    assert records.Levels("reports", "auto", peers)() == "1.0"


def test_a_number_never_asks_the_peers():
    def peers():
        raise AssertionError("not asked")

    assert records.Levels("reports", "1.0", peers)() == "1.0"


def test_levels_are_safe_to_share_between_threads():
    pinned = records.Levels("reports", "auto", lambda: ["1.1"], ttl=0.0)
    results = []
    threads = [threading.Thread(target=lambda: results.append(pinned())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["1.1"] * 8
