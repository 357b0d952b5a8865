"""The queries of the Grafana dashboard and of the Prometheus alerting rules, and the series they
select.

Shared by the unit tests (tests/unit/ops) and the functional test that scrapes a live daemon and
reporter (tests/functional/test_dashboards.py). :func:`selectors` is a small PromQL lexer: it
finds every series selector of an expression (metric name and label matchers), and skips what
is not one (functions, aggregations and their ``by (...)`` lists, keywords, strings, numbers,
durations, range brackets).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import yaml

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "etc" / "grafana" / "computed-fleet.json"
RULES = ROOT / "etc" / "prometheus" / "computed-alerts.yml"

# Series Prometheus makes itself for every target, not read from computed's /metrics: `up` is
# 0 when a scrape fails, the only way to see a dead process.
PROMETHEUS_SERIES = frozenset({"up"})
# Labels Prometheus attaches to every series of a target (the scrape config's).
TARGET_LABELS = frozenset({"job", "instance"})

# Grafana's variables, replaced by values that make the queries plain PromQL.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "1m",
    "$__range": "1h",
    "$reporter_job": "computed-reporter",
    "$instance": ".+",
    "$job": "computed",
}

KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"})
LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
AGGREGATIONS = frozenset({"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
                          "count_values", "bottomk", "topk", "quantile"})

TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<number>(?:0x[0-9a-fA-F]+|[0-9.][0-9a-zA-Z_.]*)(?:[eE][+-]?[0-9]+)?)
  | (?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<matcher>=~|!~|!=|==|>=|<=|=)
  | (?P<punct>[{}()\[\],@]|[-+*/%^<>])
""", re.VERBOSE)


class Selector(NamedTuple):
    metric: str
    matchers: tuple[tuple[str, str, str], ...]  # (label, operator, value)


def tokens(expr: str) -> list[tuple[str, str]]:
    out, position = [], 0
    while position < len(expr):
        match = TOKEN.match(expr, position)
        if match is None:
            raise ValueError(f"cannot read {expr[position:position + 20]!r} in {expr!r}")
        position = match.end()
        if match.lastgroup != "space":
            out.append((match.lastgroup, match.group()))
    return out


def _skip_group(toks: list[tuple[str, str]], i: int, opening: str, closing: str) -> int:
    """Index after the bracket group that starts at ``i``."""
    assert toks[i][1] == opening, (toks[i], opening)
    depth = 0
    for j in range(i, len(toks)):
        if toks[j][1] == opening:
            depth += 1
        elif toks[j][1] == closing:
            depth -= 1
            if depth == 0:
                return j + 1
    raise ValueError(f"unbalanced {opening!r}")


def _matchers(toks: list[tuple[str, str]], i: int) -> tuple[tuple[tuple[str, str, str], ...], int]:
    """The label matchers of the ``{...}`` at ``i``, and the index after it."""
    end = _skip_group(toks, i, "{", "}")
    inner = [t for t in toks[i + 1:end - 1] if t[1] != ","]
    if len(inner) % 3:
        raise ValueError(f"cannot read the label matchers {inner!r}")
    found = []
    for k in range(0, len(inner), 3):
        (kind, label), (_, op), (vkind, value) = inner[k:k + 3]
        if kind != "name" or vkind != "string":
            raise ValueError(f"cannot read the label matcher {inner[k:k + 3]!r}")
        found.append((label, op, value[1:-1]))
    return tuple(found), end


def selectors(expr: str) -> list[Selector]:
    """Every series selector of a PromQL expression (after Grafana's variables are replaced)."""
    toks = tokens(expr)
    found, i = [], 0
    while i < len(toks):
        kind, text = toks[i]
        following = toks[i + 1][1] if i + 1 < len(toks) else ""
        if text == "[":  # a range or subquery: durations only
            i = _skip_group(toks, i, "[", "]")
        elif kind == "name" and text in LABEL_LISTS:
            i += 1
            if i < len(toks) and toks[i][1] == "(":
                i = _skip_group(toks, i, "(", ")")
        elif kind == "name" and text.lower() in KEYWORDS:
            i += 1
            if text == "offset":  # a duration follows, e.g. "offset 5m"
                i += 1
        elif kind == "name" and (following == "(" or
                                 (text in AGGREGATIONS and following in LABEL_LISTS)):
            i += 1  # a function or an aggregation: its arguments are read in turn
        elif kind == "name":
            matchers: tuple = ()
            i += 1
            if following == "{":
                matchers, i = _matchers(toks, i)
            found.append(Selector(text, matchers))
        elif text == "{":  # {__name__="..."} without a metric name in front
            matchers, i = _matchers(toks, i)
            names = [value for label, op, value in matchers if label == "__name__" and op == "="]
            if len(names) != 1:
                raise ValueError(f"a selector without one metric name in {expr!r}")
            found.append(Selector(names[0], tuple(m for m in matchers if m[0] != "__name__")))
        else:
            i += 1
    return found


def substitute(expr: str) -> str:
    """``expr`` with Grafana's variables replaced; a variable not known here is an error."""
    for variable in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace("${" + variable[1:] + "}", GRAFANA_VARIABLES[variable])
        expr = expr.replace(variable, GRAFANA_VARIABLES[variable])
    leftover = re.findall(r"\$\{?[a-zA-Z_]\w*", expr)
    if leftover:
        raise ValueError(f"unknown Grafana variable(s) {leftover} in {expr!r}")
    return expr


# --- the dashboard ---------------------------------------------------------------------------


def load_dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(dashboard: dict) -> Iterator[dict]:
    """Every panel, those folded into a collapsed row included; rows themselves are not."""
    for panel in dashboard["panels"]:
        if panel.get("type") == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def dashboard_queries(dashboard: dict) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable, variables replaced."""
    queries = []
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            queries.append((f"panel {panel['title']!r} query {target.get('refId')}",
                            substitute(target.get("expr", ""))))
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable["query"]
        query = query["query"] if isinstance(query, dict) else query
        match = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query)
        if match is None:
            raise ValueError(f"variable {variable['name']}: not label_values(series, label): "
                             f"{query!r}")
        queries.append((f"variable {variable['name']!r}", substitute(match.group(1))))
    return queries


# --- the rules -------------------------------------------------------------------------------


def load_rules() -> dict:
    return yaml.safe_load(RULES.read_text())


def rule_queries(rules: dict) -> list[tuple[str, str]]:
    return [(f"rule {rule.get('alert') or rule.get('record')!r}", rule["expr"])
            for group in rules["groups"] for rule in group["rules"]]


# --- both ------------------------------------------------------------------------------------


def used_selectors() -> list[tuple[str, Selector]]:
    """(where, selector) for every series the dashboard and the rules read."""
    return [(where, selector)
            for where, expr in dashboard_queries(load_dashboard()) + rule_queries(load_rules())
            for selector in selectors(expr)]


def used_metrics() -> set[str]:
    """Names of the series the dashboard and the rules read that computed must expose."""
    return {selector.metric for _, selector in used_selectors()} - PROMETHEUS_SERIES


def exposition_samples(text: str) -> dict[str, dict[str, set[str]]]:
    """Sample name -> label -> values seen, from a Prometheus text exposition."""
    from prometheus_client.parser import text_string_to_metric_families
    seen: dict[str, dict[str, set[str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = seen.setdefault(sample.name, {})
            for label, value in sample.labels.items():
                labels.setdefault(label, set()).add(value)
    return seen


def problems(exposed: dict[str, dict[str, set[str]]],
             used: list[tuple[str, Selector]] | None = None) -> list[str]:
    """What the dashboard and the rules read that ``exposed`` (sample name -> label -> values)
    lacks: a metric, a label, or a label value matched with ``=``."""
    found = []
    for where, selector in used_selectors() if used is None else used:
        if selector.metric in PROMETHEUS_SERIES:
            continue
        labels = exposed.get(selector.metric)
        if labels is None:
            found.append(f"{where}: {selector.metric} is not exposed")
            continue
        for label, op, value in selector.matchers:
            if label in TARGET_LABELS:
                continue
            if label not in labels:
                found.append(f"{where}: {selector.metric} has no label {label!r} "
                             f"(it has {sorted(labels)})")
            elif op == "=" and value not in labels[label]:
                found.append(f"{where}: {selector.metric}{{{label}={value!r}}} is not exposed "
                             f"({label} is one of {sorted(labels[label])})")
    return found
