"""One scheduling pass after Placement: filter the candidates, weigh the survivors, order them.

Owns the decision of which candidate nodes a build tries, in which order, given the host states
of Placement's candidates and the request spec (:mod:`computed.scheduling.host_state`), the
enabled filters and the weighers (:mod:`computed.scheduling.loader`). The order is Nova's
FilterScheduler's: every filter must pass a host; the survivors are ranked by the sum of their
weighers' normalised, multiplied weights (:mod:`computed.scheduling.weighers`); the first is
drawn at random among the best ``host_subset_size``, the rest follow best first (Nova's
alternates). Hosts of equal weight come in random order, so concurrent builds spread over equal
nodes instead of all racing for one.

Guarantees, whatever the operators' filters and weighers do:

* **A failing filter fails a candidate, never the request.** An exception from a filter on a
  host refuses that host, with the reason naming the filter and the error; the pass logs it
  once per filter (with the traceback), not once per host. A weigher that raises is left out of
  the ranking for this pass (logged), the others still count.
* **A time budget per pass.** Hosts are evaluated one at a time through every filter; once
  ``time_budget`` seconds have gone, no further host is evaluated and the pass goes on with the
  hosts already found good (the log names the filter that took most of the time). Weighing that
  would start past the budget is skipped (the survivors keep their random order). A single call
  that never returns cannot be interrupted from Python: the budget bounds the pass between calls.
* **Every candidate not chosen has a reason**: :attr:`Decision.refused` maps it to the filter
  that refused it; :attr:`Decision.unevaluated` counts the ones the budget left out.

Pure apart from the clock and the log: no I/O; the clock and the random source are injected.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from computed.scheduling import weighers as weighing
from computed.scheduling.filters import BaseHostFilter

LOG = logging.getLogger(__name__)

#: Seconds a scheduling pass may take (``[filter_scheduler] time_budget``'s default lives in
#: computed.conf.scheduler; this is for a pipeline made without configuration).
DEFAULT_TIME_BUDGET = 2.0


def name_of(obj: Any) -> str:
    """A filter's or weigher's class name, as Nova's logs name them."""
    return type(obj).__name__


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why a candidate node was not chosen: ``filter`` refused it, or raised ``error``."""

    node: str
    filter: str
    error: str | None = None

    def __str__(self) -> str:
        if self.error:
            return f'{self.filter} failed on node {self.node}: {self.error}'
        return f'{self.filter} refused node {self.node}'


@dataclasses.dataclass
class Decision:
    """The outcome of one pass: ``hosts`` to try, in order; the rest, and why."""

    hosts: list[Any]
    refused: dict[str, Refusal]
    unevaluated: int = 0
    budget_exhausted: bool = False
    elapsed: float = 0.0
    weights: dict[str, float] = dataclasses.field(default_factory=dict)

    def summary(self) -> str:
        """Why candidates were left out, counted per filter (for NoValidHost's reason)."""
        counts = Counter((r.filter, 'failed' if r.error else 'refused')
                         for r in self.refused.values())
        parts = [f'{name} {how} {count}' for (name, how), count in sorted(counts.items())]
        if self.unevaluated:
            parts.append(f'{self.unevaluated} not evaluated within the time budget')
        return ', '.join(parts)


def checker(filter_obj: Any) -> Callable[[Any, Any], Any]:
    """How to ask ``filter_obj`` about one host: Nova's ``filter_all`` on a list of one host
    when the filter has its own or Nova's (what Nova's handler calls, its rebuild check
    included), else ``host_passes`` (the built-in base's ``filter_all`` only calls it)."""
    filter_all = getattr(filter_obj, 'filter_all', None)
    if filter_all is None or getattr(type(filter_obj), 'filter_all', None) is \
            BaseHostFilter.filter_all:
        return filter_obj.host_passes

    def passes(host: Any, spec: Any) -> bool:
        kept = filter_all([host], spec)
        return kept is not None and any(True for _ in kept)
    return passes


class Pipeline:
    """Filters, weighers and the rules of a pass (see the module docstring)."""

    def __init__(self, filters: Sequence[Any] = (), weighers: Sequence[Any] = (), *,
                 time_budget: float | None = DEFAULT_TIME_BUDGET, host_subset_size: int = 1,
                 max_candidates: int | None = None,
                 clock: Callable[[], float] = time.monotonic):
        if host_subset_size < 1:
            raise ValueError(f'host_subset_size must be at least 1, not {host_subset_size}')
        self.filters = list(filters)
        self.weighers = list(weighers)
        self.time_budget = time_budget
        self.host_subset_size = host_subset_size
        self.max_candidates = max_candidates
        self.clock = clock

    def __repr__(self) -> str:
        return (f'Pipeline(filters={[name_of(f) for f in self.filters]}, '
                f'weighers={[name_of(w) for w in self.weighers]})')

    def run(self, hosts: Sequence[Any], spec: Any,
            rand: random.Random | None = None) -> Decision:
        """Filter, weigh and order ``hosts`` (host states) for ``spec`` (a request spec)."""
        start = self.clock()
        deadline = None if self.time_budget is None else start + self.time_budget
        good, refused, unevaluated = self._filter(hosts, spec, deadline)
        exhausted = unevaluated > 0
        rand = rand or random.Random()
        rand.shuffle(good)
        weights: dict[str, float] = {}
        if len(good) > 1 and self.weighers:
            if deadline is not None and self.clock() > deadline:
                exhausted = True
                LOG.warning('scheduling pass for %s: time budget of %.3f s spent filtering; '
                            '%d good candidate(s) left unweighed (random order)',
                            _request(spec), self.time_budget, len(good))
            else:
                ranked = self._weigh(good, spec, deadline)
                good = [w.obj for w in ranked]
                weights = {_node(w.obj): w.weight for w in ranked}
        if self.host_subset_size > 1 and len(good) > 1:
            # Nova: the first host is drawn among the best host_subset_size, so that
            # concurrent requests with the same weights do not all take the same first host.
            first = rand.randrange(min(self.host_subset_size, len(good)))
            good.insert(0, good.pop(first))
        return Decision(good, refused, unevaluated, exhausted, self.clock() - start, weights)

    def _filter(self, hosts: Sequence[Any], spec: Any,
                deadline: float | None) -> tuple[list[Any], dict[str, Refusal], int]:
        active = [(f, name_of(f), checker(f)) for f in self.filters if _runs(f)]
        good: list[Any] = []
        refused: dict[str, Refusal] = {}
        failed: set[str] = set()
        spent: Counter[str] = Counter()
        for index, host in enumerate(hosts):
            if deadline is not None and index and self.clock() > deadline:
                left = len(hosts) - index
                slowest = spent.most_common(1)[0][0] if spent else 'none'
                LOG.warning('scheduling pass for %s: time budget of %.3f s spent after %d of '
                            '%d candidate(s) (most time in %s); going on with the %d good '
                            'one(s) found', _request(spec), self.time_budget, index,
                            len(hosts), slowest, len(good))
                return good, refused, left
            refusal = None
            for filter_obj, name, passes in active:
                began = self.clock()
                try:
                    passed = passes(host, spec)
                except Exception as exc:
                    refusal = Refusal(_node(host), name, f'{type(exc).__name__}: {exc}')
                    if name not in failed:
                        failed.add(name)
                        LOG.warning('scheduling pass for %s: filter %s.%s raised on node %s '
                                    '(the node is refused; further failures of this filter '
                                    'in this pass are not logged)', _request(spec),
                                    type(filter_obj).__module__, name, _node(host),
                                    exc_info=True)
                else:
                    if not passed:
                        refusal = Refusal(_node(host), name)
                finally:
                    spent[name] += self.clock() - began
                if refusal is not None:
                    refused[refusal.node] = refusal
                    break
            else:
                good.append(host)
        return good, refused, 0

    def _weigh(self, hosts: list[Any], spec: Any,
               deadline: float | None) -> list[weighing.WeighedHost]:
        weighed = [weighing.WeighedHost(host) for host in hosts]
        for weigher in self.weighers:
            if deadline is not None and self.clock() > deadline:
                LOG.warning('scheduling pass for %s: time budget spent before weigher %s; '
                            'ranking by the weighers so far', _request(spec), name_of(weigher))
                break
            try:
                if callable(getattr(weigher, 'weigh_objects', None)):
                    raw = weigher.weigh_objects(weighed, spec)
                else:
                    raw = [weigher._weigh_object(w.obj, spec) for w in weighed]
                before = [w.weight for w in weighed]
                try:
                    weighing.add_weights(weigher, weighed, list(raw))
                except BaseException:
                    for w, weight in zip(weighed, before):
                        w.weight = weight
                    raise
            except Exception:
                LOG.warning('scheduling pass for %s: weigher %s.%s raised; it is left out of '
                            'this ranking', _request(spec), type(weigher).__module__,
                            name_of(weigher), exc_info=True)
        # Stable: hosts of equal weight keep their (random) order.
        return sorted(weighed, key=lambda w: w.weight, reverse=True)


def _runs(filter_obj: Any) -> bool:
    """Nova's ``run_filter_for_index(0)``: a build is the first (and only) instance."""
    check = getattr(filter_obj, 'run_filter_for_index', None)
    try:
        return True if check is None else bool(check(0))
    except Exception:
        return True


def _node(host: Any) -> str:
    return str(getattr(host, 'uuid', None) or getattr(host, 'nodename', None) or host)


def _request(spec: Any) -> str:
    uuid = getattr(spec, 'instance_uuid', None)
    return f'instance {uuid}' if uuid else 'a build'
