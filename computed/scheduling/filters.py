"""The built-in host filters, and the base class filters written for computed derive from.

Owns the filters computed ships for bare metal, each with the name, hint and semantics of the
Nova filter it stands for, so ``[filter_scheduler] enabled_filters`` written for Nova keeps its
meaning:

* :class:`ComputeCapabilitiesFilter`: the flavor's ``capabilities:<key>`` extra specs (and the
  unscoped keys the node has as an attribute or stat) against the node's capabilities, with
  Nova's extra-spec operators (:mod:`computed.scheduling.extra_specs_ops`). Exact single-level
  matches were already decided by Placement as traits; the filter sees them pass again.
* :class:`JsonFilter`: the ``query`` scheduler hint, Nova's JSON grammar (``=``, ``<``, ``>``,
  ``in``, ``<=``, ``>=``, ``not``, ``or``, ``and``; ``$attribute.key`` reads the host state).
* :class:`AvailabilityZoneFilter`: the requested zone (``availability_zone`` of the build, or
  the ``availability_zone`` hint) equals the node's.
* :class:`AllHostsFilter`: passes everything.

Nova's aggregate filters (AggregateInstanceExtraSpecsFilter...) and server-group filters
(ServerGroupAffinityFilter...) have no counterpart: computed's aggregates group daemons, not
the nodes a host state stands for (computed.api.aggregates: nothing places by them), and there
are no server groups, so there is nothing for them to read. Nova's own classes can still be
named (they pass every host when the request has no group and the host no aggregate, as in
Nova).

:class:`BaseHostFilter` has Nova's interface (``host_passes``, ``filter_all``,
``run_filter_once_per_request``, ``run_filter_for_index``, ``RUN_ON_REBUILD``), so a filter
derived from it also runs under Nova, and one derived from Nova's runs here. Pure: filters read
their arguments only; no I/O. Calling them, isolating their failures and timing them is
:mod:`computed.scheduling.pipeline`'s.
"""

from __future__ import annotations

import json
import logging
import operator
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from computed.scheduling import extra_specs_ops

LOG = logging.getLogger(__name__)

CAPABILITIES = 'capabilities'


class BaseHostFilter:
    """Nova's host filter interface: override :meth:`host_passes`."""

    #: Nova: run once for a multi-instance request instead of once per instance.
    run_filter_once_per_request = False
    #: Nova: whether to run when the request is a rebuild (computed has none).
    RUN_ON_REBUILD = False

    def host_passes(self, host_state: Any, spec_obj: Any) -> bool:
        raise NotImplementedError(f'{type(self).__name__}.host_passes')

    def filter_all(self, filter_obj_list: Iterable[Any], spec_obj: Any) -> Iterator[Any]:
        for obj in filter_obj_list:
            if self.host_passes(obj, spec_obj):
                yield obj

    def run_filter_for_index(self, index: int) -> bool:
        return not (self.run_filter_once_per_request and index > 0)


class AllHostsFilter(BaseHostFilter):
    """Passes every host."""

    run_filter_once_per_request = True

    def host_passes(self, host_state: Any, spec_obj: Any) -> bool:
        return True


def _lookup(host_state: Any, scope: list[str]) -> Any:
    """The value at ``scope`` on a host, Nova's way: an attribute of the host, else its stats
    entry; then keys of a dict, a JSON string read as one; None when absent or unreadable."""
    value = host_state
    for name in scope:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return None
        if isinstance(value, dict):
            value = value.get(name)
        else:
            found = getattr(value, name, None)
            if found is None:
                stats = getattr(value, 'stats', None)
                found = stats.get(name) if isinstance(stats, dict) else None
            value = found
        if value is None:
            return None
    return value


class ComputeCapabilitiesFilter(BaseHostFilter):
    """The flavor's capability extra specs against the node (Nova's semantics)."""

    run_filter_once_per_request = True

    def __init__(self) -> None:
        self._plan: tuple[Any, list[tuple[str, list[str], str]], list[tuple[str, str]]] | None
        self._plan = None

    def _checks(self, extra_specs: dict[str, str],
                host_state: Any) -> Iterator[tuple[str, list[str], str]]:
        # The scoped specs are the same for every host of a pass: split them once per request
        # (read into a local: concurrent builds share the filter object).
        plan = self._plan
        if plan is None or plan[0] is not extra_specs:
            scoped, unscoped = [], []
            for key, requirement in extra_specs.items():
                scope = key.split(':')
                if len(scope) == 1:
                    unscoped.append((key, requirement))
                elif scope[0] == CAPABILITIES:
                    scoped.append((key, scope[1:], requirement))
            plan = self._plan = (extra_specs, scoped, unscoped)
        yield from plan[1]
        for key, requirement in plan[2]:
            stats = getattr(host_state, 'stats', None) or {}
            if hasattr(host_state, key) or key in stats:
                yield key, [key], requirement

    def host_passes(self, host_state: Any, spec_obj: Any) -> bool:
        flavor = spec_obj.flavor
        extra_specs = getattr(flavor, 'extra_specs', None) or {}
        for key, scope, requirement in self._checks(extra_specs, host_state):
            value = _lookup(host_state, scope)
            if value is None or not extra_specs_ops.match(str(value), requirement):
                LOG.debug('%s fails extra spec %s=%r (has %r)', host_state, key, requirement,
                          value)
                return False
        return True


class JsonQueryError(ValueError):
    """A ``query`` hint that is not Nova's JSON grammar; the message quotes it."""

    def __init__(self, query: Any, reason: str):
        self.query = query
        super().__init__(f'query hint {query!r}: {reason}')


def _compare(test: Callable[[Any, Any], bool]) -> Callable[[list[Any]], bool]:
    def command(args: list[Any]) -> bool:
        # Nova: the first term against every other; fewer than two terms never passes.
        if len(args) < 2:
            return False
        try:
            return all(test(args[0], other) for other in args[1:])
        except TypeError:
            return False  # terms of kinds that do not compare (a number and a string)
    return command


def _in(args: list[Any]) -> bool:
    return len(args) >= 2 and args[0] in args[1:]


_COMMANDS: dict[str, Callable[[list[Any]], Any]] = {
    '=': _compare(operator.eq),
    '<': _compare(operator.lt),
    '>': _compare(operator.gt),
    'in': _in,
    '<=': _compare(operator.le),
    '>=': _compare(operator.ge),
    # Nova's "not" flips each argument and answers the list (any() of it decides at the top).
    'not': lambda args: [not arg for arg in args],
    'or': any,
    'and': all,
}


def _variable(text: str, host_state: Any) -> Any:
    """``$name.key...``: an attribute of the host, then keys of dicts; a plain string as is."""
    if not text:
        return None
    if not text.startswith('$'):
        return text
    first, *rest = text[1:].split('.')
    value = getattr(host_state, first, None)
    for key in rest:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
        if value is None:
            return None
    return value


def evaluate_query(query: Any, host_state: Any) -> Any:
    """The value of a parsed JSON query on a host (Nova's JsonFilter evaluation)."""
    if not query:
        return True
    if not isinstance(query, list):
        raise JsonQueryError(query, 'not a list: [command, argument...]')
    if not isinstance(query[0], str) or query[0] not in _COMMANDS:
        raise JsonQueryError(query, f'not a command: {query[0]!r}; '
                             f"expected one of {', '.join(_COMMANDS)}")
    args = []
    for arg in query[1:]:
        if isinstance(arg, list):
            arg = evaluate_query(arg, host_state)
        elif isinstance(arg, str):
            arg = _variable(arg, host_state)
        if arg is not None:
            args.append(arg)
    return _COMMANDS[query[0]](args)


def parse_query(text: Any) -> Any:
    """A ``query`` hint's JSON; :class:`JsonQueryError` when it is not JSON."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError as exc:
        raise JsonQueryError(text, f'not JSON: {exc}') from None


class JsonFilter(BaseHostFilter):
    """Hosts matching the ``query`` scheduler hint (Nova's JSON grammar)."""

    def __init__(self) -> None:
        self._parsed: tuple[Any, Any] | None = None

    def host_passes(self, host_state: Any, spec_obj: Any) -> bool:
        text = spec_obj.get_scheduler_hint('query')
        if not text:
            return True
        # One parse per request, not per host (the spec is the same for every host of a pass).
        # Read once into a local: concurrent builds share the filter object.
        parsed = self._parsed
        if parsed is None or parsed[0] is not text:
            parsed = self._parsed = (text, parse_query(text))
        result = evaluate_query(parsed[1], host_state)
        if isinstance(result, list):
            result = any(result)
        return bool(result)


class AvailabilityZoneFilter(BaseHostFilter):
    """Hosts in the requested availability zone (none requested: every host)."""

    run_filter_once_per_request = True

    def host_passes(self, host_state: Any, spec_obj: Any) -> bool:
        zone = (getattr(spec_obj, 'availability_zone', None)
                or spec_obj.get_scheduler_hint('availability_zone'))
        if not zone:
            return True
        # Nova's "zone:host:node" form: the zone is the part before the first colon.
        zone = str(zone).split(':', 1)[0]
        return bool(zone) and getattr(host_state, 'availability_zone', None) == zone


def all_filters() -> list[type]:
    """Every built-in filter class (what ``available_filters`` names by default, as Nova's
    ``nova.scheduler.filters.all_filters``)."""
    return [AllHostsFilter, ComputeCapabilitiesFilter, JsonFilter, AvailabilityZoneFilter]

