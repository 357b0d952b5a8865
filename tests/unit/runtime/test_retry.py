"""computed's one backoff rule (computed.runtime.retry.Backoff), alone and as tenacity's wait."""

from __future__ import annotations

import pytest
import tenacity

from computed.runtime.retry import Backoff


def test_doubles_from_first_up_to_the_cap():
    backoff = Backoff(first=0.5, cap=4.0)
    assert [backoff.delay(n) for n in range(1, 7)] == [0.5, 1, 2, 4, 4, 4]


def test_equal_jitter_draws_from_the_upper_half():
    assert Backoff(2.0, 30.0, jitter=True, rand=lambda: 0.0).delay(2) == 2.0
    assert Backoff(2.0, 30.0, jitter=True, rand=lambda: 1.0).delay(2) == 4.0


def test_a_cap_below_first_wins():
    assert Backoff(first=0.5, cap=0.05).delay(1) == 0.05


def test_tenacity_waits_what_delay_says():
    slept = []
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 4:
            raise ConnectionError("down")
        return "ok"

    retrying = tenacity.Retrying(wait=Backoff(1.0, 3.0), sleep=slept.append,
                                 stop=tenacity.stop_after_attempt(5))
    assert retrying(flaky) == "ok"
    assert slept == [1.0, 2.0, 3.0]


def test_stop_gives_the_last_error():
    retrying = tenacity.Retrying(wait=Backoff(1.0, 3.0), sleep=lambda _s: None,
                                 stop=tenacity.stop_after_attempt(2), reraise=True)
    with pytest.raises(ConnectionError):
        retrying(lambda: (_ for _ in ()).throw(ConnectionError("down")))
