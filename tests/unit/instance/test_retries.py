"""computed.instances.retries: the pure decision after a failed build attempt."""

import pytest

from computed.instances import retries
from computed.instances.retries import Attempt, GiveUp, NextAttempt

A, B, C = (f'{i}' * 8 + '-0000-0000-0000-000000000000' for i in 'abc')


def test_a_first_failure_with_attempts_left_retries_elsewhere():
    decision = retries.after_failure((), Attempt(A, 'image not found'), max_attempts=3)
    assert decision == NextAttempt(frozenset({A}), f'attempt 1 on node {A}: image not found')


def test_the_next_attempt_excludes_every_node_tried():
    previous = retries.attempts(f'attempt 1 on node {A}: boom')
    decision = retries.after_failure(previous, Attempt(B, 'bang'), max_attempts=3)
    assert isinstance(decision, NextAttempt) and decision.exclude == {A, B}
    assert retries.attempts(decision.fault) == (Attempt(A, 'boom'), Attempt(B, 'bang'))


def test_max_attempts_reached_gives_up_listing_every_attempt():
    previous = (Attempt(A, 'boom'), Attempt(B, 'bang'))
    decision = retries.after_failure(previous, Attempt(C, 'crash'), max_attempts=3)
    assert decision == GiveUp(f'attempt 1 on node {A}: boom\n'
                              f'attempt 2 on node {B}: bang\n'
                              f'attempt 3 on node {C}: crash\n'
                              'build given up: max_attempts 3 reached')


def test_max_attempts_one_never_retries():
    decision = retries.after_failure((), Attempt(A, 'boom'), max_attempts=1)
    assert isinstance(decision, GiveUp) and f'node {A}: boom' in decision.fault


def test_a_failure_that_cannot_be_retried_gives_up_whatever_attempts_are_left():
    decision = retries.after_failure((), Attempt(A, 'boom'), max_attempts=3, can_retry=False)
    assert decision == GiveUp(f'attempt 1 on node {A}: boom')


def test_no_other_node_gives_up_with_the_attempts():
    decision = retries.after_failure((), Attempt(A, 'boom'), max_attempts=3)
    assert retries.no_other_node(decision) == GiveUp(
        f'attempt 1 on node {A}: boom\nbuild given up: no other node can take the instance')


@pytest.mark.parametrize('reason', ['two\nlines', '  spaced\t out ', 'colon: inside'])
def test_reasons_round_trip_on_one_line(reason):
    text = retries.fault([Attempt(A, reason), Attempt(B, 'x')], 'given up')
    assert retries.attempts(text) == (Attempt(A, ' '.join(reason.split())), Attempt(B, 'x'))
    assert len(text.splitlines()) == 3


@pytest.mark.parametrize('text', [None, '', 'power off failed: BMC unreachable'])
def test_a_fault_without_attempts_has_none(text):
    assert retries.attempts(text) == ()
