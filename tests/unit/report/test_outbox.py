"""The daemon's outbox: quiet when nothing changed, lossless when sending fails."""

import threading

import pytest

from computed.providers.outbox import (
    FENCED_RETRY,
    KEPT_RETRY,
    MAX_KEPT_RETRY,
    Outbox,
    RpcSender,
    Verdict,
)
from computed.providers.report import API_VERSION, Outcome, Report
from tests.unit.daemon.fakes import Clock
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


def test_a_fenced_report_is_not_final_it_is_sent_again_while_the_claim_is_ours():
    """The reporter's view of ZooKeeper may lag the claim: fenced is not the last word."""
    clock = Clock()
    reporter = Reporter(Outcome.FENCED)
    gate = Gate()
    outbox = make_outbox(reporter, gate, clock=clock)
    outbox.offer(U1, 7, state())
    assert outbox.send_batch() == 1
    assert outbox.pending() == 1 and outbox.confirmed(U1) is None
    assert outbox.send_batch() == 0  # not before its retry time
    clock.now += FENCED_RETRY
    reporter.outcome = Outcome.APPLIED  # the reporter caught up with ZooKeeper
    assert outbox.send_batch() == 1
    assert outbox.pending() == 0 and outbox.confirmed(U1) == (7, state())
    assert [r.seq for r in reporter.batches[0]] == [r.seq for r in reporter.batches[1]]


def test_a_fenced_report_whose_claim_is_really_gone_is_dropped_at_its_retry():
    clock = Clock()
    reporter = Reporter(Outcome.FENCED)
    gate = Gate()
    outbox = make_outbox(reporter, gate, clock=clock)
    outbox.offer(U1, 7, state())
    outbox.send_batch()
    gate.value = Verdict.DROP  # the claim went to a peer
    clock.now += FENCED_RETRY
    assert outbox.send_batch() == 0
    assert outbox.pending() == 0 and len(reporter.batches) == 1


def test_a_kept_delete_is_sent_again_less_and_less_often_until_it_applies():
    clock = Clock()
    reporter = Reporter(Outcome.KEPT)
    outbox = make_outbox(reporter, clock=clock)
    outbox.offer(U1, 7, None)
    assert outbox.send_batch() == 1
    waits = []
    for _ in range(6):  # each attempt answered "kept" again
        assert outbox.pending() == 1 and outbox.confirmed(U1) is None
        wait = 0.0
        while outbox.send_batch() == 0:
            clock.now += 1
            wait += 1
        waits.append(wait)
    assert len(reporter.batches) == 7
    assert waits == [KEPT_RETRY, 2 * KEPT_RETRY, 4 * KEPT_RETRY, 8 * KEPT_RETRY,
                     MAX_KEPT_RETRY, MAX_KEPT_RETRY]
    reporter.outcome = Outcome.APPLIED  # the allocations are gone
    clock.now += MAX_KEPT_RETRY
    outbox.send_batch()
    assert outbox.pending() == 0 and outbox.confirmed(U1) == (7, None)


def test_a_report_waiting_for_its_retry_does_not_hold_up_the_others():
    clock = Clock()
    reporter = Reporter(Outcome.KEPT)
    outbox = make_outbox(reporter, batch_size=1, clock=clock)
    outbox.offer(U1, 7, None)
    outbox.send_batch()
    reporter.outcome = Outcome.APPLIED
    outbox.offer(U2, 8, state(U2))
    assert outbox.send_batch() == 1
    assert [r.uuid for r in reporter.batches[-1]] == [U2]


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


@pytest.mark.parametrize("outcome", [Outcome.APPLIED, Outcome.STALE])
def test_outcomes_that_leave_placement_as_reported_confirm_the_state(outcome):
    outbox = make_outbox(Reporter(outcome))
    outbox.offer(U1, 7, None)
    outbox.send_batch()
    assert outbox.pending() == 0 and outbox.confirmed(U1) == (7, None)
    assert not outbox.offer(U1, 7, None)


def test_an_invalid_report_is_dropped_logged_and_not_confirmed(caplog):
    outbox = make_outbox(Reporter(Outcome.INVALID))
    outbox.offer(U1, 7, state())
    assert outbox.send_batch() == 1
    assert outbox.pending() == 0 and outbox.confirmed(U1) is None
    assert f"reporter refused report {U1} as invalid" in caplog.text


def test_a_gone_node_is_reported_with_a_null_state_under_its_claim_epoch():
    reporter = Reporter()
    outbox = make_outbox(reporter)
    outbox.offer(U1, 7, None)
    outbox.send_batch()
    (report,) = reporter.batches[0]
    assert (report.uuid, report.claim_epoch, report.host, report.state) == (U1, 7, "c1", None)


def test_a_dropped_report_does_not_take_a_newer_offer_with_it():
    outbox = None

    class Racing(Gate):
        def verdict(self, uuid, claim_epoch):
            if claim_epoch == 7:  # the claim changed while the old report waited
                outbox.offer(U1, 9, state())
                return Verdict.DROP
            return Verdict.SEND

    reporter = Reporter()
    outbox = make_outbox(reporter, Racing())
    outbox.offer(U1, 7, state())
    assert outbox.send_batch() == 0 and outbox.pending() == 1
    assert outbox.send_batch() == 1 and reporter.batches[0][0].claim_epoch == 9


def test_held_reports_are_asked_about_again_at_every_batch():
    gate = Gate(Verdict.HOLD)
    outbox = make_outbox(Reporter(), gate)
    outbox.offer(U1, 7, state())
    outbox.send_batch()
    outbox.send_batch()
    assert gate.asked == [(U1, 7), (U1, 7)] and outbox.pending() == 1


class Client:
    """An oslo.messaging RPC client that answers ``apply_reports`` with ``answers``."""

    def __init__(self, answers):
        self.answers = answers
        self.versions = []
        self.calls = []

    def prepare(self, version, version_cap=None):
        assert version_cap == version
        self.versions.append(version)
        return self

    def call(self, ctxt, method, **kwargs):
        self.calls.append((method, kwargs))
        return self.answers


def test_rpc_sender_turns_answers_into_outcomes_at_the_edge(caplog):
    client = Client([[U1, 3, "applied"], [U2, "4", "fenced"], ["bad"], [U1, 5, "exploded"],
                     None])
    sender = RpcSender(client)
    report = Report(U1, 7, 3, "c1", None)
    assert sender.send([report]) == {(U1, 3): Outcome.APPLIED, (U2, 4): Outcome.FENCED}
    assert all(isinstance(o, Outcome) for o in sender.send([report]).values())
    assert client.versions == [API_VERSION]
    assert client.calls[0] == ("apply_reports", {"reports": [report.to_dict()]})
    assert caplog.text.count("ignoring a malformed answer from a reporter") == 6


def test_an_answer_the_outbox_cannot_read_leaves_the_report_queued():
    outbox = make_outbox(RpcSender(Client([[U1, "x", "applied"]])))
    outbox.offer(U1, 7, state())
    outbox.send_batch()
    assert outbox.pending() == 1 and outbox.last_failed == 1
