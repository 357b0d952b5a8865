"""The short chaos run: 3 daemons (each in its own network namespace), a reporter, ~40 nodes,
6 faults drawn from a printed seed while a workload runs (forged reports and casts, planted
members among them), then every invariant checked from evidence (see :mod:`tests.chaos.chaos`).
The fleet runs with ZooKeeper credentials (ACLs on, as docs/security.md advises). Reproduce a run
with ``COMPUTED_CHAOS_SEED=<seed>``.

The same on a ZooKeeper ensemble is tests/chaos/test_chaos_ensemble.py: a file of its own, so
that the suite's workers (``--dist loadfile``) run the two at once.
"""

from __future__ import annotations

from tests.chaos.chaos import Chaos, chaos_seed, run_and_check

FAULTS = 6
CREDENTIALS = "computed:chaos-short"
#: Seconds this file takes in the suite, for its place in the order (tests/conftest.py).
EXPECTED_FILE_SECONDS = 80


def test_short_chaos_run(tmp_path):
    seed = chaos_seed()
    chaos = Chaos(tmp_path, seed, daemons=3, nodes=40, session=3, grace=3.0,
                  zk_credentials=CREDENTIALS)
    run_and_check(chaos, seed, FAULTS, 360)
