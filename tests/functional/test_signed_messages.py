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
from tests.functional.daemons import bus_conf, ironic, make_available, seen, wait_for

WORLD_NODES = 4
KEY = "k" * 64
OTHER_KEY = "o" * 64
SIGNED = f"[messaging]\nsigning_keys = {KEY}\n"


def client_with(stack, world, keys, host):
    conf = bus_conf(stack)
    conf.register_opts([cfg.StrOpt("host", default=host)])
    conf.set_override("signing_keys", keys, group="messaging")
    transport = rpc.get_transport(conf, "test", url=stack["rabbitmq"].url)
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


ROLLOUT = f"[messaging]\nsigning_keys = {KEY}\naccept_unsigned = true\n"


def test_signing_is_turned_on_across_a_running_fleet_without_a_refusal(stack, world, placement):
    """docs/operations.md, "Turning signing on": the key with accept_unsigned, each process
    restarted in turn, then accept_unsigned removed, each restarted again. At every step a
    change of a node reaches Placement and no message is refused: a reporter given the key
    first still applies the reports of a daemon not yet given it."""
    make_available(stack, world.nodes)
    node = world.nodes[0]
    reporters = [world.reporter("r1")]
    daemons = [world.daemon("c1")]
    wait_for(lambda: all(seen(placement, n) for n in world.nodes), 90,
             "every node reported, unsigned", world.processes)
    toggle = Toggler(stack, world, placement, node)
    restart(reporters, world.reporter, "r1", ROLLOUT)
    toggle("reporter with the key, daemon without")
    restart(daemons, world.daemon, "c1", ROLLOUT)
    toggle("both with the key, accepting unsigned")
    restart(reporters, world.reporter, "r1", SIGNED)
    toggle("reporter requiring signatures, daemon accepting unsigned")
    restart(daemons, world.daemon, "c1", SIGNED)
    toggle("both requiring signatures")
    log = reporters[0].log.read_text(errors="replace")  # one file for every r1 (appended)
    assert "refusing RPC message" not in log and "Traceback" not in log
    assert log.count("accepts unsigned RPC messages") == 1  # the first keyed reporter
    assert KEY not in log
    # Once it is done, an unsigned sender is refused.
    transport, client = client_with(stack, world, [], host="c1")
    try:
        with pytest.raises(Exception, match="not sign"):
            client.call({}, "apply_reports", reports=[])
    finally:
        transport.cleanup()


class Toggler:
    """Turns maintenance of ``node`` on and off in Ironic, and waits for Placement to show it
    (a report from the node's daemon applied by the reporter)."""

    def __init__(self, stack, world, placement, node):
        self.stack, self.world, self.placement, self.node = stack, world, placement, node
        self.on = False

    def __call__(self, step):
        self.on = not self.on
        if self.on:
            ironic(self.stack, "PUT", f"/nodes/{self.node}/maintenance", {"reason": "test"})
        else:
            ironic(self.stack, "DELETE", f"/nodes/{self.node}/maintenance")
        wait_for(lambda: (seen(self.placement, self.node) is not None
                          and seen(self.placement, self.node).reserved == int(self.on)), 90,
                 f"{step}: maintenance {self.on} in Placement", self.world.processes)


def restart(processes, start, host, extra):
    """Stop the last of ``processes`` (SIGTERM: a daemon drains) and start it again with
    ``extra`` configuration."""
    processes[-1].stop(90)
    processes.append(start(host, extra=extra))


def test_a_key_is_rotated_across_a_running_fleet_without_a_refusal(stack, world, placement):
    """docs/operations.md, "Rotating a key": OLD,NEW everywhere; NEW,OLD everywhere; NEW. Each
    process restarted in turn at each step; a change of a node reaches Placement after every
    restart and no message is refused; afterwards OLD is refused."""
    make_available(stack, world.nodes)
    node = world.nodes[0]
    reporters = [world.reporter("r1", extra=SIGNED)]
    daemons = [world.daemon("c1", extra=SIGNED)]
    wait_for(lambda: all(seen(placement, n) for n in world.nodes), 90,
             "every node reported, signed with the old key", world.processes)
    toggle = Toggler(stack, world, placement, node)
    for keys in (f"{KEY},{OTHER_KEY}", f"{OTHER_KEY},{KEY}", OTHER_KEY):
        extra = f"[messaging]\nsigning_keys = {keys}\n"
        restart(reporters, world.reporter, "r1", extra)
        toggle(f"reporter on {keys[:4]}..., daemon not yet")
        restart(daemons, world.daemon, "c1", extra)
        toggle(f"both on {keys[:4]}...")
    log = reporters[0].log.read_text(errors="replace")
    assert "refusing RPC message" not in log and "Traceback" not in log
    assert KEY not in log and OTHER_KEY not in log
    transport, client = client_with(stack, world, [KEY], host="c1")
    try:
        with pytest.raises(Exception, match="matches none"):
            client.call({}, "apply_reports", reports=[])
    finally:
        transport.cleanup()
