"""Compute API listing benchmark (issue 15): ``GET /servers/detail?limit=1000`` over 10,000
server rows, as openstacksdk sees it from outside ``computed-api``.

Stack: ZooKeeper, RabbitMQ and Placement (``computed-api`` connects to them at start; a listing
reads only computed's database). A fresh sqlite database gets ``--rows`` instance rows of one
project (written directly, as scheduled builds would leave them: ACTIVE, node, host, flavor copy),
then ``computed-api`` (noauth2) serves it as a process. Each of ``--runs`` runs times
``--requests`` requests of ``/servers/detail?limit=1000`` through openstacksdk's compute adapter
(the project's own token, newest first) and one walk of every page of the whole project (following
the API's ``servers_links``, ``marker`` paging). Prints p50/p95 of the single requests and the
walk time; the median of the runs.

    .venv/bin/python -m bench.api_list_bench [--stack-dir .services] [--rows 10000]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import openstack
import sqlalchemy as sa

from bench.common import arguments, machine, say, stack_for, wait_for_api, workdir_or_tmp
from computed import db
from computed.db import engine as db_engine
from computed.db import models
from computed.testing.process import free_port

PROJECT = "bench"
PAGE = 1000


def fill(url: str, rows: int) -> None:
    engine = db_engine.engine_from_url(url)
    start = models.utcnow()
    flavor = {"id": "bm", "name": "bm.gold", "vcpus": 0, "ram": 0, "disk": 0, "ephemeral": 0,
              "swap": 0, "extra_specs": {"resources:CUSTOM_GOLD": "1"}}
    values = [dict(uuid=str(uuid.uuid4()), node_uuid=str(uuid.uuid4()), host=f"c{i % 3}",
                   member_epoch=1, state="ACTIVE", resource_class="CUSTOM_GOLD", traits="[]",
                   image="http://images/x.qcow2", created_at=start, updated_at=start,
                   project_id=PROJECT, user_id="u", name=f"server-{i}",
                   flavor=json.dumps(flavor)) for i in range(rows)]
    with engine.begin() as conn:
        conn.execute(sa.insert(models.Instance.__table__), values)
    engine.dispose()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args(argv)
    work = workdir_or_tmp(args.workdir, "api-list-bench-")
    with stack_for(args, work, ["zookeeper", "rabbitmq", "placement"], "apilist",
                   keep_nodes=True) as stack:
        url = f"sqlite:///{work / 'computed.sqlite'}"
        db.sync(url)
        fill(url, args.rows)
        port = free_port()
        conf = work / "api.conf"
        conf.write_text(stack.computed_conf(host="api", database=url) +
                        f"[api]\nbind_host = 127.0.0.1\nbind_port = {port}\n"
                        "auth_strategy = noauth2\n")
        bin_dir = Path(sys.executable).parent
        with open(work / "api.log", "ab") as log:
            api = subprocess.Popen([str(bin_dir / "computed-api"), "--config-file", str(conf)],
                                   stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            try:
                wait_for_api(base, lambda: api.poll() is None, f"log: {work}/api.log")
            except RuntimeError as exc:
                raise SystemExit(str(exc)) from None
            conn = openstack.connection.Connection(
                auth_type="admin_token", auth={"endpoint": f"{base}/v2.1",
                                               "token": f"u:{PROJECT}"})
            runs = []
            for run in range(args.runs):
                single = []
                for _ in range(args.requests):
                    started = time.perf_counter()
                    response = conn.compute.get(f"/servers/detail?limit={PAGE}",
                                                microversion="2.61")
                    single.append(time.perf_counter() - started)
                    assert response.status_code == 200 and \
                        len(response.json()["servers"]) == min(PAGE, args.rows)
                # The walk follows the API's own "next" links with the SDK's compute adapter:
                # what the API serves, without openstacksdk building 10,000 Server objects
                # (conn.compute.servers() took 60-90 s for that here, under load 15-20).
                started = time.perf_counter()
                seen, path = 0, f"/servers/detail?limit={PAGE}"
                while path:
                    body = conn.compute.get(path, microversion="2.61").json()
                    seen += len(body["servers"])
                    links = [link["href"] for link in body.get("servers_links", [])
                             if link["rel"] == "next"]
                    path = links[0].split("/v2.1", 1)[1] if links else None
                walk = time.perf_counter() - started
                assert seen == args.rows, seen
                runs.append((statistics.median(single), percentile(single, 0.95), walk))
                say(f"run {run + 1}: limit={PAGE} p50 {runs[-1][0]:.3f} s, "
                    f"p95 {runs[-1][1]:.3f} s; all {args.rows} rows paged in {walk:.2f} s")
            say(f"median of {args.runs} runs: p50 {statistics.median(r[0] for r in runs):.3f} s, "
                f"p95 {statistics.median(r[1] for r in runs):.3f} s, walk "
                f"{statistics.median(r[2] for r in runs):.2f} s; machine: {machine()}; "
                f"load {os.getloadavg()[0]:.2f}")
        finally:
            api.terminate()
            api.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
