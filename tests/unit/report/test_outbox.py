"""The daemon's outbox: quiet when nothing changed, lossless when sending fails."""

import threading

import pytest

from computed.providers.outbox import Outbox, Verdict
from computed.providers.report import Outcome
from tests.unit.report.fakes import U1, U2, Gate, Reporter, state


def make_outbox(reporter, gate=None, batch_size=100, **kwargs):
    return Outbox("c1", reporter, gate or Gate(), batch_size=batch_size, **kwargs)


def test_unchanged_state_is_sent_once_then_never_again():
    reporter = Reporter()
    outbox = make_outbox(reporter)
    assert outbox.offer(U1, 7, state())
    assert not outbox.offer(U1, 7, state())  # already queued
    assert outbox.send_batch() == 1
    assert not outbox.offer(U1, 7, state())  # confirmed: a sync pass sends nothing
    assert outbox.send_batch() == 0
    assert len(reporter.batches) == 1


def test_a_failed_call_keeps_the_reports_for_the_next_attempt():
    reporter = Reporter()
    reporter.fail = True
    outbox = make_outbox(reporter)
    outbox.offer(U1, 7, state())
    with pytest.raises(TimeoutError):
        outbox.send_batch()
    assert outbox.pending() == 1
    reporter.fail = False
    assert outbox.send_batch() == 1
    assert outbox.pending() == 0 and outbox.confirmed(U1) == (7, state())


@pytest.mark.parametrize("failure", ["call", "outcome"])
def test_after_a_failure_the_confirmed_state_is_unknown(failure):
    # B's call timed out (or B failed half way on the reporter): Placement may hold B. A change
    # back to the confirmed A must still be sent, or Placement could keep B for good.
    reporter = Reporter()
    outbox = make_outbox(reporter)
    outbox.offer(U1, 7, state(reserved=0))
    outbox.send_batch()
    outbox.offer(U1, 7, state(reserved=1))
    if failure == "call":
        reporter.fail = True
        with pytest.raises(TimeoutError):
            outbox.send_batch()
        reporter.fail = False
    else:
        reporter.outcome = Outcome.FAILED
        outbox.send_batch()
        reporter.outcome = Outcome.APPLIED
    assert outbox.confirmed(U1) is None
    assert outbox.offer(U1, 7, state(reserved=0))
    assert outbox.send_batch() == 1
    assert reporter.batches[-1][0].state["reserved"] == 0
    assert outbox.confirmed(U1) == (7, state(reserved=0))


def test_a_newer_state_replaces_an_unsent_one_with_a_larger_seq():
    reporter = Reporter()
    outbox = make_outbox(reporter)
    outbox.offer(U1, 7, state(reserved=0))
    outbox.offer(U1, 7, state(reserved=1))
    outbox.send_batch()
    (report,) = reporter.batches[0]
    assert report.state["reserved"] == 1
    outbox.offer(U1, 7, state(reserved=0))
    outbox.send_batch()
    assert reporter.batches[1][0].seq > report.seq


def test_fenced_reports_are_dropped_not_confirmed():
    outbox = make_outbox(Reporter(Outcome.FENCED))
    outbox.offer(U1, 7, state())
    outbox.send_batch()
    assert outbox.pending() == 0 and outbox.confirmed(U1) is None


def test_a_missing_answer_counts_as_failed():
    outbox = make_outbox(Reporter(None))
    outbox.offer(U1, 7, state())
    outbox.send_batch()
    assert outbox.pending() == 1


def test_reports_whose_claim_is_gone_are_not_sent():
    reporter = Reporter()
    outbox = make_outbox(reporter, Gate(Verdict.DROP, {U2: Verdict.SEND}))
    outbox.offer(U1, 7, state(U1))
    outbox.offer(U2, 8, state(U2))
    assert outbox.send_batch() == 1
    assert [r.uuid for r in reporter.batches[0]] == [U2]
    assert outbox.pending() == 0


def test_batches_are_bounded_and_forget_drops_everything_about_a_node():
    reporter = Reporter()
    outbox = make_outbox(reporter, batch_size=1)
    outbox.offer(U1, 7, state(U1))
    outbox.offer(U2, 7, state(U2))
    assert outbox.send_batch() == 1
    outbox.forget([U1, U2])
    assert outbox.pending() == 0 and outbox.confirmed(U1) is None


def test_a_new_epoch_is_reported_again_even_with_the_same_state():
    reporter = Reporter()
    outbox = make_outbox(reporter)
    outbox.offer(U1, 7, state())
    outbox.send_batch()
    assert outbox.offer(U1, 9, state())  # a new claim: its owner reports under its own epoch


def test_run_retries_with_backoff_until_it_gets_through():
    reporter = Reporter()
    reporter.fail = True
    outbox = make_outbox(reporter, max_backoff=0.05)
    outbox.offer(U1, 7, state())
    stop = threading.Event()
    thread = threading.Thread(target=outbox.run, args=(stop,))
    thread.start()
    try:
        while len(reporter.batches) < 3:
            stop.wait(0.01)
        reporter.fail = False
        while outbox.pending():
            stop.wait(0.01)
    finally:
        stop.set()
        thread.join(5)
    assert outbox.confirmed(U1) == (7, state())


def test_a_state_equal_to_the_confirmed_one_is_still_sent_while_another_is_in_flight():
    # available -> deploying -> available within one call: when the call returns, Placement
    # holds the in-flight state, so the offer that looked "already confirmed" must go out.
    class ChangesBack(Reporter):
        def send(self, batch):
            if batch[0].state["reserved"] == 1:
                outbox.offer(U1, 7, state(reserved=0))  # changed back while B was on the wire
            return super().send(batch)

    outbox = make_outbox(ChangesBack())
    outbox.offer(U1, 7, state(reserved=0))
    outbox.send_batch()
    outbox.offer(U1, 7, state(reserved=1))
    outbox.send_batch()
    assert outbox.confirmed(U1) == (7, state(reserved=1))
    assert outbox.pending() == 1  # the change back is queued, not lost
    outbox.send_batch()
    assert outbox.confirmed(U1) == (7, state(reserved=0))


def test_reports_are_held_while_the_fence_is_closed_and_sent_after():
    reporter = Reporter()
    gate = Gate(Verdict.HOLD)  # claim ours, fence closed (ZooKeeper reconnecting)
    outbox = make_outbox(reporter, gate)
    outbox.offer(U1, 7, state())
    assert outbox.send_batch() == 0 and outbox.pending() == 1 and reporter.batches == []
    gate.value = Verdict.SEND
    assert outbox.send_batch() == 1 and outbox.confirmed(U1) == (7, state())


def test_run_backs_off_when_the_reporter_can_apply_nothing():
    reporter = Reporter(Outcome.FAILED)
    outbox = make_outbox(reporter, max_backoff=0.2)
    outbox.offer(U1, 7, state())
    stop = threading.Event()
    thread = threading.Thread(target=outbox.run, args=(stop,))
    thread.start()
    stop.wait(1.0)
    stop.set()
    thread.join(5)
    # Without backoff this loop would have sent hundreds of calls in a second.
    assert 2 <= len(reporter.batches) <= 10 and outbox.pending() == 1
