"""The harness's Ironic (computed.testing.ironic) against the session's real Ironic: the nodes
Ironic.enroll_nodes copies in its database read through the API as the one Ironic created, and
Ironic.drop_nodes removes nodes with every row of theirs, those with an instance too (which the
API refuses to delete), and nothing else; bench.seed's unseed_nodes drops a prefix's nodes the same
way."""

from __future__ import annotations

import sqlite3
import uuid

from bench.seed import unseed_nodes
from computed.testing import ironic as ironic_harness
from computed.testing.ironic import request
from tests.functional.daemons import ironic, make_available

#: What differs between two nodes by nature rather than by copy.
OWN = ("uuid", "name", "links", "ports", "portgroups", "states", "volume", "firmware",
       "created_at", "updated_at")


def _rows(stack, uuids: list[str]) -> dict[str, int]:
    """{table: rows of these nodes} in Ironic's database, for the tables that have any."""
    db = sqlite3.connect(stack["ironic"].database, timeout=30)
    try:
        marks = ",".join("?" * len(uuids))
        ids = [row[0] for row in db.execute(f"SELECT id FROM nodes WHERE uuid IN ({marks})",
                                             uuids)]
        found = {"nodes": len(ids)} if ids else {}
        id_marks = ",".join("?" * len(ids))
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            if ids and any(c[1] == "node_id" for c in db.execute(f"PRAGMA table_info({table})")):
                count = db.execute(f"SELECT COUNT(*) FROM {table} WHERE node_id IN ({id_marks})",
                                   ids).fetchone()[0]
                if count:
                    found[table] = count
        return found
    finally:
        db.close()


def test_copied_nodes_read_as_the_one_ironic_created(stack):
    token = uuid.uuid4().hex[:6]
    made = stack["ironic"].enroll_nodes(5, resource_class=f"harness-{token}",
                                        prefix=f"harness-{token}", properties={"cpus": 8})
    try:
        assert len(set(made)) == 5
        shown = [ironic(stack, "GET", f"/nodes/{node}") for node in made]
        assert [node["uuid"] for node in shown] == made
        assert [node["name"] for node in shown] == [f"harness-{token}-{i:05d}" for i in range(5)]
        first = shown[0]
        assert first["resource_class"] == f"harness-{token}"
        assert first["properties"] == {"cpus": 8}
        for node in shown[1:]:
            assert {k: v for k, v in node.items() if k not in OWN} == \
                   {k: v for k, v in first.items() if k not in OWN}
        listed = request("GET", f"{stack['ironic'].url}/v1/nodes?resource_class=harness-{token}"
                                "&fields=uuid")["nodes"]
        assert sorted(node["uuid"] for node in listed) == sorted(made)
        # A copy takes state changes as a node Ironic created does.
        make_available(stack, [made[-1]])
        assert ironic(stack, "GET", f"/nodes/{made[-1]}")["provision_state"] == "available"
    finally:
        stack["ironic"].drop_nodes(made)


def test_dropped_nodes_leave_no_row_and_others_stay(stack):
    token = uuid.uuid4().hex[:6]
    made = stack["ironic"].enroll_nodes(3, prefix=f"drop-{token}")
    kept = stack["ironic"].enroll_nodes(1, prefix=f"keep-{token}")
    try:
        ironic(stack, "POST", "/ports", {"node_uuid": made[0], "address": "52:54:00:12:34:56"})
        ironic(stack, "PUT", f"/nodes/{made[0]}/traits/CUSTOM_DROP_{token.upper()}")
        ironic(stack, "PATCH", f"/nodes/{made[1]}",
               [{"op": "add", "path": "/instance_uuid", "value": str(uuid.uuid4())}])
        assert {table: _rows(stack, made).get(table) for table in ("ports", "node_traits")} == \
               {"ports": 1, "node_traits": 1}
        stack["ironic"].drop_nodes(made)
        assert _rows(stack, made) == {}
        assert _rows(stack, kept) == {"nodes": 1}
        for node in made:
            try:
                ironic(stack, "GET", f"/nodes/{node}")
            except OSError as exc:
                assert getattr(exc, "code", None) == 404, exc
            else:
                raise AssertionError(f"node {node} still shown after drop_nodes")
    finally:
        stack["ironic"].drop_nodes(made + kept)


def test_a_prefix_unseeded_leaves_no_row_of_its_nodes_in_slices(stack, monkeypatch):
    monkeypatch.setattr(ironic_harness, "DROP_SLICE", 2)  # 3 nodes: two statements' slices
    token = uuid.uuid4().hex[:6]
    made = stack["ironic"].enroll_nodes(3, prefix=f"unseed-{token}")
    kept = stack["ironic"].enroll_nodes(1, prefix=f"unseed-{token}x")
    try:
        ironic(stack, "POST", "/ports", {"node_uuid": made[2], "address": "52:54:00:12:34:57"})
        assert unseed_nodes(stack, f"unseed-{token}") == 3
        assert _rows(stack, made) == {}
        assert _rows(stack, kept) == {"nodes": 1}
    finally:
        stack["ironic"].drop_nodes(made + kept)
