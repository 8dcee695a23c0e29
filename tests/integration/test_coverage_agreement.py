"""Windows the data does not fill give the same coverage and rates offline and from Prometheus.

The bundled PRO 5000 vs H20 dataset over two hours of which it holds the last one, and
the same dataset with one H20 replica scraped from half-way only
(:mod:`tests.analyses.late_pod`), each backfilled into a real Prometheus 2.42:
``collection`` (the covered spans), ``throughput`` and ``cost`` give the same
Measurements, by key, as the dataset's own engine, and the rates are those the data
holds, not diluted by the time without it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from inference_obs.analyses.collection import collection
from inference_obs.analyses.cost import cost
from inference_obs.analyses.throughput import ThroughputResult, throughput
from inference_obs.deployment import Deployment
from inference_obs.engine.rules import Rules
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Window
from inference_obs.source.base import Source
from inference_obs.source.dataset import Dataset
from inference_obs.source.dataset.reader import SAMPLES, read_dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.prometheus import PrometheusSource
from tests.analyses.late_pod import DATASET, LATE, generated, late_dataset, long_window
from tests.integration.servers import PrometheusFactory
from tests.integration.test_analyses_agreement import _disagreements

pytestmark = pytest.mark.integration

Analysis = Callable[[Source, Deployment, Window], AnalysisResult]


def _cost(source: Source, deployment: Deployment, window: Window) -> AnalysisResult:
    return cost(source, deployment.with_facts(gpu_hour_price=2.5), window)


ANALYSES: dict[str, Analysis] = {"collection": collection, "throughput": throughput, "cost": _cost}


def _agree(dataset: Dataset, server: PrometheusSource, window: Window) -> dict[str, Source]:
    """Both sources, after checking every Measurement of every analysis agrees."""
    local = DatasetSource(dataset, rules=Rules.PROMETHEUS_2)
    wrong: list[str] = []
    for deployment in dataset.manifest.deployments:
        for name, analysis in ANALYSES.items():
            offline = analysis(local, deployment, window)
            remote = analysis(server, deployment, window)
            wrong += [f"{name}: {line}" for line in _disagreements(offline, remote)]
    assert not wrong, "\n".join(wrong)
    return {"offline": local, "server": server}


def _h20(dataset: Dataset) -> Deployment:
    (found,) = [d for d in dataset.manifest.deployments if d.name == "H20"]
    return found


def test_a_window_longer_than_the_data(prometheus_factory: PrometheusFactory) -> None:
    dataset = read_dataset(DATASET)
    process = prometheus_factory((DATASET / SAMPLES).read_bytes().decode("utf-8"))
    server = PrometheusSource(process.base_url)
    hour = dataset.manifest.window.window()
    for source in _agree(dataset, server, long_window()).values():
        long = throughput(source, _h20(dataset), long_window())
        short = throughput(source, _h20(dataset), hour)
        assert isinstance(long, ThroughputResult)
        # The data holds one hour of the two: the hour's rate, said to be over that span.
        rate = long.output_tokens_per_second
        assert rate.value == pytest.approx(short.output_tokens_per_second.value, rel=0.01)
        assert any("50% of the 2 h window" in a.message for a in rate.annotations)
        covered = collection(source, _h20(dataset), long_window()).covered_share
        assert covered.value == pytest.approx(0.5, abs=0.01)
    process.stop()


def test_a_pod_that_starts_half_way(prometheus_factory: PrometheusFactory, tmp_path: Path) -> None:
    dataset = late_dataset(tmp_path)
    process = prometheus_factory((dataset.path / SAMPLES).read_bytes().decode("utf-8"))
    server = PrometheusSource(process.base_url)
    window = dataset.manifest.window.window()
    # The late replica's tokens/s from its first to its last counter sample, from
    # requests.csv: what increase() over the span its samples cover gives per second.
    (counter,) = [
        s
        for s in dataset.samples
        if s.name == "vllm:generation_tokens_total" and s.labels["pod"] == LATE[0]
    ]
    first, last = counter.timestamps[0] - window.start_s, counter.timestamps[-1] - window.start_s
    truth = generated((LATE[1],), first, last) / (last - first)
    for source in _agree(dataset, server, window).values():
        result = throughput(source, _h20(dataset), window)
        # Over its own half hour, not diluted by the half hour it was absent.
        assert result.per_replica[LATE[0]][0].value == pytest.approx(truth, rel=0.01)
    process.stop()
