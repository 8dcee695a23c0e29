"""What lint reports on dashboards published with vLLM, SGLang, the production stack, AIBrix and
dcgm-exporter (tests/fixtures/dashboards/README.md says where each comes from).

The counts are pinned: a change in them is a change in what lint says about
real dashboards, to be looked at and written into the README's lint section.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from inference_obs.lint import lint_paths

DASHBOARDS = Path(__file__).parents[1] / "fixtures" / "dashboards"

EXPECTED = {
    "aibrix-vllm-engine-dashboard.json": {
        "OBS301": 2, "OBS302": 3, "OBS303": 4, "OBS401": 11, "OBS409": 6, "OBS504": 2,
    },
    "dcgm-exporter-dashboard.json": {"OBS502": 1},
    "production-stack-lmcache-dashboard.json": {"OBS201": 1},
    "production-stack-vllm-dashboard.json": {"OBS201": 5, "OBS306": 1, "OBS401": 2, "OBS406": 2},
    "production-stack-vllm-model-metrics-dashboard.json": {"OBS202": 4, "OBS301": 3},
    "sglang-dashboard-excerpt.json": {"OBS302": 2, "OBS503": 1},
    "vllm-performance-statistics-excerpt.json": {
        "OBS203": 1, "OBS301": 1, "OBS409": 4, "OBS503": 2,
    },
    "vllm-query-statistics-excerpt.json": {"OBS408": 1, "OBS501": 3},
}  # fmt: skip


def test_every_kept_dashboard_is_pinned() -> None:
    assert sorted(p.name for p in DASHBOARDS.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_findings_per_code(name: str) -> None:
    findings = lint_paths([DASHBOARDS / name])
    assert dict(Counter(f.code for f in findings)) == EXPECTED[name]
    assert all(f.line is not None for f in findings if f.expression)


@pytest.mark.parametrize(
    ("name", "where", "code", "fix"),
    [
        (
            "production-stack-vllm-dashboard.json",
            "Overview System Performance / Average Latency",
            "OBS201",
            "sum(increase(vllm:e2e_request_latency_seconds_sum[$__rate_interval]))"
            " / sum(increase(vllm:e2e_request_latency_seconds_count[$__rate_interval]))",
        ),
        (
            "production-stack-vllm-model-metrics-dashboard.json",
            "Queue Time",
            "OBS202",
            'sum(increase(vllm:request_queue_time_seconds_sum{model_name="$model_name"}'
            "[$__rate_interval])) / sum(increase(vllm:request_queue_time_seconds_count"
            '{model_name="$model_name"}[$__rate_interval]))',
        ),
        (
            "aibrix-vllm-engine-dashboard.json",
            "Cache Utilization",
            "OBS401",
            'avg(vllm:kv_cache_usage_perc{model_name="$model_name",job="${job}"})',
        ),
        ("dcgm-exporter-dashboard.json", "GPU Framebuffer Mem Used", "OBS502", None),
        ("vllm-query-statistics-excerpt.json", "Request Over Time / p99 Latency", "OBS501", None),
    ],
)
def test_what_is_said_about_known_mistakes(
    name: str, where: str, code: str, fix: str | None
) -> None:
    findings = [f for f in lint_paths([DASHBOARDS / name]) if f.where == where and f.code == code]
    assert findings, where
    if fix is not None:
        assert fix in {f.fix for f in findings}
