"""Several hosts on one machine: network namespaces, a bridge, forwarders and network faults.

Layout (everything created here carries the prefix :data:`PREFIX`, so a crashed run's leftovers
are found and removed by name at the next start):

* a bridge ``cdcbr0`` in the root namespace with address ``10.231.0.1/24`` (the *controller*
  address). The controller services (ZooKeeper, RabbitMQ, PostgreSQL, Placement, Ironic) stay
  bound to 127.0.0.1 as the harness starts them; one ``socat`` forwarder per service port listens
  on ``10.231.0.1:<same port>`` and relays to ``127.0.0.1:<port>``. A daemon therefore reaches
  the controller only over its veth and the bridge, which is what the faults cut.
* one namespace ``cdc-<host>`` per daemon, with a veth pair (``cdcNh`` on the bridge, ``cdcNn``
  inside, address ``10.231.0.<10+N>/24``) and its own loopback. The daemon runs there through
  ``ip netns exec``, which execs (no fork), so its PID is the daemon's and signals reach it.

Faults: :meth:`Host.cut_zookeeper` drops, with nftables in the daemon's namespace only, every
packet to the controller's ZooKeeper port (RabbitMQ, the database, Ironic and Placement stay
reachable); :meth:`Host.link_down` takes the namespace's end of the veth down (cut from
everything); :meth:`Host.heal` undoes both. No address outside 10.231.0.0/24 or loopback is used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.harness import process

PREFIX = "cdc"
BRIDGE = f"{PREFIX}br0"
SUBNET = "10.231.0"
CONTROLLER = f"{SUBNET}.1"
TABLE = "computed_chaos"


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
    probe = f"{PREFIX}-probe"
    result = _ip("netns", "add", probe, check=False)
    if result.returncode != 0:
        return f"ip netns add failed: {result.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def cleanup_stale() -> list[str]:
    """Remove every namespace and link named with :data:`PREFIX` (a crashed run's); returns
    what was removed. Rules live inside the namespaces and go with them."""
    removed = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(PREFIX + "-"):
            _ip("netns", "del", name, check=False)
            removed.append(f"netns {name}")
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        if name.startswith(PREFIX):
            _ip("link", "del", name, check=False)
            removed.append(f"link {name}")
    # Forwarders of a crashed run: socat processes bound to the controller address.
    for pid in _pids_with(f"bind={CONTROLLER}"):
        try:
            os.kill(pid, 9)
            removed.append(f"forwarder pid {pid}")
        except OSError:
            pass
    return removed


def _pids_with(text: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith("socat") and text in cmdline:
            pids.append(int(entry.name))
    return pids


class Host:
    """One daemon's namespace."""

    def __init__(self, network: Network, name: str, index: int):
        self.network = network
        self.name = name
        self.ns = f"{PREFIX}-{name}"
        self.address = f"{SUBNET}.{10 + index}"
        self.outer = f"{PREFIX}{index}h"
        self.inner = f"{PREFIX}{index}n"
        self.zookeeper_cut = False
        self.link_is_down = False

    def create(self) -> None:
        _ip("netns", "add", self.ns)
        _ip("link", "add", self.outer, "type", "veth", "peer", "name", self.inner)
        _ip("link", "set", self.inner, "netns", self.ns)
        _ip("link", "set", self.outer, "master", BRIDGE, "up")
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
        """Drop every packet from this namespace to the controller's ZooKeeper port."""
        self._nft("add", "rule", "inet", TABLE, "out", "ip", "daddr", CONTROLLER, "tcp",
                  "dport", str(self.network.zookeeper_port), "drop")
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
        self.zookeeper_port = 0
        self._next = 0

    def setup(self, ports: dict[str, int]) -> None:
        """Create the bridge and forward ``ports`` ({service: port}) from the controller
        address to loopback."""
        cleanup_stale()
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{CONTROLLER}/24", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        self.zookeeper_port = ports["zookeeper"]
        for name, port in ports.items():
            listen = f"TCP-LISTEN:{port},bind={CONTROLLER},fork,reuseaddr,backlog=256"
            pid = process.spawn(["socat", listen, f"TCP:127.0.0.1:{port}"],
                                self.workdir / f"forward-{name}.log")
            self.forwarders.append(pid)
        for port in ports.values():
            process.wait_until(lambda p=port: process.port_open(p, CONTROLLER), 10,
                               f"forwarder {CONTROLLER}:{port}")

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
        _ip("link", "del", BRIDGE, check=False)
        cleanup_stale()
