"""Analyses against the ground truth of scenarios simulated with fresh seeds.

The bundled datasets were made with each scenario's own seed; a test written
against them alone could pass by accident of that one draw. Here
``pro5000-vs-h20`` is simulated with seeds 101 and 202 and ``r1-decode`` with
seed 303 (about 5 s in all), and every expected number is computed from the
generated ``requests.csv`` (``dataset.requests``) or the scenario file, never
from the code under test. Which requests count follows ``ground_truth``.

Finish-reason counts are exact only where the window is aligned: PRO has one
replica, and a window from its first to its last scrape under Prometheus 2.x
rules (closed windows) makes each ``increase`` the plain difference of two
counter samples, with nothing extrapolated.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest

from inference_obs.analyses.bottleneck import BottleneckClass, bottleneck
from inference_obs.analyses.latency import latency
from inference_obs.analyses.queueing import QueueClass, QueueingResult, queueing
from inference_obs.analyses.shapes import shapes
from inference_obs.engine.rules import Rules
from inference_obs.reading.measurement import Status
from inference_obs.samples import Window
from inference_obs.simulate import simulate
from inference_obs.source.dataset.source import DatasetSource

from .ground_truth import (
    EXACT,
    deployment,
    requests_of,
    scrapes,
    true_quantile,
    truth,
    window_of,
)

Floats = npt.NDArray[np.float64]
PRO_SEEDS = (101, 202)
R1_SEED = 303
#: metric -> (event time column, value column, only requests vLLM finished?)
TRUTH = {"ttft": ("first_token", "ttft", False), "e2e": ("finish", "e2e", True)}
#: max_tokens bucket edges of the scenario's request_tokens buckets that the shares use.
EDGES = (20, 50, 100)
#: pro5000-vs-h20.yaml: the batch job's clusters (13m10s, 13m30s + 160 s) and the
#: interactive burst (13m-16m) fill PRO's queue; the stall runs 43m44.4s-44m40s.
BURST_S = (13 * 60.0, 17 * 60.0)
STALL_S = (43 * 60 + 44.4, 44 * 60 + 40.0)


@pytest.fixture(scope="module", params=PRO_SEEDS, ids=lambda s: f"seed{s}")
def pro_source(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> DatasetSource:
    seed: int = request.param
    out = tmp_path_factory.mktemp(f"pro5000-vs-h20-{seed}")
    return DatasetSource(simulate("pro5000-vs-h20", out / "data", seed=seed))


@pytest.fixture(scope="module")
def r1_source(tmp_path_factory: pytest.TempPathFactory) -> DatasetSource:
    out = tmp_path_factory.mktemp(f"r1-decode-{R1_SEED}")
    return DatasetSource(simulate("r1-decode", out / "data", seed=R1_SEED))


def _check_latency(source: DatasetSource, name: str) -> None:
    result = latency(source, deployment(source, name), window_of(source))
    for metric, (time, column, finished) in TRUTH.items():
        values = truth(source, name, column, time, finished).astype(np.float64)
        assert values.size > 100, (name, metric)
        summary = getattr(result, metric)
        assert summary.mean.status is Status.OK
        assert summary.mean.value is not None
        assert math.isclose(summary.mean.value, float(values.mean()), rel_tol=EXACT)
        for label, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
            m = getattr(summary, label)
            assert m.status is Status.OK, (name, metric, label)
            assert m.bounds is not None
            assert m.bounds.lower <= true_quantile(values, q) <= m.bounds.upper, (
                name, metric, label,
            )  # fmt: skip


@pytest.mark.parametrize("name", ["PRO", "H20"])
def test_pro5000_latency_means_and_quantile_bounds(pro_source: DatasetSource, name: str) -> None:
    _check_latency(pro_source, name)


def test_r1_latency_means_and_quantile_bounds(r1_source: DatasetSource) -> None:
    _check_latency(r1_source, "R1")


@pytest.mark.parametrize("name", ["PRO", "H20"])
def test_max_tokens_shares_exact_at_bucket_edges(pro_source: DatasetSource, name: str) -> None:
    limits = truth(pro_source, name, "max_tokens").astype(np.float64)
    result = shapes(pro_source, deployment(pro_source, name), window_of(pro_source))
    for edge in EDGES:
        m = result.max_tokens_share[edge]
        assert m.status is Status.OK
        assert m.bounds is not None
        assert m.bounds.lower == m.bounds.upper == m.value
        expected = float(np.mean(limits <= edge))
        assert m.value == pytest.approx(expected, rel=EXACT, abs=1e-12), edge


def test_finish_reason_counts_exact_in_an_alignedwindow_of(pro_source: DatasetSource) -> None:
    dep = deployment(pro_source, "PRO")
    (offsets,) = scrapes(pro_source, dep, window_of(pro_source))
    zone = window_of(pro_source).start.tzinfo
    start_s, end_s = (
        window_of(pro_source).start_s + offsets[0],
        window_of(pro_source).start_s + offsets[-1],
    )
    aligned = Window(
        datetime.fromtimestamp(start_s, UTC).astimezone(zone),
        datetime.fromtimestamp(end_s, UTC).astimezone(zone),
    )
    source = DatasetSource(pro_source.dataset, rules=Rules.PROMETHEUS_2)
    result = shapes(source, dep, aligned)
    reasons = truth(pro_source, "PRO", "finish_reason", dtype=object)
    expected = {str(r): int(np.sum(reasons == r)) for r in set(reasons.tolist())}
    assert expected.get("length", 0) > 100
    assert result.finished.value == sum(expected.values())
    got = {r: m.value for r, m in result.finish_counts.items() if m.value}
    assert got == expected
    for reason, count in expected.items():
        share = result.finish_shares[reason].value
        assert share == pytest.approx(count / reasons.size, rel=1e-12)


def _in_queue(requests: pd.DataFrame, replica: str, at: float) -> tuple[int, int]:
    """Ground-truth (waiting, running) of ``replica`` at window offset ``at``."""
    rows = requests[requests["replica"] == replica]
    waiting = (rows["arrival"] <= at) & ~(rows["scheduled"] <= at)
    end = rows["finish"].fillna(np.inf)
    running = (rows["scheduled"] <= at) & (end > at)
    return int(waiting.sum()), int(running.sum())


@pytest.fixture(scope="module")
def pro_queue(pro_source: DatasetSource) -> QueueingResult:
    return queueing(pro_source, deployment(pro_source, "PRO"), window_of(pro_source))


def test_burst_is_a_capacity_interval(pro_source: DatasetSource, pro_queue: QueueingResult) -> None:
    window, requests = window_of(pro_source), requests_of(pro_source)
    # Ground truth: the queue the burst builds, at some second inside it.
    peak = max(
        _in_queue(requests, "PRO-01", float(t))[0] for t in np.arange(BURST_S[0], BURST_S[1], 1.0)
    )
    assert peak >= 10
    burst = [
        i
        for i in pro_queue.intervals
        if i.classification is QueueClass.CAPACITY
        and BURST_S[0] <= i.start.timestamp() - window.start_s <= BURST_S[1]
    ]
    assert burst, [(i.classification, i.start) for i in pro_queue.intervals]
    top = max(burst, key=lambda i: i.max_waiting)
    assert 0 < top.max_waiting <= peak


def test_stall_sample_is_inconsistent(pro_source: DatasetSource, pro_queue: QueueingResult) -> None:
    window, requests = window_of(pro_source), requests_of(pro_source)
    flagged = [
        i
        for i in pro_queue.intervals
        if i.classification is QueueClass.INCONSISTENT
        and STALL_S[0] <= i.start.timestamp() - window.start_s <= STALL_S[1]
    ]
    assert len(flagged) == 1, [(i.classification, i.start) for i in pro_queue.intervals]
    stalled = flagged[0]
    assert stalled.mean_gpu_util == 0.0
    # The clusters the scenario places in the stall: 11 running, 4 deferred.
    at = stalled.start.timestamp() - window.start_s
    waiting, running = _in_queue(requests, "PRO-01", at)
    assert running >= 10
    assert stalled.max_running == running
    assert stalled.max_waiting == waiting > 0


def test_r1_decode_is_bandwidth_bound(r1_source: DatasetSource) -> None:
    result = bottleneck(r1_source, deployment(r1_source, "R1"), window_of(r1_source))
    assert result.classification is BottleneckClass.BANDWIDTH_BOUND_DECODE, result.reason
