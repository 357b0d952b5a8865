"""Every series the Grafana dashboard (etc/grafana/) and the alerting rules (etc/prometheus/) read
is on a live daemon's and reporter's /metrics, with the labels and label values they match.

A daemon alone in its group claims and reports every node; an Ironic notification (a node
changed through the API) makes it expose the time since the last event, the one metric absent
until then. Only Prometheus's own ``up`` is left out: no process exposes it.
"""

from __future__ import annotations

from tests.functional.daemons import Daemon, Reporter, ironic
from tests.functional.test_metrics import fleet, free_port, get, samples, wait_for  # noqa: F401 (fleet: the fixture)
from tests.unit.ops import queries

NODES = 6


def exposed(port: int) -> dict[str, dict[str, set[str]]]:
    status, text = get(port, "/metrics")
    assert status == 200, text
    return queries.exposition_samples(text)


def test_every_metric_of_the_dashboard_and_the_rules_is_exposed(stack, fleet):  # noqa: F811
    start, nodes = fleet
    daemon_port, reporter_port = free_port(), free_port()
    ports = f"[metrics]\nport = {daemon_port}\nreporter_port = {reporter_port}\n"
    reporter = start(Reporter, "r1", extra=ports)
    daemon = start(Daemon, "c1", drain_timeout=3, extra=ports)
    processes = [daemon, reporter]

    def owns_and_reported_every_node():
        values = samples(daemon_port)
        listed = values.get("computed_ironic_nodes_listed", 0)
        applied = samples(reporter_port)["computed_reporter_reports_total{outcome=applied}"]
        return (values["computed_up"] == 1 and listed >= NODES
                and values["computed_nodes_owned"] == listed
                and values.get("computed_reports_pending") == 0 and applied >= NODES) or values

    wait_for(owns_and_reported_every_node, 90, "the daemon owning and reporting its nodes",
             processes)

    # An event from Ironic: the daemon starts exposing how long ago the last one arrived.
    ironic(stack, "PATCH", f"/nodes/{nodes[0]}",
           [{"op": "add", "path": "/extra/dashboards", "value": "seen"}])

    def heard_from_ironic():
        return "computed_ironic_last_event_age_seconds" in exposed(daemon_port) or \
            "no event metric yet"

    wait_for(heard_from_ironic, 60, "an Ironic notification seen by the daemon", processes)

    daemon_series, reporter_series = exposed(daemon_port), exposed(reporter_port)
    both: dict[str, dict[str, set[str]]] = {}
    for series in (daemon_series, reporter_series):
        for name, labels in series.items():
            for label, values in labels.items():
                both.setdefault(name, {}).setdefault(label, set()).update(values)
            both.setdefault(name, {})

    used = queries.used_selectors()
    assert {selector.metric for _, selector in used} >= {"computed_nodes_owned",
                                                         "computed_reporter_reports_total"}
    assert queries.problems(both, used) == []
    # The dashboard's process panels read both kinds of process.
    for metric in queries.used_metrics():
        if metric.startswith("process_"):
            assert metric in daemon_series and metric in reporter_series, metric
