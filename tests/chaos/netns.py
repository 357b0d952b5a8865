"""Several hosts on one machine: network namespaces, a bridge, forwarders and network faults.

Layout (everything created here carries the prefix :data:`PREFIX`, so a crashed run's leftovers
are found and removed by name at the next start):

* a run takes a free *slot* N (an flock in /run/computed-chaos, released when the process dies),
  so that concurrent runs never meet; below, ``cdcN`` is its prefix.
* a bridge ``cdcNbr`` in the root namespace with address ``10.231.N.1/24`` (the *controller*
  address). The controller services (ZooKeeper, RabbitMQ, PostgreSQL, Placement, Ironic) stay
  bound to 127.0.0.1 as the harness starts them; one ``socat`` forwarder per service port listens
  on ``10.231.0.1:<same port>`` and relays to ``127.0.0.1:<port>``. A daemon therefore reaches
  the controller only over its veth and the bridge, which is what the faults cut.
* one namespace ``cdcN-<host>`` per daemon, with a veth pair (``cdcN-Ih`` on the bridge,
  ``cdcN-In`` inside, address ``10.231.N.<10+I>/24``) and its own loopback. The daemon runs there
  through ``ip netns exec``, which execs (no fork), so its PID is the daemon's and signals reach
  it.

Faults: :meth:`Host.cut_zookeeper` drops, with nftables in the daemon's namespace only, every
packet to the controller's ZooKeeper port (every server's, on an ensemble; RabbitMQ, the
database, Ironic and Placement stay reachable); :meth:`Host.link_down` takes the namespace's end
of the veth down (cut from everything); :meth:`Host.heal` undoes both. No address outside
10.231.N.0/24 or loopback is used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from computed.testing import process

PREFIX = "cdc"
TABLE = "computed_chaos"
LOCKS = Path("/run/computed-chaos")
SLOTS = range(1, 200)


def names(slot: int) -> tuple[str, str, str]:
    """(name prefix, bridge, subnet) of run slot ``slot``: concurrent runs on one machine (two
    test sessions) each hold a slot (an flock) and never touch each other's namespaces."""
    return f"{PREFIX}{slot}", f"{PREFIX}{slot}br", f"10.231.{slot}"


class NetnsUnavailable(RuntimeError):
    """Network namespaces cannot be created here (not root, no iproute2, no CAP_NET_ADMIN)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def ensure_tools() -> None:
    """iproute2 and nftables (Debian's), installed with apt-get when missing."""
    missing = [pkg for tool, pkg in (("ip", "iproute2"), ("nft", "nftables"), ("socat", "socat"))
               if not shutil.which(tool)]
    if missing:
        process.run(["apt-get", "install", "-y", "-q", *missing], "apt-get install " +
                    " ".join(missing), env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                    timeout=600)


def available() -> str | None:
    """None when namespaces work here, else the reason they do not."""
    if os.geteuid() != 0:
        return "not root"
    try:
        ensure_tools()
    except Exception as exc:  # noqa: BLE001 - any failure means: not here
        return f"tools missing: {exc}"
    probe = f"{PREFIX}probe-{os.getpid()}"
    result = _ip("netns", "add", probe, check=False)
    if result.returncode != 0:
        return f"ip netns add failed: {result.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def cleanup_stale(slot: int | None = None) -> list[str]:
    """Remove the namespaces, links and forwarders of run slot ``slot`` (default: of every slot
    no live process holds: a crashed run's); returns what was removed. Rules live inside the
    namespaces and go with them."""
    slots = [slot] if slot is not None else [n for n in SLOTS if _slot_free(n)]
    removed = []
    netns_list = [line.split()[0] for line in _ip("netns", "list", check=False).stdout.splitlines()
                  if line.split()]
    links = [line.split(":")[1].strip().split("@")[0]
             for line in _ip("-o", "link", "show", check=False).stdout.splitlines()
             if len(line.split(":")) > 1]
    # Every forwarder's command line read once: a scan of /proc per slot (199 of them) took
    # 4.6-5.6 s at a run's start when the machine ran a few hundred processes at load 17-22.
    forwarders = _forwarders()
    for n in slots:
        prefix, bridge, subnet = names(n)
        for name in netns_list:
            if name.startswith(prefix + "-"):
                _ip("netns", "del", name, check=False)
                removed.append(f"netns {name}")
        for name in links:
            if name == bridge or name.startswith(prefix + "-"):
                _ip("link", "del", name, check=False)
                removed.append(f"link {name}")
        for pid in [pid for pid, cmdline in forwarders.items() if f"bind={subnet}.1," in cmdline]:
            try:
                os.kill(pid, 9)
                removed.append(f"forwarder pid {pid}")
            except OSError:
                pass
    return removed


def _slot_free(slot: int) -> bool:
    import fcntl
    LOCKS.mkdir(parents=True, exist_ok=True)
    with open(LOCKS / f"{slot}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        fcntl.flock(lock, fcntl.LOCK_UN)
        return True


def take_slot():
    """(slot, open lock file) of a free run slot, held until the file is closed."""
    import fcntl
    LOCKS.mkdir(parents=True, exist_ok=True)
    for slot in SLOTS:
        lock = open(LOCKS / f"{slot}.lock", "w")  # noqa: SIM115 - held for the run
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        return slot, lock
    raise NetnsUnavailable("no free chaos run slot")


def _forwarders() -> dict[int, str]:
    """{pid: command line} of every socat process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith("socat"):
            found[int(entry.name)] = cmdline
    return found


class Host:
    """One daemon's namespace."""

    def __init__(self, network: Network, name: str, index: int):
        self.network = network
        self.name = name
        self.ns = f"{network.prefix}-{name}"
        self.address = f"{network.subnet}.{10 + index}"
        self.outer = f"{network.prefix}-{index}h"
        self.inner = f"{network.prefix}-{index}n"
        self.zookeeper_cut = False
        self.link_is_down = False

    def create(self) -> None:
        _ip("netns", "add", self.ns)
        _ip("link", "add", self.outer, "type", "veth", "peer", "name", self.inner)
        _ip("link", "set", self.inner, "netns", self.ns)
        _ip("link", "set", self.outer, "master", self.network.bridge, "up")
        _ip("-n", self.ns, "addr", "add", f"{self.address}/24", "dev", self.inner)
        _ip("-n", self.ns, "link", "set", self.inner, "up")
        _ip("-n", self.ns, "link", "set", "lo", "up")
        self._nft("add", "table", "inet", TABLE)
        self._nft("add", "chain", "inet", TABLE, "out",
                  "{ type filter hook output priority 0; policy accept; }")

    def argv(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *argv]

    def _nft(self, *args: str) -> None:
        result = subprocess.run(["ip", "netns", "exec", self.ns, "nft", *args],
                                capture_output=True, text=True, timeout=30, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"nft {' '.join(args)} in {self.ns}: {result.stderr.strip()}")

    def cut_zookeeper(self) -> None:
        """Drop every packet from this namespace to the controller's ZooKeeper port(s)."""
        for port in self.network.zookeeper_ports:
            self._nft("add", "rule", "inet", TABLE, "out", "ip", "daddr",
                      self.network.controller, "tcp", "dport", str(port), "drop")
        self.zookeeper_cut = True

    def link_down(self) -> None:
        _ip("-n", self.ns, "link", "set", self.inner, "down")
        self.link_is_down = True

    def heal(self) -> None:
        if self.zookeeper_cut:
            self._nft("flush", "chain", "inet", TABLE, "out")
            self.zookeeper_cut = False
        if self.link_is_down:
            _ip("-n", self.ns, "link", "set", self.inner, "up")
            self.link_is_down = False

    def destroy(self) -> None:
        _ip("netns", "del", self.ns, check=False)
        _ip("link", "del", self.outer, check=False)


class Network:
    """The bridge, the forwarders and the daemons' namespaces; :meth:`close` removes all."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.hosts: dict[str, Host] = {}
        self.forwarders: list[int] = []
        self.zookeeper_ports: list[int] = []
        self._next = 0
        self.slot, self._lock = take_slot()
        self.prefix, self.bridge, self.subnet = names(self.slot)
        self.controller = f"{self.subnet}.1"

    def setup(self, ports: dict[str, int]) -> None:
        """Create the bridge and forward ``ports`` ({service: port}) from the controller
        address to loopback."""
        cleanup_stale(self.slot)
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.controller}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        # One ZooKeeper, or the servers of an ensemble ("zookeeper1", ...): cuts cut them all.
        self.zookeeper_ports = [port for name, port in ports.items()
                                if name.startswith("zookeeper")]
        for name, port in ports.items():
            listen = f"TCP-LISTEN:{port},bind={self.controller},fork,reuseaddr,backlog=256"
            pid = process.spawn(["socat", listen, f"TCP:127.0.0.1:{port}"],
                                self.workdir / f"forward-{name}.log")
            self.forwarders.append(pid)
        for port in ports.values():
            process.wait_until(lambda p=port: process.port_open(p, self.controller), 10,
                               f"forwarder {self.controller}:{port}")

    def host(self, name: str) -> Host:
        if name not in self.hosts:
            self._next += 1
            host = Host(self, name, self._next)
            self.hosts[name] = host
            host.create()
        return self.hosts[name]

    def close(self) -> None:
        for pid in self.forwarders:
            process.stop(pid, grace=2)
        self.forwarders = []
        for host in self.hosts.values():
            host.destroy()
        self.hosts = {}
        _ip("link", "del", self.bridge, check=False)
        cleanup_stale(self.slot)
        self._lock.close()
