"""The short chaos run: 3 daemons (each in its own network namespace), a reporter, ~40 nodes,
6 faults drawn from a printed seed while a workload runs (forged reports and casts, planted
members among them), then every invariant checked from evidence (see :mod:`tests.chaos.chaos`).
The fleet runs with ZooKeeper credentials (ACLs on, as docs/security.md advises). Reproduce a run
with ``COMPUTED_CHAOS_SEED=<seed>``.

The same on a ZooKeeper ensemble of 3 with its three faults once each, in order (leader killed,
the busiest follower cut from its peers, quorum lost and regained), fewer nodes. Those faults
hit ZooKeeper's servers only: its daemons and reporter run in the test's process
(``Chaos(in_process=True)``), not as processes in namespaces.
"""

from __future__ import annotations

import os
import random

import pytest

from tests.chaos import netns
from tests.chaos.chaos import ENSEMBLE_KINDS, Chaos

FAULTS = 6
CREDENTIALS = "computed:chaos-short"


def _seed() -> int:
    reason = netns.available()
    if reason:
        pytest.skip(f"network namespaces unavailable here: {reason}")
    seed = int(os.environ.get("COMPUTED_CHAOS_SEED") or random.SystemRandom().randrange(10**6))
    print(f"chaos seed {seed} (COMPUTED_CHAOS_SEED={seed} reproduces the fault sequence)")
    return seed


def _run_and_check(chaos: Chaos, seed: int, count: int, duration: float,
                   kinds: list[str] | None = None) -> None:
    try:
        chaos.setup()
        chaos.run_faults(count=count, duration=duration, kinds=kinds)  # recovery waits count too
        results = chaos.check()
        print(results.report())
        failed = {name: detail for name, (ok, detail) in results.checks.items() if not ok}
        # A fault "recovers" when claims converge and Placement matches Ironic again.
        never = [f.line() for f in results.faults if f.recovery is None]
        assert not never, f"seed {seed}: faults never recovered: {never}\n" \
                          f"{results.report()}\n{chaos.tails()}"
        assert not failed, f"seed {seed}: invariants failed: {failed}\n{results.report()}"
    finally:
        chaos.close()


def test_short_chaos_run(tmp_path):
    seed = _seed()
    chaos = Chaos(tmp_path, seed, daemons=3, nodes=40, session=3, grace=3.0,
                  zk_credentials=CREDENTIALS)
    _run_and_check(chaos, seed, FAULTS, 360)


def test_short_chaos_run_on_an_ensemble(tmp_path):
    seed = _seed()
    chaos = Chaos(tmp_path, seed, daemons=3, nodes=24, session=3, grace=3.0, ensemble=True,
                  in_process=True, private_rabbitmq=False)  # ZooKeeper's faults only
    _run_and_check(chaos, seed, len(ENSEMBLE_KINDS), 240, list(ENSEMBLE_KINDS))
