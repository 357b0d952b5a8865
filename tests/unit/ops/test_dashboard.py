"""etc/grafana/computed-fleet.json: a Grafana dashboard that imports as is (no data source of
ours hard-coded: a ``datasource`` variable), whose panels all query, whose queries are PromQL
(promtool parses them: tests/process/test_promtool.py), and which, like the alerting rules,
reads only metrics, labels and label values that computed exposes. What computed exposes is read
from its own collectors (computed.daemon.metrics, computed.reporter.metrics) over test doubles of
a daemon and a reporter, so a renamed or removed metric turns this red;
tests/functional/test_dashboards.py checks the same against live processes.
"""

from __future__ import annotations

import types

import pytest
from prometheus_client import generate_latest

from computed.daemon.metrics import DaemonCollector
from computed.reporter.metrics import ReporterCollector
from computed.runtime import metrics
from tests.unit.metrics.test_metrics import Clock, make_service
from tests.unit.ops import queries
from tests.unit.ops.queries import Selector


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return queries.load_dashboard()


def exposed() -> dict[str, dict[str, set[str]]]:
    """Every sample name computed's daemon and reporter expose, with their labels' values."""
    clock = Clock()
    service = make_service(clock)  # connected, active, with a node list and an outbox
    service.sync.last_event_at = clock.now - 1  # a notification arrived
    daemon = DaemonCollector(service, clock=clock)
    reporter = ReporterCollector(types.SimpleNamespace(counts={"applied": 3}),
                                         types.SimpleNamespace(connected=True))
    seen: dict[str, dict[str, set[str]]] = {}
    for collector in (daemon, reporter):
        text = generate_latest(metrics.registry(collector)).decode()
        for name, labels in queries.exposition_samples(text).items():
            for label, values in labels.items():
                seen.setdefault(name, {}).setdefault(label, set()).update(values)
            seen.setdefault(name, {})
    return seen


# --- the dashboard is one Grafana can import --------------------------------------------------


def test_dashboard_is_json_grafana_imports_as_is(dashboard):
    assert dashboard["title"] and dashboard["uid"]
    assert dashboard["schemaVersion"] >= 36  # Grafana 9.0
    assert "id" not in dashboard or dashboard["id"] is None  # a new dashboard on import
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert "__inputs" not in dashboard  # nothing to map by hand: the variable picks one
    ids = [panel["id"] for panel in dashboard["panels"]] + [
        panel["id"] for panel in queries.panels(dashboard)
        if panel not in dashboard["panels"]]
    assert len(ids) == len(set(ids)), ids
    sources = [panel["datasource"] for panel in queries.panels(dashboard)] + [
        target["datasource"] for panel in queries.panels(dashboard)
        for target in panel["targets"]] + [
        v["datasource"] for v in variables.values() if v["type"] == "query"]
    assert all(source == {"type": "prometheus", "uid": "${datasource}"} for source in sources), \
        [source for source in sources if source != {"type": "prometheus", "uid": "${datasource}"}]


def test_panels_fit_the_grid_without_overlapping(dashboard):
    boxes = []
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] > 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        assert pos["h"] > 0 and pos["y"] >= 0, panel["title"]
        for title, other in boxes:
            apart = (pos["x"] + pos["w"] <= other["x"] or other["x"] + other["w"] <= pos["x"]
                     or pos["y"] + pos["h"] <= other["y"] or other["y"] + other["h"] <= pos["y"])
            assert apart, f"{panel['title']!r} overlaps {title!r}"
        boxes.append((panel["title"], pos))


def test_every_panel_has_a_query(dashboard):
    shown = list(queries.panels(dashboard))
    assert len(shown) >= 10
    for panel in shown:
        assert panel["title"].strip()
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        for target in panel["targets"]:
            assert target["expr"].strip(), f"panel {panel['title']!r} has an empty query"
            assert target["refId"]
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]


# --- only metrics that exist --------------------------------------------------------------------


def test_dashboard_and_rules_read_only_what_computed_exposes():
    assert queries.problems(exposed()) == []


def test_the_dashboard_shows_what_the_issue_asks_for():
    used = queries.used_metrics()
    for metric in ("computed_fleet_state", "computed_zookeeper_session_state",
                   "computed_fleet_members", "computed_nodes_owned",
                   "computed_claim_events_total", "computed_ironic_last_event_age_seconds",
                   "computed_reports_pending", "computed_reporter_reports_total",
                   "computed_ironic_list_failures"):
        assert metric in used, metric


def test_the_check_sees_a_metric_label_or_value_that_does_not_exist():
    seen = exposed()
    made_up = [("a", Selector("computed_nodes_owned_total", ())),
               ("b", Selector("computed_fleet_state", (("state", "=", "asleep"),))),
               ("c", Selector("computed_reporter_reports_total", (("result", "=", "failed"),))),
               ("d", Selector("computed_fleet_state", (("state", "=~", "act.*"),
                                                       ("job", "=", "anything"))))]
    assert [problem.split(":")[0] for problem in queries.problems(seen, made_up)] == \
        ["a", "b", "c"]


# --- the PromQL reader the checks rely on -------------------------------------------------------


@pytest.mark.parametrize("expr, expected", [
    ("up", [("up", ())]),
    ('sum by (job) (rate(computed_claim_events_total{event="claim"}[5m]))',
     [("computed_claim_events_total", (("event", "=", "claim"),))]),
    ('max by (job) (a) - sum by (job) (b) > 0', [("a", ()), ("b", ())]),
    ("c == 0 unless on (job, instance) (d{state='draining'} == 1)",
     [("c", ()), ("d", (("state", "=", "draining"),))]),
    ('sum(x offset 5m) by (instance) / ignoring(le) group_left(host) y',
     [("x", ()), ("y", ())]),
    ('{__name__="z", job=~"a|b"}', [("z", (("job", "=~", "a|b"),))]),
    ("min_over_time(p[15m:1m]) > 0 and deriv(p[15m]) > 1e-3 and bool inf",
     [("p", ()), ("p", ())]),
    ('label_replace(q, "dst", "$1", "src", "(.*)")', [("q", ())]),
])
def test_selectors_reads_promql(expr, expected):
    assert [(s.metric, s.matchers) for s in queries.selectors(expr)] == expected


def test_grafana_variables_are_replaced_and_unknown_ones_refused():
    assert queries.substitute('rate(x{job="$job", instance=~"${instance}"}[$__rate_interval])'
                              ) == 'rate(x{job="computed", instance=~".+"}[1m])'
    with pytest.raises(ValueError, match="unknown Grafana variable"):
        queries.substitute('x{job="$cluster"}')
