"""Backoff schedule and the retry loop, with injected sleep and randomness."""

from __future__ import annotations

import pytest

from computed_ironic import retry


def test_delays_double_up_to_the_cap_within_the_upper_half():
    policy = retry.RetryPolicy(max_retries=6, interval=1, max_delay=8)
    assert list(policy.delays(rand=lambda: 0.0)) == [0.5, 1, 2, 4, 4, 4]
    assert list(policy.delays(rand=lambda: 1.0)) == [1, 2, 4, 8, 8, 8]


def test_zero_retries_means_one_attempt():
    calls = []

    def failing():
        calls.append(1)
        raise ConnectionError('down')

    with pytest.raises(retry.RetriesExhausted) as info:
        retry.call(failing, retry.RetryPolicy(max_retries=0), lambda e: True, 'x',
                   sleep=lambda s: None)
    assert len(calls) == 1 and info.value.attempts == 1


def test_succeeds_after_transient_failures_sleeping_between_attempts():
    outcomes = [ConnectionError('1'), ConnectionError('2'), 'ok']
    slept = []

    def flaky():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    result = retry.call(flaky, retry.RetryPolicy(max_retries=5, interval=2), lambda e: True,
                        'x', sleep=slept.append, rand=lambda: 0.5)
    assert result == 'ok'
    assert slept == [1.5, 3.0]


def test_non_retriable_error_propagates_at_once():
    slept = []

    def bad():
        raise KeyError('nope')

    with pytest.raises(KeyError):
        retry.call(bad, retry.RetryPolicy(max_retries=5), lambda e: False, 'x',
                   sleep=slept.append)
    assert slept == []


def test_policy_rejects_negative_values():
    with pytest.raises(ValueError):
        retry.RetryPolicy(max_retries=-1)
