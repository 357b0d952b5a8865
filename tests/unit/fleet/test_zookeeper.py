"""computed.fleet.zookeeper on real tooz coordinators, built from URLs and never connected.

The alarm for a tooz upgrade: the module reads two private names of tooz's ZooKeeper driver
(``_coord`` and ``_path_group``); if a tooz release renames or removes either, these tests fail
and say which, before any daemon starts with the wrong session or reads the wrong group.
"""

import struct
import threading

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.serialization import (
    int_int_long_struct,
    int_int_struct,
    int_struct,
)
from tooz import coordination
from tooz.drivers import zookeeper as tooz_zookeeper

from computed.fleet import zookeeper
from computed.fleet.zookeeper import (
    NotZooKeeper,
    SessionTimeoutUnknown,
    clamp_session_timeout,
    granted_session_timeout,
    group_path,
    kazoo_client,
    negotiated_session_timeout,
    protect,
    session_timeout_bounds,
)


def coordinator(url: str) -> coordination.CoordinationDriver:
    return coordination.get_coordinator(url, b"probe")


@pytest.mark.parametrize("scheme", ["zookeeper", "kazoo"])
def test_tooz_zookeeper_driver_still_has_what_computed_reads(scheme):
    driver = coordinator(f"{scheme}://127.0.0.1:2181?namespace=custom")
    assert type(driver) is tooz_zookeeper.KazooDriver
    assert isinstance(driver._coord, KazooClient), \
        "tooz's ZooKeeper driver no longer keeps its KazooClient in _coord"
    assert driver._path_group(b"computed") == "/custom/computed", \
        "tooz's ZooKeeper driver no longer builds group paths with _path_group"


def test_kazoo_client_is_the_coordinators_own_session():
    driver = coordinator("zookeeper://127.0.0.1:2181")
    client = kazoo_client(driver)
    assert client is kazoo_client(driver) and isinstance(client, KazooClient)
    assert not client.connected  # nothing was started


def test_group_path_honours_the_namespace_of_the_url():
    assert group_path(coordinator("zookeeper://127.0.0.1:2181"), "computed") == \
        "/tooz/computed"
    assert group_path(coordinator("zookeeper://127.0.0.1:2181?timeout=2&namespace=site-1"),
                      "computed") == "/site-1/computed"


def test_another_backend_is_refused_with_its_name(tmp_path):
    driver = coordinator(f"file://{tmp_path}")
    with pytest.raises(NotZooKeeper, match="FileDriver is not ZooKeeper") as raised:
        kazoo_client(driver)
    assert raised.value.coordinator is driver
    with pytest.raises(NotZooKeeper):
        group_path(driver, "computed")


CONF_ANSWER = """clientPort=2181
secureClientPort=-1
dataDir=/var/lib/zookeeper/version-2
tickTime=2000
maxClientCnxns=60
minSessionTimeout=4000
maxSessionTimeout=40000
clientPortListenBacklog=-1
serverId=0
"""


def test_session_timeout_bounds_are_read_from_the_conf_answer():
    assert session_timeout_bounds(CONF_ANSWER) == (4.0, 40.0)
    assert session_timeout_bounds(
        "conf is not executed because it is not in the whitelist.\n") is None
    assert session_timeout_bounds("minSessionTimeout=4000\n") is None


@pytest.mark.parametrize("requested, granted", [(90, 40), (10, 10), (1, 4), (40, 40)])
def test_the_server_clamps_the_requested_timeout_to_its_bounds(requested, granted):
    assert clamp_session_timeout(requested, 4.0, 40.0) == granted


class Server:
    """One server's socket: records what was sent, answers in small chunks, then EOF."""

    def __init__(self, answer):
        self.answer, self.sent, self.closed = answer.encode(), b"", False

    def sendall(self, data):
        self.sent += data

    def recv(self, size):
        chunk, self.answer = self.answer[:7], self.answer[7:]  # a long answer, several reads
        return chunk

    def close(self):
        self.closed = True


class Ensemble:
    """The KazooClient attributes ask_server reads: its servers, TLS settings and handler."""

    use_ssl, ca, certfile, keyfile, keyfile_password = True, "/ca.pem", None, None, None
    verify_certs, check_hostname = True, False

    def __init__(self, *answers):
        self.hosts = [(f"zk-{i}", 2281) for i in range(len(answers))]
        self.answers = dict(zip(self.hosts, answers))
        self.handler, self.connections = self, []

    def create_connection(self, address, **options):
        self.connections.append((address, options))
        answer = self.answers[address]
        if isinstance(answer, Exception):
            raise answer
        return Server(answer)


def test_granted_session_timeout_asks_a_server_over_tls_with_the_clients_settings():
    ensemble = Ensemble(ConnectionRefusedError("zk-0 is down"), CONF_ANSWER)
    assert granted_session_timeout(ensemble, 90) == 40
    (first, _), (second, options) = ensemble.connections
    assert (first, second) == (("zk-0", 2281), ("zk-1", 2281))  # the next server on failure
    assert options["use_ssl"] is True and options["ca"] == "/ca.pem"
    assert options["hostname"] == "zk-1"  # kazoo's own command() passed the port here


def test_a_server_without_quorum_is_skipped_for_the_next_one():
    # An ensemble server cut from its peers (or the last one of a lost quorum) still answers
    # four-letter commands, with this line instead of its configuration.
    ensemble = Ensemble(NOT_SERVING, CONF_ANSWER)
    assert granted_session_timeout(ensemble, 90) == 40
    assert [address for address, _ in ensemble.connections] == [("zk-0", 2281), ("zk-1", 2281)]
    with pytest.raises(SessionTimeoutUnknown, match="zk-0:2281: not currently serving.*"
                                                    "zk-1:2281: not currently serving"):
        granted_session_timeout(Ensemble(NOT_SERVING, NOT_SERVING), 90)


NOT_SERVING = "This ZooKeeper instance is not currently serving requests\n"


REFUSED = "conf is not executed because it is not in the whitelist.\n"


@pytest.mark.parametrize("answers, message", [
    ([REFUSED], "4lw.commands.whitelist"),  # and the probe session is refused too (below)
    ([ConnectionResetError("reset by peer"), OSError("no route")], "reset by peer.*no route"),
])
def test_a_server_that_does_not_say_is_an_error_never_a_guess(answers, message):
    with pytest.raises(SessionTimeoutUnknown, match=message):
        granted_session_timeout(Ensemble(*answers), 90)


class ProbedServer:
    """A server socket that answers a probe session's connect request with ``granted`` ms,
    then its close request; records what it was sent."""

    def __init__(self, granted):
        self.granted, self.sent, self.closed, self.pending = granted, b"", False, b""

    def sendall(self, data):
        self.sent += data
        if len(self.sent) == len(data):  # the connect request: answer it
            # ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, ro
            self.requested = struct.unpack_from("!iqiq", data, 4)[2]
            body = int_int_long_struct.pack(0, self.granted, 0x1234) + \
                int_struct.pack(16) + b"p" * 16 + b"\x00"
            self.pending += int_struct.pack(len(body)) + body
        else:  # the close request: a reply header
            self.pending += int_struct.pack(16) + b"\x00" * 16

    def recv(self, size):
        chunk, self.pending = self.pending[:min(size, 5)], self.pending[min(size, 5):]
        return chunk

    def close(self):
        self.closed = True


class StockEnsemble(Ensemble):
    """Servers that refuse 'conf' (a stock whitelist) but open sessions: ``granted`` ms each
    (an exception: that server cannot be reached)."""

    def __init__(self, *granted, conf_first=True):
        super().__init__(*[REFUSED] * len(granted))
        self.granted, self.probes, self.conf_first = dict(zip(self.hosts, granted)), [], conf_first

    def create_connection(self, address, **options):
        if self.conf_first and not self.connections:  # the first server answers 'conf': no
            return super().create_connection(address, **options)
        self.connections.append((address, options))
        granted = self.granted[address]
        if isinstance(granted, Exception):
            raise granted
        self.probes.append(ProbedServer(granted))
        return self.probes[-1]


def test_a_stock_server_without_conf_is_asked_through_a_probe_session():
    # Issue 23 item 9: Debian's default whitelist (srvr only) refused every daemon.
    ensemble = StockEnsemble(40000)
    assert granted_session_timeout(ensemble, 90) == 40
    probe, = ensemble.probes
    assert probe.requested == 90000 and probe.closed
    assert int_int_struct.unpack(probe.sent[-8:]) == (1, -11)  # closeSession sent at once
    assert ensemble.connections[-1][1]["use_ssl"] is True  # with the client's TLS settings


def test_the_probe_takes_the_smallest_timeout_of_the_servers_that_answer():
    ensemble = StockEnsemble(40000, OSError("no route"), 30000, conf_first=False)
    assert negotiated_session_timeout(ensemble, 90) == 30
    with pytest.raises(SessionTimeoutUnknown, match="no route"):
        negotiated_session_timeout(StockEnsemble(OSError("no route"), conf_first=False), 90)


class Acls:
    """Znodes with ACLs, as kazoo's client reads and sets them."""

    def __init__(self, default_acl, acls):
        self.default_acl, self.acls, self.set = default_acl, dict(acls), []

    def ensure_path_async(self, path):
        self.acls.setdefault(path, list(self.default_acl or [OPEN]))
        return Done(True)

    def get_acls_async(self, path):
        return Done((list(self.acls[path]), None))

    def set_acls_async(self, path, acl):
        self.set.append(path)
        self.acls[path] = list(acl)
        return Done(None)


class Done:
    """A kazoo async result already answered."""

    def __init__(self, value):
        self.value = value

    def get(self, timeout=None):
        return self.value


OPEN = ("world", "anyone", "cdrwa")
DIGEST = ("digest", "computed:hash", "cdrwa")


def test_protect_closes_open_containers_to_the_sessions_acl_only():
    client = Acls((DIGEST,), {"/computed/g": [OPEN], "/computed/g/claims": [DIGEST]})
    assert protect(client, ["/computed/g", "/computed/g/claims", "/computed/g/draining"],
                   5) == ["/computed/g"]
    assert client.acls == {path: [DIGEST] for path in
                           ("/computed/g", "/computed/g/claims", "/computed/g/draining")}
    assert protect(client, ["/computed/g"], 5) == []  # idempotent


def test_protect_without_credentials_changes_nothing():
    client = Acls(None, {"/computed/g": [OPEN]})
    assert protect(client, ["/computed/g", "/computed/g/claims"], 5) == []
    assert client.set == [] and "/computed/g/claims" not in client.acls


# --- the session's start (issue 22: bounded, and given up at a stop) ------------------------------

class Start:
    """tooz's start of ``coordinator`` replaced: it waits, as its ensure_path does on a request
    queued while no server answers, until the session is closed (kazoo then fails the request),
    or it answers ``outcome`` once ``go`` is set."""

    def __init__(self, monkeypatch, coordinator, outcome=None):
        self.go = threading.Event()
        self.closed: list = []
        self.outcome = outcome
        monkeypatch.setattr(coordinator, "start", self.start)
        monkeypatch.setattr(zookeeper, "_close", self.close)

    def start(self, start_heart=False):
        assert start_heart is False
        self.go.wait(60)
        if self.closed:
            raise coordination.ToozError("Operational error: ConnectionLoss")
        if isinstance(self.outcome, Exception):
            raise self.outcome

    def close(self, client):
        self.closed.append(client)
        self.go.set()


def test_a_start_waiting_on_zookeeper_is_given_up_at_a_stop(monkeypatch):
    coordinator = coordination.get_coordinator("zookeeper://127.0.0.1:9?timeout=60", b"c1")
    start = Start(monkeypatch, coordinator)
    stop = threading.Event()
    threading.Timer(0.1, stop.set).start()  # SIGTERM, while the start waits
    assert zookeeper.start_session(coordinator, 60.0, stop) is False
    assert start.closed == [zookeeper.kazoo_client(coordinator)]


def test_a_start_waiting_on_zookeeper_past_its_limit_is_a_connection_error(monkeypatch):
    coordinator = coordination.get_coordinator("zookeeper://127.0.0.1:9?timeout=1", b"c1")
    start = Start(monkeypatch, coordinator)
    with pytest.raises(coordination.ToozConnectionError, match="within 0.1 s"):
        zookeeper.start_session(coordinator, 0.05, threading.Event())
    assert start.closed == [zookeeper.kazoo_client(coordinator)]


@pytest.mark.parametrize("outcome", [None, coordination.ToozConnectionError("refused")])
def test_a_start_that_ends_answers_as_tooz_did(monkeypatch, outcome):
    coordinator = coordination.get_coordinator("zookeeper://127.0.0.1:9", b"c1")
    start = Start(monkeypatch, coordinator, outcome)
    start.go.set()
    if outcome is None:
        assert zookeeper.start_session(coordinator, 60.0, threading.Event()) is True
    else:
        with pytest.raises(coordination.ToozConnectionError, match="refused"):
            zookeeper.start_session(coordinator, 60.0, threading.Event())
    assert start.closed == []
