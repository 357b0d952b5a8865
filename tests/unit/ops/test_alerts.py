"""etc/prometheus/computed-alerts.yml: valid for Prometheus (``promtool check rules``), each alert
fires on its fault and not on a look-alike (``promtool test rules`` with
computed-alerts.test.yml), and each is documented for the operator.

promtool comes from Debian's prometheus package, which tools/bootstrap installs: a missing
promtool is a failure, not a skip.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.unit.ops import queries

HERE = queries.Path(__file__).parent
RULE_TESTS = HERE / "computed-alerts.test.yml"


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is missing: run tools/bootstrap (it installs Debian's prometheus)"
    return path


def alerts() -> list[dict]:
    return [rule for group in queries.load_rules()["groups"] for rule in group["rules"]]


def test_promtool_check_rules_accepts_the_rules(promtool):
    result = subprocess.run([promtool, "check", "rules", str(queries.RULES)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in result.stdout, result.stdout


def test_promtool_check_rules_refuses_a_broken_rule(promtool, tmp_path):
    # The check above means something: promtool does read the expressions.
    broken = tmp_path / "broken.yml"
    broken.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [
        {"alert": "Broken", "expr": "sum by (job (computed_up)"}]}]}))
    result = subprocess.run([promtool, "check", "rules", str(broken)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0, result.stdout


def test_alerts_fire_on_their_fault_and_not_on_look_alikes(promtool, tmp_path):
    # The unit tests check labels and summaries; descriptions are prose for the operator,
    # left out of the copy the tests run on so that editing them needs no test change.
    rules = queries.load_rules()
    for rule in (rule for group in rules["groups"] for rule in group["rules"]):
        rule.get("annotations", {}).pop("description", None)
    (tmp_path / "computed-alerts.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    result = subprocess.run([promtool, "test", "rules", RULE_TESTS.name], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


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
