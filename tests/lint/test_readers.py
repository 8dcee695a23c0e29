"""Reading dashboards and rule files: every shape Grafana and Prometheus write, and clear errors."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from inference_obs.errors import InferenceObsError, LintInputError
from inference_obs.lint import lint_paths, lint_text
from inference_obs.lint.grafana import read_dashboard
from inference_obs.lint.rulefiles import read_promql, read_rules

Q = "sum(rate(vllm:generation_tokens_total[$__rate_interval]))"


def _texts(model: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    document = read_dashboard("d.json", json.dumps(model, indent=2))
    return [(q.where, q.text, q.unit) for q in document.queries]


def test_current_schema_rows_and_collapsed_rows() -> None:
    model = {
        "panels": [
            {"type": "row", "title": "Top", "panels": []},
            {"title": "A", "fieldConfig": {"defaults": {"unit": "s"}}, "targets": [{"expr": Q}]},
            {
                "type": "row",
                "title": "Folded",
                "collapsed": True,
                "panels": [{"title": "B", "targets": [{"expr": Q, "refId": "Z"}]}],
            },
        ]
    }
    assert _texts(model) == [("Top / A", Q, "s"), ("Folded / B", Q, None)]


def test_classic_schema_rows_yaxes_and_singlestat() -> None:
    model = {
        "schemaVersion": 14,
        "rows": [
            {
                "title": "R",
                "panels": [
                    {"title": "G", "type": "graph",
                     "yaxes": [{"format": "ms"}, {"format": "short"}], "targets": [{"expr": Q}]},
                    {"title": "S", "type": "singlestat", "format": "percentunit",
                     "targets": [{"expr": Q}]},
                ],
            }
        ],
    }  # fmt: skip
    assert _texts(model) == [("R / G", Q, "ms"), ("R / S", Q, "percentunit")]


def test_library_panels_are_read_from_the_inlined_elements() -> None:
    model = {
        "__elements": {
            "lib-1": {"uid": "lib-1", "model": {"title": "Lib", "targets": [{"expr": Q}]}}
        },
        "panels": [{"title": "Uses lib", "libraryPanel": {"uid": "lib-1", "name": "Lib"}}],
    }
    assert _texts(model) == [("Uses lib", Q, None)]


def test_api_wrapper_and_other_datasources() -> None:
    model = {
        "dashboard": {
            "panels": [
                {"title": "Logs", "datasource": {"type": "loki"}, "targets": [{"expr": '{a="b"}'}]},
                {
                    "title": "Mixed",
                    "datasource": {"type": "datasource", "uid": "-- Mixed --"},
                    "targets": [
                        {"expr": Q, "datasource": {"type": "prometheus"}},
                        {"expr": 'count_over_time({a="b"}[5m])', "datasource": {"type": "loki"}},
                        {"refId": "C"},
                    ],
                },
            ]
        }
    }
    assert _texts(model) == [("Mixed", Q, None)]


def test_units_follow_refid_overrides_and_refuse_to_guess() -> None:
    by_ref = {"id": "byFrameRefID", "options": "B"}
    by_name = {"id": "byName", "options": "p99"}
    model = {
        "panels": [
            {
                "title": "Refs",
                "fieldConfig": {
                    "defaults": {"unit": "s"},
                    "overrides": [
                        {"matcher": by_ref, "properties": [{"id": "unit", "value": "ms"}]}
                    ],
                },
                "targets": [{"expr": Q, "refId": "A"}, {"expr": Q, "refId": "B"}],
            },
            {
                "title": "Names",
                "fieldConfig": {
                    "defaults": {"unit": "s"},
                    "overrides": [
                        {"matcher": by_name, "properties": [{"id": "unit", "value": "ms"}]}
                    ],
                },
                "targets": [{"expr": Q}],
            },
            {
                "title": "Heat",
                "type": "heatmap",
                "yAxis": {"format": "s"},
                "targets": [{"expr": Q}],
            },
        ]
    }
    assert _texts(model) == [
        ("Refs", Q, "s"),
        ("Refs", Q, "ms"),
        ("Names", Q, None),
        ("Heat", Q, None),
    ]


def test_variables_and_their_references() -> None:
    model = {
        "templating": {
            "list": [
                {"name": "ds", "type": "datasource", "query": "prometheus"},
                {"name": "ns", "type": "query", "query": {"query": "label_values(up, namespace)"}},
                {"name": "pod", "type": "query", "query": 'label_values(up{namespace="$ns"}, pod)'},
                {"name": "h", "type": "custom", "query": "a,b", "hide": 2},
            ]
        },
        "panels": [
            {"title": "P", "repeat": "pod", "datasource": "${ds}", "targets": [{"expr": Q}]}
        ],
    }
    document = read_dashboard("d.json", json.dumps(model))
    assert [(v.name, v.kind, v.hidden) for v in document.variables] == [
        ("ds", "datasource", False),
        ("ns", "query", False),
        ("pod", "query", False),
        ("h", "custom", True),
    ]
    assert document.other_references == {"pod", "ds"}
    # pod is used by the repeat; ns through pod's query; h is hidden: nothing to report.
    assert [f.code for f in lint_text(json.dumps(model), "dashboard")] == []


def test_lines_of_expressions_in_the_file() -> None:
    text = json.dumps({"panels": [{"title": "A", "targets": [{"expr": Q}, {"expr": Q}]}]}, indent=2)
    lines = [q.line for q in read_dashboard("d.json", text).queries]
    assert lines[0] is not None
    assert lines[1] is not None
    assert lines[1] > lines[0]
    assert Q.replace('"', '\\"') in text.splitlines()[lines[0] - 1]


RULES = """\
groups:
  - name: g
    rules:
      - record: a:b:c
        expr: sum(rate(x_total[5m]))
      - alert: Slow
        expr: |
          histogram_quantile(0.9,
            sum by (le) (rate(x_bucket[5m]))) > 1
"""


def test_rule_files_records_alerts_and_lines() -> None:
    document = read_rules("r.yml", RULES)
    assert [(q.where, q.ref, q.line) for q in document.queries] == [
        ("a:b:c", "record", 5),
        ("Slow", "alert", 8),
    ]
    assert document.recorded == (("a:b:c", "sum(rate(x_total[5m]))"),)


def test_prometheus_rule_resources_and_several_documents() -> None:
    text = (
        "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nspec:\n"
        "  groups:\n  - name: g\n    rules:\n    - alert: A\n      expr: up == 0\n"
        "---\n" + RULES
    )
    assert [q.where for q in read_rules("r.yaml", text).queries] == ["A", "a:b:c", "Slow"]


def test_grafana_alerting_provisioning() -> None:
    text = """\
apiVersion: 1
groups:
  - name: g
    rules:
      - title: Queue too long
        data:
          - refId: A
            model:
              expr: sum(vllm:num_requests_waiting{model_name="$model"})
          - refId: B
            datasourceUid: __expr__
            model: {type: threshold}
"""
    (query,) = read_rules("alerts.yml", text).queries
    assert (query.where, query.ref, query.grafana) == ("Queue too long", "A", True)


def test_promql_files_with_comments() -> None:
    document = read_promql("q/x.promql", "# what it is\n# more\nsum(up)\n")
    ((query),) = document.queries
    assert (query.where, query.line, query.text.strip().endswith("sum(up)")) == ("x", 3, True)
    assert read_promql("empty.promql", "# nothing\n").queries == ()


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("d.json", '{"panels": [\n  {"title": "x",}\n]}', "d.json:2:17: not JSON"),
        ("d.json", "[1, 2]", "d.json:1:1: JSON but not a Grafana dashboard"),
        ("r.yml", "groups:\n  - name: g\n    rules: [\n", "r.yml:4:1: not YAML"),
        ("r.yml", "scrape_configs: []\n", "r.yml:1:1: YAML but not a rule file"),
        ("r.txt", "up", "r.txt:1:1: not a dashboard (.json), rule file"),
    ],
)
def test_unreadable_files_name_file_line_and_column(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LintInputError, match=re.escape(message)) as caught:
        lint_paths([path])
    assert isinstance(caught.value, InferenceObsError)
    assert "\n" not in str(caught.value)


def test_folders_are_searched_and_other_files_skipped(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "r.yml").write_text(RULES, encoding="utf-8")
    (tmp_path / "compose.yaml").write_text("services: {}\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("# notes\n", encoding="utf-8")
    result = lint_paths([tmp_path])
    assert result.files == 1
    assert result.skipped == ((tmp_path / "compose.yaml").as_posix(),)


def test_a_missing_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(LintInputError, match="no such file or folder"):
        lint_paths([tmp_path / "nope.json"])


def test_a_rule_that_does_not_parse_is_a_finding_under_its_name() -> None:
    text = """\
groups:
  - name: vm
    rules:
      - record: model_name:vllm_tokens:rate5m
        expr: sum(rate(vllm:generation_tokens_total[5m])) by (model_name)
      - alert: MetricsQLOnly
        expr: rollup_rate(vllm:generation_tokens_total[5m]) > 0
"""
    findings = lint_text(text, "rules")
    assert [(f.code, f.where, f.line) for f in findings] == [("OBS001", "MetricsQLOnly", 7)]
    assert "function 'rollup_rate': not supported" in findings[0].message


def test_a_rule_written_with_two_exprs_is_refused_not_read_as_the_last() -> None:
    text = "groups:\n- name: g\n  rules:\n  - record: r\n    expr: up\n    expr: sum(up)\n"
    with pytest.raises(LintInputError, match=r"rules\.yml:6: key 'expr' appears twice"):
        read_rules("rules.yml", text)
