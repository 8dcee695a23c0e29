"""``queueing`` and ``bottleneck`` give the same answers offline and from a real Prometheus.

For ``datasets/pro5000-vs-h20`` and ``datasets/r1-decode`` and each of their
deployments, both analyses run over the manifest window through
:class:`~inference_obs.source.dataset.source.DatasetSource` and through
:class:`~inference_obs.source.prometheus.PrometheusSource` on Prometheus
holding the same samples (backfilled with promtool, as in
``test_analyses_agreement``); queueing per app scrape and in 120 s tiles, and
the per-replica GPU readings with their sample times (``timestamp()``). The
queue intervals are the same (class, replica, start, end, sample count and
maxima) and every Measurement, by key, has the same status and value to 1e-9
relative.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from inference_obs.analyses.bottleneck import BottleneckResult, bottleneck
from inference_obs.analyses.queueing import QueueingResult, queueing
from inference_obs.engine.rules import Rules
from inference_obs.metrics import dcgm
from inference_obs.reading.alignment import gpu_per_replica
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Window
from inference_obs.source.dataset.reader import Dataset, read_dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.prometheus import PrometheusSource
from tests.integration.servers import PrometheusServer

pytestmark = pytest.mark.integration

DATASETS = Path(__file__).resolve().parents[2] / "datasets"
NAMES = ("pro5000-vs-h20", "r1-decode")
RELATIVE = 1e-9
#: The labels naming a replica on both app and GPU series of the bundled datasets.
KEYS = ("namespace", "pod")


@pytest.fixture(scope="module", params=NAMES)
def backfilled(
    request: pytest.FixtureRequest, shipped_prometheus: Callable[[Path], PrometheusServer]
) -> tuple[Dataset, PrometheusSource]:
    path = DATASETS / str(request.param)
    return read_dataset(path), PrometheusSource(shipped_prometheus(path).base_url)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or a == b or math.isclose(a, b, rel_tol=RELATIVE)


def _by_key(result: AnalysisResult) -> dict[str, Measurement]:
    out: dict[str, Measurement] = {}
    for m in result.measurements():
        assert m.key not in out, f"duplicate key {m.key}"
        out[m.key] = m
    return out


def _disagreements(local: AnalysisResult, remote: AnalysisResult) -> list[str]:
    a, b = _by_key(local), _by_key(remote)
    wrong = [f"{k}: only {'offline' if k in a else 'server'}" for k in sorted(a.keys() ^ b.keys())]
    for key in sorted(a.keys() & b.keys()):
        x, y = a[key], b[key]
        if x.status != y.status or not _close(x.value, y.value):
            wrong.append(f"{key}: offline {x.status} {x.value!r}, server {y.status} {y.value!r}")
    return wrong


def _intervals(result: QueueingResult) -> list[tuple[object, ...]]:
    return [
        (i.classification, i.replica, i.start, i.end, i.samples, i.max_waiting, i.max_running)
        for i in result.intervals
    ]


@pytest.mark.parametrize("step", [None, 120.0])
def test_queueing_agrees_with_prometheus(
    backfilled: tuple[Dataset, PrometheusSource], step: float | None
) -> None:
    dataset, server = backfilled
    local = DatasetSource(dataset, rules=Rules.PROMETHEUS_2)
    window = dataset.manifest.window.window()
    for deployment in dataset.manifest.deployments:
        offline = queueing(local, deployment, window, step=step)
        remote = queueing(server, deployment, window, step=step)
        assert offline.intervals, deployment.name
        assert _intervals(offline) == _intervals(remote), deployment.name
        for x, y in zip(offline.intervals, remote.intervals, strict=True):
            assert _close(x.mean_gpu_util, y.mean_gpu_util), (deployment.name, x, y)
        assert offline.peak_time == remote.peak_time
        assert offline.peak_replica == remote.peak_replica
        wrong = _disagreements(offline, remote)
        assert not wrong, f"{deployment.name}:\n" + "\n".join(wrong)
        assert any(m.ok for m in offline.measurements())


def test_gpu_readings_and_their_sample_times_agree_with_prometheus(
    backfilled: tuple[Dataset, PrometheusSource],
) -> None:
    # timestamp() of a selector: the server and the engine give each reading the time
    # of the GPU scrape it holds, to the millisecond, on a 30 s grid 30 s after the hour.
    dataset, server = backfilled
    local = DatasetSource(dataset, rules=Rules.PROMETHEUS_2)
    hour = dataset.manifest.window.window()
    late = Window(hour.start + timedelta(seconds=30), hour.end + timedelta(seconds=30))
    for deployment in dataset.manifest.deployments:
        selector = dcgm.GPU_UTIL.select(deployment.gpu_matchers)
        offline, remote = (
            gpu_per_replica(source, selector, KEYS, late, reach_ms=60_000.0)
            for source in (local, server)
        )
        assert (offline.interval_ms, offline.step_ms) == (remote.interval_ms, remote.step_ms)
        assert offline.replicas.keys() == remote.replicas.keys() != set()
        for name, (times, means) in offline.replicas.items():
            assert times.tolist() == remote.replicas[name][0].tolist(), name
            assert all(map(_close, means.tolist(), remote.replicas[name][1].tolist())), name
            # Each reading is a GPU scrape's own time, not a step of the grid.
            assert times.size, name
            assert not np.any(times % offline.step_ms == 0), name


def test_bottleneck_agrees_with_prometheus(backfilled: tuple[Dataset, PrometheusSource]) -> None:
    dataset, server = backfilled
    local = DatasetSource(dataset, rules=Rules.PROMETHEUS_2)
    window = dataset.manifest.window.window()
    for deployment in dataset.manifest.deployments:
        offline: BottleneckResult = bottleneck(local, deployment, window)
        remote = bottleneck(server, deployment, window)
        assert offline.classification == remote.classification, deployment.name
        assert offline.reason == remote.reason, deployment.name
        wrong = _disagreements(offline, remote)
        assert not wrong, f"{deployment.name}:\n" + "\n".join(wrong)
        assert any(m.ok for m in offline.measurements())
