"""In-flight Ironic writes are fenced under a real partition (issue 16 item 1).

A daemon in its own network namespace is stopping an instance: Ironic (through a relay of its
own, :class:`tests.functional.test_fencing.IronicProxy`) keeps failing the power-off, so the
daemon keeps retrying. It is then cut from ZooKeeper only (:meth:`tests.chaos.netns.Host.
cut_zookeeper`): it keeps running and keeps reaching Ironic. Its session expires, the peer claims
the node, adopts the instance, finishes the stop and starts it again. The evidence, from the
relay (every request the cut daemon sent), the merged audit logs and Ironic: the cut daemon sent
no write for the node once the peer held the claim, its actions all precede the peer's claim, and
the node ends powered on as the peer left it.
"""

from __future__ import annotations

import time
import uuid

import pytest

from computed.db import instances as db_instances
from computed.db import models
from computed.fleet.audit import fencing_violations
from computed.fleet.claims import ClaimRecord, read_claims
from computed.fleet.membership import fleet_root
from computed.testing.ironic import enroll_nodes
from tests.chaos import netns
from tests.chaos.chaos import Chaos
from tests.functional.daemons import make_available, ownership_now, uuid_owned_by, wait_for
from tests.functional.test_fencing import IronicProxy

NODES = 12
SESSION = 3
#: Seconds this file takes in the suite, for its place in the order (tests/conftest.py): far
#: from the chaos tier's guess of 120 s a test.
EXPECTED_FILE_SECONDS = 35


def enroll_for(chaos: Chaos, host: str) -> str:
    """A node of the run's resource class enrolled with a uuid the ring gives ``host`` among
    the members now; its uuid."""
    members = ownership_now(chaos.zk, chaos.group)[0]
    node = uuid_owned_by([m.as_ring_member() for m in members], host)
    enroll_nodes(chaos.ironic_url, 1, resource_class=chaos.resource_class,
                 prefix=f"chaos-{chaos.token}-{host}", workers=1, uuid=node)
    chaos.nodes.append(node)
    return node


def held_by(chaos: Chaos, node: str, host: str) -> ClaimRecord | None:
    """``node``'s claim record while ``host`` holds it, else None."""
    record = read_claims(chaos.zk, fleet_root(chaos.group)).get(node)
    return record if record is not None and record.host == host else None


def test_a_daemon_cut_from_zookeeper_mid_action_writes_nothing_to_ironic_once_its_claim_is_gone(
        tmp_path):
    reason = netns.available()
    if reason:
        pytest.skip(f"network namespaces unavailable here: {reason}")
    chaos = Chaos(tmp_path, seed=0, daemons=2, nodes=NODES, session=SESSION, grace=1.0,
                  private_rabbitmq=False)  # no fault restarts the broker
    proxy = None
    try:
        chaos.setup_services()
        # c1 reaches Ironic through the relay only, retrying writes for as long as it fails them.
        proxy = IronicProxy(chaos.ironic_url, address=chaos.network.controller)
        chaos.daemon_extra["c1"] = (f"[ironic]\nendpoint_override = {proxy.url}\n"
                                    f"api_max_retries = 1000\napi_retry_interval = 1\n")
        chaos.setup_fleet()
        victim, peer = chaos.daemons["c1"], chaos.daemons["c2"]
        records = read_claims(chaos.zk, fleet_root(chaos.group))
        # Any node c1 holds (the ring decides which); of 12 random nodes c1 holds none once in
        # 4,096 runs, and then one is enrolled with a uuid the ring gives c1. Made available if
        # it is not among the ones the harness made available.
        held = [n for n in chaos.nodes if records[n].host == "c1"]
        node = held[0] if held else enroll_for(chaos, "c1")
        record = wait_for(lambda: held_by(chaos, node, "c1"), 60, f"c1 holding {node}",
                          [victim, peer])
        if node not in chaos.nodes[:NODES * 3 // 4]:
            make_available(chaos.stack, [node])
        chaos.ironic("PUT", f"/nodes/{node}/states/power", {"target": "power on"})
        wait_for(lambda: chaos.ironic("GET", f"/nodes/{node}")["power_state"] == "power on",
                 60, f"node {node} powered on")
        row = db_instances.create_instance(chaos.engine, str(uuid.uuid4()), chaos.rc,
                                           node_uuid=node,
                                           host="c1", member_epoch=record.member_epoch,
                                           state=models.ACTIVE)

        def writes_to_node(since: float = 0.0) -> list[tuple[float, str, str]]:
            return [r for r in list(proxy.arrived) if r[1] != "GET" and node in r[2]
                    and r[0] >= since]

        proxy.fail_writes = True
        chaos.api.action("stop", row.uuid)
        wait_for(lambda: writes_to_node(), 60, "c1 writing to the node", [victim, peer])
        chaos.network.hosts["c1"].cut_zookeeper()
        # c1 runs on and reaches Ironic; the fence must stop its retries once the claim may be
        # gone, and the peer takes the instance over when the session expired.
        victim.wait_log(f"stop_instance of instance {row.uuid} stopped", timeout=60)
        wait_for(lambda: db_instances.get_instance(chaos.engine, row.uuid).host == "c2", 60,
                 "instance re-homed to c2", [victim, peer])
        proxy.fail_writes = False  # from now on a write of c1 would reach Ironic
        wait_for(lambda: db_instances.get_instance(chaos.engine, row.uuid).state == models.STOPPED,
                 60, "c2 finished the stop", [victim, peer])
        chaos.api.action("start", row.uuid)
        wait_for(lambda: db_instances.get_instance(chaos.engine, row.uuid).state == models.ACTIVE,
                 60, "c2 started it", [victim, peer])
        time.sleep(SESSION + 2)  # c1, still cut, had every chance to write again
        assert victim.alive, "c1 must have run (cut, not frozen) all along"

        # c2 may have held the node before c1 joined (and handed it over): the claim that counts
        # is the first one newer than c1's, i.e. taken over from the cut daemon.
        c1_epoch = record.epoch
        peer_claims = [r["t"] for r in peer.records()
                       if r["event"] == "claim" and r.get("node") == node
                       and r["claim_epoch"] > c1_epoch]
        assert peer_claims, f"c2 never took {node} over from c1 (claim epoch {c1_epoch})"
        taken = min(peer_claims)
        assert writes_to_node(), "c1 never wrote to the node: nothing was tested"
        assert writes_to_node(since=taken) == [], (
            f"c1 wrote to {node} after c2 claimed it at {taken}: {writes_to_node(taken)}")
        late_acts = [r for r in victim.records() if r["event"] == "act"
                     and r.get("node") == node and r["t"] >= taken]
        assert late_acts == [], late_acts
        merged = sorted(victim.records() + peer.records(), key=lambda r: r["t"])
        assert fencing_violations(merged) == []
        assert chaos.ironic("GET", f"/nodes/{node}")["power_state"] == "power on"

        # Healed, c1 rejoins: still nothing written to the node, the instance stays with c2.
        chaos.network.hosts["c1"].heal()
        assert chaos.wait_converged(60, placement_too=False) is not None, chaos.tails()
        assert writes_to_node(since=taken) == []
        final = db_instances.get_instance(chaos.engine, row.uuid)
        assert (final.state, final.host) == (models.ACTIVE, "c2")
        assert chaos.ironic("GET", f"/nodes/{node}")["power_state"] == "power on"
    finally:
        if proxy is not None:
            proxy.close()
        chaos.close()
