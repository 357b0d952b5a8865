"""CPU of one fleet round at 50,000 nodes, in this process (issue 27: the confirming rounds).

Runs the daemon's own :class:`computed.daemon.listing.Listings` over a catalog of ``--nodes``
nodes (parsed as a listing is, from a page like Ironic's: bench/daemon_memory.py's) and a
``providers`` table in a sqlite file (the real daemons read PostgreSQL: its rows cost the client
about the same to read, its server's share is not counted here), with an in-memory ZooKeeper
for the round's znode. Per scenario:

1. the daemon's first listing (trusted events), then the fleet's first round, which compares
   that listing with every applied state (**full**: every node's provider state made, every
   applied state read and parsed);
2. some reports land (rows written), then the next round, ``node_refresh_interval`` later, which
   confirms what the first found (**confirming**), without listing (its listing is younger than
   ``fleet_listing_interval``).

Scenarios: a cold start half way (half the nodes applied at the first round, a tenth more by the
second), a cold start's first round (none applied, 2,000 by the second), and a steady state
(every node applied, ``--missed`` of them changed in Ironic with no event). Prints the CPU
seconds (``time.process_time``) of each round, the median of ``--runs`` runs.

    .venv/bin/python -m bench.round_cpu [--nodes 50000] [--runs 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import statistics
import sys
import tempfile
import time

import sqlalchemy as sa

from bench.daemon_memory import _Listed, listing_page
from computed.baremetal.catalog import NodeCatalog
from computed.daemon.listing import ListingRound, Listings
from computed.db import models
from computed.db.engine import engine_from_url
from computed.providers.state import provider_from_node
from computed.testing.znode import OneZnode


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class _Trusted:
    def trusted(self) -> bool:
        return True

    def trusted_since(self, since: float) -> bool:
        return True


class _Nodes:
    def __init__(self, catalog: NodeCatalog) -> None:
        self.catalog = catalog

    def refresh(self) -> bool:
        self.catalog.refresh()
        return False

    def refresh_providers(self) -> bool:
        return False


def _apply(engine, nodes, changed=frozenset()) -> None:
    """Rows of reports applied for ``nodes`` (the state of a maintenance-toggled copy for the
    uuids in ``changed``: Ironic changed them with no event)."""
    rows = []
    for node in nodes:
        if node.uuid in changed:
            node = dataclasses.replace(node, maintenance=not node.maintenance)
        state = provider_from_node(node)
        rows.append({"uuid": node.uuid, "claim_epoch": 1, "seq": 1, "host": "c1",
                     "state": None if state is None else json.dumps(state.to_dict()),
                     "deleted": state is None})
    if rows:
        with engine.begin() as conn:
            conn.execute(sa.insert(models.Provider.__table__), rows)


def one_run(page: bytes, first: float, second: float, missed: int) -> tuple[float, float]:
    """CPU seconds of the first (full) and the second (confirming) round."""
    with tempfile.TemporaryDirectory() as tmp:
        engine = engine_from_url(f"sqlite:///{os.path.join(tmp, 'c.sqlite')}")
        models.Base.metadata.create_all(engine)
        clock, wall = _Clock(100.0), _Clock(5000.0)
        catalog = NodeCatalog(_Listed(page), clock=clock)
        lister = Listings(_Nodes(catalog), catalog, engine, 30.0, 600.0, _Trusted(),
                          ListingRound(OneZnode(), "/r", "c1", wall=wall), None, clock=clock)
        lister.step()  # the first listing
        nodes = sorted(catalog.view().nodes.values(), key=lambda n: n.uuid)
        cut = int(len(nodes) * first)
        _apply(engine, nodes[:cut], changed={n.uuid for n in nodes[:missed]})
        assert lister.listings == 1
        clock.now += 5.0
        wall.now += 5.0
        started = time.process_time()
        lister.step()  # the fleet's first round: compares the fresh listing
        full = time.process_time() - started
        _apply(engine, nodes[cut:int(len(nodes) * second)])
        clock.now += 31.0
        wall.now += 31.0
        started = time.process_time()
        lister.step()  # the round that confirms the first's findings
        confirming = time.process_time() - started
        assert lister.listings == 1, "a round listed again"
        engine.dispose()
    return full, confirming


SCENARIOS = {
    "cold start, half applied (then +10 %)": (0.5, 0.6, 0),
    "cold start, none applied (then +2,000)": (0.0, None, 0),
    "steady state, {missed} changed with no event": (1.0, 1.0, None),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--nodes", type=int, default=50000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--missed", type=int, default=10)
    args = parser.parse_args(argv)
    quiet = logging.getLogger("computed.daemon.listing")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # each round's warning; put back after (tests run main)
    try:
        page = listing_page(args.nodes)
        print(f"{args.nodes} nodes, median of {args.runs} runs, CPU s of one round "
              f"(load {os.getloadavg()[0]:.1f} at start)")
        for name, (first, second, missed) in SCENARIOS.items():
            second = 2000 / args.nodes if second is None else second
            missed = args.missed if missed is None else missed
            runs = [one_run(page, first, second, missed) for _ in range(args.runs)]
            full = statistics.median(r[0] for r in runs)
            confirming = statistics.median(r[1] for r in runs)
            print(f"  {name.format(missed=missed):45s} full {full:6.2f}   "
                  f"confirming {confirming:6.2f}")
        print(f"(load {os.getloadavg()[0]:.1f} at the end)")
    finally:
        quiet.setLevel(level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
