"""The outbox's state shared by the node thread (offers) and the report thread (sends) (issue 22
item 1): the race is provoked deterministically, the report thread held in the gate by Events
(bounded waits only guard against a hang)."""

from __future__ import annotations

import threading

from computed.providers.outbox import Outbox, Verdict
from tests.unit.report.fakes import U1, Reporter, state

HANG = 10.0


class _PausingGate:
    """Sends everything; the first time ``pause_in`` asks, it stops there until released: the
    moment between the batch's snapshot and its send."""

    def __init__(self) -> None:
        self.pause_in: threading.Thread | None = None
        self.asked = threading.Event()
        self.go_on = threading.Event()

    def verdict(self, uuid: str, claim_epoch: int) -> Verdict:
        if threading.current_thread() is self.pause_in and not self.asked.is_set():
            self.asked.set()
            assert self.go_on.wait(HANG)
        return Verdict.SEND


def test_a_change_back_to_the_confirmed_state_made_while_a_batch_is_gated_is_sent():
    """Placement holds A (confirmed); the node changes to B, and the report thread takes B into
    a batch; before B goes out, the node changes back to A and the node thread offers A. A must
    stay queued: B reaches Placement first, and A after it, or Placement keeps B for good."""
    reporter, gate = Reporter(), _PausingGate()
    outbox = Outbox("c1", reporter, gate, batch_size=10)
    a, b = state(reserved=0), state(reserved=1)
    assert outbox.offer(U1, 7, a) and outbox.send_batch() == 1
    assert outbox.confirmed(U1) == (7, a)
    assert outbox.offer(U1, 7, b)
    report_thread = threading.Thread(target=outbox.send_batch, name="report")
    gate.pause_in = report_thread
    report_thread.start()
    assert gate.asked.wait(HANG)
    outbox.offer(U1, 7, a)  # the node thread: changed back
    gate.go_on.set()
    report_thread.join(HANG)
    assert [r.state for r in reporter.batches[-1]] == [b.to_dict()]
    assert outbox.pending() == 1
    assert outbox.send_batch() == 1
    assert [r.state for r in reporter.batches[-1]] == [a.to_dict()]
    assert outbox.confirmed(U1) == (7, a)
