"""Failed build attempts: what happens after a deploy fails on one node.

Owns the decision, pure (no I/O, no logging): given the attempts a build has made so far (each a
node and Ironic's reason), another attempt on a node none of them used, or ERROR. Nova retries a
failed build on another host up to ``[scheduler] max_attempts``; computed does the same per node
(:mod:`computed.instances.reschedule` carries the decision out).

The attempts live in the instance's ``fault``, one line each, so that they survive the daemon
that made them (the next attempt usually runs on another daemon) and are what the user reads
once the build gives up::

    attempt 1 on node 5f0c...: Failed to deploy: image not found
    attempt 2 on node 8a21...: Deploy step failed
    build given up: max_attempts 2 reached

:func:`fault` and :func:`attempts` are inverse: a reason is kept on one line (line breaks become
spaces), and lines that are not attempts (the last one above, a fault written by something
else) are ignored when reading back.

Guarantees: :func:`after_failure` never offers a node that failed the build before, gives up
once ``max_attempts`` nodes were tried, and its ERROR fault lists every attempt with its node
and reason.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

_ATTEMPT = re.compile(r'attempt (\d+) on node (\S+): (.*)')


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One node a build was tried on, and why it failed there."""

    node: str
    reason: str


@dataclasses.dataclass(frozen=True)
class NextAttempt:
    """Try again on a node not in ``exclude``; ``fault`` records the attempts so far."""

    exclude: frozenset[str]
    fault: str


@dataclasses.dataclass(frozen=True)
class GiveUp:
    """The build ends in ERROR with ``fault``."""

    fault: str


def fault(attempts: Sequence[Attempt], outcome: str | None = None) -> str:
    """The fault text listing ``attempts``, then ``outcome`` (why the build stopped) if any."""
    lines = [f'attempt {number} on node {attempt.node}: {_one_line(attempt.reason)}'
             for number, attempt in enumerate(attempts, 1)]
    if outcome:
        lines.append(_one_line(outcome))
    return '\n'.join(lines)


def attempts(text: str | None) -> tuple[Attempt, ...]:
    """The attempts a fault written by :func:`fault` lists (none for None or another fault)."""
    found = []
    for line in (text or '').splitlines():
        match = _ATTEMPT.fullmatch(line)
        if match:
            found.append(Attempt(match.group(2), match.group(3)))
    return tuple(found)


def after_failure(previous: Sequence[Attempt], failed: Attempt, max_attempts: int,
                  can_retry: bool = True) -> NextAttempt | GiveUp:
    """What to do after ``failed``, the build having failed ``previous`` attempts before.

    ``can_retry`` False (the failed node could not be cleared, say) gives up whatever
    ``max_attempts`` allows; the caller says why in the outcome it adds to the fault.
    """
    tried = (*previous, failed)
    if not can_retry:
        return GiveUp(fault(tried))
    if len(tried) >= max_attempts:
        return GiveUp(fault(tried, f'build given up: max_attempts {max_attempts} reached'))
    return NextAttempt(frozenset(attempt.node for attempt in tried), fault(tried))


def no_other_node(decision: NextAttempt,
                  outcome: str = 'build given up: no other node can take the instance'
                  ) -> GiveUp:
    """The retry found no node that has not failed the build (or could not look, ``outcome``
    says why): ERROR with every attempt."""
    return GiveUp(fault(attempts(decision.fault), outcome))


def _one_line(text: str) -> str:
    return ' '.join(text.split())
