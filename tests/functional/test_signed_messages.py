"""Signed messages over the real RabbitMQ (issue 23, "Signed messages", item 7): with
``[messaging] signing_keys`` set, daemons and reporters sign and verify every report; a forged
report that carries the real host and the claim epoch read from ZooKeeper (no ACLs) is refused
and counted, and changes nothing."""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient
from oslo_config import cfg

from computed.fleet.claims import claim_holders
from computed.fleet.membership import fleet_root
from computed.runtime import rpc
from tests.functional.daemons import make_available, seen, wait_for

WORLD_NODES = 4
KEY = "k" * 64
OTHER_KEY = "o" * 64
SIGNED = f"[messaging]\nsigning_keys = {KEY}\n"


def client_with(stack, world, keys, host):
    conf = cfg.ConfigOpts()
    conf.register_opts([cfg.StrOpt("host", default=host)])
    conf([])
    rpc.register_opts(conf)
    conf.set_override("signing_keys", keys, group="messaging")
    transport = rpc.get_transport(conf, url=stack["rabbitmq"].url)
    return transport, rpc.get_client(transport, f"reporter-{world.group}", timeout=20)


def test_signed_reports_apply_and_a_forged_one_with_the_real_claim_is_refused(
        stack, world, placement):
    make_available(stack, world.nodes)
    reporter = world.reporter("r1", extra=SIGNED)
    world.daemon("c1", extra=SIGNED)
    wait_for(lambda: all(seen(placement, n) for n in world.nodes), 90,
             "every node reported through signed calls", world.processes)
    node = world.nodes[0]
    assert seen(placement, node).reserved == 0
    # What anyone can read from a ZooKeeper without ACLs: the claim's host and epoch.
    zk = KazooClient(hosts=stack["zookeeper"].hosts)
    zk.start(timeout=15)
    try:
        epoch, host = claim_holders(zk, fleet_root(world.group), [node])[node]
    finally:
        zk.stop()
        zk.close()
    assert host == "c1"
    forged = [{"uuid": node, "claim_epoch": epoch, "seq": int(time.time() * 1000) + 10**6,
               "host": host, "state": {"uuid": node, "name": node, "resource_class": world.rc,
                                       "reserved": 1, "traits": []}}]
    for keys, reason in (([], "not sign"), ([OTHER_KEY], "matches none")):
        transport, client = client_with(stack, world, keys, host="c1")
        try:
            with pytest.raises(Exception, match=reason):
                client.call({}, "apply_reports", reports=forged)
        finally:
            transport.cleanup()
    time.sleep(1)
    assert seen(placement, node).reserved == 0  # nothing applied
    log = reporter.log.read_text(errors="replace")
    refusals = [line for line in log.splitlines() if "refusing RPC message" in line]
    assert len(refusals) == 2, refusals
    assert "not sign" in refusals[0] and "matches none" in refusals[1]
    assert KEY not in log and OTHER_KEY not in log and "Traceback" not in log
    # A holder of the key is trusted: the same report, signed, applies (the claim is c1's).
    transport, client = client_with(stack, world, [KEY], host="c1")
    try:
        assert client.call({}, "apply_reports", reports=forged) == [
            [node, forged[0]["seq"], "applied"]]
    finally:
        transport.cleanup()
    assert seen(placement, node).reserved == 1
