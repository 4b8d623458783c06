"""The shipped Prometheus rules and Grafana dashboard (monitoring/): promtool checks the rules
and runs their unit tests; every dashboard expression parses and matches both metric spellings
(`sglang:x` as scraped in text format, `sglang_x` as prometheus_client serves OpenMetrics)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.tools import needs

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "monitoring" / "prometheus" / "specops-rules.yml"
RULE_TESTS = REPO / "monitoring" / "prometheus" / "specops-rules.test.yml"
DASHBOARD = REPO / "monitoring" / "grafana" / "specops-speculative-decoding.json"

PROMTOOL = shutil.which("promtool")
needs_promtool = needs(PROMTOOL, "promtool", "apt-get install prometheus")

# Grafana's template variables, replaced by values that keep an expression valid PromQL.
DURATIONS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}
VARIABLE_RE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)")
LABEL_VALUES_RE = re.compile(r"^\s*label_values\((.*),\s*\w+\s*\)\s*$", re.S)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120)


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def panels(data: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    todo = list(data["panels"])
    while todo:
        panel = todo.pop(0)
        found.append(panel)
        todo.extend(panel.get("panels", ()))
    return found


def expressions(data: dict[str, Any]) -> list[str]:
    """Every panel target's expr and the selector in each `label_values(…)` variable."""
    exprs = [t["expr"] for p in panels(data) for t in p.get("targets", ()) if "expr" in t]
    for variable in data["templating"]["list"]:
        query = variable.get("query")
        text = query.get("query", "") if isinstance(query, dict) else str(query or "")
        match = LABEL_VALUES_RE.match(text)
        if variable.get("type") == "query" and match:
            exprs.append(match.group(1))
    return exprs


def substitute(expr: str) -> str:
    def value(m: re.Match[str]) -> str:
        return DURATIONS.get(m.group(1) or m.group(2), ".*")

    return VARIABLE_RE.sub(value, expr)


@needs_promtool
def test_the_rules_pass_promtool_check_and_their_unit_tests() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 11 rules found" in checked.stdout
    tested = promtool("test", "rules", str(RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


@needs_promtool
def test_the_rule_tests_fail_when_a_threshold_is_wrong(tmp_path: Path) -> None:
    """The unit tests can fail: a baseline threshold of 95 % fires where they expect silence."""
    rules = RULES.read_text()
    assert ") < 0.8\n" in rules
    (tmp_path / RULES.name).write_text(rules.replace(") < 0.8\n", ") < 0.95\n"))
    (tmp_path / RULE_TESTS.name).write_text(RULE_TESTS.read_text())
    tested = promtool("test", "rules", str(tmp_path / RULE_TESTS.name))
    assert tested.returncode != 0
    assert "AcceptLengthBelowBaseline" in tested.stdout + tested.stderr


def test_the_alerts_the_team_needs_are_shipped() -> None:
    names = set(re.findall(r"^\s+- alert: (\w+)$", RULES.read_text(), re.M))
    assert names == {
        "AcceptLengthBelowBaseline",
        "GenerationThroughputCollapsed",
        "SGLangServerDown",
        "SGLangRestartLoop",
        "GpuXidError",
    }


def test_the_dashboard_shows_speculative_decoding_by_host_and_variant() -> None:
    data = dashboard()
    variables = {v["name"]: v for v in data["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert {"instance", "variant"} <= set(variables)
    text = " ".join(expressions(data))
    for metric in (
        "spec_accept_length",
        "spec_accept_rate",
        "gen_throughput",
        "num_running_reqs",
        "num_queue_reqs",
        "is_cuda_graph",
    ):
        assert f'{{__name__=~"sglang[:_]{metric}"' in text, metric
    ids = [p["id"] for p in panels(data)]
    assert len(ids) == len(set(ids))
    for panel in panels(data):
        if panel.get("type") != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert panel.get("targets"), panel["title"]


def test_every_dashboard_metric_matches_both_spellings() -> None:
    for expr in expressions(dashboard()):
        outside_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
        bare = re.findall(r"(?<![\w:])sglang[:_]\w+", outside_strings)
        assert not bare, f"{expr!r} names {bare} in one spelling only"
        for op, value in re.findall(r'__name__\s*(=~|!~|!=|=)\s*"([^"]*)"', expr):
            assert op == "=~" and value.startswith("sglang[:_]"), expr


@needs_promtool
def test_every_dashboard_expression_is_valid_promql(tmp_path: Path) -> None:
    exprs = expressions(dashboard())
    assert len(exprs) >= 15
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    for i, expr in enumerate(exprs):
        # a JSON string is a YAML double-quoted scalar
        lines += [
            f"      - record: dashboard:expr_{i}",
            f"        expr: {json.dumps(substitute(expr))}",
        ]
    path = tmp_path / "dashboard.rules.yml"
    path.write_text("\n".join(lines) + "\n")
    checked = promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in checked.stdout
