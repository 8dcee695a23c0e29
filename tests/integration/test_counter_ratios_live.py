"""Exact counter ratios over a restarted replica, from a real Prometheus.

The dataset of :mod:`tests.analyses.restarts` backfilled into Prometheus
2.42: the server sums the changes of the series that did not reset, the
restarted replica is read raw, and the ratios are the hand-worked ones
(and the offline ones).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inference_obs.analyses.counter_ratios import histogram_mean, histogram_share
from inference_obs.metrics import vllm
from inference_obs.source.dataset import SAMPLES
from inference_obs.source.dataset_source import DatasetSource
from inference_obs.source.prometheus import PrometheusSource
from tests.analyses.restarts import DEPLOYMENT, WINDOW, restarted_dataset
from tests.analyses.test_counter_ratios_restarts import RawReads
from tests.integration.servers import PrometheusFactory

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
    mean = histogram_mean(reads, DEPLOYMENT, WINDOW, FAMILY, analysis="t", statistic="m")
    share = histogram_share(server, DEPLOYMENT, WINDOW, FAMILY, 0.5, analysis="t", statistic="s")
    assert mean.value == pytest.approx(30 / 55, rel=1e-12)
    assert share.value == pytest.approx(32 / 55, rel=1e-12)
    assert {labels["pod"] for _, got in reads.reads for labels in got.labels} == {"a-1"}
    here = histogram_mean(offline, DEPLOYMENT, WINDOW, FAMILY, analysis="t", statistic="m")
    assert here.value == pytest.approx(mean.value, rel=1e-12)
