"""Options of the ``[scheduler]`` and ``[filter_scheduler]`` groups: how builds are placed and
retried.

``[filter_scheduler]`` has the names and meaning of Nova's options of that group, so an
operator's Nova configuration of filters and weighers carries over; its defaults are defined
here once (:data:`DEFAULT_ENABLED_FILTERS` and the others), and a pipeline built without
configuration uses the same ones.
"""

from __future__ import annotations

from oslo_config import cfg

NAME = 'scheduler'
FILTER_SCHEDULER = 'filter_scheduler'

#: The built-in filters and weighers (computed.scheduling.filters / .weighers).
DEFAULT_AVAILABLE_FILTERS = ['computed.scheduling.filters.all_filters']
DEFAULT_ENABLED_FILTERS = ['AvailabilityZoneFilter', 'ComputeCapabilitiesFilter', 'JsonFilter']
DEFAULT_WEIGHT_CLASSES = ['computed.scheduling.weighers.all_weighers']
DEFAULT_TIME_BUDGET = 2.0
DEFAULT_HOST_SUBSET_SIZE = 1
DEFAULT_MAX_PLACEMENT_RESULTS = 1000
DEFAULT_PROPERTY_WEIGHT_MULTIPLIER = 1.0
DEFAULT_CONDUCTOR_GROUP_SPREAD_MULTIPLIER = 1.0
DEFAULT_FEWEST_TRAITS_MULTIPLIER = 0.0


def group() -> cfg.OptGroup:
    # A fresh object per ConfigOpts (see computed.conf.database).
    return cfg.OptGroup(
        NAME,
        title='Scheduler',
        help='Placing new instances on nodes, and retrying failed builds.')


def filter_group() -> cfg.OptGroup:
    return cfg.OptGroup(
        FILTER_SCHEDULER,
        title='Filter scheduler',
        help="The filters and weighers run on Placement's candidates, as Nova's "
             '[filter_scheduler] configures them. Exact capability extra specs are '
             'decided by Placement (traits); filters see only its candidates.')


ALL_OPTS = [
    cfg.IntOpt(
        'max_attempts',
        default=3,
        min=1,
        help='Nodes a build is tried on before the instance goes to ERROR (as '
             "Nova's [scheduler] max_attempts): a deploy that fails on one node "
             'is unwound (node cleared, allocation removed) and the build handed '
             'to another candidate, never one that failed it before. 1: no retry.'),
    cfg.IntOpt(
        'max_placement_results',
        default=DEFAULT_MAX_PLACEMENT_RESULTS,
        min=1,
        help="Candidates asked of Placement per build (Nova's [scheduler] "
             'max_placement_results): the filters and weighers choose among these. '
             'Fewer is faster; too few can leave out the only nodes a filter would '
             'pass.'),
]

FILTER_OPTS = [
    cfg.MultiStrOpt(
        'available_filters',
        default=DEFAULT_AVAILABLE_FILTERS,
        help='Filter classes the scheduler may use, by dotted path: a class, or a '
             'function returning classes (as nova.scheduler.filters.all_filters). '
             "Repeat the option for several. An operator's filter written for Nova "
             '(host_passes(host_state, spec_obj)) is named here; one importing '
             "Nova's base classes needs Nova installed beside computed."),
    cfg.ListOpt(
        'enabled_filters',
        default=DEFAULT_ENABLED_FILTERS,
        help='Filters run on every candidate, by class name among the available '
             'ones (or a dotted path), in this order; a candidate must pass all.'),
    cfg.ListOpt(
        'weight_classes',
        default=DEFAULT_WEIGHT_CLASSES,
        help='Weigher classes, by dotted path: a class, or a function returning '
             'classes (as nova.scheduler.weights.all_weighers). Every one is used.'),
    cfg.FloatOpt(
        'time_budget',
        default=DEFAULT_TIME_BUDGET,
        min=0.0,
        help='Seconds one scheduling pass (filters and weighers) may take: past it, '
             'no further candidate is evaluated and the build goes on with the good '
             'ones found so far (a warning names the slowest filter). 0: no budget.'),
    cfg.IntOpt(
        'host_subset_size',
        default=DEFAULT_HOST_SUBSET_SIZE,
        min=1,
        help="As Nova's: the first node tried is drawn at random among this many "
             'best-weighed candidates.'),
    cfg.StrOpt(
        'property_weigher_key',
        help='PropertyWeigher: the capability, node property or stat whose numeric '
             'value ranks nodes (e.g. capabilities:priority). Unset: the weigher '
             'ranks all nodes equal.'),
    cfg.FloatOpt(
        'property_weight_multiplier',
        default=DEFAULT_PROPERTY_WEIGHT_MULTIPLIER,
        help='PropertyWeigher multiplier: positive prefers higher values, negative '
             'lower ones, 0 disables it.'),
    cfg.FloatOpt(
        'conductor_group_spread_multiplier',
        default=DEFAULT_CONDUCTOR_GROUP_SPREAD_MULTIPLIER,
        help='ConductorGroupSpreadWeigher multiplier: positive prefers the conductor '
             'group with the most free candidates (spreads builds), 0 disables it.'),
    cfg.FloatOpt(
        'fewest_traits_multiplier',
        default=DEFAULT_FEWEST_TRAITS_MULTIPLIER,
        help='FewestTraitsWeigher multiplier: positive prefers nodes with the fewest '
             'traits beyond those asked for (keeps special hardware free), 0 '
             'disables it.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(group())
    conf.register_opts(ALL_OPTS, group=NAME)
    conf.register_group(filter_group())
    conf.register_opts(FILTER_OPTS, group=FILTER_SCHEDULER)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {group(): ALL_OPTS, filter_group(): FILTER_OPTS}
