"""A local computed fleet to watch: real services, fake-hardware nodes, daemons, a reporter.

Run through ``tools/run-local`` (which installs what is missing first), or from the repository
root as ``.venv/bin/python -m tools.demo``: it imports :mod:`bench.seed` and the test suite's
:mod:`tests.functional.daemons` from there. Brings up ZooKeeper,
RabbitMQ, PostgreSQL (when available), Placement and Ironic on loopback, enrolls ``--nodes``
fake-hardware nodes, starts ``--daemons`` computed daemons and one computed-reporter as separate
processes, and shows a live view: members, nodes claimed per daemon, providers applied to
Placement. Keys: ``k`` kill -9 a daemon, ``t`` stop one gracefully (it drains), ``a`` add a
daemon, ``m`` toggle maintenance on a random node, ``q`` quit. Everything it started is stopped
on exit, Ctrl-C included. Without a terminal (``--seconds N``) it runs N seconds and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import select
import signal
import sys
import termios
import time
import tty
import uuid
from pathlib import Path

from bench.seed import seed_nodes
from computed import db
from computed.db import api as db_api
from computed.testing.ironic import request
from computed.testing.stack import Stack
from tests.functional.daemons import Daemon, Reporter, ownership_now, zk_client

ROOT = Path(__file__).resolve().parent.parent
GROUP = "demo"
CLEAR = "\033[H\033[2J"


class Demo:
    def __init__(self, workdir: Path, nodes: int, daemons: int):
        self.workdir = workdir
        self.node_count = nodes
        self.initial = daemons
        self.stack: Stack | None = None
        self.daemons: list[Daemon] = []
        self.reporter: Reporter | None = None
        self.events: list[str] = []
        self.next_id = 1

    def log(self, text: str) -> None:
        self.events.append(f"{time.strftime('%H:%M:%S')} {text}")
        del self.events[:-8]

    def up(self) -> None:
        print("starting ZooKeeper, RabbitMQ, PostgreSQL, Placement, Ironic ...", flush=True)
        self.stack = Stack.up(self.workdir)
        print("\n".join(self.stack.status()), flush=True)
        print(f"enrolling {self.node_count} fake-hardware nodes ...", flush=True)
        self.nodes = seed_nodes(self.stack, self.node_count, prefix="demo",
                                resource_class="baremetal-demo", available=True)
        if "postgres" in self.stack:
            self.database = self.stack["postgres"].create_database(
                f"demo_{uuid.uuid4().hex[:6]}")
            self.stack.save()
        else:
            self.database = f"sqlite:///{self.workdir / 'computed.sqlite'}"
        db.sync(self.database)
        self.engine = db_api.engine_from_url(self.database)
        self.zk = zk_client(self.stack)
        self.reporter = Reporter(self.stack, self.workdir, "reporter-1", group=GROUP,
                                 database=self.database, refresh=10).start()
        for _ in range(self.initial):
            self.add()

    def add(self) -> None:
        host = f"computed-{self.next_id}"
        self.next_id += 1
        self.daemons.append(Daemon(self.stack, self.workdir, host, group=GROUP,
                                   database=self.database, refresh=10).start())
        self.log(f"started {host}")

    def alive(self) -> list[Daemon]:
        return [d for d in self.daemons if d.alive]

    def kill(self) -> None:
        if self.alive():
            victim = random.choice(self.alive())
            victim.kill()
            self.log(f"killed {victim.host} with SIGKILL: its nodes move when its ZooKeeper "
                     f"session expires")

    def terminate(self) -> None:
        if self.alive():
            leaving = random.choice(self.alive())
            leaving.signal(signal.SIGTERM)
            self.log(f"sent SIGTERM to {leaving.host}: it drains its nodes to its peers")

    def maintenance(self) -> None:
        node = random.choice(self.nodes)
        url = f"{self.stack['ironic'].url}/v1/nodes/{node}"
        if request("GET", url)["maintenance"]:
            request("DELETE", f"{url}/maintenance")
            self.log(f"maintenance off on {node[:8]}")
        else:
            request("PUT", f"{url}/maintenance", {"reason": "demo"})
            self.log(f"maintenance on on {node[:8]} (its provider becomes reserved)")

    def screen(self) -> str:
        members, claims = ownership_now(self.zk, GROUP)
        per_host: dict[str, int] = {}
        for host in claims.values():
            per_host[host] = per_host.get(host, 0) + 1
        applied = len(db_api.provider_uuids(self.engine))
        lines = [f"computed demo: {len(self.nodes)} Ironic nodes, group '{GROUP}'", ""]
        lines.append(f"{'DAEMON':<16}{'STATE':<10}{'EPOCH':>10}{'NODES':>8}")
        member_by_name = {m.name: m for m in members}
        for daemon in self.daemons:
            member = member_by_name.get(daemon.host)
            state = ("draining" if member and member.draining else "member") if member else (
                "running" if daemon.alive else "dead")
            epoch = member.member_epoch if member else "-"
            claimed = per_host.get(daemon.host, 0)
            lines.append(f"{daemon.host:<16}{state:<10}{epoch:>10}{claimed:>8}")
        unclaimed = len(self.nodes) - sum(1 for n in self.nodes if n in claims)
        bar = int(40 * applied / max(1, len(self.nodes)))
        lines += ["", f"claimed {len(claims)} / unclaimed {unclaimed}",
                  f"providers in Placement (applied) [{'#' * bar}{'.' * (40 - bar)}] "
                  f"{applied}/{len(self.nodes)}", "", "recent:"]
        lines += [f"  {event}" for event in self.events]
        lines += ["", "keys: k kill -9 a daemon | t stop one (drain) | a add a daemon | "
                      "m toggle maintenance | q quit"]
        return "\n".join(lines)

    def down(self) -> None:
        for process in [*self.daemons, self.reporter]:
            if process is not None:
                process.ensure_stopped()
        with contextlib.suppress(Exception):
            self.zk.stop()
            self.engine.dispose()
        if self.stack is not None:
            self.stack.down()


def run(demo: Demo, seconds: float | None) -> None:
    interactive = seconds is None and sys.stdin.isatty()
    deadline = None if seconds is None else time.monotonic() + seconds
    keys = {"k": demo.kill, "t": demo.terminate, "a": demo.add, "m": demo.maintenance}
    saved = termios.tcgetattr(sys.stdin) if interactive else None
    try:
        if interactive:
            tty.setcbreak(sys.stdin.fileno())
        while deadline is None or time.monotonic() < deadline:
            print(CLEAR + demo.screen() if interactive else demo.screen() + "\n", flush=True)
            if interactive:
                ready, _, _ = select.select([sys.stdin], [], [], 1.0)
                if ready:
                    key = sys.stdin.read(1)
                    if key == "q":
                        return
                    if key in keys:
                        keys[key]()
            else:
                time.sleep(5)
    finally:
        if saved is not None:
            termios.tcsetattr(sys.stdin, termios.TCSADRAIN, saved)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--nodes", type=int, default=300, help="fake nodes (default %(default)s)")
    parser.add_argument("--daemons", type=int, default=3, help="daemons (default %(default)s)")
    parser.add_argument("--seconds", type=float, help="run this long without a terminal, then exit")
    parser.add_argument("--workdir", type=Path, default=ROOT / ".demo",
                        help="scratch directory (default %(default)s)")
    args = parser.parse_args()
    if args.nodes < 1 or args.daemons < 1:
        parser.error("--nodes and --daemons must be at least 1")
    if (args.workdir / "state.json").exists():
        Stack.load(args.workdir).down()  # left over from a demo that was killed
    demo = Demo(args.workdir, args.nodes, args.daemons)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        demo.up()
        run(demo, args.seconds)
    except KeyboardInterrupt:
        pass
    finally:
        print("\nstopping everything the demo started ...", flush=True)
        demo.down()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
