"""Compute API build benchmark (issue 15): ``--builds`` concurrent ``create_server`` calls
through openstacksdk against ``computed-api`` in front of ``--nodes`` free nodes.

Stack: ZooKeeper, RabbitMQ, PostgreSQL (where available), Placement, Ironic (fake hardware); the
fleet of bench/instance_bench.py (``--nodes`` seeded nodes, a reporter, three daemons as
processes, every node schedulable first); ``computed-api`` (noauth2, ``[quota] instances = -1``)
as a process. One flavor of the nodes' class; ``--builds`` client threads each call
``conn.compute.create_server`` once, at the same time, as one project; one poller lists
``/servers/detail`` every 0.25 s. Prints how many were accepted (202), refused (and why), ACTIVE
and ERROR; builds per minute (ACTIVE / time from the first call to the last ACTIVE); p50/p95 of
create call to ACTIVE as the poller saw it; p50/p95 of the create call itself (the quota and
the admission: the servers are placed after the 202 by the API's scheduling threads,
computed/api/pending.py; before that change the call scheduled and cast too). Then deletes them
all through the API.

    .venv/bin/python -m bench.api_create_bench [--stack-dir .services] [--nodes 200 --builds 100]
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid as uuidlib
from concurrent.futures import ThreadPoolExecutor

import openstack

from bench.common import (
    arguments,
    fmt,
    machine,
    say,
    stack_for,
    wait_for_api,
    workdir_or_tmp,
)
from bench.instance_bench import SERVICES, World, pct
from bench.seed import make_template, seed_nodes
from computed.testing.process import free_port
from tests.functional.daemons import Process

# Never fetched (fake hardware); not 127.0.0.1: the API refuses loopback image URLs.
IMAGE = "http://images.example/bench.qcow2"
PROJECT = "bench"


class ApiProcess(Process):
    script = "computed-api"


def connection(base: str, token: str) -> openstack.connection.Connection:
    return openstack.connection.Connection(
        auth_type="admin_token", auth={"endpoint": f"{base}/v2.1", "token": token})


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--builds", type=int, default=100)
    parser.add_argument("--session", type=int, default=2)
    parser.add_argument("--grace", type=float, default=120.0)
    parser.add_argument("--refresh", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=1, help="[api] workers")
    parser.add_argument("--threads", type=int, default=16, help="[api] threads")
    parser.add_argument("--scheduling-threads", type=int, default=None,
                        help="[api] scheduling_threads (left unset when not given: code "
                             "before computed/api/pending.py has no such option)")
    args = parser.parse_args(argv)
    work = workdir_or_tmp(args.workdir, "api-create-bench-")
    prefix = f"ab{uuidlib.uuid4().hex[:6]}"
    with stack_for(args, work, SERVICES, prefix) as stack:
        world = None
        api = None
        try:
            rc = f"bench-{prefix}"
            make_template(stack["ironic"].url, prefix, rc)
            nodes = seed_nodes(stack, args.nodes, prefix=prefix, resource_class=rc, log=say)
            world = World(stack, work, args, nodes, rc)
            world.reporter("r1")
            for host in ("c1", "c2", "c3"):
                world.daemon(host)
            # No convergence wait: on a borrowed stack the daemons also claim nodes of earlier
            # runs; what matters here is that every seeded node is schedulable.
            deadline = time.monotonic() + 300
            while (n := world.schedulable()) < args.nodes:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {n} of {args.nodes} nodes schedulable")
                time.sleep(0.5)
            say(f"{args.nodes} nodes schedulable")
            port = free_port()
            scheduling = (f"scheduling_threads = {args.scheduling_threads}\n"
                          if args.scheduling_threads else "")
            api = ApiProcess(stack, work, "api", group=world.group, database=world.database,
                             extra=f"[api]\nbind_host = 127.0.0.1\nbind_port = {port}\n"
                                   f"workers = {args.workers}\nthreads = {args.threads}\n"
                                   f"{scheduling}auth_strategy = noauth2\n"
                                   "[quota]\ninstances = -1\n").start()
            base = f"http://127.0.0.1:{port}"
            wait_for_api(base, lambda: api.alive, api.log)
            admin = connection(base, "admin:admin")
            flavor = admin.compute.create_flavor(name=f"bm-{prefix}", ram=0, vcpus=0, disk=0)
            admin.compute.create_flavor_extra_specs(flavor, {f"resources:{world.rc}": "1"})
            started: dict[str, float] = {}
            call_times: list[float] = []
            refused: list[str] = []
            done: dict[str, tuple[str, float]] = {}
            stop = threading.Event()

            def poll() -> None:
                member = connection(base, f"u:{PROJECT}")
                while not stop.is_set():
                    body = member.compute.get("/servers/detail?limit=1000").json()
                    now = time.monotonic()
                    for server in body["servers"]:
                        if server["status"] in ("ACTIVE", "ERROR") and server["id"] not in done:
                            done[server["id"]] = (server["status"], now)
                    time.sleep(0.25)

            barrier = threading.Barrier(args.builds)

            def create(index: int) -> None:
                member = connection(base, f"u:{PROJECT}")
                member.compute.get("/flavors")  # discovery and session set up before the start
                barrier.wait()
                t0 = time.monotonic()
                try:
                    server = member.compute.create_server(
                        name=f"b-{index}", flavor_id=flavor.id, image_id=IMAGE, networks="none")
                except openstack.exceptions.HttpException as exc:
                    refused.append(f"{exc.status_code} {exc}")
                    return
                call_times.append(time.monotonic() - t0)
                started[server.id] = t0

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            first = time.monotonic()
            with ThreadPoolExecutor(args.builds) as pool:
                list(pool.map(create, range(args.builds)))
            deadline = time.monotonic() + 900
            while set(started) - set(done) and time.monotonic() < deadline:
                time.sleep(0.5)
            stop.set()
            poller.join(10)
            active = [uid for uid, (status, _t) in done.items() if status == "ACTIVE"]
            latencies = [done[uid][1] - started[uid] for uid in active if uid in started]
            last = max((done[uid][1] for uid in active), default=first)
            say(f"{args.builds} concurrent create_server against {args.nodes} free nodes: "
                f"{len(started)} accepted, {len(refused)} refused, {len(active)} ACTIVE, "
                f"{len(done) - len(active)} ERROR, {len(set(started) - set(done))} unfinished")
            for reason in sorted(set(refused))[:5]:
                say(f"  refused: {reason[:200]}")
            say(f"builds per minute: {len(active) / max(last - first, 1e-9) * 60:.0f} "
                f"({len(active)} in {last - first:.1f} s)")
            say(f"create -> ACTIVE: p50 {fmt(pct(latencies, 0.5), 1)} s, "
                f"p95 {fmt(pct(latencies, 0.95), 1)} s; create call: "
                f"p50 {fmt(pct(call_times, 0.5))} s, p95 {fmt(pct(call_times, 0.95))} s")
            say(f"[api] workers {args.workers} x threads {args.threads}, scheduling_threads "
                f"{args.scheduling_threads or 'default'}; machine: {machine()}; "
                f"load {os.getloadavg()[0]:.1f}")
            member = connection(base, f"u:{PROJECT}")
            for uid in started:
                member.compute.delete_server(uid)
            return 0
        finally:
            if api is not None:
                api.stop(60)  # SIGTERM: the parent stops its workers too (SIGKILL would not)
            if world is not None:
                world.close()


if __name__ == "__main__":
    sys.exit(main())
