"""queueing(): queue bursts against GPU activity on the bundled PRO 5000 vs H20 data."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from inference_obs.analyses.gpu import gpu
from inference_obs.analyses.queueing import (
    QueueClass,
    QueueingResult,
    QueueingSettings,
    queueing,
)
from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError
from inference_obs.metrics import vllm
from inference_obs.query import Selector
from inference_obs.reading.measurement import Status
from inference_obs.samples import SampleSet, Window
from inference_obs.source.base import Source
from inference_obs.source.dataset.source import DatasetSource

BUNDLED = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"


@pytest.fixture(scope="module")
def window(source: DatasetSource) -> Window:
    edges = source.dataset.manifest.window
    return Window(edges.start, edges.end)


def _deployment(source: DatasetSource, name: str) -> Deployment:
    return next(d for d in source.dataset.manifest.deployments if d.name == name)


@pytest.fixture(scope="module")
def pro(source: DatasetSource, window: Window) -> QueueingResult:
    return queueing(source, _deployment(source, "PRO"), window)


def _minute(window: Window, minutes: float) -> float:
    return window.start_s + 60.0 * minutes


def test_burst_is_capacity_with_busy_gpus(pro: QueueingResult, window: Window) -> None:
    burst = [
        i
        for i in pro.intervals
        if i.classification is QueueClass.CAPACITY
        and _minute(window, 13) <= i.start.timestamp() <= _minute(window, 17)
    ]
    assert burst, [(i.classification, i.start) for i in pro.intervals]
    top = max(burst, key=lambda i: i.max_waiting)
    assert top.max_waiting >= 10
    assert top.mean_gpu_util is not None
    assert 88.0 <= top.mean_gpu_util <= 100.0
    assert pro.peak_time is not None
    assert _minute(window, 13) <= pro.peak_time.timestamp() <= _minute(window, 17)
    assert pro.peak_waiting.value == max(i.max_waiting for i in pro.intervals)


def test_running_with_zero_gpu_is_inconsistent(pro: QueueingResult, window: Window) -> None:
    flagged = [
        i
        for i in pro.intervals
        if i.classification is QueueClass.INCONSISTENT and i.max_running >= 10
    ]
    assert len(flagged) == 1
    assert flagged[0].mean_gpu_util == 0.0
    assert flagged[0].max_waiting > 0
    assert _minute(window, 43) <= flagged[0].start.timestamp() <= _minute(window, 46)


def test_low_hourly_utilisation_coexists_with_queue(
    source: DatasetSource, window: Window, pro: QueueingResult
) -> None:
    hourly = gpu(source, _deployment(source, "PRO"), window).utilization_mean
    assert hourly.value is not None
    assert hourly.value < 30.0
    assert pro.class_share["capacity"].value is not None
    assert pro.class_share["capacity"].value > 0
    shares = [m.value for m in pro.class_share.values() if m.value is not None]
    assert sum(shares) == pytest.approx(1.0)


def test_intervals_lie_in_window_and_its_timezone(pro: QueueingResult, window: Window) -> None:
    for i in pro.intervals:
        assert window.start <= i.start <= i.end <= window.end
        assert i.start.utcoffset() == window.start.utcoffset()


def test_measurements_carry_provenance(pro: QueueingResult) -> None:
    assert pro.best_lag.ok
    assert pro.best_lag.value in {-2.0, -1.0, 0.0, 1.0, 2.0}
    corr = pro.best_lag_correlation.value
    assert corr is not None
    assert -1.0 <= corr <= 1.0
    assert pro.best_lag.caveats
    for m in pro.measurements():
        assert m.provenance.promql
        assert m.provenance.computation
    assert set(pro.peak_waiting_by_reason) >= {"capacity", "deferred"}


def test_no_gpu_data_is_unknown_and_named(source: DatasetSource, window: Window) -> None:
    deployment = _deployment(source, "PRO").model_copy(update={"gpu_selector": {"pod": "nomatch"}})
    result = queueing(source, deployment, window)
    assert result.intervals
    assert {i.classification for i in result.intervals} == {QueueClass.UNKNOWN}
    assert result.gpu_alignment.status is Status.NO_DATA
    assert "DCGM_FI_DEV_GPU_UTIL" in result.gpu_alignment.annotations[0].message
    assert result.best_lag.status is Status.NO_DATA


def test_explicit_tolerance_too_small_aligns_nothing(source: DatasetSource, window: Window) -> None:
    result = queueing(source, _deployment(source, "PRO"), window, tolerance_s=1.0)
    assert {i.classification for i in result.intervals} == {QueueClass.UNKNOWN}


def test_settings_default_to_the_old_arguments() -> None:
    assert QueueingSettings().model_dump() == {"busy_threshold": 50.0, "tolerance_s": None}
    assert queueing.settings is QueueingSettings


def test_busy_threshold_decides_capacity_against_starved(
    source: DatasetSource, window: Window, pro: QueueingResult
) -> None:
    # At 0 % every aligned GPU reading counts as busy: each queued row that was starved is
    # capacity, each idle row busy; inconsistent and unknown rows do not depend on the line.
    always = queueing(source, _deployment(source, "PRO"), window, busy_threshold=0.0)
    before = {k: m.value or 0.0 for k, m in pro.class_share.items()}
    after = {k: m.value or 0.0 for k, m in always.class_share.items()}
    assert before["starved"]
    assert before["idle"]
    assert after["starved"] == after["idle"] == 0.0
    assert after["capacity"] == pytest.approx(before["capacity"] + before["starved"])
    assert after["busy"] == pytest.approx(before["busy"] + before["idle"])
    assert after["inconsistent"] == before["inconsistent"]
    assert after["unknown"] == before["unknown"]


@pytest.mark.parametrize(
    ("setting", "value"),
    [("busy_threshold", 101.0), ("busy_threshold", -1.0), ("tolerance_s", -1.0), ("busy", 60.0)],
)
def test_bad_settings_are_refused_naming_them(
    source: DatasetSource, window: Window, setting: str, value: float
) -> None:
    overrides: dict[str, Any] = {setting: value}
    with pytest.raises(ConfigurationError, match=rf"queueing\.{setting}"):
        queueing(source, _deployment(source, "PRO"), window, **overrides)


def test_peak_by_reason_is_the_largest_raw_sample(
    source: DatasetSource, window: Window, pro: QueueingResult
) -> None:
    selector = vllm.NUM_REQUESTS_WAITING_BY_REASON.select(_deployment(source, "PRO").matchers)
    expected: dict[str, float] = {}
    for one in source.raw(selector, window):
        reason = one.labels.get("reason", "unlabelled")
        expected[reason] = max(expected.get(reason, 0.0), float(np.nanmax(one.values)))
    assert {k: m.value for k, m in pro.peak_waiting_by_reason.items()} == expected


class _Recording:
    """Delegates to a source, remembering the metric of every raw fetch."""

    def __init__(self, source: Source) -> None:
        self._source = source
        self.raw_metrics: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)

    def raw(self, selector: Selector, window: Window) -> SampleSet:
        self.raw_metrics.append(str(selector.metric))
        return self._source.raw(selector, window)


def test_gpu_samples_are_reduced_by_the_source(source: DatasetSource, window: Window) -> None:
    recording = _Recording(source)
    result = queueing(cast(Source, recording), _deployment(source, "PRO"), window)
    assert recording.raw_metrics == [
        vllm.NUM_REQUESTS_WAITING.name,
        vllm.NUM_REQUESTS_RUNNING.name,
    ]
    gpus = 'DCGM_FI_DEV_GPU_UTIL{namespace="llm",pod=~"pro-model-.*"}'
    assert result.gpu_alignment.provenance.promql[2:] == (
        f"avg by (namespace, pod) ({gpus})",
        f"max by (namespace, pod) (timestamp({gpus}))",
    )


def test_the_best_lag_is_pearson_r_of_each_rows_waiting_and_a_later_rows_idle_share(
    pro: QueueingResult,
) -> None:
    # Worked from the rows the figure draws, row by row: row k's waiting against
    # 100 - utilisation of row k + lag of the same replica, where that row has one.
    pairs: dict[int, tuple[list[float], list[float]]] = {lag: ([], []) for lag in (-2, -1, 0, 1, 2)}
    for one in pro.rows:
        n = len(one.waiting)
        for lag, (x, y) in pairs.items():
            for k in range(n):
                if 0 <= k + lag < n and not math.isnan(float(one.gpu_util[k + lag])):
                    x.append(float(one.waiting[k]))
                    y.append(100.0 - float(one.gpu_util[k + lag]))
    r = {lag: float(np.corrcoef(x, y)[0, 1]) for lag, (x, y) in pairs.items()}
    best = max(r, key=lambda lag: (abs(r[lag]), -list(r).index(lag)))
    assert pro.best_lag.value == best
    assert pro.best_lag_correlation.value == r[best]
