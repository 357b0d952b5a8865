"""Seed many nodes into the harness Ironic quickly, for benchmarks.

Creating nodes through Ironic's API runs at about 40 nodes/s on the harness (sqlite, one process)
and concurrent POSTs fail with sqlite's "database is locked". So :func:`seed_nodes` creates **one**
template node through the API (and, by default, moves it to ``available`` through the API, so it
is a node as Nova would see it, with a power state), then copies its row in Ironic's sqlite
database (``<stack workdir>/ironic/ironic.sqlite``, table ``nodes``) ``count - 1`` times in one
transaction, with a new ``id`` (sqlite's rowid), ``uuid`` and ``name`` each (the unique columns:
``uuid``, ``name``, ``instance_uuid`` which stays NULL). Then it checks that Ironic's API serves
every one of them (``GET /v1/nodes``, paginated), and raises otherwise.

A template with no ports, traits or tags has no rows in other tables, so a copied row is a whole
node. The copies share the template's ``created_at``/states; Ironic sees them as any other node.

Every stack benchmark and the local run (tools/demo) seed through it (``seed_nodes(stack, 10000,
prefix="placement")``). Seeding is idempotent per prefix: nodes already seeded with that prefix
are kept and only the missing ones are added. :func:`unseed_nodes` deletes a prefix's nodes again
(straight from the database, for a stack that other people keep using).

Command line (a stack started with ``tools/services up``)::

    .venv/bin/python -m bench.seed --stack-dir .services --count 3000 [--prefix bench]
    .venv/bin/python -m bench.seed --stack-dir .services --prefix bench --delete
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

from computed.testing.ironic import list_nodes, request


def ironic_db(stack) -> Path:
    path = stack["ironic"].database
    if not path.exists():
        raise FileNotFoundError(f"no Ironic sqlite database at {path}: seeding needs the "
                                f"harness Ironic (sqlite)")
    return path


def api_node_uuids(url: str, prefix: str | None = None) -> list[str]:
    """Every node uuid Ironic's API lists, optionally only ``prefix-*`` names."""
    return [n["uuid"] for n in list_nodes(url, "uuid,name", timeout=120)
            if prefix is None or (n.get("name") or "").startswith(f"{prefix}-")]


def _named(prefix: str) -> str:
    """The LIKE pattern (with ESCAPE '\\') of the names ``prefix-*``."""
    return prefix.replace("_", "\\_").replace("%", "\\%") + "-%"


def _connect(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(db), timeout=60, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 60000")
    return conn


def _wait_state(url: str, node: str, kind: str, state: str, timeout: float = 60) -> None:
    """Wait until the node's ``<kind>_state`` (provision or power) is ``state`` with no target
    left: Ironic moves it asynchronously."""
    deadline = time.monotonic() + timeout
    while True:
        body = request("GET", f"{url}/v1/nodes/{node}?fields={kind}_state,"
                               f"target_{kind}_state,last_error")
        if body[f"{kind}_state"] == state and not body.get(f"target_{kind}_state"):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"template node {node} did not reach {state}: {body}")
        time.sleep(0.2)


def _template(url: str, prefix: str, resource_class: str, available: bool) -> str:
    body = {"driver": "fake-hardware", "name": f"{prefix}-00000",
            "resource_class": resource_class}
    node = request("POST", f"{url}/v1/nodes", body)["uuid"]
    if available:
        for verb, state in (("manage", "manageable"), ("provide", "available")):
            request("PUT", f"{url}/v1/nodes/{node}/states/provision", {"target": verb})
            _wait_state(url, node, "provision", state)
    return node


def make_template(url: str, prefix: str, resource_class: str) -> str:
    """A node to copy from that Placement will see as schedulable: available, powered off
    (fake power answers asynchronously, so wait for it), no instance, not in maintenance, all
    set through the API so that Ironic's own state machine wrote every field."""
    node = _template(url, prefix, resource_class, available=True)
    request("PUT", f"{url}/v1/nodes/{node}/states/power", {"target": "power off"})
    _wait_state(url, node, "power", "power off")
    return node


def seed_nodes(stack, count: int, prefix: str = "bench", resource_class: str = "baremetal",
               available: bool = True, log=print) -> list[str]:
    """Make Ironic hold ``count`` nodes named ``<prefix>-NNNNN``; returns their uuids, checked
    through the API."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    url = stack["ironic"].url
    db = ironic_db(stack)
    started = time.monotonic()
    conn = _connect(db)
    try:
        rows = conn.execute("SELECT uuid, name FROM nodes WHERE name LIKE ? ESCAPE '\\'",
                            (_named(prefix),)).fetchall()
        have = {name: uuid for uuid, name in rows}
        template = have.get(f"{prefix}-00000")
        if template is None:
            template = _template(url, prefix, resource_class, available)
            have[f"{prefix}-00000"] = template
        missing = [f"{prefix}-{i:05d}" for i in range(count) if f"{prefix}-{i:05d}" not in have]
        stack["ironic"].copy_node(template, missing)
        expected = {u for (u,) in conn.execute(
            "SELECT uuid FROM nodes WHERE name LIKE ? ESCAPE '\\'",
            (_named(prefix),))}
    finally:
        conn.close()
    inserted = time.monotonic() - started
    listed = set(api_node_uuids(url, prefix))
    if listed != expected or len(expected) < count:
        raise RuntimeError(f"Ironic's API lists {len(listed)} nodes named {prefix}-*, the "
                           f"database holds {len(expected)}, {count} wanted")
    log(f"seeded {len(missing)} nodes (now {len(expected)} named {prefix}-*) in "
        f"{inserted:.1f} s; the API lists all of them ({time.monotonic() - started:.1f} s "
        f"with the check)")
    return sorted(expected)


def unseed_nodes(stack, prefix: str = "bench") -> int:
    """Delete every ``<prefix>-*`` node, with its rows in Ironic's other tables, straight from
    Ironic's database (:meth:`computed.testing.ironic.Ironic.drop_nodes`); returns how many."""
    conn = _connect(ironic_db(stack))
    try:
        uuids = [uuid for (uuid,) in conn.execute(
            "SELECT uuid FROM nodes WHERE name LIKE ? ESCAPE '\\'", (_named(prefix),))]
    finally:
        conn.close()
    return stack["ironic"].drop_nodes(uuids)


def main(argv: list[str] | None = None) -> int:
    from computed.testing.stack import Stack
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--stack-dir", required=True, type=Path,
                        help="workdir of a running stack (tools/services up: .services)")
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--prefix", default="bench")
    parser.add_argument("--delete", action="store_true", help="remove the prefix's nodes")
    args = parser.parse_args(argv)
    stack = Stack.load(args.stack_dir)
    if args.delete:
        print(f"deleted {unseed_nodes(stack, args.prefix)} nodes named {args.prefix}-*")
    else:
        seed_nodes(stack, args.count, args.prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main())
