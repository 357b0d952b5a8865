"""Retrying Ironic requests: exponential backoff with jitter.

Owns the retry policy (how many times, how long to wait) and the loop that
applies it. Guarantees: a call is tried at most ``max_retries + 1`` times;
waits grow as ``interval * 2**n`` up to ``max_delay``, each drawn uniformly
from its upper half ("equal jitter"), so daemons that saw Ironic fail at the
same moment do not come back in lockstep, yet never retry instantly. Sleep
and randomness are injected so tests run without waiting and without mocks.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

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

    def delays(self, rand: Callable[[], float] = random.random
               ) -> Iterator[float]:
        """The waits before retry 1, 2, ... ``max_retries``."""
        for attempt in range(self.max_retries):
            ceiling = min(self.interval * 2 ** attempt, self.max_delay)
            yield ceiling / 2 + rand() * ceiling / 2


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
    delays = policy.delays(rand)
    attempts = 0
    while True:
        attempts += 1
        try:
            return fn()
        except Exception as exc:
            if not retriable(exc):
                raise
            delay = next(delays, None)
            if delay is None:
                raise RetriesExhausted(attempts, exc) from exc
            LOG.warning('%s failed (attempt %d of %d), retrying in %.2f s: '
                        '%s', what, attempts, policy.max_retries + 1, delay,
                        exc)
            sleep(delay)
