"""The short chaos run on a ZooKeeper ensemble of 3 with its three faults once each, in order
(leader killed, the busiest follower cut from its peers, quorum lost and regained), fewer nodes
than tests/chaos/test_chaos.py. Those faults hit ZooKeeper's servers only: its daemons and
reporter run in the test's process (``Chaos(in_process=True)``), not as processes in namespaces,
and the run takes the shared broker (no fault restarts it). Reproduce a run with
``COMPUTED_CHAOS_SEED=<seed>`` (the seed draws the holds and the workload).
"""

from __future__ import annotations

from tests.chaos.chaos import ENSEMBLE_KINDS, Chaos, chaos_seed, run_and_check

#: Seconds this file takes in the suite, for its place in the order (tests/conftest.py).
EXPECTED_FILE_SECONDS = 60


def test_short_chaos_run_on_an_ensemble(tmp_path):
    seed = chaos_seed()
    chaos = Chaos(tmp_path, seed, daemons=3, nodes=24, session=3, grace=3.0, ensemble=True,
                  in_process=True, private_rabbitmq=False)  # ZooKeeper's faults only
    run_and_check(chaos, seed, len(ENSEMBLE_KINDS), 240, list(ENSEMBLE_KINDS))
