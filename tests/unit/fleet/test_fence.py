"""The fence: session states, terms and the lease (fake clock, no ZooKeeper)."""

import pytest

from computed.fleet.fence import LEASE_FRACTION, Fence, SessionState
from tests.unit.fleet.fakes import Clock


def connected_fence(timeout=3.0):
    clock = Clock()
    fence = Fence(timeout, clock=clock)
    fence.connected()
    assert fence.renew(lambda: None)
    return fence, clock


def test_a_new_fence_may_not_act_before_it_connects_and_renews():
    clock = Clock()
    fence = Fence(3.0, clock=clock)
    assert fence.state is SessionState.LOST
    assert not fence.may_act(fence.term)
    fence.connected()
    assert not fence.may_act(fence.term)  # connected, but no round trip yet
    assert fence.renew(lambda: None)
    assert fence.may_act(fence.term)


def test_lease_runs_out_without_a_round_trip_even_while_connected():
    # A process frozen past its session timeout wakes up "connected" but must not act.
    fence, clock = connected_fence(timeout=3.0)
    clock.now += 3.0 * LEASE_FRACTION - 0.01
    assert fence.may_act(fence.term)
    clock.now += 0.02
    assert not fence.may_act(fence.term)


def test_lease_counts_from_when_the_round_trip_was_sent():
    fence, clock = connected_fence(timeout=3.0)

    def slow_round_trip():
        clock.now += 1.5  # the answer took 1.5 s

    clock.now += 1.0
    sent = clock.now
    assert fence.renew(slow_round_trip)
    assert fence.lease_remaining() == pytest.approx(sent + 3.0 * LEASE_FRACTION - clock.now)


def test_failed_round_trip_does_not_renew():
    fence, clock = connected_fence()
    clock.now += 10

    def fails():
        raise OSError("connection refused")

    assert not fence.renew(fails)
    assert not fence.may_act(fence.term)


def test_suspended_stops_acting_at_once_and_reconnect_keeps_the_term():
    fence, _ = connected_fence()
    term = fence.term
    fence.suspended()
    assert fence.state is SessionState.SUSPENDED
    assert not fence.may_act(term)
    fence.connected()
    assert fence.term == term
    assert not fence.may_act(term)  # the lease must be renewed first
    assert fence.renew(lambda: None)
    assert fence.may_act(term)


def test_lost_session_kills_claims_of_the_old_term():
    fence, _ = connected_fence()
    old = fence.term
    fence.lost()
    fence.connected()
    assert fence.term == old + 1
    assert fence.renew(lambda: None)
    assert not fence.may_act(old)
    assert fence.may_act(fence.term)


def test_round_trip_across_a_session_loss_does_not_renew_the_new_session():
    fence, _ = connected_fence()

    def loses_session_meanwhile():
        fence.lost()
        fence.connected()

    assert not fence.renew(loses_session_meanwhile)


def test_each_state_change_is_reported_to_the_caller_once():
    fence = Fence(3.0, clock=Clock())
    assert fence.connected() and not fence.connected()
    assert fence.suspended()
    assert not fence.suspended()  # repeated: no second change
    assert fence.lost()
    assert fence.state is SessionState.LOST


def test_timeout_must_be_positive():
    with pytest.raises(ValueError, match="session timeout"):
        Fence(0)


def test_the_lease_comes_from_the_granted_session_timeout_not_the_requested_one():
    # ?timeout=90 asked, the server granted 40: a 60 s lease would outlive the session.
    clock = Clock()
    fence = Fence(90.0, clock=clock)
    fence.connected()
    assert fence.renew(lambda: None)
    fence.granted(40.0)
    assert fence.requested_session_timeout == 90.0 and fence.session_timeout == 40.0
    assert fence.lease_remaining() == pytest.approx(40.0 * LEASE_FRACTION)  # cut at once
    clock.now += 1
    assert fence.renew(lambda: None)
    assert fence.lease_remaining() == pytest.approx(40.0 * LEASE_FRACTION)
    with pytest.raises(ValueError, match="positive"):
        fence.granted(0)
