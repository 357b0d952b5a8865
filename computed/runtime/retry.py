"""Retrying: computed's one backoff rule, for tenacity and for schedules that must not block.

Every retry in computed goes through tenacity's public API (``tenacity.Retrying`` with its
``stop``, ``retry``, ``wait``, ``sleep`` and ``before_sleep`` arguments): the Ironic driver
(:mod:`computed_ironic.retry`), the database's deadlock retries (:mod:`computed.db.common`), the
start of an RPC server (:class:`computed.runtime.rpc.Serving`) and the outbox's sends
(:meth:`computed.providers.outbox.Outbox.run`). This module owns the one thing they share that
tenacity does not give as computed needs it, the wait: :class:`Backoff`.

Why not tenacity's own waits: ``wait_exponential`` + ``wait_random_exponential`` add up to the
same "equal jitter", but draw from the ``random`` module, and the tests (and the benchmarks) pin
the draw; and the daemon's re-adoption of its instances (:mod:`computed.daemon.hosting`) retries
across passes of the node thread, which must never block: it needs the delay as a number
(:meth:`Backoff.delay`), not a loop that sleeps.

Guarantees: the n-th wait (after n failures in a row) is ``first * 2**(n-1)`` capped at ``cap``;
with ``jitter`` it is drawn uniformly from the upper half of that ("equal jitter": peers that
failed together do not come back in lockstep, and none retries at once). Pure: no state, no
I/O, safe from any thread (the random source is the caller's).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import tenacity


@dataclasses.dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff; also a tenacity ``wait`` (``wait=Backoff(...)``)."""

    first: float
    cap: float
    jitter: bool = False
    rand: Callable[[], float] = random.random

    def delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` failures in a row (1 for the first)."""
        ceiling = min(self.cap, self.first * 2.0 ** max(0, failures - 1))
        if not self.jitter:
            return ceiling
        return ceiling / 2 + self.rand() * ceiling / 2

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        return self.delay(retry_state.attempt_number)
