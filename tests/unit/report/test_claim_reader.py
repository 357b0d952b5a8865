"""The reporter's view of the claims: epoch and host of each live claim, one pipelined round."""

import json

import pytest
from kazoo import exceptions as zk_exc

from computed.fleet.claims import claim_holders
from computed.reporter.applier import ClaimReader
from tests.unit.report.fakes import U1, U2

U3 = "33333333-3333-3333-3333-333333333333"
ROOT = "/computed/g"


class Stat:
    def __init__(self, czxid):
        self.czxid = czxid


class Async:
    def __init__(self, client, value):
        self._client, self._value = client, value

    def get(self, timeout=None):
        self._client.log.append("get")
        if isinstance(self._value, Exception):
            raise self._value
        return self._value


class FakeKazoo:
    """Answers ``get_async`` from ``znodes`` ({path: (data, czxid)}), logging each call."""

    def __init__(self, znodes):
        self.znodes = znodes
        self.log = []

    def get_async(self, path):
        self.log.append("get_async")
        if path not in self.znodes:
            return Async(self, zk_exc.NoNodeError())
        data, czxid = self.znodes[path]
        return Async(self, (data, Stat(czxid)))


def claim(host, member_epoch=1):
    return json.dumps({"host": host, "member_epoch": member_epoch}).encode()


def test_holders_are_read_with_one_pipelined_round():
    client = FakeKazoo({f"{ROOT}/claims/{U1}": (claim("c1"), 7),
                        f"{ROOT}/claims/{U2}": (claim("c2"), 9)})
    holders = ClaimReader(client, ROOT).claim_holders([U1, U2, U3, U1])
    assert holders == {U1: (7, "c1"), U2: (9, "c2")}  # U3 unclaimed: left out
    # Every request is sent before the first answer is waited for.
    assert client.log == ["get_async"] * 3 + ["get"] * 3


@pytest.mark.parametrize("data", [b"", b"not json", b"[]", json.dumps({"member_epoch": 1}).encode(),
                                  json.dumps({"host": 3, "member_epoch": 1}).encode(),
                                  json.dumps({"host": "", "member_epoch": 1}).encode()])
def test_a_claim_whose_data_cannot_be_parsed_has_no_host(data):
    client = FakeKazoo({f"{ROOT}/claims/{U1}": (data, 7)})
    assert claim_holders(client, ROOT, [U1]) == {U1: (7, None)}


def test_zookeeper_errors_are_raised():
    class Down(FakeKazoo):
        def get_async(self, path):
            return Async(self, zk_exc.ConnectionLoss())

    with pytest.raises(zk_exc.ConnectionLoss):
        claim_holders(Down({}), ROOT, [U1])
