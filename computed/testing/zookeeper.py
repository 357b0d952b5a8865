"""Apache ZooKeeper from Debian's ``zookeeper`` package, as a plain java process.

tickTime is 500 ms so that sessions can be as short as 1 s (ZooKeeper clamps a session timeout to
2..20 tickTimes): the fleet's failover tests depend on short sessions.
``info["max_session_timeout"]`` (ms, 60000 unless given) sets the largest timeout granted, for
tests of what a daemon does when it gets less than it asked for. ``conf`` is among the
four-letter commands served: the daemon reads its session timeout bounds with it (see
:mod:`computed.fleet.zookeeper`). Ready when ``ruok`` answers ``imok``.

With ``info["tls"]`` true the server also listens for TLS on ``info["secure_port"]`` (Netty, from
Debian's ``libnetty-java``, with a certificate for 127.0.0.1 signed by a CA made for the occasion,
``info["ca"]``); :attr:`ZooKeeper.tls_url` is the backend URL of that port.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from computed.testing import process
from computed.testing.service import Service

JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")
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
            "4lw.commands.whitelist=ruok,stat,srvr,mntr,cons,conf",
            *self._tls(conf),
            "",
        ]))
        jars = [*JARS, *(NETTY_JARS if self.info.get("tls") else ())]
        classpath = ":".join([str(conf), *jars])
        argv = ["java", "-Xmx256m", "-cp", classpath,
                "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(conf / "zoo.cfg")]
        self.info.update(port=port, url=f"zookeeper://127.0.0.1:{port}")
        self.info["pid"] = process.spawn(argv, self.log, cwd=conf)
        process.wait_until(self.ready, 60, "zookeeper", pid=self.pid, log=self.log)

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
        return process.exchange(self.info.get("port", 0), b"ruok", 4) == b"imok"

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.info['port']}"
