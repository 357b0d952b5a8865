"""etc/prometheus/computed-alerts.yml: every alert tested firing and quiet in
computed-alerts.test.yml, labelled, and documented for the operator. promtool's own checks
(the rules valid, each alert firing on its fault and not on a look-alike) run it as a process, in
tests/process/test_promtool.py.
"""

from __future__ import annotations

import yaml

from tests.unit.ops import queries

HERE = queries.Path(__file__).parent
RULE_TESTS = HERE / "computed-alerts.test.yml"


def alerts() -> list[dict]:
    return [rule for group in queries.load_rules()["groups"] for rule in group["rules"]]


def test_every_alert_is_tested_firing_and_quiet():
    cases = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    checks = [check for case in cases for check in case.get("alert_rule_test", [])]
    for rule in alerts():
        name = rule["alert"]
        own = [check for check in checks if check["alertname"] == name]
        assert any(check.get("exp_alerts") for check in own), f"{name} never seen firing"
        assert any(not check.get("exp_alerts") for check in own), f"{name} never seen quiet"


def test_every_alert_has_a_severity_a_summary_and_a_description():
    names = [rule["alert"] for rule in alerts()]
    assert len(names) == len(set(names)), names
    for rule in alerts():
        assert rule["labels"]["severity"] in ("warning", "critical"), rule
        assert rule["annotations"]["summary"].strip(), rule
        assert rule["annotations"]["description"].strip(), rule


def test_every_alert_is_explained_in_the_operations_guide():
    guide = (queries.ROOT / "docs" / "operations.md").read_text()
    missing = [rule["alert"] for rule in alerts() if f"`{rule['alert']}`" not in guide]
    assert not missing, f"docs/operations.md does not explain {missing}"
