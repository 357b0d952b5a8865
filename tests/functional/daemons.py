"""computed daemons and reporters for functional tests, and what tests read back from them.

A :class:`Daemon` is the real ``computed`` console script with its own config file (pointing at the
stack), log and audit log: a process of its own with ``process=True`` (what a test kills,
freezes or signals), else run in the test's process (:mod:`tests.functional.inprocess`: the same
composition root, its own sessions and connections, its log in its own file). Fixtures choose
with :func:`want_processes`: the tests marked ``daemon_processes`` get processes.

:func:`ownership_now` reads the fleet straight from ZooKeeper and :func:`expected_ownership`
computes what the rules say it should be, so a test can wait for the two to agree.

A test about what one daemon does with its nodes must not count on the ring giving it any of a
few random uuids (with 4 nodes and 2 daemons it gets none once in 16 runs): :func:`node_for`
picks a node the ring gives that daemon, enrolling one when it has none, and
:func:`uuid_owned_by` draws such a uuid for a test that enrolls its own.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from computed.fleet import audit
from computed.fleet.claims import claims_path, read_claims
from computed.fleet.membership import fleet_root, read_members
from hashring.ownership import Member, compute_ownership, member_ring
from tests import cli
from tests.database import copy_sqlite
from tests.functional import inprocess

BIN = Path(sys.executable).parent
GROUP = "computed"
#: ZooKeeper session timeouts (seconds) unless a test chooses: short for processes, which tests
#: kill and freeze (a dead daemon's nodes move once its session expires); tooz's default for
#: in-process services, which nobody kills. tooz also waits that long for the first connection
#: and the daemon exits 1 when it is not made: in-process, the starts of a test's services
#: share one interpreter lock, and at load 27 two daemons' first connections to a TLS
#: ZooKeeper took 2.0 and 2.5 s (both daemons exited 1: "Cannot use coordination backend ...
#: Connection time-out").
PROCESS_SESSION = 2
IN_PROCESS_SESSION = 10
#: The message bus of every daemon and reporter here. oslo.messaging's rabbit driver looks at a
#: stop only between two waits for a message on a listening connection, each at most
#: heartbeat_timeout_threshold / heartbeat_rate / 2 seconds: with its defaults (60 and 3) that
#: is its idle poll's 5 s, and every stop of a server, and the cleanup of a transport that made
#: calls, waited 0-5 s (2.8 s median for a daemon's two servers). Here 0.25 s. Not the
#: product's setting: an idle connection then wakes four times a second and sends a heartbeat
#: every 0.5 s (computed.runtime.rpc.stop_together says what that costs).
MESSAGING = "[oslo_messaging_rabbit]\nheartbeat_rate = 120\n"
#: For daemons that no reporter serves: a daemon's report thread waits ``[reporter] call_timeout``
#: for an answer that never comes, and an in-process daemon's stop waits for that thread
#: (inprocess.THREAD_GRACE): with the 10 s above, a tear-down waited up to 10 s per daemon (4-9 s
#: of each of test_fencing's and test_zookeeper_trust's). A test that reads no report gives its
#: daemons this ``extra``: the call gives up after 1 s.
NO_REPORTER = "[reporter]\ncall_timeout = 1\n"


def fleet_database(workdir: Path, template: Path | None = None) -> str:
    """A fresh, migrated sqlite database for one fleet (tests must not share provider rows):
    a copy of ``template`` (a database :func:`fleet_database` made, as the ``fleet_db``
    fixture's session template), else migrated here (``db.sync``: every revision, about a
    second)."""
    path = Path(workdir) / "computed.sqlite"
    if template is not None:
        return copy_sqlite(template, path)
    from computed import db
    url = f"sqlite:///{path}"
    db.sync(url)
    return url


def want_processes(request: Any) -> bool:
    """Whether the test of ``request`` (a pytest fixture request) runs its daemons and
    reporters as processes: it is marked ``daemon_processes`` (pytest.ini)."""
    return request.node.get_closest_marker("daemon_processes") is not None


class Process:
    """A computed console script with its own config, log and (for daemons) audit log; a process
    of its own (``process=True``) or a :class:`tests.functional.inprocess.Service`."""

    script = "computed"

    def __init__(self, stack, workdir: Path, host: str, session_timeout: float | None = None,
                 refresh: float = 1.0, weight: int = 1, drain_timeout: int = 20,
                 group: str = GROUP, database: str = "", extra: str = "",
                 rehome_grace: float = 120.0, zookeeper_url: str = "", process: bool = True):
        self.host = host
        self.process = process
        if session_timeout is None:
            session_timeout = PROCESS_SESSION if process else IN_PROCESS_SESSION
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.conf = self.workdir / f"{host}.conf"
        self.log = self.workdir / f"{host}.log"
        self.audit = self.workdir / f"{host}.audit"
        zk = stack["zookeeper"].url
        self.conf.write_text(stack.computed_conf(host=host, database=database, extra=(
            f"[fleet]\nnode_refresh_interval = {refresh}\naudit_log = {self.audit}\n"
            f"weight = {weight}\ndrain_timeout = {drain_timeout}\n"
            f"rehome_grace = {rehome_grace}\n{MESSAGING}"
            f"[reporter]\ntopic = reporter-{group}\ncall_timeout = 10\n" + extra)).replace(
            f"backend_url = {zk}?timeout=2",
            f"backend_url = {_with_timeout(zookeeper_url or zk, session_timeout)}\n"
            f"group = {group}"))
        self.proc: subprocess.Popen | None = None
        self.service: inprocess.Service | None = None

    def start(self) -> Process:
        argv = ["--config-file", str(self.conf)]
        if not self.process:
            self.service = inprocess.Service(self.script, argv, self.log, self.host).start()
            return self
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([str(BIN / self.script), *argv],
                                         stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        return self

    def signal(self, signum: int) -> None:
        if self.service is not None:
            self.service.signal(signum)  # raises: only a process can be signalled
        self.proc.send_signal(signum)

    def kill(self) -> None:
        if self.service is not None:
            self.service.kill()  # raises: only a process can be killed
        self.proc.kill()
        self.proc.wait(10)

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM (in-process: its stop) and wait: a daemon drains and leaves. The exit
        status."""
        if self.service is not None:
            return self.service.stop(timeout)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    @property
    def alive(self) -> bool:
        if self.service is not None:
            return self.service.alive
        return self.proc is not None and self.proc.poll() is None

    def records(self) -> list[dict]:
        return audit.read(self.audit) if self.audit.exists() else []

    def wait_log(self, text: str, timeout: float = 60) -> None:
        """Wait until the process has logged ``text`` (e.g. that it serves its topic)."""
        deadline = time.monotonic() + timeout
        while not (self.log.exists() and text in self.log.read_text(errors="replace")):
            if not self.alive or time.monotonic() > deadline:
                raise AssertionError(f"{self.host} never logged {text!r}\n{dump_logs([self])}")
            time.sleep(0.1)

    def ensure_stopped(self) -> None:
        """A process killed if it runs; an in-process service stopped without its drain, and
        an AssertionError if it leaves threads or signal handlers behind."""
        if self.service is not None:
            self.service.ensure_stopped()
        elif self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def stop_all(processes: Iterable[Process], meanwhile: Callable[[], object] = lambda: None
             ) -> None:
    """Every one of ``processes`` stopped (:meth:`Process.ensure_stopped`), then their failures
    raised. Processes are killed first; the in-process services are asked at once, so that none
    waits on another's answer, and ``meanwhile`` (the rest of a tear-down) runs while they
    stop: an in-process service's stop takes seconds of waiting (oslo.messaging's listeners
    end at their next poll, up to 5 s later), a process's SIGKILL none."""
    processes = list(processes)
    in_process = [p for p in processes if p.service is not None]
    for process in processes:
        if process.service is None:
            process.ensure_stopped()  # killed before the rest: as it always was
        elif process.service.alive:
            process.service.stop_request.request("tear-down", drain=False)
    failures = []
    try:
        meanwhile()
    finally:
        for process in in_process:
            try:
                process.ensure_stopped()
            except AssertionError as exc:
                failures.append(str(exc))
    if failures:
        raise AssertionError("\n".join(failures))


def _with_timeout(url: str, session_timeout: float) -> str:
    return f"{url}{'&' if '?' in url else '?'}timeout={session_timeout}"


class Daemon(Process):
    script = "computed"


class Reporter(Process):
    script = "computed-reporter"


def zk_client(stack, auth: str = "") -> KazooClient:
    """A client of the stack's ZooKeeper; ``auth`` ("user:password") authenticates it with the
    digest scheme, as a daemon whose backend_url carries those credentials."""
    client = KazooClient(hosts=stack["zookeeper"].hosts, timeout=10,
                         auth_data=[("digest", auth)] if auth else None)
    client.start(timeout=15)
    return client


def ownership_now(client: KazooClient, group: str = GROUP) -> tuple[list, dict]:
    """(members, {node: claiming host}) as ZooKeeper has them now."""
    members = read_members(client, f"/tooz/{group}", f"{fleet_root(group)}/draining")
    claims = read_claims(client, fleet_root(group))
    return members, {node: record.host for node, record in claims.items()}


def expected_ownership(members: list, nodes: Iterable[str]) -> dict[str, str]:
    ownership = compute_ownership([m.as_ring_member() for m in members], list(nodes), {})
    return ownership.owners()


def uuid_owned_by(members: Iterable[Member], host: str) -> str:
    """A fresh node uuid whose ring owner among ``members`` (hashring members: name, weight,
    draining) is ``host``. Ring ownership depends only on the uuid and the members, so the node
    is ``host``'s whichever other nodes exist, as long as it hosts no instance and the members
    stay the same."""
    members = list(members)
    ring = member_ring(members)
    if host not in ring.nodes:
        raise ValueError(f"{host} is not on the ring of {members}: it can own nothing")
    while True:
        node = str(uuid.uuid4())
        if compute_ownership(members, [node], {}, ring=ring).owner(node) == host:
            return node


def node_for(stack, world, zk: KazooClient, host: str, schedulable: bool = True,
             ring_members: Iterable[Member] | None = None) -> str:
    """A node of ``world`` that the ring gives ``host`` among the members ZooKeeper has now (or
    among ``ring_members``, hashring members: e.g. with a daemon about to join, for a node
    ``host`` keeps through the join); when the ring gives it none of the world's, one is
    enrolled (with the world's resource class, made schedulable unless ``schedulable`` is
    false) with a uuid the ring gives ``host`` and added to ``world.nodes`` (deleted with them).
    The caller waits for ``host`` to claim it; a join or a leave the members do not foresee may
    move it."""
    from computed.testing.ironic import enroll_nodes
    if ring_members is None:
        ring_members = [m.as_ring_member() for m in ownership_now(zk, world.group)[0]]
    ring_members = list(ring_members)
    owners = compute_ownership(ring_members, list(world.nodes), {}).owners()
    owned = sorted(n for n, h in owners.items() if h == host)
    if owned:
        return owned[0]
    node = uuid_owned_by(ring_members, host)
    enroll_nodes(stack["ironic"].url, 1, resource_class=world.resource_class,
                 prefix=f"for-{host}-{world.group}", workers=1, uuid=node)
    world.nodes.append(node)
    if schedulable:
        make_available(stack, [node])
    return node


def wait_converged(client: KazooClient, nodes: list[str], hosts: set[str], timeout: float = 60,
                   group: str = GROUP) -> float:
    """Wait until exactly ``hosts`` are members and the claims equal the rules' answer for them;
    returns the seconds it took."""
    started = time.monotonic()
    deadline = started + timeout
    root = fleet_root(group)
    claims: dict[str, str] = {}
    read_at = None  # the claims' parent's pzxid when ``claims`` was read
    expected: dict[str, str] = {}
    expected_for = None  # the members ``expected`` was computed for
    while True:
        members = read_members(client, f"/tooz/{group}", f"{root}/draining")
        # A claim is only ever created or deleted, never rewritten (computed.fleet.claims): the
        # claims stay as read while their parent's pzxid (the zxid of its last child created or
        # deleted) does. Read every claim only then, not every 0.1 s: one request where there
        # were as many as there are nodes.
        stat = client.exists(claims_path(root))
        if stat is None or stat.pzxid != read_at:
            claims = {node: r.host for node, r in read_claims(client, root).items()}
            read_at = None if stat is None else stat.pzxid
        if members != expected_for:
            expected, expected_for = expected_ownership(members, nodes), members
        names = {m.name for m in members}
        if names == hosts and claims == expected:
            return time.monotonic() - started
        if time.monotonic() > deadline:
            owners = {}
            for host in claims.values():
                owners[host] = owners.get(host, 0) + 1
            raise AssertionError(f"not converged after {timeout}s: members {sorted(names)}, "
                                 f"want {sorted(hosts)}; claims per host {owners}; "
                                 f"{len(set(nodes) - set(claims))} nodes unclaimed")
        time.sleep(0.1)


def merged_records(daemons: Iterable[Daemon]) -> list[dict]:
    records = [r for daemon in daemons for r in daemon.records()]
    return sorted(records, key=lambda r: r["t"])


def dump_logs(daemons: Iterable[Daemon]) -> str:
    return "\n".join(f"--- {d.host}\n" + d.log.read_text()[-3000:]
                     for d in daemons if d.log.exists())


def json_status(daemon: Daemon) -> dict:
    """``computed-manage fleet status --json`` with the daemon's configuration, run in this
    process (tests/cli.py: a function call where a subprocess costs 1-3 s of imports)."""
    result = cli.run("computed-manage", "--config-file", daemon.conf, "fleet", "status",
                     "--json", home=daemon.workdir)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# --- the real services, as the tests poke them ------------------------------------------------

def wait_for(check, timeout, what, processes=()):
    """Poll ``check`` until it returns something true; fail with the processes' logs."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached after {timeout}s\n{dump_logs(processes)}")
        time.sleep(0.2)


def ironic(stack, method, path, body=None):
    from computed.testing.ironic import request
    return request(method, f"{stack['ironic'].url}/v1{path}", body)


def wait_state(stack, node, state):
    wait_for(lambda: ironic(stack, "GET", f"/nodes/{node}")["provision_state"] == state, 60,
             f"node {node} {state}")


def make_available(stack, nodes):
    """manage + provide + power off: the nodes become schedulable (reserved 0)."""
    for node in nodes:
        ironic(stack, "PUT", f"/nodes/{node}/states/provision", {"target": "manage"})
    for node in nodes:
        wait_state(stack, node, "manageable")
        ironic(stack, "PUT", f"/nodes/{node}/states/provision", {"target": "provide"})
    for node in nodes:
        wait_state(stack, node, "available")
        ironic(stack, "PUT", f"/nodes/{node}/states/power", {"target": "power off"})
    for node in nodes:  # fake power answers asynchronously; power None counts as reserved
        # node=node binds this node (ruff B023); wait_for is done with it within the iteration
        wait_for(lambda node=node: ironic(stack, "GET", f"/nodes/{node}")["power_state"]
                 == "power off", 30, f"node {node} powered off")


def seen(placement, node):
    """The provider as Placement has it, or None while it does not exist or is half-written
    (created, inventory not yet set: the reporter is in the middle of applying it)."""
    from computed.placement.client import PlacementError
    try:
        return placement.get(node)
    except PlacementError:
        return None


def wait_schedulable(world, placement, timeout: float = 120):
    """Every node of ``world`` in Placement with reserved 0 (what a build can land on)."""
    def schedulable(node: str) -> bool:
        provider = seen(placement, node)  # one read a node and poll (3 GETs), not two
        return provider is not None and provider.reserved == 0

    wait_for(lambda: all(schedulable(n) for n in world.nodes), timeout, "nodes schedulable",
             world.processes)


def bus_conf(stack):
    """A bare configuration for an RPC transport of the test's process on ``stack``'s broker
    (its URL passed to get_transport): the queue manager's locks in the stack."""
    from oslo_config import cfg

    from computed.runtime import rpc
    conf = cfg.ConfigOpts()
    conf([])
    rpc.register_opts(conf)
    conf.set_override("lock_path", str(stack.lock_path), group="messaging")
    return conf


def instance_bus(stack):
    """A started kazoo client and an RPC transport on the stack: what a ServerAPI in the test
    process needs to find a node's owner and cast to it. The caller stops the client."""
    from computed.runtime import rpc
    zk = KazooClient(hosts=stack["zookeeper"].hosts)
    zk.start(timeout=15)
    return zk, rpc.get_transport(bus_conf(stack), "test", url=stack["rabbitmq"].url)
