"""Apache ZooKeeper from Debian's ``zookeeper`` package, as a plain java process.

tickTime is 500 ms so that sessions can be as short as 1 s (ZooKeeper clamps a session timeout to
2..20 tickTimes): the fleet's failover tests depend on short sessions.
``info["max_session_timeout"]`` (ms, 60000 unless given) sets the largest timeout granted, for
tests of what a daemon does when it gets less than it asked for. ``conf`` is among the
four-letter commands served (the daemon reads its session timeout bounds with it, see
:mod:`computed.fleet.zookeeper`) unless ``info["four_letter_words"]`` says otherwise: a list of
commands, or None for ZooKeeper's own default (``srvr`` only, as a stock Debian server and many
shared ensembles). Ready when ``srvr`` says the server serves.

With ``info["tls"]`` true the server also listens for TLS on ``info["secure_port"]`` (Netty, from
Debian's ``libnetty-java``, with a certificate for 127.0.0.1 signed by a CA made for the occasion,
``info["ca"]``); :attr:`ZooKeeper.tls_url` is the backend URL of that port.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from computed.testing import process
from computed.testing.service import Service

JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")
#: The JVM's quick compiler only and its serial collector: a test's ZooKeeper lives seconds to
#: minutes on a small heap, where the optimising compiler's and G1's threads cost more CPU than
#: they give back (a start, 10,000 reads and 5 s idle: 1.84-1.92 -> 1.02-1.12 CPU s of the
#: JVM; with 80,000 reads 5.87-6.30 -> 4.26-4.94; 2 runs each, OpenJDK 17, load 4-7).
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# What ZooKeeper's Netty server needs (Debian's libnetty-java; netty-all.jar there is only a
# manifest).
NETTY_JARS = tuple(f"/usr/share/java/netty-{name}.jar" for name in (
    "buffer", "codec", "common", "handler", "resolver", "transport",
    "transport-native-unix-common"))


def ensure_installed() -> None:
    if all(Path(jar).exists() for jar in JARS) and shutil.which("java"):
        return
    process.run(["apt-get", "install", "-y", "-q", "zookeeper"], "apt-get install zookeeper",
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


class ZooKeeper(Service):
    name = "zookeeper"

    def start(self) -> None:
        ensure_installed()
        port = self.info.get("port") or process.free_port()
        conf = self.workdir / "zookeeper"
        (conf / "data").mkdir(parents=True, exist_ok=True)
        (conf / "zoo.cfg").write_text("\n".join([
            "tickTime=500",
            "minSessionTimeout=1000",
            f"maxSessionTimeout={self.info.get('max_session_timeout', 60000)}",
            f"dataDir={conf / 'data'}",
            f"clientPort={port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",
            *self._four_letter_words(),
            *self._tls(conf),
            "",
        ]))
        jars = [*JARS, *(NETTY_JARS if self.info.get("tls") else ())]
        classpath = ":".join([str(conf), *jars])
        argv = ["java", "-Xmx256m", *JVM_FLAGS, "-cp", classpath,
                "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(conf / "zoo.cfg")]
        self.info.update(port=port, url=f"zookeeper://127.0.0.1:{port}")
        self.info["pid"] = process.spawn(argv, self.log, cwd=conf)
        process.wait_until(self.ready, 60, "zookeeper", pid=self.pid, log=self.log)

    def _four_letter_words(self) -> list[str]:
        """The whitelist line of zoo.cfg; none (ZooKeeper's default: srvr) when asked for."""
        words = self.info.get("four_letter_words", ["ruok", "stat", "srvr", "mntr", "cons",
                                                    "conf"])
        return [] if words is None else [f"4lw.commands.whitelist={','.join(words)}"]

    def _tls(self, conf: Path) -> list[str]:
        """zoo.cfg lines for a TLS port, with a CA and a server certificate made for it."""
        if not self.info.get("tls"):
            return []
        ca, server = conf / "ca.pem", conf / "server.pem"
        if not server.exists():
            openssl = ["openssl", "req", "-nodes", "-newkey", "rsa:2048", "-days", "7"]
            process.run([*openssl, "-x509", "-keyout", str(conf / "ca.key"), "-out", str(ca),
                         "-subj", "/CN=computed test CA"], "openssl (CA)", cwd=conf)
            process.run([*openssl, "-keyout", str(conf / "server.key"),
                         "-out", str(conf / "server.csr"), "-subj", "/CN=127.0.0.1"],
                        "openssl (server key)", cwd=conf)
            (conf / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
            process.run(["openssl", "x509", "-req", "-in", str(conf / "server.csr"),
                         "-CA", str(ca), "-CAkey", str(conf / "ca.key"), "-CAcreateserial",
                         "-days", "7", "-extfile", str(conf / "san.cnf"),
                         "-out", str(conf / "server.crt")], "openssl (server certificate)",
                        cwd=conf)
            server.write_text((conf / "server.key").read_text() +
                              (conf / "server.crt").read_text())
        secure_port = self.info.get("secure_port") or process.free_port()
        self.info.update(secure_port=secure_port, ca=str(ca))
        return ["serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                f"secureClientPort={secure_port}",
                "secureClientPortAddress=127.0.0.1",
                f"ssl.keyStore.location={server}", "ssl.keyStore.type=PEM",
                f"ssl.trustStore.location={ca}", "ssl.trustStore.type=PEM",
                "ssl.clientAuth=none"]

    @property
    def tls_url(self) -> str:
        """The backend URL of the TLS port (tooz's use_ssl and ca options)."""
        return (f"zookeeper://127.0.0.1:{self.info['secure_port']}"
                f"?use_ssl=true&ca={self.info['ca']}")

    def ready(self) -> bool:
        # Serving, not merely up: "ruok" answers "imok" before the server has loaded its
        # database, and a client connecting then is refused ("ZooKeeperServer not running");
        # a suite run under load saw a test's first connection time out that way.
        return _srvr_mode(self.info.get("port", 0)) == "standalone"

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.info['port']}"


# --- an ensemble ------------------------------------------------------------------------------

NFT_PREFIX = "computed_zk_"
UID_BASE = 100000  # server uid = UID_BASE + its client port: unique while the port is in use


def _srvr_mode(port: int) -> str | None:
    """"leader", "follower" (or "standalone") when the server on ``port`` serves, else None."""
    answer = process.exchange(port, b"srvr", 4096).decode("utf-8", "replace")
    for line in answer.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


class Ensemble(Service):
    """Three (``info["size"]``) ZooKeeper servers on loopback, one quorum.

    Each server has its own client, quorum and election ports, dataDir and ``myid``, the same
    tickTime as :class:`ZooKeeper` (500 ms) and a short ``syncLimit`` (2 s), so that a follower
    cut from its leader stops serving within seconds. Ready when every server serves, one as the
    leader. :attr:`url` lists all servers (``zookeeper://h:p1,h:p2,h:p3``, the form tooz's driver
    takes: the netloc is handed to kazoo as its host list).

    Faults: :meth:`kill` / :meth:`stop_server` / :meth:`start_server` one server (``index``
    0..size-1), :meth:`leader` finds the leader, :meth:`partition` cuts one server from its
    peers (its quorum and election traffic, both directions; clients still reach it, as a
    server on a host cut from the others' network would be reached by clients on its side) and
    :meth:`heal` undoes it. Partitions are nftables rules in the root namespace, in a table of
    this ensemble's own (``computed_zk_<first client port>``) that :meth:`stop` deletes, and a
    new ensemble on the same port deletes too. To tell a server's own packets from its peers' on
    loopback, each server runs as its own uid (:data:`UID_BASE` + its client port, through
    ``setpriv``) with its data in a directory that uid owns; partitions therefore need root, the
    rest does not (servers then run as the caller).
    """

    name = "zookeeper"

    def start(self) -> None:
        ensure_installed()
        size = self.info.setdefault("size", 3)
        servers = self.info.get("servers") or [
            {"id": i + 1, "port": process.free_port(), "quorum_port": process.free_port(),
             "election_port": process.free_port()} for i in range(size)]
        self.info["servers"] = servers
        self.info["url"] = "zookeeper://" + self.hosts
        self.info["table"] = f"{NFT_PREFIX}{servers[0]['port']}"
        self.info.setdefault("partitioned", [])
        if os.geteuid() == 0:
            self._nft_delete()  # a dead ensemble's, on the port this one now holds
        for index in range(size):
            if not process.alive(servers[index].get("pid")):
                self._spawn(index)
        process.wait_until(self.ready, 90, "zookeeper ensemble quorum", log=self.server_log(0))

    @property
    def root(self) -> Path:
        """Where the servers' data lives: outside the (0700) test directories, so that each
        server's uid can reach its own."""
        if not self.info.get("root"):
            import tempfile
            root = Path(tempfile.mkdtemp(prefix="computed-zk-"))
            root.chmod(0o711)
            self.info["root"] = str(root)
        return Path(self.info["root"])

    def server_log(self, index: int) -> Path:
        return self.workdir / f"zookeeper-{index + 1}.log"

    def _spawn(self, index: int) -> None:
        server = self.info["servers"][index]
        conf = self.root / f"server{server['id']}"
        data = conf / "data"
        data.mkdir(parents=True, exist_ok=True)
        (data / "myid").write_text(f"{server['id']}\n")
        peers = [f"server.{s['id']}=127.0.0.1:{s['quorum_port']}:{s['election_port']}"
                 for s in self.info["servers"]]
        (conf / "zoo.cfg").write_text("\n".join([
            "tickTime=500", "initLimit=10", "syncLimit=4",
            "minSessionTimeout=1000",
            f"maxSessionTimeout={self.info.get('max_session_timeout', 60000)}",
            f"dataDir={data}", f"clientPort={server['port']}", "clientPortAddress=127.0.0.1",
            "admin.enableServer=false", "4lw.commands.whitelist=ruok,stat,srvr,mntr,cons,conf",
            "cnxTimeout=1000",  # election connections: give up on a cut peer in 1 s, not 5
            *peers, ""]))
        argv = ["java", "-Xmx128m", *JVM_FLAGS, "-cp", ":".join([str(conf), *JARS]),
                "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(conf / "zoo.cfg")]
        if os.geteuid() == 0:
            uid = UID_BASE + server["port"]
            for path in (conf, data, *data.iterdir()):
                os.chown(path, uid, uid)
            argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
            server["uid"] = uid
        server["pid"] = process.spawn(argv, self.server_log(index), cwd=conf)

    @property
    def hosts(self) -> str:
        return ",".join(f"127.0.0.1:{s['port']}" for s in self.info["servers"])

    @property
    def pid(self) -> int | None:
        return next((s["pid"] for s in self.info.get("servers", []) if s.get("pid")), None)

    def modes(self) -> list[str | None]:
        """Each server's mode ("leader", "follower") or None while it does not serve."""
        return [_srvr_mode(s["port"]) for s in self.info["servers"]]

    def ready(self) -> bool:
        """Every running server serves, one of them the leader."""
        running = [i for i, s in enumerate(self.info.get("servers", []))
                   if process.alive(s.get("pid"))]
        modes = self.modes()
        return bool(running) and all(modes[i] for i in running) and \
            [modes[i] for i in running].count("leader") == 1

    def has_quorum(self) -> bool:
        return "leader" in self.modes()

    def leader(self) -> int | None:
        """The index of the leader, None while there is none."""
        modes = self.modes()
        return modes.index("leader") if "leader" in modes else None

    def followers(self) -> list[int]:
        return [i for i, mode in enumerate(self.modes()) if mode == "follower"]

    def connections(self, index: int) -> int:
        """Client connections the server serves now (``cons``, less the asking one)."""
        answer = process.exchange(self.info["servers"][index]["port"], b"cons", 1 << 16)
        lines = [line for line in answer.decode("utf-8", "replace").splitlines()
                 if line.strip().startswith("/")]
        return max(len(lines) - 1, 0)

    def kill(self, index: int) -> None:
        """SIGKILL one server (a crash)."""
        server = self.info["servers"][index]
        if process.alive(server.get("pid")):
            os.kill(server["pid"], 9)
            process.wait_until(lambda: not process.alive(server["pid"]), 10,
                               f"zookeeper server {server['id']} dead")
        server.pop("pid", None)

    def stop_server(self, index: int) -> None:
        server = self.info["servers"][index]
        process.stop(server.get("pid"))
        server.pop("pid", None)

    def start_server(self, index: int) -> None:
        """Start one stopped server again (same ports, same data); returns once it serves,
        when a quorum can form."""
        self._spawn(index)
        process.wait_until(lambda: _srvr_mode(self.info["servers"][index]["port"]) is not None,
                           90, f"zookeeper server {index + 1} serving",
                           log=self.server_log(index))

    def partition(self, index: int) -> None:
        """Cut server ``index`` from its peers (not from clients) until :meth:`heal`."""
        if os.geteuid() != 0:
            raise RuntimeError("partitioning a zookeeper server needs root (nftables)")
        server = self.info["servers"][index]
        own = {server["quorum_port"], server["election_port"]}
        peers = {p for s in self.info["servers"] if s is not server
                 for p in (s["quorum_port"], s["election_port"])}
        table = self.info["table"]
        if not self.info["partitioned"]:
            self._nft("add", "table", "inet", table)
            self._nft("add", "chain", "inet", table, "out",
                      "{ type filter hook output priority 0; policy accept; }")
        ports = lambda ps: "{ " + ", ".join(str(p) for p in sorted(ps)) + " }"  # noqa: E731
        # Its peers' packets to its ports; its own to its peers' ports and from its own ports.
        self._nft("add", "rule", "inet", table, "out", "tcp", "dport", ports(own),
                  "meta", "skuid", "!=", str(server["uid"]), "drop")
        self._nft("add", "rule", "inet", table, "out", "meta", "skuid", str(server["uid"]),
                  "tcp", "dport", ports(peers), "drop")
        self._nft("add", "rule", "inet", table, "out", "meta", "skuid", str(server["uid"]),
                  "tcp", "sport", ports(own), "drop")
        self.info["partitioned"].append(index)

    def heal(self) -> None:
        """Undo every partition."""
        if self.info.get("partitioned"):
            self._nft_delete()
            self.info["partitioned"] = []

    def _nft(self, *args: str) -> None:
        process.run(["nft", *args], "nft " + " ".join(args[:4]))

    def _nft_delete(self) -> None:
        table = self.info.get("table")
        if table:
            subprocess.run(["nft", "delete", "table", "inet", table], capture_output=True,
                           timeout=30, check=False)

    def restart(self) -> None:
        """Every server stopped, then started again on the same ports and data."""
        self.heal()
        for index in range(len(self.info["servers"])):
            self.stop_server(index)
        self.start()

    def stop(self) -> None:
        """Every server stopped, its data removed, the partitions undone."""
        if os.geteuid() == 0:
            self._nft_delete()
        self.info["partitioned"] = []
        for server in self.info.get("servers", []):
            process.stop(server.get("pid"))
            server.pop("pid", None)
        if self.info.get("root"):
            shutil.rmtree(self.info["root"], ignore_errors=True)
            self.info.pop("root")

    def describe(self) -> str:
        modes = ", ".join(mode or "DOWN" for mode in self.modes())
        return f"{self.name:<10} {modes:<24} {self.url}"
