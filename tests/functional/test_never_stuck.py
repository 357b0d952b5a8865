"""Never stuck (issue 16, items 11-13): a service that hangs, a broker that is not there yet, a
database that fails at rejoin. Each ends in one clear line and a retry, never in a hang."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from urllib import parse

import pytest
from oslo_config import cfg

from computed import conf as computed_conf
from computed.baremetal.driver import DriverUnavailable
from computed.db import instances as db_instances
from computed.placement.client import PlacementClient
from computed.placement.http import PlacementUnavailable
from computed.providers.state import ProviderState
from computed.runtime import keystone
from computed.testing.process import free_port
from computed_ironic.driver import IronicDriver
from tests.functional.daemons import Daemon, ownership_now, seen, wait_for, zk_client
from tests.functional.test_reporting import _call, playing_a_daemon

#: Processes: it signals daemons and reads their exit status (the one test that does neither runs
#: its reporters in the test's process: tests/functional/inprocess.py).
pytestmark = pytest.mark.daemon_processes

# Nodes the world fixture enrolls: one is enough here.
WORLD_NODES = 2
# Seconds: the HTTP timeout the tests configure, so that a hang ends quickly.
TIMEOUT = 1
# The default [reporter] call_timeout: how long a daemon waits for a reporter's answer.
REPORTER_CALL_TIMEOUT = 120
# A call that is not over after this long is taken for a hang (far above TIMEOUT plus retries).
HANG = 60


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """An HTTP URL on loopback whose server accepts every connection and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(conn)  # held open, never read from nor written to

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        listener.close()
        for conn in accepted:
            conn.close()


class Forwarder:
    """A TCP port on loopback that, once :meth:`start` ed, forwards every connection to
    ``target``: a broker that is not there yet, then comes up, on the same address."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self._lock:
                if self._listener is None:  # closed meanwhile: this connection is cut too
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Stop listening and cut every forwarded connection (:meth:`start` opens it again)."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, []
        if listener is not None:
            # shutdown first: a close alone leaves the kernel socket listening (and accepting)
            # while the accept thread is blocked on it.
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@contextlib.contextmanager
def broker_not_there_yet(stack) -> Iterator[tuple[Forwarder, str]]:
    """(the forwarder, a transport_url through it): nothing listens until it is started."""
    url = parse.urlsplit(stack["rabbitmq"].url)
    forwarder = Forwarder((url.hostname, url.port))
    netloc = f"{url.username}:{url.password}@127.0.0.1:{forwarder.port}"
    try:
        yield forwarder, parse.urlunsplit(url._replace(netloc=netloc))
    finally:
        forwarder.close()


def finished(call, *args, **kwargs):
    """Run ``call`` in a thread; (returned, raised) once it ends, or fail the test as a hang."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["returned"] = call(*args, **kwargs)
        except Exception as exc:  # the test looks at it
            outcome["raised"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), f"{call} still running after {HANG}s: a hang"
    return outcome.get("returned"), outcome.get("raised")


def service_conf(tmp_path, text: str = "") -> cfg.ConfigOpts:
    path = tmp_path / "computed.conf"
    path.write_text("[coordination]\nbackend_url = zookeeper://127.0.0.1:9\n" + text)
    conf = cfg.ConfigOpts()
    computed_conf.register_opts(conf)
    conf(["--config-file", str(path)], project="computed")
    return conf


# --- item 11: HTTP timeouts on every Placement and Ironic request -----------------------------

def test_a_placement_that_never_answers_fails_the_request_with_one_line(tmp_path):
    with silent_server() as url:
        conf = service_conf(tmp_path, f"[placement]\nauth_type = admin_token\ntoken = admin\n"
                                      f"endpoint = {url}\ntimeout = {TIMEOUT}\n")
        client = PlacementClient(keystone.load_adapter(conf, "placement"))
        node = str(uuid.uuid4())
        state = ProviderState(uuid=node, name=node, resource_class="CUSTOM_GOLD", reserved=0)
        _, raised = finished(client.apply, state)
    assert isinstance(raised, PlacementUnavailable), raised
    line = str(raised)
    assert "\n" not in line
    assert "Placement" in line and url in line and node in line, line


def test_the_http_timeout_has_a_default(tmp_path):
    conf = service_conf(tmp_path)
    assert conf.placement.timeout > 0 and conf.ironic.timeout > 0
    assert keystone.load_session(_noauth(conf, "placement"), "placement").timeout == \
        conf.placement.timeout


def _noauth(conf: cfg.ConfigOpts, group: str) -> cfg.ConfigOpts:
    conf.set_override("auth_type", "none", group)
    keystone.register_plugin_opts(conf, group)
    conf.set_override("endpoint_override", "http://127.0.0.1:9", group)
    return conf


def test_an_ironic_that_never_answers_fails_the_listing_with_one_line(tmp_path):
    with silent_server() as url:
        conf = service_conf(tmp_path, f"[ironic]\nauth_type = none\nendpoint_override = {url}\n"
                                      f"timeout = {TIMEOUT}\napi_max_retries = 0\n")
        driver = IronicDriver.from_conf(conf)
        try:
            _, raised = finished(driver.list_nodes)
        finally:
            driver.close()
    assert isinstance(raised, DriverUnavailable), raised
    line = str(raised)
    assert "\n" not in line
    assert "Ironic" in line and url in line, line


def test_a_reporter_whose_placement_never_answers_answers_failed_and_holds_no_lock(
        stack, world):
    """The reporter's Placement accepts connections and never answers: the batch is answered
    ``failed`` (the daemon resends it) well before the daemon's default call timeout, the log
    says why in one line naming Placement's URL, and the provider's row is not left locked:
    another reporter applies the same report right after. ``[placement] timeout`` is 5 s here
    (the default 30 s only makes the test slower; that the default stays below the default call
    timeout is tests/unit/conf/test_timeouts.py)."""
    node = world.nodes[0]
    state = {"uuid": node, "name": node, "resource_class": world.rc, "reserved": 0,
             "traits": []}
    with silent_server() as url:
        stuck = world.reporter("r-silent", process=False, extra=(
            f"[placement]\nendpoint = {url}\nresync_interval = 0\ntimeout = 5\n"))
        stuck.wait_log("serving topic")
        with playing_a_daemon(stack, world, node) as (client, epoch):
            # As patient as a daemon with the default [reporter] call_timeout.
            daemon = client.prepare(timeout=REPORTER_CALL_TIMEOUT)
            report = {"uuid": node, "epoch": epoch, "seq": 1, "host": "tester", "state": state}
            answers = _call(daemon, [report, {**report, "seq": 2}])
            assert answers == [[node, 1, "failed"], [node, 2, "failed"]], (
                answers, stuck.log.read_text()[-3000:])
            lines = [line for line in stuck.log.read_text().splitlines()
                     if "Placement unavailable" in line]
            assert len(lines) == 1 and url in lines[0], lines
            assert "no answer from Placement" in lines[0], lines
            stuck.stop()
            healthy = world.reporter("r-healthy", process=False)
            healthy.wait_log("serving topic")
            got = wait_for(lambda: _call(client, [{**report, "seq": 3}]), HANG,
                           "the healthy reporter applies", [healthy])
            assert got == [[node, 3, "applied"]], got


# --- item 12: the broker down at start ------------------------------------------------------

def _stopped_cleanly(process, last_line: str) -> None:
    """SIGTERM ends ``process`` on its own (no hang), with status 0 and ``last_line`` logged."""
    before = len(process.log.read_text())
    process.signal(signal.SIGTERM)
    try:
        status = process.proc.wait(HANG)
    except Exception:
        raise AssertionError(f"{process.host} ignored SIGTERM for {HANG}s\n"
                             f"{process.log.read_text()[-3000:]}") from None
    log = process.log.read_text()[before:]
    assert status == 0, log[-3000:]
    assert last_line in log and "Traceback" not in log, log[-3000:]


def test_a_daemon_and_a_reporter_started_before_the_broker_stay_killable(stack, world):
    with broker_not_there_yet(stack) as (_, transport_url):
        extra = f"[DEFAULT]\ntransport_url = {transport_url}\n"
        daemon = world.daemon("c1", extra=extra)
        reporter = world.reporter("r1", extra=extra)
        daemon.wait_log("joined group")
        for process in (daemon, reporter):  # both are trying the broker: oslo.messaging says so
            # (in the kernel's words on native threads; eventlet's sockets said ECONNREFUSED)
            process.wait_log("Connection refused")
        _stopped_cleanly(daemon, "computed stopped")
        _stopped_cleanly(reporter, "computed-reporter stopped")


def test_a_daemon_and_a_reporter_started_before_the_broker_report_once_it_is_up(
        stack, world, placement):
    node = world.nodes[0]
    with broker_not_there_yet(stack) as (broker, transport_url):
        extra = f"[DEFAULT]\ntransport_url = {transport_url}\n"
        daemon = world.daemon("c1", extra=extra)
        reporter = world.reporter("r1", extra=extra)
        daemon.wait_log("joined group")
        assert seen(placement, node) is None
        broker.start()
        reporter.wait_log("serving topic")
        wait_for(lambda: seen(placement, node), HANG, "the node reported", [daemon, reporter])
        _stopped_cleanly(daemon, "computed stopped")
        _stopped_cleanly(reporter, "computed-reporter stopped")


def test_a_daemon_does_not_wait_for_a_report_in_flight_to_exit(stack, world):
    """No reporter answers: the daemon's report call is in flight (for up to its call timeout,
    here far longer than HANG) when SIGTERM comes. The daemon drains and exits without waiting
    for the answer: the reports it did not get confirmed are resent by whoever claims the
    nodes next, and a late apply of them is fenced."""
    daemon = world.daemon("c1", drain_timeout=120, extra="[reporter]\ncall_timeout = 600\n")
    daemon.wait_log("claimed")
    time.sleep(3)  # the report thread sends the claimed nodes' first reports meanwhile
    _stopped_cleanly(daemon, "computed stopped")


# --- item 13: the database away at rejoin ----------------------------------------------------

def test_a_readoption_that_fails_at_rejoin_is_retried_until_the_database_is_back(stack, world,
                                                                                 tmp_path):
    """The daemon's database goes away, then its ZooKeeper session expires (it was frozen): it
    rejoins with a new member epoch while its instance cannot be re-adopted. The failure is
    logged and retried; once the database is back the instance is under the new member epoch,
    without a restart."""
    assert "postgres" in stack, "this test needs the PostgreSQL harness"
    database = world.engine.url
    instance = str(uuid.uuid4())
    db_instances.create_instance(world.engine, instance, world.rc, node_uuid=world.nodes[0],
                                 host="c1", member_epoch=1, state="ACTIVE")
    forwarder = Forwarder((database.host, database.port))
    forwarder.start()
    try:
        through = database.set(port=forwarder.port).render_as_string(hide_password=False)
        daemon = Daemon(stack, tmp_path, "c1", group=world.group, database=through,
                        drain_timeout=2).start()
        world.processes.append(daemon)

        def member_epoch() -> int:
            return db_instances.get_instance(world.engine, instance).member_epoch

        first = wait_for(lambda: member_epoch() != 1 and member_epoch(), HANG,
                         "the instance re-adopted at the first join", [daemon])
        forwarder.close()  # the database is away ...
        daemon.signal(signal.SIGSTOP)  # ... and the session expires while the daemon is frozen
        zk = zk_client(stack)
        try:
            wait_for(lambda: "c1" not in {m.name for m in ownership_now(zk, world.group)[0]},
                     HANG, "c1's session expired", [daemon])
        finally:
            daemon.signal(signal.SIGCONT)
            zk.stop()
            zk.close()

        def rejoined() -> int | None:
            joins = [r["member_epoch"] for r in daemon.records() if r["event"] == "join"]
            return joins[-1] if len(joins) >= 2 else None

        epoch = wait_for(rejoined, HANG, "a rejoin", [daemon])
        # The re-adoption runs right after the join, against no database: once it failed, the
        # instance must still be under the first member epoch.
        daemon.wait_log("cannot re-adopt the instances of host c1", timeout=HANG)
        assert member_epoch() == first  # not re-adopted while the database is away
        forwarder.start()
        wait_for(lambda: member_epoch() == epoch, HANG,
                 "the instance re-adopted under the new member epoch", [daemon])
        failures = [line for line in daemon.log.read_text().splitlines()
                    if "cannot re-adopt the instances of host c1" in line]
        assert failures and "Connection refused" in failures[0], failures
        _stopped_cleanly(daemon, "computed stopped")
    finally:
        forwarder.close()
