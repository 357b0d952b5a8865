"""computed.scheduling.pipeline, weighers and loader: Nova's order, operators' classes by
dotted path, isolation of failing and slow filters."""

import logging
import random

import pytest

from computed.scheduling import filters, loader, weighers
from computed.scheduling.host_state import HostState, NodeFacts, RequestSpec
from computed.scheduling.pipeline import Pipeline

FIXTURES = 'tests.unit.scheduling.fixtures.downstream_plain'


def node(uuid, group='', traits=(), **capabilities):
    return HostState(NodeFacts(uuid, 'CUSTOM_GOLD', traits=frozenset(traits),
                               capabilities=capabilities, conductor_group=group))


def spec(hints=None, project='p', **specs):
    return RequestSpec({'name': 'gold', 'extra_specs': specs}, hints=hints, project_id=project,
                       instance_uuid='i-1')


class Clock:
    """A clock that moves only when told: no wall-clock time in these tests."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_normalize_as_nova():
    assert weighers.normalize([1, 3, 5]) == [0.0, 0.5, 1.0]
    assert weighers.normalize([2, 2]) == [0.0, 0.0]
    assert weighers.normalize([5], minval=0, maxval=10) == [0.5]
    assert weighers.normalize([]) == []


def test_filters_then_weighers_order_the_candidates():
    hosts = [node('a', disk_count='2', raid_level='1'), node('b', disk_count='8', raid_level='5'),
             node('c', disk_count='4', raid_level='5'), node('d', raid_level='0')]
    pipeline = Pipeline(loader.filters([f'{FIXTURES}.raid_filters'], ['RaidLevelFilter']),
                        loader.weighers([f'{FIXTURES}.DiskCountWeigher']))
    decision = pipeline.run(hosts, spec(**{'raid:level': '1,5'}), random.Random(1))
    assert [h.uuid for h in decision.hosts] == ['b', 'c', 'a']
    assert decision.refused['d'].filter == 'RaidLevelFilter'
    # minval 0: normalised over 0..8, then the multiplier 2.
    assert decision.weights == {'b': 2.0, 'c': 1.0, 'a': 0.5}
    assert 'RaidLevelFilter refused 1' in decision.summary()


def test_downstream_filter_reads_hints_and_project():
    hosts = [node('a'), node('b', quarantine='yes')]
    pipeline = Pipeline(loader.filters([f'{FIXTURES}.RaidLevelFilter'], ['RaidLevelFilter']))
    assert [h.uuid for h in pipeline.run(hosts, spec(hints={'not_node': 'a'})).hosts] == ['b']
    assert [h.uuid for h in pipeline.run(hosts, spec(project='quarantine')).hosts] == ['b']


def test_equal_weights_keep_a_random_order():
    hosts = [node(str(i)) for i in range(20)]
    pipeline = Pipeline([], loader.weighers(['computed.scheduling.weighers.all_weighers']))
    orders = {tuple(h.uuid for h in pipeline.run(hosts, spec(), random.Random(seed)).hosts)
              for seed in range(5)}
    assert len(orders) == 5


def test_host_subset_size_draws_the_first_among_the_best():
    hosts = [node(str(i), disk_count=str(i)) for i in range(10)]
    pipeline = Pipeline([], loader.weighers([f'{FIXTURES}.DiskCountWeigher']),
                        host_subset_size=3)
    firsts = {pipeline.run(hosts, spec(), random.Random(seed)).hosts[0].uuid
              for seed in range(40)}
    assert firsts == {'9', '8', '7'}


def test_a_raising_filter_refuses_the_candidate_and_is_logged_once(caplog):
    hosts = [node('a'), node('b')]
    pipeline = Pipeline(loader.filters([f'{FIXTURES}.BrokenFilter'], ['BrokenFilter']))
    with caplog.at_level(logging.WARNING, 'computed.scheduling.pipeline'):
        decision = pipeline.run(hosts, spec())
    assert decision.hosts == []
    assert str(decision.refused['a']) == ("BrokenFilter failed on node a: "
                                          "KeyError: 'no_such_stat'")
    raised = [r for r in caplog.records if 'raised' in r.getMessage()]
    assert len(raised) == 1 and 'BrokenFilter' in raised[0].getMessage()
    assert raised[0].exc_info is not None
    assert decision.summary() == 'BrokenFilter failed 2'


def test_a_raising_weigher_is_left_out(caplog):
    hosts = [node('a', disk_count='1'), node('b', disk_count='5')]
    pipeline = Pipeline([], loader.weighers([f'{FIXTURES}.BrokenWeigher',
                                             f'{FIXTURES}.DiskCountWeigher']))
    with caplog.at_level(logging.WARNING, 'computed.scheduling.pipeline'):
        decision = pipeline.run(hosts, spec())
    assert [h.uuid for h in decision.hosts] == ['b', 'a']
    assert any('BrokenWeigher' in r.getMessage() for r in caplog.records)


class SlowFilter(filters.BaseHostFilter):
    """Passes every host, and moves the test clock a second per call."""

    def __init__(self, clock):
        self.clock = clock

    def host_passes(self, host_state, spec_obj):
        self.clock.now += 1.0
        return True


def test_the_time_budget_stops_the_pass_with_the_good_hosts_so_far(caplog):
    clock = Clock()
    hosts = [node(str(i)) for i in range(10)]
    pipeline = Pipeline([SlowFilter(clock)], loader.weighers(
        ['computed.scheduling.weighers.all_weighers']), time_budget=3.5, clock=clock)
    with caplog.at_level(logging.WARNING, 'computed.scheduling.pipeline'):
        decision = pipeline.run(hosts, spec())
    assert len(decision.hosts) == 4 and decision.unevaluated == 6
    assert decision.budget_exhausted
    assert '6 not evaluated within the time budget' in decision.summary()
    assert any('SlowFilter' in r.getMessage() for r in caplog.records)


def test_no_budget_evaluates_everything():
    clock = Clock()
    hosts = [node(str(i)) for i in range(10)]
    decision = Pipeline([SlowFilter(clock)], time_budget=None, clock=clock).run(hosts, spec())
    assert len(decision.hosts) == 10 and not decision.budget_exhausted


def test_built_in_weighers():
    settings = weighers.WeigherSettings(property_weigher_key='capabilities:priority',
                                        property_weight_multiplier=1.0,
                                        conductor_group_spread_multiplier=0.0)
    hosts = [node('a', priority='1'), node('b', priority='7'), node('c')]
    ranked = weighers.weigh([weighers.PropertyWeigher(settings)], hosts, spec())
    assert [w.obj.uuid for w in ranked] == ['b', 'a', 'c']
    spread = [node('a', group='g1'), node('b', group='g2'), node('c', group='g2')]
    ranked = weighers.weigh([weighers.ConductorGroupSpreadWeigher()], spread, spec())
    assert {w.obj.uuid for w in ranked[:2]} == {'b', 'c'}
    plain = [node('a', traits={'CUSTOM_GPU', 'CUSTOM_X'}), node('b', traits={'CUSTOM_X'})]
    request = RequestSpec({}, traits={'CUSTOM_X'})
    fewest = weighers.FewestTraitsWeigher(weighers.WeigherSettings(fewest_traits_multiplier=1))
    assert [w.obj.uuid for w in weighers.weigh([fewest], plain, request)] == ['b', 'a']
    assert weighers.FewestTraitsWeigher().weight_multiplier(plain[0]) == 0.0  # off by default


def test_loader_errors_name_the_path():
    with pytest.raises(loader.LoadError, match="no_such_module") as caught:
        loader.classes(['no_such_module.Filter'])
    assert caught.value.path == 'no_such_module.Filter'
    with pytest.raises(loader.LoadError, match='has no Nope'):
        loader.classes([f'{FIXTURES}.Nope'])
    with pytest.raises(loader.LoadError, match='not a dotted path'):
        loader.classes(['Filter'])
    with pytest.raises(loader.LoadError, match='not among the available') as caught:
        loader.filters(['computed.scheduling.filters.all_filters'], ['RaidLevelFilter'])
    assert caught.value.path == 'RaidLevelFilter'
    with pytest.raises(loader.LoadError, match='not a weigher'):
        loader.weighers([f'{FIXTURES}.RaidLevelFilter'])


def test_loader_by_name_and_by_path_in_the_enabled_order():
    made = loader.filters(['computed.scheduling.filters.all_filters'],
                          ['JsonFilter', f'{FIXTURES}.RaidLevelFilter',
                           'ComputeCapabilitiesFilter'])
    assert [type(f).__name__ for f in made] == ['JsonFilter', 'RaidLevelFilter',
                                                'ComputeCapabilitiesFilter']


def test_pipeline_from_conf(tmp_path):
    from oslo_config import cfg

    from computed.conf import scheduler as conf_scheduler
    conf = cfg.ConfigOpts()
    conf_scheduler.register_opts(conf)
    path = tmp_path / 'c.conf'
    path.write_text('[filter_scheduler]\n'
                    'available_filters = computed.scheduling.filters.all_filters\n'
                    f'available_filters = {FIXTURES}.raid_filters\n'
                    'enabled_filters = RaidLevelFilter, ComputeCapabilitiesFilter\n'
                    f'weight_classes = {FIXTURES}.DiskCountWeigher,'
                    'computed.scheduling.weighers.PropertyWeigher\n'
                    'property_weigher_key = priority\n'
                    'time_budget = 0\n'
                    '[scheduler]\nmax_placement_results = 200\n')
    conf(['--config-file', str(path)])
    pipeline = loader.pipeline_from_conf(conf)
    assert [type(f).__name__ for f in pipeline.filters] == ['RaidLevelFilter',
                                                            'ComputeCapabilitiesFilter']
    assert [type(w).__name__ for w in pipeline.weighers] == ['DiskCountWeigher',
                                                             'PropertyWeigher']
    assert pipeline.weighers[1].settings.property_weigher_key == 'priority'
    assert (pipeline.time_budget, pipeline.max_candidates) == (None, 200)


def test_default_pipeline_is_the_default_configuration():
    from computed.conf import scheduler as conf_scheduler
    pipeline = loader.default_pipeline()
    assert [type(f).__name__ for f in pipeline.filters] == \
        conf_scheduler.DEFAULT_ENABLED_FILTERS
    assert pipeline.time_budget == conf_scheduler.DEFAULT_TIME_BUDGET


def test_pipeline_from_conf_names_the_option_at_fault():
    from oslo_config import cfg

    from computed.conf import scheduler as conf_scheduler
    from computed.conf.errors import ConfigError
    conf = cfg.ConfigOpts()
    conf_scheduler.register_opts(conf)
    conf([])
    conf.set_override('enabled_filters', ['NoSuchFilter'], 'filter_scheduler')
    with pytest.raises(ConfigError, match=r'\[filter_scheduler\] enabled_filters: .*NoSuch'):
        loader.pipeline_from_conf(conf)
    conf.clear_override('enabled_filters', 'filter_scheduler')
    conf.set_override('available_filters', ['no.such.module'], 'filter_scheduler')
    with pytest.raises(ConfigError, match='available_filters'):
        loader.pipeline_from_conf(conf)
    conf.clear_override('available_filters', 'filter_scheduler')
    conf.set_override('weight_classes', ['nope.Weigher'], 'filter_scheduler')
    with pytest.raises(ConfigError, match='weight_classes'):
        loader.pipeline_from_conf(conf)
