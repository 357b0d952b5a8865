"""How the Ironic driver's client shapes a full listing: time and memory at thousands of nodes.

The fleet lists Ironic often (every daemon while the event stream cannot be trusted, one daemon
for the fleet while it can), so the client under :class:`computed_ironic.IronicDriver` matters.
Starts a harness Ironic (:mod:`computed.testing.ironic`, fake hardware, sqlite), enrolls
``--nodes`` nodes and lists them all, ``--rounds`` times each way:

* ``driver``: :meth:`IronicDriver.list_nodes` as it is (a keystoneauth adapter; pages of
  ``?fields=``, marker paging, parsed into :class:`computed.baremetal.driver.Node`);
* ``sdk-raw``: the same driver over openstacksdk's baremetal proxy used as a raw HTTP client
  (what the driver did before it took a plain adapter);
* ``sdk-nodes``: openstacksdk's node API, ``conn.baremetal.nodes(fields=..., limit=...)``, the
  resources only (not even converted into ``Node``: a lower bound of that way).

The ways take turns, round after round, so that they share the machine's load. Prints, per way,
the median wall time of a listing and the peak of Python allocations during one
(:mod:`tracemalloc`; what the listing itself allocates, its result included).

    .venv/bin/python -m bench.ironic_list_bench [--nodes 3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openstack.connection
from keystoneauth1 import noauth
from keystoneauth1 import session as ks_session

from computed.testing import ironic as harness
from computed_ironic import API_VERSION, IronicDriver
from computed_ironic.convert import LIST_FIELDS


def _peak(listing: Callable[[], Any]) -> float:
    """MiB allocated at the peak of one listing."""
    gc.collect()
    tracemalloc.start()
    listing()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2 ** 20


def _compare(ways: dict[str, Callable[[], Any]], rounds: int) -> None:
    for listing in ways.values():
        listing()  # warm: version discovery, connection pool, imports
    times: dict[str, list[float]] = {name: [] for name in ways}
    counts: dict[str, int] = {}
    for _ in range(rounds):
        for name, listing in ways.items():
            gc.collect()
            start = time.perf_counter()
            counts[name] = len(listing())
            times[name].append(time.perf_counter() - start)
    for name, listing in ways.items():
        print(f"{name:<10} {counts[name]} nodes: {statistics.median(times[name]):6.3f} s "
              f"median, {_peak(listing):7.1f} MiB peak")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--nodes", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ironic-list-bench-") as workdir:
        service = harness.Ironic(Path(workdir))
        service.start()
        try:
            start = time.monotonic()
            harness.enroll_nodes(service.url, args.nodes, prefix="bench")
            print(f"enrolled {args.nodes} nodes in {time.monotonic() - start:.1f} s")
            driver = IronicDriver.for_endpoint(service.url)
            session = ks_session.Session(auth=noauth.NoAuth(), timeout=30)
            conn = openstack.connection.Connection(
                session=session, baremetal_endpoint_override=service.url,
                baremetal_api_version=API_VERSION)
            # openstacksdk's proxy is a keystoneauth Adapter: the driver takes it as one.
            sdk_raw = IronicDriver(conn.baremetal)
            _compare({"driver": driver.list_nodes, "sdk-raw": sdk_raw.list_nodes,
                      "sdk-nodes": lambda: list(conn.baremetal.nodes(
                          fields=list(LIST_FIELDS), limit=harness.PAGE))}, args.rounds)
            driver.close()
            conn.close()
        finally:
            service.stop()


if __name__ == "__main__":
    main()
