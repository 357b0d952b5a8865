"""Two reporter replicas against the real Placement and one database (issue 13 item 4).

Each replica keeps a cache of what it wrote to Placement. The decision to skip a write must come
from what the database says was last applied (by any replica), never from one replica's memory:
otherwise a replica whose cache is behind answers ``applied`` without a request and Placement
keeps another replica's older write, silently.
"""

from __future__ import annotations

import uuid

from computed.db import engine as db_engine
from computed.placement.client import PlacementClient
from computed.providers.report import Outcome, Report
from computed.reporter.applier import ReportApplier
from computed.runtime import keystone
from tests import database
from tests.functional.daemons import fleet_database, seen


class OneClaim:
    """The live claims as ZooKeeper would answer: every provider claimed by c1 with epoch 5."""

    def claim_holders(self, nodes):
        return {node: (5, "c1") for node in nodes}


def test_replicas_never_skip_a_write_another_replica_made_stale(computed_config, tmp_path):
    engine = db_engine.engine_from_url(fleet_database(tmp_path))
    replicas = [ReportApplier(PlacementClient(keystone.load_adapter(computed_config,
                                                                     "placement")),
                              OneClaim(), engine, workers=1) for _ in range(2)]
    node = str(uuid.uuid4())
    rc = f"CUSTOM_REPLICA_{uuid.uuid4().hex[:6].upper()}"

    def report(replica, seq, reserved):
        state = {"uuid": node, "name": node, "resource_class": rc, "reserved": reserved,
                 "traits": []}
        answer = replicas[replica].apply(
            [Report(node, 5, seq, "c1", state).to_dict()])
        assert answer == [[node, seq, Outcome.APPLIED.value]]

    try:
        report(0, 1, reserved=1)
        report(1, 2, reserved=0)
        report(0, 3, reserved=1)  # replica 0's cache still says 1 from seq 1
        placement = PlacementClient(keystone.load_adapter(computed_config, "placement"))
        assert seen(placement, node).reserved == 1
        assert database.get_provider(engine, node).seq == 3
    finally:
        for replica in replicas:
            replica.close()
        engine.dispose()
