"""computed.testing.stack starts and stops a wave of services at once: every call ends before a
failure is raised, so the saved state lists every service that started and no stop is skipped."""

import threading

import pytest

from computed.testing import stack


def test_a_wave_runs_its_calls_at_once_and_raises_the_failure_after_all_ended():
    both_running = threading.Barrier(2, timeout=5)
    done = []

    def slow_ok():
        both_running.wait()  # only passes if the other call runs at the same time
        done.append("ok")

    def failing():
        both_running.wait()
        raise RuntimeError("placement did not start")

    with pytest.raises(RuntimeError, match="placement did not start"):
        stack.together([slow_ok, failing])
    assert done == ["ok"]


def test_placement_and_ironic_start_after_what_they_need():
    started = [name for wave in stack.WAVES for name in wave]
    assert sorted(started) == sorted(stack.ORDER)
    wave_of = {name: i for i, wave in enumerate(stack.WAVES) for name in wave}
    assert wave_of["placement"] > wave_of["postgres"]  # its database
    assert wave_of["ironic"] > wave_of["rabbitmq"]     # its notifications
