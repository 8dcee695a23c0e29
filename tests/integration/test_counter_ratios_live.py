"""Exact counter ratios over a restarted replica, from a real Prometheus.

The dataset of :mod:`tests.analyses.restarts` backfilled into Prometheus
2.42, and imported into VictoriaMetrics 1.79 (whose ranges leave their start
open): the server sums the changes of the series that did not reset, only
the restarted replica is read raw, and the ratios are the hand-worked ones
(and the offline ones).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from inference_obs.metrics import vllm
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import histogram_mean, histogram_share
from inference_obs.samples import Window
from inference_obs.source.dataset.reader import SAMPLES
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.prometheus import PrometheusSource
from tests.analyses.restarts import DEPLOYMENT, WINDOW, restarted_dataset, restarted_series
from tests.analyses.test_counter_ratios_restarts import RawReads
from tests.integration.servers import PrometheusFactory, VictoriaMetricsServer

pytestmark = pytest.mark.integration

FAMILY = vllm.REQUEST_QUEUE_TIME


@pytest.fixture(scope="module")
def sources(
    tmp_path_factory: pytest.TempPathFactory, prometheus_factory: PrometheusFactory
) -> Iterator[tuple[DatasetSource, PrometheusSource]]:
    dataset = restarted_dataset(Path(tmp_path_factory.mktemp("restarts")))
    server = prometheus_factory((dataset.path / SAMPLES).read_text())
    yield DatasetSource(dataset), PrometheusSource(server.base_url)
    server.stop()


def test_mean_and_share_match_the_hand_worked_values(
    sources: tuple[DatasetSource, PrometheusSource],
) -> None:
    offline, server = sources
    reads = RawReads(server)
    mean = histogram_mean(Reading(reads, DEPLOYMENT, WINDOW, "t"), FAMILY, "m")
    share = histogram_share(Reading(server, DEPLOYMENT, WINDOW, "t"), FAMILY, 0.5, "s")
    assert mean.value == pytest.approx(30 / 55, rel=1e-12)
    assert share.value == pytest.approx(32 / 55, rel=1e-12)
    assert {labels["pod"] for _, got in reads.reads for labels in got.labels} == {"a-1"}
    here = histogram_mean(Reading(offline, DEPLOYMENT, WINDOW, "t"), FAMILY, "m")
    assert here.value == pytest.approx(mean.value, rel=1e-12)


def test_victoria_metrics_gives_the_hand_worked_values(
    victoria_metrics: VictoriaMetricsServer,
) -> None:
    # VM's retention counts from now: the same samples, a day back, under pod
    # names of their own (the session shares one VM).
    start = (int(time.time()) - 86400) // 60 * 60
    window = Window.parse(datetime.fromtimestamp(start, UTC).isoformat(), "4m")
    victoria_metrics.import_series(
        [
            (
                {"__name__": s.name, **s.labels},
                list(zip(s.t_ms.tolist(), s.values.tolist(), strict=True)),
            )
            for s in restarted_series(window, prefix="vm-")
        ]
    )
    deployment = DEPLOYMENT.model_copy(update={"selector": {"pod": "~vm-a-.*"}})
    server = PrometheusSource(victoria_metrics.base_url)
    reads = RawReads(server)
    mean = histogram_mean(Reading(reads, deployment, window, "t"), FAMILY, "m")
    share = histogram_share(Reading(server, deployment, window, "t"), FAMILY, 0.5, "s")
    assert mean.value == pytest.approx(30 / 55, rel=1e-12)
    assert share.value == pytest.approx(32 / 55, rel=1e-12)
    assert {labels["pod"] for _, got in reads.reads for labels in got.labels} == {"vm-a-1"}
