"""Per-node memory of a daemon's steady state, by simulation (issue 13 item 10: RSS <= 150 MB).

Builds, in this process and with the daemon's own classes, what one daemon of ``--daemons``
keeps per Ironic node once the fleet is steady, and measures it with :mod:`tracemalloc`:

* the catalog: every node as :func:`computed_ironic.convert.node_from_api` makes it from a
  JSON page like Ironic's ``GET /v1/nodes?fields=...`` (each node's strings are new objects, as
  they are when a listing is parsed), held by :class:`computed.baremetal.catalog.NodeCatalog`;
* the providers computed reported (uuids read from the database: new strings again),
  as :class:`computed.daemon.nodes.FleetNodes` keeps them;
* the fleet's plan over every node (:func:`computed.fleet.plan.compute_plan`) and the uuid list
  it is computed from;
* for this daemon's share: its claims, the sync pass's record of what it synced and the
  outbox's confirmed provider states.

Prints the bytes per node of each part and in all, at each ``--nodes`` size, and what that
makes at 50,000 nodes on top of the process's floor (the RSS of a daemon's imports, measured
here by importing what ``computed.cmd.daemon`` imports). This is the Python heap only: RSS adds
the allocator's slack and fragmentation, which the real daemon's RSS (bench/steady_bench.py)
shows.

    .venv/bin/python -m bench.daemon_memory [--nodes 10000 50000] [--daemons 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
import uuid as uuidlib

import psutil

# The import floor is measured after these, as the daemon imports them.
import computed.cmd.daemon  # noqa: F401
from computed.baremetal.catalog import NodeCatalog
from computed.baremetal.driver import BaremetalDriver
from computed.daemon.nodes import FleetNodes
from computed.fleet.claims import Claim
from computed.fleet.plan import RingCache, compute_plan
from computed.providers.outbox import Outbox, Verdict
from computed.providers.report import Outcome
from computed.providers.state import provider_from_node
from computed_ironic import convert
from hashring.ownership import Member

FLOOR_RSS_MB = psutil.Process().memory_info().rss / 2**20


def listing_page(count: int, seed: int = 0) -> bytes:
    """Ironic's answer to a listing of ``count`` nodes (report_bench's population)."""
    nodes = []
    for i in range(count):
        nodes.append({
            "uuid": str(uuidlib.UUID(int=(seed << 64) + i + 1, version=4)),
            "name": f"sb224d0b-{i}", "resource_class": "bench-sb224d0b-0",
            "provision_state": "available", "target_provision_state": None,
            "power_state": "power off", "maintenance": i % 100 == 0, "instance_uuid": None,
            "traits": ["CUSTOM_A", "CUSTOM_B"] if i % 50 == 0 else [],
            "conductor_group": "", "shard": None, "last_error": None, "properties": {},
            "links": [{"href": f"http://127.0.0.1:6385/v1/nodes/{i}", "rel": "self"}]})
    return json.dumps({"nodes": nodes}).encode()


class _Listed(BaremetalDriver):
    def __init__(self, page: bytes):
        self._page = page

    def list_nodes(self):
        return [convert.node_from_api(r) for r in json.loads(self._page)["nodes"]]

    def get_node(self, uuid):
        raise NotImplementedError


class _Open:
    def verdict(self, uuid, claim_epoch):
        return Verdict.SEND


class _Applied:
    def send(self, batch):
        return {(r.uuid, r.seq): Outcome.APPLIED for r in batch}


def measure(count: int, daemons: int) -> dict[str, float]:
    """Bytes per node of each part of one daemon's state at ``count`` nodes."""
    page = listing_page(count)
    members = [Member(f"c{i + 1}") for i in range(daemons)]
    parts: dict[str, float] = {}
    keep = []
    gc.collect()
    tracemalloc.start()

    def part(name, build):
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        keep.append(build())
        gc.collect()
        parts[name] = (tracemalloc.get_traced_memory()[0] - before) / count

    catalog = NodeCatalog(_Listed(page))
    part("catalog (every node)", catalog.refresh)
    uuids = list(catalog.view().nodes)
    # FleetNodes keeps the providers' uuids as the database returns them: new strings.
    part("known providers (every node)",
         lambda: frozenset(str(uuidlib.UUID(u)) for u in uuids))
    nodes = FleetNodes(catalog, engine=None)
    ring = RingCache()
    plan = None

    def plan_it():
        nonlocal plan
        plan = compute_plan(members, (), nodes.uuids(), {}, "c1", ring=ring.ring_for(members))
        return plan
    part("fleet plan (every node)", plan_it)
    mine = sorted(plan.take)
    view = catalog.view().nodes
    part("claims (own share)",
         lambda: {u: Claim(u, 10**9 + i, 1) for i, u in enumerate(mine)})
    # NodeSync's record of what it synced: uuid -> (claim epoch, node snapshot).
    part("sync record (own share)",
         lambda: {u: (10**9 + i, view[u]) for i, u in enumerate(mine)})
    outbox = Outbox("c1", _Applied(), _Open(), batch_size=1000)

    def confirm():
        for i, u in enumerate(mine):
            outbox.offer(u, 10**9 + i, provider_from_node(view[u]))
        while outbox.send_batch():
            pass
        return outbox
    part("outbox confirmed (own share)", confirm)
    tracemalloc.stop()
    parts["total"] = sum(parts.values())
    return parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    parser.add_argument("--nodes", type=int, nargs="+", default=[10000, 50000])
    parser.add_argument("--daemons", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"import floor (RSS after the daemon's imports): {FLOOR_RSS_MB:.1f} MB")
    for count in args.nodes:
        parts = measure(count, args.daemons)
        print(f"{count} nodes, {args.daemons} daemons: bytes per node (Python heap)")
        for name, value in parts.items():
            print(f"  {name:32s} {value:8.0f}")
        print(f"  -> {parts['total'] * count / 2**20:.1f} MB at {count}; "
              f"{parts['total'] * 50000 / 2**20:.1f} MB at 50,000")
    return 0


if __name__ == "__main__":
    sys.exit(main())
