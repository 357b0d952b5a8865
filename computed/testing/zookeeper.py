"""Apache ZooKeeper from Debian's ``zookeeper`` package, as a plain java process.

tickTime is 500 ms so that sessions can be as short as 1 s (ZooKeeper clamps a session timeout to
2..20 tickTimes): the fleet's failover tests depend on short sessions.
``info["max_session_timeout"]`` (ms, 60000 unless given) sets the largest timeout granted, for
tests of what a daemon does when it gets less than it asked for. ``conf`` is among the
four-letter commands served: the daemon reads its session timeout bounds with it (see
:mod:`computed.fleet.zookeeper`). Ready when ``ruok`` answers ``imok``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from computed.testing import process
from computed.testing.service import Service

JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")


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
            "",
        ]))
        classpath = ":".join([str(conf), *JARS])
        argv = ["java", "-Xmx256m", "-cp", classpath,
                "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(conf / "zoo.cfg")]
        self.info.update(port=port, url=f"zookeeper://127.0.0.1:{port}")
        self.info["pid"] = process.spawn(argv, self.log, cwd=conf)
        process.wait_until(self.ready, 60, "zookeeper", pid=self.pid, log=self.log)

    def ready(self) -> bool:
        return process.exchange(self.info.get("port", 0), b"ruok", 4) == b"imok"

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.info['port']}"
