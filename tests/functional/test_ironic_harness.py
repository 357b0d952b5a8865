"""The harness's Ironic (computed.testing.ironic) against the session's real Ironic:
Ironic.drop_nodes removes nodes with every row of theirs, those with an instance too (which the
API refuses to delete), and nothing else."""

from __future__ import annotations

import sqlite3
import uuid

from computed.testing.ironic import enroll_nodes
from tests.functional.daemons import ironic


def _rows(stack, uuids: list[str]) -> dict[str, int]:
    """{table: rows of these nodes} in Ironic's database, for the tables that have any."""
    db = sqlite3.connect(stack["ironic"].workdir / "ironic" / "ironic.sqlite", timeout=30)
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


def test_dropped_nodes_leave_no_row_and_others_stay(stack):
    token = uuid.uuid4().hex[:6]
    made = enroll_nodes(stack["ironic"].url, 3, prefix=f"drop-{token}")
    kept = enroll_nodes(stack["ironic"].url, 1, prefix=f"keep-{token}")
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
