"""A daemon and a reporter asked to stop while their ZooKeeper is gone stop, in bounded time.

``systemctl stop`` of a daemon whose ZooKeeper ensemble is gone (every server frozen or killed)
used to hang for ever: the leave waited for ZooKeeper's answers to the deletes of its claims
and of its member with no limit, and tooz's ``stop()`` waited for its heartbeat thread and for
another leave, also with none; kazoo holds a request made while no server answers until one
does. Now every wait is bounded by the session timeout (:mod:`computed.fleet.zookeeper`,
"Bounded waits"): what the daemon leaves behind is ephemeral and goes when the session expires,
and its log says so.

Each test runs a daemon and a reporter as processes of their own, on a ZooKeeper of the test's
own (the stack's is shared), freezes (SIGSTOP) or kills (SIGKILL) that ZooKeeper and sends both
SIGTERM (the reporter's way out deletes its service record in ZooKeeper). The bound they must
exit within is not a performance figure: it only tells a slow stop from a hang. Last,
``computed-manage`` on a frozen ZooKeeper: one line naming the servers.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess

import pytest

from computed.testing import process
from computed.testing.zookeeper import ZooKeeper
from tests import cli
from tests.functional.daemons import dump_logs

#: Processes: the test signals the daemon and reads its exit status.
pytestmark = pytest.mark.daemon_processes

WORLD_NODES = 4
SESSION = 2
#: Far above the bound: the drain's own limit must not be what ends a hung leave.
DRAIN_TIMEOUT = 300
#: Seconds after SIGTERM past which the daemon counts as hung: a few session timeouts for the
#: leave's bounded waits and kazoo's close (max(10 s, the session timeout)), and a margin for
#: the RPC servers' stop and a loaded machine.
HUNG_AFTER = 10 * SESSION + 60
#: The session timeout of the daemon asked to stop while it starts: twice the others', so
#: that its start (kazoo's connect, bounded by it, and the start's own limit of twice it, 8 s)
#: is still under way when the SIGTERM comes on a loaded machine (it comes a few tenths of a
#: second after the connect began). Not longer: the daemon's exit waits for kazoo's connect
#: attempt to time out (it took 30 s with a 30 s session, 10 s with a 10 s one).
START_SESSION = 2 * SESSION
#: How long computed-manage, computed-status and computed-api wait for a session on the frozen
#: ZooKeeper (10 s and 15 s by default), and the session the commands ask for (at least 10 s by
#: default, which is also how long kazoo's connect attempt waits for the frozen server's
#: answer): the one line they end with is the same.
CONNECT_LIMITS = (f"command_connect_timeout = 1\ncommand_session_timeout = {SESSION}\n"
                  f"api_connect_timeout = 1")


@pytest.fixture
def zookeeper(tmp_path):
    """A ZooKeeper of the test's own, which the test may freeze or kill."""
    server = ZooKeeper(tmp_path / "zk", {})
    server.start()
    yield server
    if process.alive(server.pid):
        os.kill(server.pid, signal.SIGCONT)  # a frozen process does not act on SIGTERM
    server.stop()


def stopped(process, gone: str) -> int:
    """``process``'s exit status once it ended; an AssertionError (and SIGKILL) when it still
    runs :data:`HUNG_AFTER` seconds after the SIGTERM the caller sent it."""
    try:
        return process.proc.wait(HUNG_AFTER)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError(f"{process.host} still ran {HUNG_AFTER} s after SIGTERM with its "
                             f"ZooKeeper {gone}\n{dump_logs([process])}") from None


@pytest.mark.parametrize("gone", ["frozen", "killed"])
def test_a_daemon_stops_in_bounded_time_when_zookeeper_is_gone(world, zookeeper, gone):
    daemon = world.daemon("c1", session_timeout=SESSION, drain_timeout=DRAIN_TIMEOUT,
                          zookeeper_url=zookeeper.url)
    reporter = world.reporter("r1", session_timeout=SESSION, zookeeper_url=zookeeper.url)
    daemon.wait_log("claimed ")  # it holds claims, whose deletes ZooKeeper will not answer
    reporter.wait_log("serving topic")  # and it published its service record

    os.kill(zookeeper.pid, signal.SIGSTOP if gone == "frozen" else signal.SIGKILL)
    daemon.signal(signal.SIGTERM)
    reporter.signal(signal.SIGTERM)
    status = stopped(daemon, gone)
    assert stopped(reporter, gone) == 0, dump_logs([reporter])

    log = daemon.log.read_text()
    assert status == 0, dump_logs([daemon])
    # Why the leave was not confirmed, one line each for the claims and the member.
    assert "leaving without ZooKeeper confirming the delete of" in log, dump_logs([daemon])
    assert ("host c1 leaves group " + world.group + " without ZooKeeper confirming it"
            in log), dump_logs([daemon])
    assert "computed stopped" in log


def test_computed_manage_on_a_frozen_zookeeper_is_one_line(stack, zookeeper, tmp_path):
    """A check, not a fix's proof (this passed before too): a command whose ZooKeeper is
    frozen ends within its connect limit with one line naming the servers, no traceback.
    (A failure after the session is up is tests/unit/cmd/test_cli_habits.py's.)"""
    conf = tmp_path / "manage.conf"
    conf.write_text(stack.computed_conf(host="m1").replace(
        f"backend_url = {stack['zookeeper'].url}?timeout=2",
        f"backend_url = {zookeeper.url}?timeout={SESSION}\n{CONNECT_LIMITS}"))
    os.kill(zookeeper.pid, signal.SIGSTOP)
    result = cli.run("computed-manage", "--config-file", conf, "fleet", "status", home=tmp_path)
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr and result.threads_left == (), result
    line, = result.stderr.splitlines()
    assert f"fleet status: ZooKeeper at {zookeeper.hosts} unreachable" in line, line


def frozen_conf(stack, zookeeper, tmp_path, name: str, extra: str = "") -> pathlib.Path:
    """A configuration whose backend_url is the test's own ZooKeeper (2 s sessions) and whose
    database cannot be reached (these commands fail on ZooKeeper before they read it)."""
    conf = tmp_path / f"{name}.conf"
    conf.write_text(stack.computed_conf(
        host=name, database="postgresql+psycopg2://postgres@127.0.0.1:9/none",
        extra=extra).replace(
        f"backend_url = {stack['zookeeper'].url}?timeout=2",
        f"backend_url = {zookeeper.url}?timeout={SESSION}\n{CONNECT_LIMITS}"))
    return conf


def test_computed_api_on_a_frozen_zookeeper_is_one_line(stack, zookeeper, tmp_path):
    """Before, kazoo's KazooTimeoutError (no session within 15 s) left computed-api as a
    traceback; now the one line computed-manage prints, exit 1."""
    conf = frozen_conf(stack, zookeeper, tmp_path, "a1", extra=(
        f"[api]\nbind_host = 127.0.0.1\nbind_port = {process.free_port()}\n"
        f"auth_strategy = noauth2\n"))
    os.kill(zookeeper.pid, signal.SIGSTOP)
    result = cli.run("computed-api", "--config-file", conf, home=tmp_path)
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr and result.threads_left == (), result
    last = result.stderr.splitlines()[-1]
    assert last.startswith(f"computed-api: error: ZooKeeper at {zookeeper.hosts} unreachable: "
                           ), last


def test_computed_status_on_a_frozen_zookeeper_fails_its_checks_in_one_line(
        stack, zookeeper, tmp_path):
    """A check, not a fix's proof (this passed before too): the checks that need ZooKeeper
    fail with one line naming its servers, exit 2 (a failure), no traceback. (A failure after
    the session is up is tests/unit/cmd/test_status_zookeeper.py's.)"""
    conf = frozen_conf(stack, zookeeper, tmp_path, "s1")
    os.kill(zookeeper.pid, signal.SIGSTOP)
    result = cli.run("computed-status", "--config-file", conf, "upgrade", "check",
                     home=tmp_path)
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr + result.stdout and result.stderr == "", result
    said = {line.partition(": ")[0]: line.partition(": ")[2]
            for line in result.stdout.splitlines()}
    for check in ("Service versions", "ZooKeeper"):
        assert said[check].startswith(f"Failure: cannot reach ZooKeeper at {zookeeper.hosts} "
                                      f"unreachable: no session within"), said


def test_a_daemon_asked_to_stop_while_it_starts_on_a_frozen_zookeeper_stops_at_once(
        world, zookeeper):
    """Its session's start waited for ZooKeeper without looking at the stop: kazoo's connect
    for the URL's timeout (:data:`START_SESSION` here: a daemon's start may ask a long
    session), and tooz's creation of its namespace with no limit at all when the connection
    dropped under it (the unit tests of computed.fleet.zookeeper.start_session show that case).
    Now the start gives up at the stop: exit 0, one line. (Its exit still waits for kazoo's
    connection thread, whose connect attempt ends at that timeout: kazoo's close cannot cut it
    short.)"""
    os.kill(zookeeper.pid, signal.SIGSTOP)
    daemon = world.daemon("c1", session_timeout=START_SESSION, zookeeper_url=zookeeper.url)
    daemon.wait_log("Connecting to ")  # kazoo's: the session's start has begun
    daemon.signal(signal.SIGTERM)
    assert stopped(daemon, "frozen") == 0, dump_logs([daemon])
    log = daemon.log.read_text()
    assert "computed stopped: SIGTERM during its start, before it joined group" in log, \
        dump_logs([daemon])
    assert "Traceback" not in log
