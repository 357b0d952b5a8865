"""promtool, Prometheus' own checker, run on what computed ships (Debian's prometheus package,
which tools/bootstrap installs: a missing promtool is a failure, not a skip): the alerting rules
(etc/prometheus/computed-alerts.yml) are valid, each alert fires on its fault and not on a
look-alike (``promtool test rules`` with tests/unit/ops/computed-alerts.test.yml), and the
dashboard's queries are PromQL. The checks that need no promtool are in tests/unit/ops.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.unit.ops import queries
from tests.unit.ops.test_alerts import RULE_TESTS, alerts


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is missing: run tools/bootstrap (it installs Debian's prometheus)"
    return path


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return queries.load_dashboard()


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


def test_dashboard_queries_are_promql(dashboard, tmp_path):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: run tools/bootstrap (it installs Debian's prometheus)"
    found = queries.dashboard_queries(dashboard)
    # promtool parses the expression of every rule it checks: one recording rule per query.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{n}", "expr": expr} for n, (_, expr) in enumerate(found)]}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, (result.stdout + result.stderr + "\n" +
                                    "\n".join(f"query_{n}: {where}" for n, (where, _) in
                                              enumerate(found)))
