"""What lint says of public dashboards and rule files that use idioms the other tests do not.

The excerpts are kept verbatim under ``tests/fixtures/real/lint`` (its
README names each one's repository, path, commit and licence): KubeRay's
Ray Serve LLM dashboard (the label-join idiom, a ratio of two histograms'
``_sum``s, ``delta()`` of counters), GKE's Cloud Monitoring dashboards for
DCGM and llm-d, NVIDIA DeepOps' GPU dashboard, llm-d's alerting rules and one
query of its monitoring guide.
Each test names the mistake it is about; the expected findings are read off
the queries by hand.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from inference_obs.lint import Finding, lint_paths, lint_text

REAL = Path(__file__).parents[1] / "fixtures" / "real" / "lint"
KUBERAY = REAL / "kuberay-serve-llm-excerpt.json"
GKE_DCGM = REAL / "gke-nvidia-dcgm-prometheus-excerpt.json"
GKE_LLM_D = REAL / "gke-llm-d-dashboard-excerpt.json"
LLM_D_RULES = REAL / "llm-d-prometheus-alerting-rules-excerpt.yaml"

#: Findings per file, by code: the table "Public material, findings by class" of docs/lint.md.
EXPECTED = {
    "deepops-gpu-dashboard-excerpt.json": {"OBS502": 1, "OBS505": 2},
    "gke-llm-d-dashboard-excerpt.json": {"OBS310": 1},
    "gke-llm-d-request-latency.promql": {},
    "gke-nvidia-dcgm-prometheus-excerpt.json": {"OBS307": 1, "OBS505": 2},
    "kuberay-serve-llm-excerpt.json": {"OBS202": 1, "OBS204": 2},
    "llm-d-idle-gpu-time.promql": {"OBS308": 1},
    "llm-d-prometheus-alerting-rules-excerpt.yaml": {
        "OBS303": 1, "OBS306": 1, "OBS309": 1, "OBS311": 1, "OBS410": 1,
    },
}  # fmt: skip


def _at(findings: list[Finding], where: str) -> list[Finding]:
    return [f for f in findings if f.where == where]


def test_every_kept_file_is_pinned() -> None:
    kept = sorted(p.name for p in REAL.iterdir() if p.suffix != ".md")
    assert kept == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_findings_per_code(name: str) -> None:
    found = Counter(f.code for f in lint_paths([REAL / name]))
    assert dict(found) == {k: v for k, v in EXPECTED[name].items() if v}


# The label-join idiom: `... * on(WorkerId) group_left(deployment, replica)
# max by (WorkerId, deployment, replica) (ray_serve_deployment_request_counter_total{...} * 0 + 1)`
# reads the counter only for its labels (its value times 0, plus 1, is 1).
JOINED_CORRECT_PANELS = ("Generation Tokens/s", "TTFT -- Mean", "Cache Utilization")


@pytest.mark.parametrize("where", JOINED_CORRECT_PANELS)
def test_a_counter_used_only_for_its_labels_is_not_a_lifetime_number(where: str) -> None:
    findings = _at(lint_paths([KUBERAY]), where)
    assert findings == [], [(f.code, f.message) for f in findings]


def test_the_join_does_not_hide_a_counter_whose_value_is_used() -> None:
    """Without ``* 0`` the joined counter's lifetime total would multiply the panel."""
    text = (
        "sum by(WorkerId) (rate(ray_vllm_generation_tokens_total[5m]))\n"
        "* on(WorkerId) group_left(deployment, replica)\n"
        "max by(WorkerId, deployment, replica) (ray_serve_deployment_request_counter_total)"
    )
    assert "OBS201" in {f.code for f in lint_text(text)}


@pytest.mark.parametrize(
    ("text", "lifetime"),
    [
        ("max by (pod) (x_total > bool 0)", False),  # whether it ever counted: labels only
        ("max by (pod) (group(x_total) by (pod))", False),
        ("max by (pod) (x_total > bool 1000)", True),  # compares the lifetime total
        ("max by (pod) (x_total * 2 + 1)", True),
    ],
)
def test_only_a_value_that_is_thrown_away_is_not_a_lifetime_number(
    text: str, lifetime: bool
) -> None:
    """Synthetic: the shapes around the idiom, decided by hand."""
    assert ("OBS201" in {f.code for f in lint_text(text)}) is lifetime


def test_bytes_per_second_of_transfer_time_is_not_a_sum_without_count() -> None:
    """rate(nixl_bytes_transferred_sum) / rate(nixl_xfer_time_seconds_sum): bytes per second of
    transfer time, a valid ratio of two totals (the panel's unit GBs says so)."""
    findings = _at(lint_paths([KUBERAY]), "NIXL: Transfer Throughput")
    assert findings == [], [(f.code, f.message, f.fix) for f in findings]


def test_a_sum_shown_as_a_time_is_still_found_through_the_join() -> None:
    (finding,) = _at(lint_paths([KUBERAY]), "Queue Time")
    assert finding.code == "OBS202"
    assert finding.severity == "error"


def test_one_delta_fix_replaces_every_delta() -> None:
    """Both targets divide delta() of one counter by delta() of another: one finding each,
    whose fix reads increase() on both sides."""
    findings = _at(lint_paths([KUBERAY]), "Tokens Per Request Per Model Last 7 Days")
    assert [(f.code, f.ref) for f in findings] == [("OBS204", "A"), ("OBS204", "B")]
    for finding in findings:
        assert finding.fix is not None
        assert "delta(" not in finding.fix
        assert finding.fix.count("increase(") == 2


def _prometheus_queries(path: Path) -> list[tuple[str, str]]:
    """``(widget title, prometheusQuery)`` of a Cloud Monitoring dashboard, read here by hand."""
    out = []
    for tile in json.loads(path.read_text())["mosaicLayout"]["tiles"]:
        widget = tile["widget"]
        for chart in widget.values():
            if not isinstance(chart, dict):
                continue
            for data_set in chart.get("dataSets", [chart]):
                query = data_set.get("timeSeriesQuery", {}).get("prometheusQuery")
                if query:
                    out.append((widget["title"], query))
    return out


@pytest.mark.parametrize("path", [GKE_DCGM, GKE_LLM_D], ids=lambda p: p.name)
def test_a_cloud_monitoring_dashboard_is_read_query_by_query(path: Path) -> None:
    from inference_obs.lint import read_file

    document = read_file(path, path.name)
    assert [(q.where, q.text) for q in document.queries] == _prometheus_queries(path)
    # ${__interval} is replaced as Grafana's variables are: every query parses.
    assert "OBS001" not in {f.code for f in lint_paths([path])}


def test_interval_variables_in_a_promql_file_are_replaced() -> None:
    assert lint_paths([REAL / "gke-llm-d-request-latency.promql"]) == []


def test_a_ratio_and_a_percentage_joined_by_or_are_an_error() -> None:
    """DCGM_FI_PROF_DRAM_ACTIVE is 0-1 and DCGM_FI_DEV_MEM_COPY_UTIL 0-100; the sum is then
    multiplied by 100, so GPUs read through MEM_COPY_UTIL show up to 10,000 %."""
    (finding,) = _at(lint_paths([GKE_DCGM]), "Memory Bandwidth Utilization % (avg. by Model)")
    assert (finding.code, finding.severity) == ("OBS307", "error")
    assert finding.fix is not None
    assert "avg_over_time(DCGM_FI_DEV_MEM_COPY_UTIL[$__interval]) / 100" in finding.fix


def test_the_correct_dcgm_panels_have_no_finding() -> None:
    """SM activity (0-1) times 100 shown in %, GPU_UTIL (0-100) in %, framebuffer used over
    total times 100 in %, energy (mJ) rate over 1000 in watts: each number is right."""
    findings = lint_paths([GKE_DCGM])
    for where in (
        "Avg. SM Utilization (H100 Only)",
        "GPU Utilization % (avg. by Model)",
        "Framebuffer Memory Utilization % (avg. by Model)",
        "Total Power Usage (by Model)",
    ):
        assert _at(findings, where) == []


def test_bytes_per_second_on_a_bytes_unit_is_a_warning() -> None:
    findings = _at(lint_paths([GKE_DCGM]), "PCIe Bytes Transmitted per Second (by GPU)")
    assert [(f.code, f.severity) for f in findings] == [("OBS505", "warning")]


def test_deepops_pcie_rate_on_a_bytes_axis_and_its_correct_panels() -> None:
    """NVIDIA DeepOps draws sum(DCGM_FI_PROF_PCIE_TX_BYTES) (bytes per second) on a ``bytes``
    axis; its utilisation panels (GPU_UTIL in percent, used over used plus free in
    percentunit) and its Ethernet rate in Bps are right."""
    findings = lint_paths([REAL / "deepops-gpu-dashboard-excerpt.json"])
    assert {(f.code, f.ref) for f in _at(findings, "PCIe Throughput")} == {
        ("OBS505", "A"),
        ("OBS505", "B"),
    }
    for where in ("GPU Total Utilization", "GPU Mem Usage", "Ethernet Throughput"):
        assert _at(findings, where) == []


def test_a_count_of_engine_series_is_not_a_pod_count() -> None:
    (finding,) = _at(lint_paths([GKE_LLM_D]), "P/D Pod Count")
    assert finding.code == "OBS310"
    assert finding.fix == (
        "count by (cluster, role) (count by (cluster, role, pod) (vllm:generation_tokens_total))"
    )


def test_steps_per_second_are_not_an_idle_share() -> None:
    (finding,) = lint_paths([REAL / "llm-d-idle-gpu-time.promql"])
    assert (finding.code, finding.severity) == ("OBS308", "error")


def test_dcgm_series_have_no_node_label() -> None:
    (finding,) = [
        f for f in _at(lint_paths([LLM_D_RULES]), "LLMDGPUUnderutilization") if f.code == "OBS309"
    ]
    assert finding.fix == "avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL or nvidia_gpu_duty_cycle) < 30"


def test_an_unguarded_ratio_alert_is_found_and_a_bounded_one_is_not() -> None:
    """Running prefill requests over running decode requests is +Inf when decode is idle;
    errors over requests is NaN (never firing) when there is no traffic."""
    findings = lint_paths([LLM_D_RULES])
    assert "OBS311" in {f.code for f in _at(findings, "LLMDPrefillDecodeImbalance")}
    for where in ("LLMDHighErrorRate", "LLMDLowPrefixCacheHitRate"):
        assert _at(findings, where) == []


def test_a_counter_without_its_total_suffix_never_fires() -> None:
    (finding,) = _at(lint_paths([LLM_D_RULES]), "LLMDHighPreemptions")
    assert (finding.code, finding.severity) == ("OBS410", "warning")
    assert finding.fix == "sum by (pod) (rate(vllm:num_preemptions_total[5m])) > 1"


def test_sglang_queue_named_with_vllm_words_never_has_data() -> None:
    """Synthetic: no public dashboard with sglang:num_waiting_reqs in a panel query was found
    (the name appears in public code and notes that read /metrics); the panel is the smallest
    that shows it."""
    panel = {
        "title": "Waiting requests",
        "type": "timeseries",
        "targets": [{"refId": "A", "expr": "sum(sglang:num_waiting_reqs)"}],
    }
    (finding,) = lint_text(json.dumps({"panels": [panel]}), "dashboard")
    assert (finding.code, finding.severity) == ("OBS410", "warning")
    assert finding.fix == "sum(sglang:num_queue_reqs)"


def test_no_correct_panel_or_rule_gets_an_error() -> None:
    """Every error-level finding in the public excerpts is on a known mistake."""
    mistakes = {
        ("Queue Time", "OBS202"),
        ("Memory Bandwidth Utilization % (avg. by Model)", "OBS307"),
        ("llm-d-idle-gpu-time", "OBS308"),
    }
    errors = {(f.where, f.code) for f in lint_paths([REAL]) if f.severity == "error"}
    assert errors == mistakes
