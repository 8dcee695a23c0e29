"""The exported dashboards: importable, one deployment variable in every query, lint-clean."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inference_obs.dashboards import bucket_note, dashboard_files, dashboards
from inference_obs.lint import lint_text
from inference_obs.lint.placeholders import references, substitute
from inference_obs.metrics import sglang, vllm
from inference_obs.metrics.family import Family, MetricType
from inference_obs.query import parse

FILES = dashboard_files()


def _panels(model: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in model["panels"] if p["type"] != "row"]


@pytest.mark.parametrize("name", sorted(FILES))
def test_lint_finds_nothing(name: str) -> None:
    assert list(lint_text(FILES[name], "dashboard")) == []


@pytest.mark.parametrize("name", sorted(FILES))
def test_importable_and_every_query_uses_the_deployment_variable(name: str) -> None:
    model = json.loads(FILES[name])
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    (deployment,) = (v for v in variables if v != "datasource")
    assert variables[deployment]["type"] == "query"
    assert model["uid"].startswith("inference-obs-")
    assert model["schemaVersion"] >= 36
    ids = [p["id"] for p in model["panels"]]
    assert len(ids) == len(set(ids))
    for panel in _panels(model):
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["fieldConfig"]["defaults"]["unit"]
        assert panel["description"]
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        for target in panel["targets"]:
            assert deployment in references(target["expr"]), target["expr"]
            assert "__rate_interval" in references(target["expr"]), target["expr"]
            parse(substitute(target["expr"]).text)


def test_the_export_is_stable() -> None:
    assert dashboard_files() == FILES


def test_latency_panels_say_what_their_buckets_resolve() -> None:
    model = json.loads(FILES["vllm.json"])
    ttft = next(p for p in _panels(model) if p["title"] == "Time to first token")
    assert bucket_note(vllm.TIME_TO_FIRST_TOKEN) in ttft["description"]
    assert "at most 0.001s" in ttft["description"]
    assert [t["legendFormat"] for t in ttft["targets"]] == [
        "p50 {{model_name}}",
        "p90 {{model_name}}",
        "p99 {{model_name}}",
        "mean {{model_name}}",
    ]
    assert "sum by (le, model_name) (increase(" in ttft["targets"][0]["expr"]
    tpot = bucket_note(sglang.REQUEST_TIME_PER_OUTPUT_TOKEN)
    assert "23 from 0.002s to 8s" in tpot  # SGLang's inter-token latency bounds
    unlisted = Family("x", MetricType.HISTOGRAM, "seconds", "x", "sglang", buckets=())
    assert "not record" in bucket_note(unlisted)


def test_dashboards_cover_the_questions() -> None:
    titles = {
        name: [p.title for row in board.rows for p in row.panels]
        for name, board in dashboards().items()
    }
    assert "Waiting and running requests, and engine steps per second" in titles["vllm.json"]
    assert "KV-cache usage of the fullest engine" in titles["vllm.json"]
    assert "Cached share of prompt tokens" in titles["sglang.json"]
    assert "Retractions per second" in titles["sglang.json"]
    assert "GPU utilisation (NVML, 0-100)" in titles["dcgm.json"]


def test_counters_every_rank_repeats_are_never_summed_over_ranks() -> None:
    # sglang:num_retracted_requests_total: one series per TP rank, each counting
    # every retraction of the server.
    model = json.loads(FILES["sglang.json"])
    (panel,) = (p for p in _panels(model) if p["title"] == "Retractions per second")
    (target,) = panel["targets"]
    assert target["expr"] == (
        "sum by (model_name) (max without (tp_rank, pp_rank, moe_ep_rank, attn_cp_rank) "
        '(rate(sglang:num_retracted_requests_total{model_name=~"$model_name"}'
        "[$__rate_interval])))"
    )
    for name in sglang.PER_RANK_COPIES:
        for board in FILES.values():
            for expr in (t["expr"] for p in _panels(json.loads(board)) for t in p["targets"]):
                if name in expr:
                    assert "max without (tp_rank, pp_rank, moe_ep_rank" in expr, expr
