"""Fencing every write, through the whole product: daemons, the real ZooKeeper, RabbitMQ, Ironic
(fake hardware) and database. The daemons run in the test's process
(tests/functional/inprocess.py) but in the test that freezes one (SIGSTOP): processes of their
own there (marked ``daemon_processes``), with the short :data:`SESSION`.

* A daemon frozen past its ZooKeeper session (SIGSTOP) in the middle of an Ironic write that
  keeps being retried, whose peer meanwhile re-homed the instance and changed the node: once
  woken, it writes nothing more to Ironic (issue 16 item 1). Its Ironic traffic goes through
  :class:`IronicProxy`, which fails its writes (503) while the test wants it retrying and counts
  what it sends.
* A claim znode deleted behind its holder's back with a plain kazoo client: the holder notices,
  claims the node again with a new claim epoch, and no other daemon claims it (item 4).
* A cast that nobody receives (sent to a queue no daemon consumes) is still carried out by the
  instance's owner (item 5).
* A cast carrying a member epoch that is not the target's current one is refused by the target,
  in one line, through the real bus (item 8).

Instances are recorded straight in the database (row on a node the daemon holds, its host and
member epoch, as the scheduler would): these tests are about what the daemons do with them, and
need no Placement; no reporter runs either (the daemons' report calls give up after 1 s,
daemons.NO_REPORTER).
"""

from __future__ import annotations

import http.server
import signal
import threading
import time
import uuid

import pytest
import requests
from kazoo.client import KazooClient

from computed.db import instances as db_instances
from computed.db import models
from computed.fleet.claims import claims_path, read_claims
from computed.fleet.membership import fleet_root
from computed.instances.rpcapi import ComputeAPI, ServerAPI
from computed.runtime import rpc
from computed_ironic import IronicDriver
from tests.functional.daemons import (
    NO_REPORTER,
    bus_conf,
    dump_logs,
    ironic,
    make_available,
    node_for,
    wait_converged,
    wait_for,
)

WORLD_NODES = 4
SESSION = 2
GRACE = 1.0


class IronicProxy:
    """Ironic's API relayed on a port of its own (on ``address``); ``fail_writes`` answers
    PUT/PATCH with 503 instead of relaying them. ``requests`` lists (method, path, relayed) in
    arrival order, ``arrived`` (wall-clock time, method, path) of each."""

    def __init__(self, target: str, address: str = "127.0.0.1"):
        self.target = target.rstrip("/")
        self.fail_writes = False
        self.requests: list[tuple[str, str, bool]] = []
        self.arrived: list[tuple[float, str, str]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def relay(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                write = self.command in ("PUT", "PATCH", "POST", "DELETE")
                proxy.arrived.append((time.time(), self.command, self.path))
                if write and proxy.fail_writes:
                    proxy.requests.append((self.command, self.path, False))
                    self.answer(503, b'{"error_message": "injected by the test proxy"}', {})
                    return
                proxy.requests.append((self.command, self.path, True))
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "content-length", "connection")}
                response = requests.request(self.command, proxy.target + self.path,
                                            headers=headers, data=body, timeout=30)
                # Links in Ironic's answers (version discovery) point back at the proxy.
                content = response.content.replace(proxy.target.encode(), proxy.url.encode())
                self.answer(response.status_code, content, response.headers)

            def answer(self, status, content, headers):
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in ("content-length", "connection", "transfer-encoding",
                                           "content-encoding", "date", "server"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(content)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_PUT = do_PATCH = do_POST = do_DELETE = relay

        self._server = http.server.ThreadingHTTPServer((address, 0), Handler)
        self.url = f"http://{address}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def writes(self, since: int = 0, node: str = "") -> list[tuple[str, str, bool]]:
        return [r for r in self.requests[since:] if r[0] != "GET" and node in r[1]]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def zk(stack):
    client = KazooClient(hosts=stack["zookeeper"].hosts)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def servers(stack, world):
    """A ServerAPI on the world's database (actions only: no scheduling, no Placement)."""
    transport = rpc.get_transport(bus_conf(stack), "test", url=stack["rabbitmq"].url)
    yield ServerAPI(world.engine, None, ComputeAPI(transport), owner_of=None), transport
    transport.cleanup()


def converged(stack, zk, world, hosts):
    """Wait until ``hosts`` hold every node the daemons list (the world's, and whatever else the
    stack's Ironic has: the daemons share out all of them) as the rules say."""
    with IronicDriver.for_endpoint(stack["ironic"].url) as driver:
        nodes = [node.uuid for node in driver.list_nodes()]
    wait_converged(zk, nodes, hosts, group=world.group)


def held_by(zk, world, host):
    """{node: claim record} of the claims ``host`` holds."""
    return {node: record for node, record in read_claims(zk, fleet_root(world.group)).items()
            if record.host == host}


def powered(stack, node, state):
    ironic(stack, "PUT", f"/nodes/{node}/states/power", {"target": state})
    wait_for(lambda: ironic(stack, "GET", f"/nodes/{node}")["power_state"] == state, 60,
             f"node {node} {state}")


def instance_on(world, node, host, member_epoch, state=models.ACTIVE):
    """An instance recorded on ``node``, managed by (host, member epoch)."""
    return db_instances.create_instance(world.engine, str(uuid.uuid4()), world.rc, node_uuid=node,
                                        host=host, member_epoch=member_epoch, state=state)


@pytest.mark.daemon_processes  # it freezes whichever daemon holds the node
def test_a_daemon_frozen_past_its_session_never_writes_to_ironic_after_waking(
        stack, world, zk, servers):
    api, _ = servers
    make_available(stack, world.nodes)
    proxy = IronicProxy(stack["ironic"].url)
    try:
        # Both daemons reach Ironic through the proxy, retrying writes for as long as it fails
        # them; the victim is whichever holds the world's first node.
        retrying = (f"[ironic]\nendpoint_override = {proxy.url}\napi_max_retries = 1000\n"
                    f"api_retry_interval = 1\n")
        daemons = {host: world.daemon(host, session_timeout=SESSION, rehome_grace=GRACE,
                                      extra=NO_REPORTER + retrying) for host in ("c1", "c2")}
        converged(stack, zk, world, set(daemons))
        node = world.nodes[0]
        record = read_claims(zk, fleet_root(world.group))[node]
        victim = daemons[record.host]
        peer = next(d for d in daemons.values() if d is not victim)
        powered(stack, node, "power on")
        row = instance_on(world, node, victim.host, record.member_epoch)

        # The victim starts powering the node off; Ironic (the proxy) keeps failing: it retries.
        proxy.fail_writes = True
        api.action("stop", row.uuid)
        wait_for(lambda: proxy.writes(node=node), 60, "the victim writing to the node",
                 [victim, peer])
        victim.signal(signal.SIGSTOP)
        try:
            proxy.fail_writes = False
            # Its session expires: the peer adopts the instance, finishes the stop, and its
            # user starts it again: the node is powered on, the instance ACTIVE, all the peer's
            # doing.
            wait_for(lambda: api.get(row.uuid).host == peer.host, 60, "instance re-homed",
                     [victim, peer])
            wait_for(lambda: api.get(row.uuid).state == "STOPPED", 60,
                     "the peer finished the stop", [victim, peer])
            api.action("start", row.uuid)
            wait_for(lambda: api.get(row.uuid).state == "ACTIVE", 60, "the peer started it",
                     [victim, peer])
            assert ironic(stack, "GET", f"/nodes/{node}")["power_state"] == "power on"
            woken = len(proxy.requests)
        finally:
            victim.signal(signal.SIGCONT)
        # The victim wakes in the middle of its retries: it must stop, not power the node off.
        victim.wait_log(f"stop_instance of instance {row.uuid} stopped", timeout=60)
        assert proxy.writes(since=woken) == [], dump_logs([victim])
        assert ironic(stack, "GET", f"/nodes/{node}")["power_state"] == "power on"
        assert api.get(row.uuid).state == "ACTIVE" and api.get(row.uuid).host == peer.host
    finally:
        proxy.close()


def test_a_claim_deleted_behind_the_holders_back_is_noticed_and_taken_again(stack, world,
                                                                           zk):
    c1 = world.daemon("c1", extra=NO_REPORTER)
    c2 = world.daemon("c2", extra=NO_REPORTER)
    converged(stack, zk, world, {"c1", "c2"})
    # The ring gives c1 none of the world's 4 random nodes once in 16 runs: the node is one the
    # ring gives c1 (enrolled for it if need be), held by c1 before its claim is deleted.
    node = node_for(stack, world, zk, "c1", schedulable=False)
    record = wait_for(lambda: held_by(zk, world, "c1").get(node), 60, f"c1 holding {node}",
                      [c1, c2])
    deleted_at = time.time()
    zk.delete(f"{claims_path(fleet_root(world.group))}/{node}")
    # c1 notices (a watch, not a poll of its own), drops the claim and claims the node again.
    wait_for(lambda: any(r["event"] == "release" and r.get("lost") and r["node"] == node and
                         r["t"] >= deleted_at for r in c1.records()), 30,
             "c1 dropping the deleted claim", [c1, c2])
    wait_for(lambda: held_by(zk, world, "c1").get(node) is not None and
             held_by(zk, world, "c1")[node].epoch > record.epoch, 30, "c1 claiming again",
             [c1, c2])
    c1.wait_log(f"our claim on node {node} (claim epoch {record.epoch}) was deleted", 10)
    # Never two holders: c2 did not claim the node after the deletion (before it, c2 may have
    # held it while the two daemons joined), and c1's claims of it do not overlap.
    assert not [r for r in c2.records() if r.get("node") == node and r["event"] == "claim"
                and r["t"] >= deleted_at]
    events = [(r["event"], r["claim_epoch"]) for r in c1.records()
              if r.get("node") == node and r["event"] in ("claim", "release")]
    assert events[-3:] == [("claim", record.epoch), ("release", record.epoch),
                           ("claim", held_by(zk, world, "c1")[node].epoch)]
    converged(stack, zk, world, {"c1", "c2"})


def test_a_lost_cast_is_still_carried_out(stack, world, zk, servers):
    api, transport = servers
    make_available(stack, world.nodes)
    c1 = world.daemon("c1", extra=NO_REPORTER + "[fleet]\nresume_interval = 2\n")
    converged(stack, zk, world, {"c1"})
    node = world.nodes[0]
    record = held_by(zk, world, "c1")[node]
    powered(stack, node, "power on")
    row = instance_on(world, node, "c1", record.member_epoch)
    # The bus acknowledges the cast, nobody ever gets it: a queue no daemon consumes.
    lost = ServerAPI(world.engine, None, ComputeAPI(transport, topic=f"nobody-{world.group}"),
                     owner_of=None)
    assert lost.action("stop", row.uuid).state == "STOPPING"
    wait_for(lambda: api.get(row.uuid).state == "STOPPED", 60, "the stop carried out", [c1])
    assert ironic(stack, "GET", f"/nodes/{node}")["power_state"] == "power off"
    c1.wait_log(f"instance {row.uuid} is STOPPING and nothing here works on it: resuming")


def test_a_cast_for_another_member_epoch_is_refused_through_the_bus(stack, world, zk,
                                                                   servers):
    api, transport = servers
    make_available(stack, world.nodes)
    c1 = world.daemon("c1", extra=NO_REPORTER)
    converged(stack, zk, world, {"c1"})
    node = world.nodes[0]
    record = held_by(zk, world, "c1")[node]
    powered(stack, node, "power on")
    row = instance_on(world, node, "c1", record.member_epoch)
    ComputeAPI(transport).stop_instance("c1", row.uuid, record.member_epoch - 1)
    c1.wait_log(f"refusing stop_instance of instance {row.uuid}: sent for member epoch "
                f"{record.member_epoch - 1}, this daemon's is {record.member_epoch}")
    assert api.get(row.uuid).state == "ACTIVE"
    assert ironic(stack, "GET", f"/nodes/{node}")["power_state"] == "power on"
    assert "Traceback" not in c1.log.read_text()
    # The current member epoch is served, through the same bus.
    ComputeAPI(transport).stop_instance("c1", row.uuid, record.member_epoch)
    wait_for(lambda: api.get(row.uuid).state == "STOPPED", 60, "stopped", [c1])
