"""Loading filter and weigher classes by dotted path, as Nova's ``[filter_scheduler]`` names them.

Owns the reading of ``available_filters`` (dotted paths, each a class or a function returning
classes, as Nova's ``nova.scheduler.filters.all_filters``), ``enabled_filters`` (class names
among the available ones, in the order given: the order filters run in) and ``weight_classes``
(dotted paths, classes or such functions). An enabled name may also be a dotted path of its own.

Guarantees: the classes are imported and made when the pipeline is built (a service's start, not
a build), so a misspelt path or a class that cannot be made is an error at start-up,
:class:`LoadError` naming the path or name and why. Nothing here imports Nova: an operator's
class that derives from Nova's base classes imports them itself, and loads only where Nova is
installed. A built-in weigher (:class:`~computed.scheduling.weighers.ConfiguredWeigher`) is
given the weigher settings; every other class is made without arguments, as Nova makes them.
:func:`pipeline_from_conf` turns a :class:`LoadError` into the ConfigError of the option at
fault, so a service refuses to start with one line naming it.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterable
from typing import Any

from computed.scheduling.pipeline import Pipeline
from computed.scheduling.weighers import ConfiguredWeigher, WeigherSettings


class LoadError(ValueError):
    """A filter or weigher that cannot be loaded; ``path`` is the name at fault."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f'cannot load {path!r}: {reason}')


def load_object(path: str) -> Any:
    """The object at ``package.module.Name`` (the longest importable module prefix)."""
    parts = path.strip().split('.')
    if len(parts) < 2 or not all(parts):
        raise LoadError(path, 'not a dotted path (package.module.Name)')
    for cut in range(len(parts) - 1, 0, -1):
        module_name = '.'.join(parts[:cut])
        try:
            obj: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only "this prefix is not a module" means try a shorter one; a module that
            # exists but fails to import its own dependencies is the error to report.
            if exc.name and module_name.startswith(exc.name):
                continue
            raise LoadError(path, f'importing {module_name}: {exc}') from None
        except Exception as exc:  # an operator's module failing at import: say which
            raise LoadError(path, f'importing {module_name}: {type(exc).__name__}: '
                            f'{exc}') from None
        try:
            for attribute in parts[cut:]:
                obj = getattr(obj, attribute)
        except AttributeError:
            raise LoadError(path, f'{module_name} has no {".".join(parts[cut:])}') from None
        return obj
    raise LoadError(path, f'no module {parts[0]!r}')


def classes(paths: Iterable[str]) -> list[type]:
    """The classes the paths name: a class itself, or every class a function returns."""
    found: list[type] = []
    for path in paths:
        obj = load_object(path)
        if inspect.isclass(obj):
            candidates = [obj]
        elif callable(obj):
            try:
                candidates = list(obj())
            except Exception as exc:
                raise LoadError(path, f'calling it: {type(exc).__name__}: {exc}') from None
        else:
            raise LoadError(path, f'not a class nor a function returning classes: {obj!r}')
        for cls in candidates:
            if not inspect.isclass(cls):
                raise LoadError(path, f'returned {cls!r}, not a class')
            if cls not in found:
                found.append(cls)
    return found


def make(cls: type, settings: WeigherSettings | None = None) -> Any:
    """An instance of a filter or weigher class."""
    name = f'{cls.__module__}.{cls.__qualname__}'
    try:
        if issubclass(cls, ConfiguredWeigher):
            return cls(settings)
        return cls()
    except Exception as exc:
        raise LoadError(name, f'making an instance: {type(exc).__name__}: {exc}') from None


def filters(available: Iterable[str], enabled: Iterable[str]) -> list[Any]:
    """Instances of the enabled filters, in the order enabled, from the available classes."""
    by_name: dict[str, type] = {}
    available = list(available)
    for cls in classes(available):
        by_name.setdefault(cls.__name__, cls)
    made = []
    for name in enabled:
        name = name.strip()
        if '.' in name:
            loaded = classes([name])
            if len(loaded) != 1:
                raise LoadError(name, f'names {len(loaded)} classes, not one filter')
            cls = loaded[0]
        elif name in by_name:
            cls = by_name[name]
        else:
            raise LoadError(name, 'enabled but not among the available filters ('
                            + ', '.join(sorted(by_name)) + f'; available_filters = '
                            f"{', '.join(available)})")
        if not (callable(getattr(cls, 'host_passes', None))
                or callable(getattr(cls, 'filter_all', None))):
            raise LoadError(name, 'not a filter: no host_passes nor filter_all')
        made.append(make(cls))
    return made


def weighers(paths: Iterable[str], settings: WeigherSettings | None = None) -> list[Any]:
    """Instances of every weigher class the paths name."""
    made = []
    for cls in classes(paths):
        if not (callable(getattr(cls, 'weigh_objects', None))
                or callable(getattr(cls, '_weigh_object', None))):
            raise LoadError(f'{cls.__module__}.{cls.__qualname__}',
                            'not a weigher: no weigh_objects nor _weigh_object')
        made.append(make(cls, settings))
    return made


def pipeline_from_conf(conf: Any) -> Pipeline:
    """The pipeline ``[filter_scheduler]`` and ``[scheduler] max_placement_results``
    configure; :class:`~computed.conf.errors.ConfigError` naming the option (and the class)
    when a filter or weigher cannot be loaded."""
    from computed.conf.errors import ConfigError
    options = conf.filter_scheduler
    settings = WeigherSettings(
        property_weigher_key=options.property_weigher_key,
        property_weight_multiplier=options.property_weight_multiplier,
        conductor_group_spread_multiplier=options.conductor_group_spread_multiplier,
        fewest_traits_multiplier=options.fewest_traits_multiplier)
    try:
        enabled = filters(options.available_filters, options.enabled_filters)
    except LoadError as exc:
        option = ('enabled_filters' if exc.path in options.enabled_filters
                  else 'available_filters')
        raise ConfigError('filter_scheduler', option, str(exc)) from None
    try:
        weighing = weighers(options.weight_classes, settings)
    except LoadError as exc:
        raise ConfigError('filter_scheduler', 'weight_classes', str(exc)) from None
    return Pipeline(enabled, weighing,
                    # 0 means no budget.
                    time_budget=options.time_budget or None,
                    host_subset_size=options.host_subset_size,
                    max_candidates=conf.scheduler.max_placement_results)


def default_pipeline() -> Pipeline:
    """The pipeline of the default configuration (for callers without one)."""
    from computed.conf import scheduler as defaults
    return Pipeline(filters(defaults.DEFAULT_AVAILABLE_FILTERS, defaults.DEFAULT_ENABLED_FILTERS),
                    weighers(defaults.DEFAULT_WEIGHT_CLASSES, WeigherSettings(
                        property_weight_multiplier=defaults.DEFAULT_PROPERTY_WEIGHT_MULTIPLIER,
                        conductor_group_spread_multiplier=(
                            defaults.DEFAULT_CONDUCTOR_GROUP_SPREAD_MULTIPLIER),
                        fewest_traits_multiplier=defaults.DEFAULT_FEWEST_TRAITS_MULTIPLIER)),
                    time_budget=defaults.DEFAULT_TIME_BUDGET,
                    host_subset_size=defaults.DEFAULT_HOST_SUBSET_SIZE,
                    max_candidates=defaults.DEFAULT_MAX_PLACEMENT_RESULTS)
