"""The upgrade test's judgments, pure: what counts as a lost action, a wrong provider, a 5xx.

Owns the bookkeeping the upgrade test (:mod:`tests.upgrade.grenade`) keeps while its threads
drive the fleet, and the verdicts it reads at the end. No I/O: the threads feed observations in
(an API answer, a server's status, the set of nodes whose provider disagrees with Ironic at a
time) and read summaries out, so the rules are unit-tested without services
(tests/unit/upgrade/test_grenade_invariants.py).

* :class:`Ledger`: every action the tenant asked for and the API accepted (2xx) must reach its
  outcome (a build ACTIVE, a stop SHUTOFF, a start or reboot ACTIVE with no task left, a delete
  gone) before its deadline; one that does not is *lost*, one that ends in ERROR *failed*.
* :class:`Answers`: every HTTP answer the API gave, by class; a 5xx is a violation whatever the
  request, a refused connection (the API restarting) is counted apart.
* :class:`Staleness`: for each node, each episode during which its provider in Placement
  disagreed with Ironic, from the first observation that saw it wrong to the first that saw it
  right again; the longest one is compared with the events bound.

Threads: a :class:`Ledger` and an :class:`Answers` are fed by the tenant thread and read by the
main thread; a :class:`Staleness` by the truth thread and the main thread. Each guards its state
with its own lock; readers get copies.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections import Counter
from collections.abc import Iterable

#: The status each action must end in (with no task left); None: the server must be gone.
OUTCOMES = {
    "create": "ACTIVE",
    "stop": "SHUTOFF",
    "start": "ACTIVE",
    "reboot": "ACTIVE",
    "delete": None,  # gone: the API answers 404
}


@dataclasses.dataclass
class Action:
    server: str
    action: str
    asked_at: float
    deadline: float
    step: str
    done_at: float | None = None
    failed: str | None = None

    @property
    def open(self) -> bool:
        return self.done_at is None and self.failed is None


class Ledger:
    """The tenant's accepted actions and what became of each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._actions: list[Action] = []

    def accepted(self, server: str, action: str, now: float, timeout: float, step: str) -> None:
        if action not in OUTCOMES:
            raise ValueError(f"unknown action {action!r} on server {server}")
        with self._lock:
            self._actions.append(Action(server, action, now, now + timeout, step))

    def pending(self) -> list[Action]:
        """The open actions, oldest first (copies)."""
        with self._lock:
            return [dataclasses.replace(a) for a in self._actions if a.open]

    def busy(self, server: str) -> bool:
        """Whether ``server`` has an action not yet done (the tenant waits before the next)."""
        with self._lock:
            return any(a.open and a.server == server for a in self._actions)

    def observe(self, server: str, status: str | None, task_state: str | None,
                now: float) -> None:
        """What the API says of ``server`` now: ``status`` None when it answered 404."""
        with self._lock:
            for action in self._actions:
                if not action.open or action.server != server:
                    continue
                want = OUTCOMES[action.action]
                if want is None:
                    if status is None:
                        action.done_at = now
                elif status == "ERROR":
                    action.failed = f"server {server} went to ERROR after {action.action}"
                elif status is None:
                    action.failed = f"server {server} disappeared during {action.action}"
                elif status == want and not task_state:
                    action.done_at = now

    def expire(self, now: float) -> None:
        """Open actions past their deadline are lost."""
        with self._lock:
            for action in self._actions:
                if action.open and now > action.deadline:
                    action.failed = (f"lost: {action.action} of server {action.server} "
                                     f"(asked during {action.step}) not done after "
                                     f"{action.deadline - action.asked_at:.0f} s")

    def summary(self) -> dict:
        """Counts by action and outcome, the failures' texts, the slowest action's seconds; by
        step: the actions asked during it and the slowest of those that were done."""
        with self._lock:
            actions = list(self._actions)
        done = [a for a in actions if a.done_at is not None]
        slowest_by_step: dict[str, float] = {}
        for a in done:
            slowest_by_step[a.step] = max(slowest_by_step.get(a.step, 0.0),
                                          a.done_at - a.asked_at)
        return {
            "accepted": Counter(a.action for a in actions),
            "done": Counter(a.action for a in done),
            "open": sum(a.open for a in actions),
            "failed": [a.failed for a in actions if a.failed],
            "slowest": max((a.done_at - a.asked_at for a in done), default=None),
            "asked_by_step": Counter(a.step for a in actions),
            "slowest_by_step": slowest_by_step,
        }


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class Answers:
    """Every answer of the API, by status class; other than 2xx also by request (ids left out);
    5xx kept whole."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_class: Counter[str] = Counter()
        self.not_ok: Counter[str] = Counter()
        self.server_errors: list[str] = []
        self.unreachable: Counter[str] = Counter()

    def answered(self, status: int, what: str, step: str) -> None:
        with self._lock:
            self.by_class[f"{status // 100}xx"] += 1
            if status >= 300:
                self.not_ok[f"{status} {_UUID.sub('{id}', what)}"] += 1
            if status >= 500:
                self.server_errors.append(f"{status} on {what} during {step}")

    def refused(self, step: str) -> None:
        """No answer: the connection was refused (the API between two processes)."""
        with self._lock:
            self.unreachable[step] += 1

    def summary(self) -> dict:
        with self._lock:
            return {"by_class": dict(self.by_class), "not_ok": dict(self.not_ok),
                    "server_errors": list(self.server_errors),
                    "unreachable": sum(self.unreachable.values()),
                    "unreachable_by_step": dict(self.unreachable)}


@dataclasses.dataclass(frozen=True)
class Episode:
    node: str
    started: float
    ended: float | None  # None: still wrong at the last observation
    step: str

    def length(self, now: float) -> float:
        return (self.ended if self.ended is not None else now) - self.started


class Staleness:
    """Per node, how long its provider stayed wrong, one episode at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, tuple[float, str]] = {}
        self._closed: list[Episode] = []
        self._last = 0.0

    def observe(self, now: float, wrong: Iterable[str], step: str) -> None:
        """The nodes whose provider disagrees with Ironic in an observation made at ``now``."""
        wrong = set(wrong)
        with self._lock:
            self._last = now
            for node in wrong - self._open.keys():
                self._open[node] = (now, step)
            for node in list(self._open.keys() - wrong):
                started, began_in = self._open.pop(node)
                self._closed.append(Episode(node, started, now, began_in))

    def episodes(self) -> list[Episode]:
        with self._lock:
            still = [Episode(node, started, None, step)
                     for node, (started, step) in self._open.items()]
            return self._closed + still

    def longest(self) -> Episode | None:
        with self._lock:
            now = self._last
        episodes = self.episodes()
        return max(episodes, key=lambda e: e.length(now), default=None)

    def longest_by_step(self) -> dict[str, float]:
        """The longest episode that began in each step (an open one up to the last look)."""
        with self._lock:
            now = self._last
        longest: dict[str, float] = {}
        for e in self.episodes():
            longest[e.step] = max(longest.get(e.step, 0.0), e.length(now))
        return longest

    def over(self, bound: float) -> list[Episode]:
        """The episodes longer than ``bound`` seconds (an open one counts up to the last
        observation)."""
        with self._lock:
            now = self._last
        return [e for e in self.episodes() if e.length(now) > bound]


def wrong_providers(ironic_nodes: Iterable[dict], offered: set[str],
                    allocated: set[str]) -> set[str]:
    """The nodes whose provider Placement shows wrong, from one look at both.

    ``ironic_nodes``: Ironic's nodes (``uuid``, ``maintenance``, ``power_state``,
    ``provision_state``, ``instance_uuid``); ``offered``: the providers Placement offers for one
    unit of their class (reserved 0, nothing allocated); ``allocated``: the providers holding an
    allocation. A node Ironic says can take an instance (Nova's rule: not in maintenance, power
    known and not in error, provision state available, no instance) must be offered unless an
    allocation holds it (a build between its allocation and Ironic's instance_uuid); a node that
    cannot must not be offered.
    """
    wrong = set()
    for node in ironic_nodes:
        free = (not node.get("maintenance")
                and node.get("power_state") not in (None, "error")
                and node.get("provision_state") in ("available", None)
                and not node.get("instance_uuid"))
        uuid = node["uuid"]
        if free and uuid not in offered and uuid not in allocated:
            wrong.add(uuid)
        elif not free and uuid in offered:
            wrong.add(uuid)
    return wrong
