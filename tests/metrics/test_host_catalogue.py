"""The host catalogue: node_exporter, cAdvisor and process CPU families, and their queries.

Names, types, units and labels are written out here from node_exporter's
``cpu`` collector, cAdvisor's Prometheus collector (as the kubelet serves it
on ``/metrics/cadvisor``) and prometheus_client's process collector,
independently of the catalogue code. The host queries are evaluated on
series built here whose answers follow from their construction.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from inference_obs.cli import main
from inference_obs.engine.evaluate import Evaluator
from inference_obs.engine.rules import Rules
from inference_obs.metrics import (
    FAMILIES,
    STANDARD_QUERIES,
    MetricType,
    builders,
    family,
    host,
    host_queries as hq,
)
from inference_obs.metrics.standard import standard_query
from inference_obs.query import Expr, Matcher, to_promql
from inference_obs.samples import SampleSet, Series, Vector

#: name -> (type, unit, labels the exporter itself sets)
EXPECTED = {
    "node_cpu_seconds_total": ("counter", "seconds", {"cpu", "mode"}),
    "container_cpu_usage_seconds_total": ("counter", "seconds", {"container", "pod", "namespace"}),
    "container_cpu_cfs_periods_total": ("counter", "periods", {"container", "pod", "namespace"}),
    "container_cpu_cfs_throttled_periods_total": (
        "counter",
        "periods",
        {"container", "pod", "namespace"},
    ),
    "container_spec_cpu_quota": ("gauge", "microseconds", {"container", "pod", "namespace"}),
    "container_spec_cpu_period": ("gauge", "microseconds", {"container", "pod", "namespace"}),
    "container_memory_working_set_bytes": ("gauge", "bytes", {"container", "pod", "namespace"}),
    "process_cpu_seconds_total": ("counter", "seconds", set()),
}
POD = [Matcher.equal("pod", "llm-01")]


def test_every_host_family_is_catalogued_once() -> None:
    assert {f.name for f in host.FAMILIES} == set(EXPECTED)
    assert len(set(host.FAMILIES)) == len(host.FAMILIES)
    for f in host.FAMILIES:
        assert f in FAMILIES
        assert family(f.name) is f


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_type_unit_and_labels(name: str) -> None:
    kind, unit, labels = EXPECTED[name]
    f = family(name)
    assert f.type is MetricType(kind)
    assert f.unit == unit
    assert labels <= set(f.labels)
    assert not f.already_rate
    assert f.traps, f"{name} documents no trap"


def test_traps_name_the_ways_host_cpu_is_misread() -> None:
    assert any("container=" in t and "twice" in t for t in host.CONTAINER_CPU_USAGE.traps)
    assert any("twice" in t for t in host.CONTAINER_MEMORY_WORKING_SET.traps)
    assert any("ratio of two counters" in t for t in host.CONTAINER_CPU_CFS_THROTTLED_PERIODS.traps)
    assert any("cores in use" in t for t in host.CONTAINER_CPU_USAGE.traps)
    assert any("per logical CPU" in t for t in host.NODE_CPU_SECONDS.traps)
    assert any("GIL" in t for t in host.PROCESS_CPU_SECONDS.traps)
    assert any(
        "quota / container_spec_cpu_period" in t for t in host.CONTAINER_SPEC_CPU_QUOTA.traps
    )
    assert set(host.CPU_MODES) == {
        "idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user",
    }  # fmt: skip


def test_catalogue_command_lists_host_families(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalogue"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "node_cpu_seconds_total\tcounter\tseconds" in "\n".join(lines)
    assert any(
        line.startswith("container_cpu_cfs_throttled_periods_total\tcounter\t") for line in lines
    )


def test_host_queries_render_exactly() -> None:
    window = 3600.0
    texts = {q.key: to_promql(q.expr(POD, window, ())) for q in STANDARD_QUERIES}
    assert texts["host_container_cpu_throttled_ratio"] == (
        'sum(increase(container_cpu_cfs_throttled_periods_total{pod="llm-01",container!=""}[1h])) '
        '/ sum(increase(container_cpu_cfs_periods_total{pod="llm-01",container!=""}[1h]))'
    )
    assert to_promql(hq.server_process_cpu_cores(POD, window)) == (
        'sum(rate(process_cpu_seconds_total{pod="llm-01"}[1h]))'
    )
    assert to_promql(hq.container_cpu_cores(POD, window, ("pod",))) == (
        'sum by (pod) (rate(container_cpu_usage_seconds_total{pod="llm-01",container!=""}[1h]))'
    )
    assert to_promql(hq.container_cpu_limit_cores(POD, window)) == (
        'sum(avg_over_time(container_spec_cpu_quota{pod="llm-01",container!=""}[1h])) '
        '/ max(avg_over_time(container_spec_cpu_period{pod="llm-01",container!=""}[1h]))'
    )
    assert to_promql(hq.node_cpu_busy_ratio(POD, window)) == (
        'sum(rate(node_cpu_seconds_total{pod="llm-01",mode!="idle"}[1h])) '
        '/ sum(rate(node_cpu_seconds_total{pod="llm-01"}[1h]))'
    )


# Eleven samples a minute apart: a window of ten minutes holds them all, so
# Prometheus 2.x rules (closed window) need no extrapolation.
T0 = 1.7e9
TIMES = T0 + 60.0 * np.arange(11)
END = float(TIMES[-1])
SCRAPE = {"pod": "llm-01", "namespace": "serving"}


def _counter(name: str, labels: dict[str, str], per_second: float) -> Series:
    return Series(name, labels, TIMES, per_second * (TIMES - T0))


def _gauge(name: str, labels: dict[str, str], value: float) -> Series:
    return Series(name, labels, TIMES, np.full(TIMES.size, value))


def _samples() -> SampleSet:
    vllm = SCRAPE | {"container": "vllm"}
    series = [
        # The container uses 2.5 cores; the pod cgroup (no container label) repeats it
        # plus 0.01 for the pause container: the right answer is 2.5, not 5.01.
        _counter("container_cpu_usage_seconds_total", vllm, 2.5),
        _counter("container_cpu_usage_seconds_total", SCRAPE, 2.51),
        # 10 periods a second (100 ms), 3 of them throttled: ratio 0.3.
        _counter("container_cpu_cfs_periods_total", vllm, 10.0),
        _counter("container_cpu_cfs_throttled_periods_total", vllm, 3.0),
        # A 4-core limit: 400000 us of quota per 100000 us period.
        _gauge("container_spec_cpu_quota", vllm, 400000.0),
        _gauge("container_spec_cpu_period", vllm, 100000.0),
        _gauge("container_memory_working_set_bytes", vllm, 8e9),
        _gauge("container_memory_working_set_bytes", SCRAPE, 8.0007e9),
        _counter("process_cpu_seconds_total", SCRAPE | {"job": "vllm"}, 0.4),
    ]
    # Two CPUs of one node: cpu 0 is 60 % busy (user 0.5, system 0.1), cpu 1 20 %
    # (user 0.2): busy share (0.6 + 0.2) / 2 = 0.4.
    for cpu, shares in (
        ("0", {"user": 0.5, "system": 0.1, "idle": 0.4}),
        ("1", {"user": 0.2, "idle": 0.8}),
    ):
        for mode, share in shares.items():
            series.append(
                _counter("node_cpu_seconds_total", {"cpu": cpu, "mode": mode, "node": "n1"}, share)
            )
    return SampleSet.from_series(series)


@pytest.mark.parametrize(
    ("builder", "matchers", "expected"),
    [
        (hq.server_process_cpu_cores, POD, 0.4),
        (hq.container_cpu_cores, POD, 2.5),
        (hq.container_cpu_throttled_ratio, POD, 0.3),
        (standard_query("host_container_cpu_throttled_ratio").builder, POD, 0.3),
        (hq.container_cpu_limit_cores, POD, 4.0),
        (hq.container_memory_working_set_bytes, POD, 8e9),
        (hq.node_cpu_busy_ratio, [Matcher.equal("node", "n1")], 0.4),
    ],
)
def test_host_queries_give_the_constructed_answer(
    builder: Callable[[list[Matcher], float, tuple[str, ...]], Expr],
    matchers: list[Matcher],
    expected: float,
) -> None:
    result = Evaluator(_samples(), rules=Rules.PROMETHEUS_2).evaluate(
        builder(matchers, 600.0, ()), END
    )
    assert isinstance(result, Vector)
    assert len(result) == 1
    assert math.isclose(float(result.values[0]), expected, rel_tol=1e-9)


def test_pod_level_cgroup_would_double_count() -> None:
    # Without container!="" the pod's own cgroup (2.51) is added to its container's (2.5).
    result = Evaluator(_samples(), rules=Rules.PROMETHEUS_2).evaluate(
        builders.per_second(host.CONTAINER_CPU_USAGE, POD, 600.0), END
    )
    assert isinstance(result, Vector)
    assert math.isclose(float(result.values[0]), 5.01, rel_tol=1e-9)
