"""What ZooKeeper lets others do to a fleet, and what a fleet believes of ZooKeeper.

Real ZooKeeper, daemons in the test's process (issue 16 items 3, 6 and 7):

* with credentials in ``backend_url`` an anonymous client can neither delete a claim, nor write a
  drain marker, nor plant a member, even where the fleet's containers existed (open) before the
  credentials were configured; the daemons themselves work as usual;
* something planted in the group that is not a live daemon gets no nodes, and ``fleet status``
  names it;
* the fence's lease follows the session timeout the server granted, not the one asked for;
* daemons and computed-manage work over TLS (Debian's ZooKeeper with Netty) with credentials.
"""

from __future__ import annotations

import time
import uuid

import pytest
from kazoo import exceptions as zk_exc
from kazoo.client import KazooClient
from tooz import coordination

from computed.fleet.claims import claims_path, read_claims
from computed.fleet.membership import drain_markers_path, fleet_root
from computed.fleet.zookeeper import ask_server, negotiated_session_timeout
from computed.testing.ironic import enroll_nodes, list_node_uuids
from computed.testing.zookeeper import ZooKeeper
from hashring.ownership import Member, compute_ownership
from tests import cli
from tests.functional.daemons import (
    NO_REPORTER,
    Daemon,
    dump_logs,
    json_status,
    stop_all,
    uuid_owned_by,
    wait_converged,
    want_processes,
    zk_client,
)
from tests.functional.test_metrics import free_port, samples

NODES = 12
#: How long the planted znode is watched for a share it must not get: several reconcile passes.
WATCH = 8.0
CREDENTIALS = "computed:s3cret-pass"


@pytest.fixture(scope="module")
def nodes(stack):
    uuids = stack["ironic"].enroll_nodes(NODES, prefix=f"trust-{uuid.uuid4().hex[:6]}")
    yield uuids
    stack["ironic"].drop_nodes(uuids)


@pytest.fixture
def daemons(stack, tmp_path, request, fleet_db):
    started: list[Daemon] = []
    database = fleet_db
    group = f"t{uuid.uuid4().hex[:8]}"

    def start(*hosts, **kwargs):
        kwargs.setdefault("process", want_processes(request))
        # No reporter serves these fleets (daemons.NO_REPORTER).
        kwargs["extra"] = NO_REPORTER + kwargs.get("extra", "")
        new = [Daemon(stack, tmp_path, host, group=group, database=database, **kwargs)
               for host in hosts]
        started.extend(new)
        return [daemon.start() for daemon in new]

    start.group = group
    yield start
    stop_all(started)


@pytest.fixture
def anonymous(stack):
    client = zk_client(stack)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def computed_user(stack):
    client = zk_client(stack, auth=CREDENTIALS)
    yield client
    client.stop()
    client.close()


def test_with_credentials_an_anonymous_client_cannot_touch_the_fleet(
        stack, nodes, daemons, anonymous, computed_user):
    group = daemons.group
    root = fleet_root(group)
    # Containers from before the credentials were configured: created open, as ZooKeeper does.
    for path in (claims_path(root), drain_markers_path(group), f"/tooz/{group}"):
        anonymous.ensure_path(path)
    zk = stack["zookeeper"].url.replace("zookeeper://", f"zookeeper://{CREDENTIALS}@")
    fleet = daemons("c1", "c2", zookeeper_url=zk)
    every_node = list_node_uuids(stack["ironic"].url)
    try:
        wait_converged(computed_user, every_node, {"c1", "c2"}, group=group)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{dump_logs(fleet)}") from None

    claim, other_claim = (f"{claims_path(root)}/{node}" for node in nodes[:2])
    attempts = {
        "delete a claim": lambda: anonymous.delete(claim),
        "write a drain marker": lambda: anonymous.create(
            f"{drain_markers_path(group)}/c1", b"{}"),
        "plant a member": lambda: anonymous.create(f"/tooz/{group}/planted", b""),
        "plant a claim": lambda: anonymous.create(f"{claims_path(root)}/{uuid.uuid4()}",
                                                  b'{"host": "c1", "member_epoch": 1}'),
        "read a claim": lambda: anonymous.get(other_claim),
    }
    allowed = []
    for what, attempt in attempts.items():
        try:
            attempt()
            allowed.append(what)
        except zk_exc.NoAuthError:
            pass
        except zk_exc.KazooException as exc:  # not refused for want of rights: say what it was
            allowed.append(f"{what} ({exc!r})")
    assert allowed == [], f"an anonymous client could {', '.join(allowed)}"
    # The daemons, and the operator's commands with the same credentials, work as usual.
    status = json_status(fleet[0])
    assert {m["host"] for m in status["members"]} == {"c1", "c2"}
    assert status["summary"]["unclaimed"] == 0 and status["ignored"] == []
    assert set(read_claims(computed_user, root)) == set(every_node)


def test_a_persistent_znode_planted_in_the_group_gets_no_nodes(
        stack, nodes, daemons, anonymous):
    group = daemons.group
    fleet = daemons("c1", "c2")
    # No session behind it, capabilities unreadable: it was taken as a member of weight 1. The
    # test shows nothing unless the ring with it would give it a node: of 12 random nodes it
    # would get none once in 130 runs, so then one it would get is enrolled (deleted with the
    # module's nodes).
    wrongly = [Member("c1"), Member("c2"), Member("planted")]
    every_node = list_node_uuids(stack["ironic"].url)
    if "planted" not in compute_ownership(wrongly, every_node, {}).owners().values():
        bait = uuid_owned_by(wrongly, "planted")
        enroll_nodes(stack["ironic"].url, 1, prefix=f"trust-bait-{group}", workers=1, uuid=bait)
        nodes.append(bait)
        every_node.append(bait)
    wait_converged(anonymous, every_node, {"c1", "c2"}, group=group)
    anonymous.create(f"/tooz/{group}/planted", b"not capabilities")
    # Give the daemons several reconcile passes to (wrongly) hand it a share.
    deadline = time.monotonic() + WATCH
    while time.monotonic() < deadline:
        owners = {record.host for record in read_claims(anonymous, fleet_root(group)).values()}
        claimed = set(read_claims(anonymous, fleet_root(group)))
        assert owners <= {"c1", "c2"} and claimed == set(every_node), \
            f"nodes left to the planted znode: {len(set(every_node) - claimed)} unclaimed"
        time.sleep(0.2)
    status = json_status(fleet[0])
    assert [m["host"] for m in status["members"]] == ["c1", "c2"]
    assert status["ignored"] == [
        {"name": "planted", "reason": "a persistent znode: no daemon session keeps it"}]
    assert status["summary"]["ignored"] == 1 and status["summary"]["unclaimed"] == 0
    for daemon in fleet:  # loudly, but once: not on every pass
        lines = [line for line in daemon.log.read_text().splitlines()
                 if "ignoring" in line and "planted" in line]
        assert len(lines) == 1, dump_logs([daemon])


@pytest.fixture
def stingy_zookeeper(tmp_path):
    """A ZooKeeper that grants at most 4 s, whatever a client asks for."""
    server = ZooKeeper(tmp_path / "stingy", {"max_session_timeout": 4000})
    server.start()
    yield server
    server.stop()


def test_the_lease_follows_the_session_timeout_zookeeper_granted(stingy_zookeeper, daemons):
    port = free_port()
    daemon, = daemons("c1", session_timeout=30, zookeeper_url=stingy_zookeeper.url,
                      extra=f"[metrics]\nport = {port}\n")
    deadline = time.monotonic() + 60
    values: dict[str, float] = {}
    while not values.get("computed_lease_remaining_seconds"):
        assert daemon.alive and time.monotonic() < deadline, dump_logs([daemon])
        try:
            values = samples(port)
        except OSError:
            pass
        time.sleep(0.2)
    # Asked 30 s, granted 4 s: a lease of 30 * 2/3 = 20 s would outlive the session.
    assert 0 < values["computed_lease_remaining_seconds"] <= 4.0 * 2 / 3
    assert values.get("computed_zookeeper_session_timeout_seconds") == 4.0

    from computed.fleet.zookeeper import granted_session_timeout, kazoo_client
    coordinator = coordination.get_coordinator(f"{stingy_zookeeper.url}?timeout=30", b"probe")
    coordinator.start()
    try:
        assert granted_session_timeout(kazoo_client(coordinator), 30) == 4.0
    finally:
        coordinator.stop()


@pytest.fixture
def stock_zookeeper(tmp_path):
    """A ZooKeeper with its default four-letter-word whitelist (srvr only: no conf), granting
    at most 4 s."""
    server = ZooKeeper(tmp_path / "stock", {"max_session_timeout": 4000,
                                            "four_letter_words": None})
    server.start()
    yield server
    server.stop()


def test_a_stock_zookeeper_without_conf_still_bounds_the_lease(stock_zookeeper, daemons):
    """Issue 23 item 9: a ZooKeeper that refuses 'conf' (Debian's default whitelist) was
    refused; the daemon now reads the granted timeout from a probe session's connect answer."""
    assert "not in the whitelist" in ask_server(_probe_client(stock_zookeeper), b"conf")
    port = free_port()
    daemon, = daemons("c1", session_timeout=30, zookeeper_url=stock_zookeeper.url,
                      extra=f"[metrics]\nport = {port}\n")
    deadline = time.monotonic() + 60
    values: dict[str, float] = {}
    while not values.get("computed_lease_remaining_seconds"):
        assert daemon.alive and time.monotonic() < deadline, dump_logs([daemon])
        try:
            values = samples(port)
        except OSError:
            pass
        time.sleep(0.2)
    assert 0 < values["computed_lease_remaining_seconds"] <= 4.0 * 2 / 3
    assert values.get("computed_zookeeper_session_timeout_seconds") == 4.0
    assert "read from a probe session" in daemon.log.read_text()
    # Every probe session was closed at once: only the daemon's own session is left.
    client = _probe_client(stock_zookeeper)
    assert negotiated_session_timeout(client, 30) == 4.0
    assert negotiated_session_timeout(client, 2) == 2.0  # within [1 s, 4 s]: as asked


def _probe_client(server):
    return KazooClient(hosts=server.hosts)  # never started: only its hosts and TLS settings


def test_the_backend_url_password_stays_out_of_logs_and_output(stack, tmp_path, request,
                                                                fleet_db):
    """kazoo logs its digest credential at DEBUG; a daemon and computed-manage must not pass it
    on. (A daemon, not the reporter: the reporter holds kazoo's connection lines back while it
    waits for ZooKeeper at start, so its log never has the line to mask.)"""
    password = CREDENTIALS.split(":")[1]
    zk = stack["zookeeper"].url.replace("zookeeper://", f"zookeeper://{CREDENTIALS}@")
    daemon = Daemon(stack, tmp_path, "c1", group=f"t{uuid.uuid4().hex[:8]}",
                    database=fleet_db, zookeeper_url=zk,
                    extra="[DEFAULT]\ndebug = True\n", process=want_processes(request)).start()
    try:
        daemon.wait_log("joined group")
        assert daemon.stop() == 0
    finally:
        daemon.ensure_stopped()
    log = daemon.log.read_text()
    assert "scheme='digest'" in log  # kazoo did log its Auth request...
    assert password not in log       # ...without the password
    for command in (["config", "check"], ["fleet", "status"]):
        result = cli.run("computed-manage", "--config-file", daemon.conf, *command,
                         home=tmp_path)
        assert result.returncode == 0, result.stderr
        assert password not in result.stdout + result.stderr


@pytest.fixture
def tls_zookeeper(tmp_path):
    server = ZooKeeper(tmp_path / "tls", {"tls": True})
    server.start()
    yield server
    server.stop()


def test_daemons_share_the_nodes_over_tls_with_credentials(stack, nodes, tls_zookeeper,
                                                           daemons):
    # tls_zookeeper before daemons: the daemons stop before their ZooKeeper does.
    url = tls_zookeeper.tls_url.replace("zookeeper://", f"zookeeper://{CREDENTIALS}@")
    fleet = daemons("c1", "c2", zookeeper_url=url)
    client = KazooClient(hosts=f"127.0.0.1:{tls_zookeeper.info['secure_port']}", use_ssl=True,
                         ca=tls_zookeeper.info["ca"], auth_data=[("digest", CREDENTIALS)])
    client.start(timeout=15)
    try:
        wait_converged(client, list_node_uuids(stack["ironic"].url), {"c1", "c2"},
                       group=daemons.group)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{dump_logs(fleet)}") from None
    finally:
        client.stop()
        client.close()
    assert all("use_ssl: True" in daemon.log.read_text() for daemon in fleet)
    status = json_status(fleet[0])  # computed-manage over TLS too
    assert [m["host"] for m in status["members"]] == ["c1", "c2"]
