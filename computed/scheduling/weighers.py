"""Host weighers: the built-in ones, their base class, and Nova's weighing arithmetic.

Owns how candidates that passed the filters are ranked, as Nova's ``nova.weights`` ranks them:
each weigher gives every host a raw weight (``weigh_objects``, by default ``_weigh_object`` per
host, clamped to the weigher's ``minval``/``maxval``), the raw weights are normalised to 0..1
across the hosts (:func:`normalize`; all equal: all 0), multiplied by the weigher's
``weight_multiplier(host_state)`` and summed; the highest total is the best host. A weigher
written against Nova's ``BaseHostWeigher`` (``_weigh_object(host_state, weight_properties)``,
``weigh_objects``, ``weight_multiplier``, ``minval``, ``maxval``) runs unchanged, and gets
:class:`WeighedHost` objects carrying ``obj`` and ``weight`` as Nova's WeighedObject does.

Built in, for bare metal (each with its multiplier in ``[filter_scheduler]``):

* :class:`PropertyWeigher`: prefers nodes by a numeric value of theirs
  (``property_weigher_key``: a capability, a property, or a stat; higher is better, a negative
  multiplier prefers lower; a node without it weighs 0).
* :class:`ConductorGroupSpreadWeigher`: prefers nodes of the conductor group with the most free
  candidates, so that builds spread across conductor groups instead of filling one first.
* :class:`FewestTraitsWeigher`: prefers the least special node (fewest traits beyond those the
  request asked for), keeping the rare hardware for the requests that need it. Off by default
  (multiplier 0).

Pure: no I/O; weighing never raises for the built-in weighers. Calling operators' weighers and
isolating their failures is :mod:`computed.scheduling.pipeline`'s.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any


def normalize(weights: Sequence[float], minval: float | None = None,
              maxval: float | None = None) -> list[float]:
    """Weights scaled to 0..1 between ``minval`` and ``maxval`` (default: the smallest and
    largest weight); all 0 when the range is empty."""
    if not weights:
        return []
    low = float(min(weights) if minval is None else minval)
    high = float(max(weights) if maxval is None else maxval)
    if low == high:
        return [0.0] * len(weights)
    span = high - low
    return [(float(weight) - low) / span for weight in weights]


class WeighedHost:
    """A host and its total weight so far (Nova's WeighedObject: ``obj``, ``weight``)."""

    __slots__ = ('obj', 'weight')

    def __init__(self, obj: Any, weight: float = 0.0):
        self.obj = obj
        self.weight = weight

    def __repr__(self) -> str:
        return f'<WeighedHost {self.obj!r}: {self.weight}>'


class BaseHostWeigher:
    """Nova's weigher interface: override :meth:`_weigh_object` (or :meth:`weigh_objects`)."""

    minval: float | None = None
    maxval: float | None = None

    def weight_multiplier(self, host_state: Any) -> float:
        return 1.0

    def _weigh_object(self, host_state: Any, weight_properties: Any) -> float:
        raise NotImplementedError(f'{type(self).__name__}._weigh_object')

    def weigh_objects(self, weighed_obj_list: Sequence[WeighedHost],
                      weight_properties: Any) -> list[float]:
        weights = []
        for weighed in weighed_obj_list:
            weight = self._weigh_object(weighed.obj, weight_properties)
            if self.minval is not None:
                weight = max(weight, self.minval)
            if self.maxval is not None:
                weight = min(weight, self.maxval)
            weights.append(weight)
        return weights


@dataclasses.dataclass(frozen=True)
class WeigherSettings:
    """The ``[filter_scheduler]`` options of the built-in weighers (defaults in
    :mod:`computed.conf.scheduler`)."""

    property_weigher_key: str | None = None
    property_weight_multiplier: float = 1.0
    conductor_group_spread_multiplier: float = 1.0
    fewest_traits_multiplier: float = 0.0


class ConfiguredWeigher(BaseHostWeigher):
    """A built-in weigher: made with the :class:`WeigherSettings` (the loader passes them)."""

    multiplier_option = ''

    def __init__(self, settings: WeigherSettings | None = None):
        self.settings = settings or WeigherSettings()

    def weight_multiplier(self, host_state: Any) -> float:
        return float(getattr(self.settings, self.multiplier_option))


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def host_value(host_state: Any, key: str) -> Any:
    """A node's value for ``key``: ``capabilities:<k>`` or plain ``<k>`` from its
    capabilities, then its properties, then its stats; None when it has none."""
    name = key.split(':', 1)[1] if key.startswith('capabilities:') else key
    for source in ('capabilities', 'properties', 'stats'):
        values = getattr(host_state, source, None)
        if isinstance(values, dict) and values.get(name) is not None:
            return values[name]
    return None


class PropertyWeigher(ConfiguredWeigher):
    """Prefers nodes with a higher numeric ``property_weigher_key`` value."""

    multiplier_option = 'property_weight_multiplier'

    def _weigh_object(self, host_state: Any, weight_properties: Any) -> float:
        key = self.settings.property_weigher_key
        if not key:
            return 0.0
        value = _number(host_value(host_state, key))
        return 0.0 if value is None else value


class ConductorGroupSpreadWeigher(ConfiguredWeigher):
    """Prefers the conductor group with the most free candidates (spreads builds)."""

    multiplier_option = 'conductor_group_spread_multiplier'

    def weigh_objects(self, weighed_obj_list: Sequence[WeighedHost],
                      weight_properties: Any) -> list[float]:
        groups = [getattr(weighed.obj, 'conductor_group', '') or '' for weighed in
                  weighed_obj_list]
        free = Counter(groups)
        return [float(free[group]) for group in groups]

    def _weigh_object(self, host_state: Any, weight_properties: Any) -> float:
        return 0.0  # weigh_objects needs every host at once


class FewestTraitsWeigher(ConfiguredWeigher):
    """Prefers nodes with the fewest traits beyond those the request asked for."""

    multiplier_option = 'fewest_traits_multiplier'

    def _weigh_object(self, host_state: Any, weight_properties: Any) -> float:
        asked = getattr(weight_properties, 'traits', frozenset())
        traits = getattr(host_state, 'traits', frozenset())
        return -float(len(set(traits) - set(asked)))


def all_weighers() -> list[type]:
    """Every built-in weigher class (``weight_classes``' default, as Nova's
    ``nova.scheduler.weights.all_weighers``)."""
    return [PropertyWeigher, ConductorGroupSpreadWeigher, FewestTraitsWeigher]


def weigh(weighers: Iterable[Any], hosts: Sequence[Any],
          weight_properties: Any) -> list[WeighedHost]:
    """Nova's arithmetic without isolation (the pipeline isolates): hosts with their total
    weights, best first (a stable sort: equal weights keep the given order)."""
    weighed = [WeighedHost(host) for host in hosts]
    if len(weighed) > 1:
        for weigher in weighers:
            add_weights(weigher, weighed, weigher.weigh_objects(weighed, weight_properties))
    return sorted(weighed, key=lambda w: w.weight, reverse=True)


def add_weights(weigher: Any, weighed: Sequence[WeighedHost], raw: Sequence[float]) -> None:
    """Add one weigher's normalised, multiplied weights to the hosts' totals."""
    if len(raw) != len(weighed):
        raise ValueError(f'{type(weigher).__name__} gave {len(raw)} weights for '
                         f'{len(weighed)} hosts')
    normalised = normalize(list(raw), getattr(weigher, 'minval', None),
                           getattr(weigher, 'maxval', None))
    for host, weight in zip(weighed, normalised):
        host.weight += multiplier(weigher, host.obj) * weight


def multiplier(weigher: Any, host_state: Any) -> float:
    """The weigher's multiplier for the host (Nova before Stein took no argument)."""
    try:
        return float(weigher.weight_multiplier(host_state))
    except TypeError:
        return float(weigher.weight_multiplier())
