"""Where the checks of meaning (OBS307-OBS311), OBS410 and OBS505 stop, and Cloud Monitoring's
layouts and units: small synthetic expressions, each expectation decided by hand."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from inference_obs.cli import main
from inference_obs.lint import lint_text
from inference_obs.lint.names import likely_name


def _codes(text: str, kind: str = "promql") -> set[str]:
    return {f.code for f in lint_text(text, kind)}


def _alert(expr: str) -> str:
    return f"groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: {expr}\n"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # 0-1 plus 0-100: one side is a hundred times the other's scale.
        ("DCGM_FI_PROF_SM_ACTIVE + DCGM_FI_DEV_GPU_UTIL", True),
        # Both brought to percent first.
        ("DCGM_FI_PROF_SM_ACTIVE * 100 or DCGM_FI_DEV_GPU_UTIL", False),
        # Two ratios.
        ("DCGM_FI_PROF_SM_ACTIVE or DCGM_FI_PROF_GR_ENGINE_ACTIVE", False),
    ],
)
def test_scales_mixed(text: str, found: bool) -> None:
    assert ("OBS307" in _codes(text)) is found


@pytest.mark.parametrize(
    ("by", "found"),
    [("node", True), ("Hostname", False), ("pod", False), ("cluster", False)],
)
def test_node_label_on_dcgm(by: str, found: bool) -> None:
    assert ("OBS309" in _codes(f"avg by ({by}) (DCGM_FI_DEV_GPU_UTIL)")) is found


def test_node_label_on_other_exporters_is_not_judged() -> None:
    """Only DCGM's labels are known to lack ``node``; kube-state-metrics has one."""
    assert "OBS309" not in _codes("sum by (node) (kube_pod_info)")


@pytest.mark.parametrize(
    ("expr", "found"),
    [
        ("sum(vllm:num_requests_running) / sum(vllm:num_requests_waiting) > 2", True),
        # Guarded: the denominator filtered, clamped, offset by one.
        ("sum(vllm:num_requests_running) / (sum(vllm:num_requests_waiting) > 0) > 2", False),
        (
            "sum(vllm:num_requests_running) / clamp_min(sum(vllm:num_requests_waiting), 1) > 2",
            False,
        ),
        ("sum(vllm:num_requests_running) / (sum(vllm:num_requests_waiting) + 1) > 2", False),
        # Below a threshold: +Inf never fires it.
        ("sum(vllm:num_requests_running) / sum(vllm:num_requests_waiting) < 2", False),
        # A counter's share of another: zero together.
        (
            "sum(rate(vllm:request_success_total[5m]))"
            " / sum(rate(vllm:prompt_tokens_total[5m])) > 2",
            False,
        ),
    ],
)
def test_unguarded_ratio_alert(expr: str, found: bool) -> None:
    assert ("OBS311" in _codes(_alert(expr), "rules")) is found


def test_a_ratio_in_a_panel_is_not_an_alert() -> None:
    assert "OBS311" not in _codes(
        "sum(vllm:num_requests_running) / sum(vllm:num_requests_waiting) > 2"
    )


def test_steps_per_second_in_a_throughput_panel_are_not_a_share() -> None:
    panel = {
        "title": "Engine steps",
        "targets": [{"refId": "A", "expr": "sum(rate(vllm:iteration_tokens_total_count[5m]))"}],
    }
    assert "OBS308" not in _codes(json.dumps({"panels": [panel]}), "dashboard")


@pytest.mark.parametrize(
    ("name", "likely"),
    [
        ("vllm:num_preemptions", "vllm:num_preemptions_total"),  # the counter suffix first
        ("sglang:num_waiting_reqs", "sglang:num_queue_reqs"),  # SGLang's word, not difflib's
        ("sglang:num_running_requests", "sglang:num_running_reqs"),
        ("vllm:num_requests_runing", "vllm:num_requests_running"),  # a typo
        ("vllm:gpu_prefix_cache_hits", "vllm:prefix_cache_hits_total"),  # an old name: the current
        ("vllm:scheduler_busy_slots", None),
        ("up", None),
    ],
)
def test_likely_name(name: str, likely: str | None) -> None:
    assert likely_name(name) == likely


def _panel(unit: str, expr: str) -> str:
    panel = {
        "title": "Bytes",
        "fieldConfig": {"defaults": {"unit": unit}},
        "targets": [{"refId": "A", "expr": expr}],
    }
    return json.dumps({"panels": [panel]})


def test_an_amount_of_bytes_on_a_rate_unit_is_an_error() -> None:
    """Framebuffer memory used (MiB) drawn as bytes per second claims a rate that is not one."""
    findings = lint_text(_panel("Bps", "max(DCGM_FI_DEV_FB_USED)"), "dashboard")
    assert "OBS501" in {f.code for f in findings}


CLOUD_LAYOUTS: dict[str, Callable[[object], object]] = {
    "gridLayout": lambda w: {"widgets": [w]},
    "rowLayout": lambda w: {"rows": [{"widgets": [w]}]},
    "columnLayout": lambda w: {"columns": [{"widgets": [w]}]},
    "mosaicLayout": lambda w: {"tiles": [{"widget": w}]},
}


def _widget(unit: str, query: str) -> dict[str, object]:
    data_set = {"timeSeriesQuery": {"prometheusQuery": query, "unitOverride": unit}}
    return {"title": "KV cache", "xyChart": {"dataSets": [data_set]}}


@pytest.mark.parametrize("layout", sorted(CLOUD_LAYOUTS))
def test_every_cloud_monitoring_layout_is_read(layout: str) -> None:
    """A 0-1 gauge on unit ``%`` (0-100) is found in each layout, by its widget's title."""
    widget = _widget("%", "max(vllm:kv_cache_usage_perc)")
    text = json.dumps({"displayName": "d", layout: CLOUD_LAYOUTS[layout](widget)})
    (finding,) = lint_text(text, "dashboard")
    assert (finding.code, finding.where) == ("OBS501", "KV cache")


def test_a_ratio_on_cloud_monitorings_percent_of_one_is_right() -> None:
    """``10^2.%`` shows a 0-1 ratio as percent: the gauge as it is is right on it."""
    widget = _widget("10^2.%", "max(vllm:kv_cache_usage_perc)")
    assert (
        lint_text(
            json.dumps({"displayName": "d", "gridLayout": {"widgets": [widget]}}), "dashboard"
        )
        == []
    )


def test_the_command_reads_a_cloud_monitoring_dashboard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gke.json"
    widget = _widget("%", "max(avg_over_time(vllm:kv_cache_usage_perc[${__interval}]))")
    path.write_text(
        json.dumps({"displayName": "d", "mosaicLayout": {"tiles": [{"widget": widget}]}})
    )
    assert main(["lint", str(path)]) == 1  # an error finding, not 2 (unreadable)
    assert "OBS501" in capsys.readouterr().out
