"""measure(): values, no_data that names the missing family, provenance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inference_obs.deployment import Deployment
from inference_obs.metrics import builders as b, vllm
from inference_obs.reading.measurement import Status, measure, measure_by
from inference_obs.samples import Labels, Series, Window
from inference_obs.source.dataset.manifest import Generator, Manifest, ManifestWindow
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset

WINDOW = Window.parse("2026-10-19T17:40+08:00", "10m")
DEPLOYMENT = Deployment(
    name="A",
    selector={"pod": "~a-.*"},
    hardware={"gpu_model": "NVIDIA H20", "gpus_per_replica": 8},
    engine={"name": "vllm"},
)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> DatasetSource:
    times = WINDOW.start_s + np.arange(0.0, 601.0, 60.0)
    series = [
        Series("vllm:generation_tokens_total", {"pod": "a-0"}, times, (times - times[0]) * 2.0)
    ]
    manifest = Manifest(
        title="test",
        synthetic=True,
        window=ManifestWindow(start=WINDOW.start, end=WINDOW.end),
        scrape_interval_seconds=60,
        deployments=(DEPLOYMENT,),
        generator=Generator(scenario="test", seed=1, version="0"),
    )
    path: Path = tmp_path_factory.mktemp("ds") / "d"
    return DatasetSource(write_dataset(path, manifest, series))


def test_value_unit_and_provenance(source: DatasetSource) -> None:
    expr = b.increase_total(vllm.GENERATION_TOKENS, DEPLOYMENT.matchers, WINDOW.seconds)
    m = measure(
        source,
        DEPLOYMENT,
        WINDOW,
        analysis="throughput",
        statistic="output_tokens",
        expr=expr,
        unit="tokens",
        families=[vllm.GENERATION_TOKENS],
        matchers=DEPLOYMENT.matchers,
    )
    # 2 tokens/s for 600 s, samples at both window ends: no extrapolation.
    assert (m.status, m.value, m.unit) == (Status.OK, 1200.0, "tokens")
    assert m.key == "A/throughput/output_tokens"
    assert m.provenance.promql == ('sum(increase(vllm:generation_tokens_total{pod=~"a-.*"}[10m]))',)
    assert (m.provenance.engine, m.provenance.rules) == ("dataset", "prometheus-2")


def test_missing_family_is_no_data_never_zero(source: DatasetSource) -> None:
    expr = b.increase_total(vllm.NUM_PREEMPTIONS, DEPLOYMENT.matchers, WINDOW.seconds)
    m = measure(
        source,
        DEPLOYMENT,
        WINDOW,
        analysis="cache",
        statistic="preemptions",
        expr=expr,
        unit="events",
        families=[vllm.NUM_PREEMPTIONS],
        matchers=DEPLOYMENT.matchers,
    )
    assert m.status is Status.NO_DATA
    assert m.value is None
    assert not m.ok
    assert "vllm:num_preemptions_total" in m.annotations[0].message


def test_grouped_measure_answers_every_group_from_one_query(source: DatasetSource) -> None:
    by = ("pod",)
    expr = b.increase_total(vllm.GENERATION_TOKENS, DEPLOYMENT.matchers, WINDOW.seconds, by)
    here, absent = Labels({"pod": "a-0"}), Labels({"pod": "a-1"})
    got = measure_by(
        source, DEPLOYMENT, WINDOW, analysis="throughput",
        statistics={here: "output_tokens[a-0]", absent: "output_tokens[a-1]"}, expr=expr,
        by=by, unit="tokens", families=[vllm.GENERATION_TOKENS], matchers=DEPLOYMENT.matchers,
    )  # fmt: skip
    assert (got[here].value, got[here].key) == (1200.0, "A/throughput/output_tokens[a-0]")
    assert got[here].provenance.promql == (
        'sum by (pod) (increase(vllm:generation_tokens_total{pod=~"a-.*"}[10m]))',
    )
    assert got[absent].status is Status.NO_DATA
    assert "vllm:generation_tokens_total for A" in got[absent].annotations[0].message
