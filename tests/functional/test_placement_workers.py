"""The harness's Placement in worker processes (``Stack.up(placement_workers=N)``, the
benchmarks' ``--placement-workers``): it serves with N processes under one server, keeps its
providers across a restart on the same port with as many workers, and its stop leaves none of
them (chaos and tests/functional/test_reporting restart Placement)."""

from __future__ import annotations

import json
import urllib.request
import uuid

import psutil

from computed.testing import process
from computed.testing.placement import Placement
from computed.testing.postgres import PostgreSQL

HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39",
           "Content-Type": "application/json", "Accept": "application/json"}


def call(url: str, method: str = "GET", body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers=HEADERS)
    with urllib.request.urlopen(request, timeout=30) as resp:
        text = resp.read()
        return json.loads(text) if text else {}


def workers(placement: Placement) -> set[int]:
    process.wait_until(lambda: len(psutil.Process(placement.pid).children()) == 2, 60,
                       "placement's workers")
    return {child.pid for child in psutil.Process(placement.pid).children()}


def test_two_workers_serve_restart_and_stop_with_it(tmp_path):
    # On PostgreSQL, as the benchmarks run it: two workers starting on one sqlite file lock
    # each other out ("database is locked", seen in a suite run).
    database = PostgreSQL(tmp_path / "postgres", {})
    database.start()
    placement = Placement(tmp_path, info={"workers": 2, "database": database.info["url"]})
    try:
        placement.start()
        first = workers(placement)
        # Writes, each taken by whichever worker accepts it first.
        names = [str(uuid.uuid4()) for _ in range(6)]
        for name in names:
            call(placement.url + "/resource_providers", "POST", {"uuid": name, "name": name})
        port = placement.info["port"]

        placement.restart()
        assert placement.info["port"] == port and placement.workers == 2
        second = workers(placement)
        assert not any(process.alive(pid) for pid in first)
        listed = call(placement.url + "/resource_providers")["resource_providers"]
        assert set(names) <= {p["uuid"] for p in listed}
    finally:
        server = placement.pid
        placement.stop()
        database.stop()
    assert not process.alive(server)
    assert not any(process.alive(pid) for pid in second)
