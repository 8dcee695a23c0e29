"""The Reading's Measurements: values, no_data naming the missing families, partial answers,
provenance."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from inference_obs.deployment import Deployment
from inference_obs.errors import Annotation, QueryError
from inference_obs.metrics import builders as b, vllm
from inference_obs.query import Binary, label_replace
from inference_obs.reading.context import Reading, missing_families
from inference_obs.reading.measurement import Status
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


def _reading(source: DatasetSource, analysis: str) -> Reading:
    return Reading(source, DEPLOYMENT, WINDOW, analysis)


def test_value_unit_and_provenance(source: DatasetSource) -> None:
    expr = b.increase_total(vllm.GENERATION_TOKENS, DEPLOYMENT.matchers, WINDOW.seconds)
    m = _reading(source, "throughput").measure("output_tokens", expr, "tokens")
    # 2 tokens/s for 600 s, samples at both window ends: no extrapolation.
    assert (m.status, m.value, m.unit) == (Status.OK, 1200.0, "tokens")
    assert m.key == "A/throughput/output_tokens"
    assert m.provenance.promql == ('sum(increase(vllm:generation_tokens_total{pod=~"a-.*"}[10m]))',)
    assert (m.provenance.engine, m.provenance.rules) == ("dataset", "prometheus-2")


def test_missing_family_is_no_data_never_zero(source: DatasetSource) -> None:
    expr = b.increase_total(vllm.NUM_PREEMPTIONS, DEPLOYMENT.matchers, WINDOW.seconds)
    m = _reading(source, "cache").measure("preemptions", expr, "events")
    assert m.status is Status.NO_DATA
    assert m.value is None
    assert not m.ok
    assert "vllm:num_preemptions_total" in m.annotations[0].message


def test_the_missing_families_are_found_by_walking_the_query(source: DatasetSource) -> None:
    m, w = DEPLOYMENT.matchers, WINDOW.seconds
    # Tokens exist, preemptions and the TTFT histogram do not: only those two are named,
    # the histogram by its family name (probed through _count), in the order written.
    expr = b.increase_total(vllm.GENERATION_TOKENS, m, w) / b.increase_total(
        vllm.NUM_PREEMPTIONS, m, w
    ) + b.histogram_quantile_merged(vllm.TIME_TO_FIRST_TOKEN, 0.5, m, w)
    got = _reading(source, "t").measure("x", expr, "ratio")
    assert got.status is Status.NO_DATA
    assert got.annotations[-1].message == (
        "no series of vllm:num_preemptions_total, vllm:time_to_first_token_seconds for A"
    )
    assert missing_families(source, expr, WINDOW) == [
        "vllm:num_preemptions_total",
        "vllm:time_to_first_token_seconds",
    ]


def test_an_answer_the_server_marked_partial_makes_a_partial_measurement(
    source: DatasetSource,
) -> None:
    expr = b.increase_total(vllm.GENERATION_TOKENS, DEPLOYMENT.matchers, WINDOW.seconds)
    answer = source.instant(expr, WINDOW.end_s)
    marked = replace(
        answer,
        annotations=(Annotation("partial_response", "the server answered with partial data"),),
    )
    m = _reading(source, "throughput").measure("output_tokens", expr, "tokens", answer=marked)
    assert (m.status, m.value) == (Status.PARTIAL, 1200.0)
    assert m.ok
    assert m.annotations[0].kind == "partial_response"


def test_several_series_where_one_is_expected_is_refused(source: DatasetSource) -> None:
    one = b.increase_total(vllm.GENERATION_TOKENS, [], WINDOW.seconds, ("pod",))
    two = Binary("or", one, label_replace(one, "pod", "a-9", "pod", ".*"))
    with pytest.raises(QueryError, match="returned 2 series, expected 1"):
        _reading(source, "t").measure("x", two, "tokens")


def test_grouped_measure_answers_every_group_from_one_query(source: DatasetSource) -> None:
    by = ("pod",)
    expr = b.increase_total(vllm.GENERATION_TOKENS, DEPLOYMENT.matchers, WINDOW.seconds, by)
    here, absent = Labels({"pod": "a-0"}), Labels({"pod": "a-1"})
    statistics = {here: "output_tokens[a-0]", absent: "output_tokens[a-1]"}
    got = _reading(source, "throughput").measure_by(statistics, expr, by, "tokens")
    assert (got[here].value, got[here].key) == (1200.0, "A/throughput/output_tokens[a-0]")
    assert got[here].provenance.promql == (
        'sum by (pod) (increase(vllm:generation_tokens_total{pod=~"a-.*"}[10m]))',
    )
    assert got[absent].status is Status.NO_DATA
    assert "vllm:generation_tokens_total for A" in got[absent].annotations[0].message
