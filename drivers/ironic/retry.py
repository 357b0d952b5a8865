"""Retrying Ironic requests: exponential backoff with jitter, on tenacity.

Owns the retry policy of the Ironic driver (how many times, how long to wait) and applies it
with ``tenacity.Retrying`` and :class:`computed.runtime.retry.Backoff`, computed's one backoff
rule (:func:`call`), and the waiting out of a condition that ends by itself until a deadline
(:func:`until`: a node a conductor holds locked). Guarantees of :func:`call`: a call is tried at
most ``max_retries + 1`` times; waits grow as
``interval * 2**n`` up to ``max_delay``, each drawn uniformly from its upper half ("equal
jitter"), so daemons that saw Ironic fail at the same moment do not come back in lockstep, yet
never retry instantly. Sleep and randomness are injected so tests run without waiting and
without mocks. Called from whichever thread uses the driver; keeps no state between calls.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import tenacity

from computed.runtime.retry import Backoff

LOG = logging.getLogger(__name__)

T = TypeVar('T')


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """How a request is retried.

    ``max_retries`` and ``interval`` come from ``[ironic] api_max_retries``
    and ``api_retry_interval``. ``max_delay`` caps one wait: without it the
    defaults (60 retries from 2 s) would back off to hours.
    """

    max_retries: int = 3
    interval: float = 1.0
    max_delay: float = 30.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f'max_retries must be >= 0, not {self.max_retries}')
        if self.interval < 0 or self.max_delay < 0:
            raise ValueError('interval and max_delay must be >= 0')

    def backoff(self, rand: Callable[[], float] = random.random) -> Backoff:
        """The waits, as a tenacity ``wait``."""
        return Backoff(self.interval, self.max_delay, jitter=True, rand=rand)

    def delays(self, rand: Callable[[], float] = random.random
               ) -> Iterator[float]:
        """The waits before retry 1, 2, ... ``max_retries``."""
        backoff = self.backoff(rand)
        for failures in range(1, self.max_retries + 1):
            yield backoff.delay(failures)


class RetriesExhausted(Exception):
    """Every attempt failed; ``last`` is the final error."""

    def __init__(self, attempts: int, last: BaseException):
        super().__init__(f'{attempts} attempt(s), last error: {last}')
        self.attempts = attempts
        self.last = last


def call(fn: Callable[[], T], policy: RetryPolicy,
         retriable: Callable[[BaseException], bool], what: str,
         sleep: Callable[[float], None] = time.sleep,
         rand: Callable[[], float] = random.random) -> T:
    """``fn()``, retried while it raises an error ``retriable`` accepts.

    A non-retriable error propagates at once. When retries run out,
    :class:`RetriesExhausted` carries the attempt count and last error.
    """
    attempts = policy.max_retries + 1

    def log(state: tenacity.RetryCallState) -> None:
        LOG.warning('%s failed (attempt %d of %d), retrying in %.2f s: %s', what,
                    state.attempt_number, attempts, state.next_action.sleep,
                    state.outcome.exception())

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(attempts), wait=policy.backoff(rand),
        retry=tenacity.retry_if_exception(retriable), sleep=sleep, before_sleep=log)
    try:
        return retrying(fn)
    except tenacity.RetryError as exc:
        last = exc.last_attempt.exception()
        raise RetriesExhausted(exc.last_attempt.attempt_number, last) from last


def until(fn: Callable[[], T], retriable: Callable[[BaseException], bool], interval: float,
          deadline: float, on_retry: Callable[[int, BaseException], None],
          clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> T:
    """``fn()``, tried again every ``interval`` seconds while it raises an error ``retriable``
    accepts, as long as the next try would start by ``deadline`` (on ``clock``);
    ``on_retry(tries, error)`` before each wait (the caller's log line).

    For what ends by itself, however long it takes (a conductor's lock on a node): counted
    against the caller's own timeout, not a number of tries. A non-retriable error propagates
    at once; past the deadline, :class:`RetriesExhausted` carries the tries and last error.
    """
    retrying = tenacity.Retrying(
        stop=lambda _state: clock() + interval > deadline, wait=tenacity.wait_fixed(interval),
        retry=tenacity.retry_if_exception(retriable), sleep=sleep,
        before_sleep=lambda state: on_retry(state.attempt_number, state.outcome.exception()))
    try:
        return retrying(fn)
    except tenacity.RetryError as exc:
        last = exc.last_attempt.exception()
        raise RetriesExhausted(exc.last_attempt.attempt_number, last) from last
