"""The daemon's outbox: quiet when nothing changed, lossless when sending fails."""

import threading

import pytest

from computed.providers.report import MalformedReport, Outbox, Report

U1 = "11111111-1111-1111-1111-111111111111"
U2 = "22222222-2222-2222-2222-222222222222"


def state(uuid=U1, reserved=0):
    return {"uuid": uuid, "name": uuid, "resource_class": "CUSTOM_GOLD", "reserved": reserved,
            "traits": []}


class Reporter:
    """Answers every report with a fixed outcome (or raises), recording what it got."""

    def __init__(self, outcome="applied"):
        self.outcome = outcome
        self.batches = []
        self.fail = False

    def __call__(self, batch):
        self.batches.append(batch)
        if self.fail:
            raise TimeoutError("no reporter answered")
        return {(r.uuid, r.seq): self.outcome for r in batch}


def test_unchanged_state_is_sent_once_then_never_again():
    reporter = Reporter()
    outbox = Outbox("c1", reporter)
    assert outbox.offer(U1, 7, state())
    assert not outbox.offer(U1, 7, state())  # already queued
    assert outbox.send_batch() == 1
    assert not outbox.offer(U1, 7, state())  # confirmed: a sync pass sends nothing
    assert outbox.send_batch() == 0
    assert len(reporter.batches) == 1


def test_a_failed_call_keeps_the_reports_for_the_next_attempt():
    reporter = Reporter()
    reporter.fail = True
    outbox = Outbox("c1", reporter)
    outbox.offer(U1, 7, state())
    with pytest.raises(TimeoutError):
        outbox.send_batch()
    assert outbox.pending() == 1
    reporter.fail = False
    assert outbox.send_batch() == 1
    assert outbox.pending() == 0 and outbox.confirmed(U1) == (7, state())


def test_a_newer_state_replaces_an_unsent_one_with_a_larger_seq():
    reporter = Reporter()
    outbox = Outbox("c1", reporter)
    outbox.offer(U1, 7, state(reserved=0))
    outbox.offer(U1, 7, state(reserved=1))
    outbox.send_batch()
    (report,) = reporter.batches[0]
    assert report.state["reserved"] == 1
    outbox.offer(U1, 7, state(reserved=0))
    outbox.send_batch()
    assert reporter.batches[1][0].seq > report.seq


def test_fenced_reports_are_dropped_not_confirmed():
    outbox = Outbox("c1", Reporter("fenced"))
    outbox.offer(U1, 7, state())
    outbox.send_batch()
    assert outbox.pending() == 0 and outbox.confirmed(U1) is None


def test_a_missing_answer_counts_as_failed():
    outbox = Outbox("c1", lambda batch: {})
    outbox.offer(U1, 7, state())
    outbox.send_batch()
    assert outbox.pending() == 1


def test_reports_whose_claim_is_gone_are_not_sent():
    reporter = Reporter()
    outbox = Outbox("c1", reporter, may_send=lambda uuid, epoch: uuid == U2)
    outbox.offer(U1, 7, state(U1))
    outbox.offer(U2, 8, state(U2))
    assert outbox.send_batch() == 1
    assert [r.uuid for r in reporter.batches[0]] == [U2]
    assert outbox.pending() == 0


def test_batches_are_bounded_and_forget_drops_everything_about_a_node():
    reporter = Reporter()
    outbox = Outbox("c1", reporter, batch_size=1)
    outbox.offer(U1, 7, state(U1))
    outbox.offer(U2, 7, state(U2))
    assert outbox.send_batch() == 1
    outbox.forget([U1, U2])
    assert outbox.pending() == 0 and outbox.confirmed(U1) is None


def test_a_new_epoch_is_reported_again_even_with_the_same_state():
    reporter = Reporter()
    outbox = Outbox("c1", reporter)
    outbox.offer(U1, 7, state())
    outbox.send_batch()
    assert outbox.offer(U1, 9, state())  # a new claim: its owner reports under its own epoch


def test_run_retries_with_backoff_until_it_gets_through():
    reporter = Reporter()
    reporter.fail = True
    outbox = Outbox("c1", reporter, max_backoff=0.05)
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


@pytest.mark.parametrize("bad, field", [
    ("nope", "expected an object"),
    ({"uuid": "x", "epoch": 1, "seq": 1, "host": "h", "state": None}, "'uuid'"),
    ({"uuid": U1, "epoch": -1, "seq": 1, "host": "h", "state": None}, "'epoch'"),
    ({"uuid": U1, "epoch": 1, "seq": True, "host": "h", "state": None}, "'seq'"),
    ({"uuid": U1, "epoch": 1, "seq": 1, "host": "", "state": None}, "'host'"),
    ({"uuid": U1, "epoch": 1, "seq": 1, "host": "h", "state": []}, "'state'"),
    ({"uuid": U1, "epoch": 1, "seq": 1, "host": "h", "state": state(U2)}, "describes"),
])
def test_malformed_reports_name_the_field(bad, field):
    with pytest.raises(MalformedReport, match=field):
        Report.from_dict(bad)


def test_report_round_trip():
    report = Report(U1, 7, 3, "c1", state())
    assert Report.from_dict(report.to_dict()) == report


def test_a_state_equal_to_the_confirmed_one_is_still_sent_while_another_is_in_flight():
    # available -> deploying -> available within one call: when the call returns, Placement
    # holds the in-flight state, so the offer that looked "already confirmed" must go out.
    outbox = None

    def reporter(batch):
        if batch[0].state["reserved"] == 1:
            outbox.offer(U1, 7, state(reserved=0))  # changed back while B was on the wire
        return {(r.uuid, r.seq): "applied" for r in batch}

    outbox = Outbox("c1", reporter)
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
    verdict = {"value": None}  # claim ours, fence closed (ZooKeeper reconnecting)
    outbox = Outbox("c1", reporter, may_send=lambda uuid, epoch: verdict["value"])
    outbox.offer(U1, 7, state())
    assert outbox.send_batch() == 0 and outbox.pending() == 1 and reporter.batches == []
    verdict["value"] = True
    assert outbox.send_batch() == 1 and outbox.confirmed(U1) == (7, state())


def test_run_backs_off_when_the_reporter_can_apply_nothing():
    reporter = Reporter("failed")
    outbox = Outbox("c1", reporter, max_backoff=0.2)
    outbox.offer(U1, 7, state())
    stop = threading.Event()
    thread = threading.Thread(target=outbox.run, args=(stop,))
    thread.start()
    stop.wait(1.0)
    stop.set()
    thread.join(5)
    # Without backoff this loop would have sent hundreds of calls in a second.
    assert 2 <= len(reporter.batches) <= 10 and outbox.pending() == 1
