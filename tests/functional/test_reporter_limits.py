"""What one message on the real bus can make a real reporter do (issue 16 item 9).

The test holds a node's claim itself (as a forger who read it from an open ZooKeeper could) and
calls the reporter through RabbitMQ: a report with 3,000 traits, one with a 10 MB field, and a
call of 2,000 reports. Each is answered in a way the sender understands, nothing reaches
Placement from the oversized ones, no log line carries the 10 MB, and an honest report still
applies afterwards.
"""

from __future__ import annotations

import time
import uuid

from tests.functional.daemons import seen, wait_for
from tests.functional.test_reporting import _call, playing_a_daemon

WORLD_NODES = 2
MAX_REPORTS = 50


def test_one_message_cannot_make_the_reporter_work_without_bound(stack, world, placement):
    reporter = world.reporter("r1", extra=f"[reporter]\nmax_reports_per_call = {MAX_REPORTS}\n")
    reporter.wait_log("serving topic")
    node = world.nodes[0]
    with playing_a_daemon(stack, world, node) as (client, epoch):
        seq = int(time.time() * 1000)

        def report(seq, **state_fields):
            state = {"uuid": node, "name": node, "resource_class": world.rc, "reserved": 0,
                     "traits": [], **state_fields}
            return {"uuid": node, "claim_epoch": epoch, "seq": seq, "host": "tester",
                    "state": state}

        def send(reports):
            return wait_for(lambda: _call(client, reports), 60, "reporter answers", [reporter])

        many_traits = report(seq, traits=[f"CUSTOM_FORGED_{i}" for i in range(3000)])
        assert send([many_traits]) == [[node, seq, "invalid"]]
        huge = report(seq + 1, name="x" * 10_000_000)
        assert send([huge]) == [[node, seq + 1, "invalid"]]
        assert seen(placement, node) is None  # nothing of either reached Placement

        flood = [{"uuid": str(uuid.uuid4()), "claim_epoch": 1, "seq": i, "host": "forger",
                  "state": None} for i in range(2000)]
        answers = send(flood)
        outcomes = [outcome for _, _, outcome in answers]
        assert len(answers) == 2000
        assert outcomes.count("fenced") == MAX_REPORTS  # looked at: no claim, not applied
        assert outcomes.count("failed") == 2000 - MAX_REPORTS  # not looked at: send again

        assert send([report(seq + 2, reserved=1)]) == [[node, seq + 2, "applied"]]
        assert seen(placement, node).reserved == 1
    lines = reporter.log.read_text(errors="replace").splitlines()
    assert max(len(line) for line in lines) < 2000
    refused = [line for line in lines if "dropping oversized report" in line]
    assert len(refused) == 2 and all(node in line for line in refused)
    assert sum("max_reports_per_call" in line for line in lines) == 1
