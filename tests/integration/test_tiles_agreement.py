"""Tiles reduced by a real server: Prometheus 2.42 and VictoriaMetrics 1.79 agree with the plan.

The hand-planned dataset of :mod:`tests.analyses.tiles_data` (no sample on a
tile edge, so closed and left-open ranges see the same tiles) is backfilled
into Prometheus with promtool, and imported into VictoriaMetrics a day back
under a namespace of its own (VM's retention counts from the wall clock).
Through either server, queueing per 60 s tile gives the planned classes,
the sampled shares the planned counts, and the boundary analysis its one
interval with PCIe read only there; through Prometheus every number equals
the offline one to 1e-9.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from inference_obs.analyses.boundaries.stages import boundaries
from inference_obs.analyses.queueing import QueueingResult, queueing
from inference_obs.deployment import Deployment
from inference_obs.engine.rules import Rules
from inference_obs.metrics import vllm
from inference_obs.reading.resolution import positive_share
from inference_obs.source.base import Source
from inference_obs.source.dataset.reader import SAMPLES
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.prometheus import PrometheusSource
from tests.analyses.tiles_data import (
    DEPLOYMENT,
    STEP,
    T0_CLASSES,
    tiles_dataset,
    tiles_series,
    tiles_window,
)
from tests.integration.servers import PrometheusFactory, VictoriaMetricsServer

pytestmark = pytest.mark.integration

RELATIVE = 1e-9
VM_NAMESPACE = "vm-tiles"


@pytest.fixture(scope="module")
def sources(
    tmp_path_factory: pytest.TempPathFactory, prometheus_factory: PrometheusFactory
) -> Iterator[tuple[DatasetSource, PrometheusSource]]:
    dataset = tiles_dataset(Path(tmp_path_factory.mktemp("tiles")))
    server = prometheus_factory((dataset.path / SAMPLES).read_text())
    yield DatasetSource(dataset, rules=Rules.PROMETHEUS_2), PrometheusSource(server.base_url)
    server.stop()


def _planned(source: Source, deployment: Deployment, start: datetime) -> QueueingResult:
    """Queueing per tile through ``source``, checked against the plan."""
    result = queueing(source, deployment, tiles_window(start), step=STEP)
    t0 = [i for i in result.intervals if i.replica.endswith("/t-0")]
    runs = [c for k, c in enumerate(T0_CLASSES) if k == 0 or c != T0_CLASSES[k - 1]]
    assert [i.classification.value for i in t0] == runs
    assert t0[3].mean_gpu_util == pytest.approx(316 / 6, rel=1e-12)  # sample-weighted
    return result


def _shares(source: Source, deployment: Deployment, start: datetime) -> None:
    window = tiles_window(start)
    waiting = vllm.NUM_REQUESTS_WAITING.select(deployment.matchers)
    running = vllm.NUM_REQUESTS_RUNNING.select(deployment.matchers)
    assert positive_share(source, waiting, window, STEP)[0] == pytest.approx(2 / 20, rel=1e-12)
    assert positive_share(source, running, window, STEP)[0] == pytest.approx(14 / 20, rel=1e-12)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=RELATIVE)


def test_prometheus_tiles_agree_with_the_plan_and_offline(
    sources: tuple[DatasetSource, PrometheusSource],
) -> None:
    offline, server = sources
    window = tiles_window()
    remote = _planned(server, DEPLOYMENT, window.start)
    local = _planned(offline, DEPLOYMENT, window.start)
    assert remote.intervals == local.intervals
    for a, b in zip(local.measurements(), remote.measurements(), strict=True):
        assert (a.key, a.status) == (b.key, b.status), (a, b)
        assert _close(a.value, b.value), (a, b)
    _shares(server, DEPLOYMENT, window.start)
    near, far = (boundaries(s, DEPLOYMENT, window, step=STEP) for s in (offline, server))
    assert near.intervals == far.intervals
    (interval,) = far.intervals
    assert interval.pcie_rx_bytes_per_second == 7_500.0
    assert near.evidence_promql == far.evidence_promql


def test_victoria_metrics_tiles_agree_with_the_plan(
    victoria_metrics: VictoriaMetricsServer,
) -> None:
    start = datetime.fromtimestamp((int(time.time()) - 86400) // 3600 * 3600, UTC)
    series = tiles_series(start, namespace=VM_NAMESPACE)
    victoria_metrics.import_series(
        [
            (
                {"__name__": s.name, **s.labels},
                list(zip(s.t_ms.tolist(), s.values.tolist(), strict=True)),
            )
            for s in series
        ]
    )
    deployment = DEPLOYMENT.model_copy(
        update={"selector": {"namespace": VM_NAMESPACE, "pod": "~t-.*"}}
    )
    server = PrometheusSource(victoria_metrics.base_url)
    result = _planned(server, deployment, start)
    assert result.peak_waiting.value == 3.0
    _shares(server, deployment, start)
    (interval,) = boundaries(server, deployment, tiles_window(start), step=STEP).intervals
    assert (interval.samples, interval.pcie_rx_bytes_per_second) == (2, 7_500.0)
