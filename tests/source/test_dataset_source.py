"""DatasetSource: every Source method on a small hand-made dataset, with known answers."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference_obs.engine.rules import Rules
from inference_obs.errors import ConfigurationError, DatasetError, NotSupportedOffline, QueryError
from inference_obs.query import (
    Matcher,
    Number,
    Selector,
    histogram_quantile,
    increase,
    label_replace,
    max_over_time,
    to_promql,
)
from inference_obs.samples import Labels, Series, Vector, Window
from inference_obs.source.base import EngineInfo, Metadata, Source
from inference_obs.source.dataset.manifest import Manifest
from inference_obs.source.dataset.reader import Dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset

START = 1_792_403_200.0  # 2026-10-19T09:40:00Z
MANIFEST: dict[str, Any] = {
    "title": "A hand-made dataset for DatasetSource",
    "synthetic": True,
    "window": {"start": "2026-10-19T09:40:00Z", "end": "2026-10-19T09:42:00Z"},
    "scrape_interval_seconds": 15,
    "deployments": [
        {
            "name": "PRO",
            "selector": {"pod": "~pro-.*"},
            "hardware": {"gpu_model": "NVIDIA H20", "gpus_per_replica": 8},
            "engine": {"name": "vllm", "version": "0.8.5"},
        }
    ],
    "methodology": ["Written by hand for the tests."],
    "generator": {"scenario": "hand", "seed": 0, "version": "0.1.0"},
}
TIMES = START + 15.0 * np.arange(9)  # 09:40:00 .. 09:42:00, every 15 s
RUNNING = "vllm:num_requests_running"
SUCCESS = "vllm:request_success_total"
E2E = "vllm:e2e_request_latency_seconds"


def _series() -> list[Series]:
    return [
        Series(RUNNING, {"pod": "pro-0"}, TIMES, [0, 1, 2, 3, 4, 5, 6, 7, 8]),
        Series(RUNNING, {"pod": "pro-1"}, TIMES[:4], [10, 20, 30, 40]),
        Series(SUCCESS, {"pod": "pro-0", "finished_reason": "stop"}, TIMES, 10.0 * np.arange(9)),
        Series(f"{E2E}_bucket", {"pod": "pro-0", "le": "1.0"}, TIMES, 1.0 * np.arange(9)),
        Series(f"{E2E}_bucket", {"pod": "pro-0", "le": "+Inf"}, TIMES, 2.0 * np.arange(9)),
        Series(f"{E2E}_sum", {"pod": "pro-0"}, TIMES, 1.5 * np.arange(9)),
        Series("custom_not_in_catalogue", {"pod": "other"}, [START + 300.0], [1.0]),
    ]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    path = tmp_path_factory.mktemp("source") / "ds"
    return write_dataset(path, Manifest.model_validate(MANIFEST), _series())


@pytest.fixture(scope="module")
def source(dataset: Dataset) -> DatasetSource:
    return DatasetSource(dataset)


def _window(start: float, seconds: float) -> Window:
    return Window.parse(datetime.fromtimestamp(start, UTC), seconds)


def _vector(value: Vector | float) -> dict[Labels, float]:
    assert isinstance(value, Vector)
    return value.as_dict()


# --- construction and info ------------------------------------------------------


def test_is_a_source_with_dataset_info(source: DatasetSource) -> None:
    assert isinstance(source, Source)
    assert source.info() == EngineInfo(kind="dataset", version=None, rules=Rules.PROMETHEUS_2)
    vm = DatasetSource(source.dataset, rules=Rules.VICTORIAMETRICS)
    assert vm.info().rules is Rules.VICTORIAMETRICS


def test_reads_a_path(dataset: Dataset) -> None:
    from_path = DatasetSource(dataset.path)
    assert from_path.dataset.manifest == dataset.manifest
    np.testing.assert_array_equal(from_path.samples.values, dataset.samples.values)


def test_refuses_a_missing_dataset_and_bad_rules(tmp_path: Path, dataset: Dataset) -> None:
    with pytest.raises(DatasetError, match="no dataset directory"):
        DatasetSource(tmp_path / "nothing")
    with pytest.raises(ConfigurationError, match=r"rules must be one of Rules\.PROMETHEUS_2, "):
        DatasetSource(dataset, rules="prometheus-2")  # type: ignore[arg-type]


# --- instant ----------------------------------------------------------------------


def test_instant_selector_takes_newest_sample(source: DatasetSource) -> None:
    answer = source.instant(Selector(RUNNING), START + 50.0)
    assert answer.promql == RUNNING
    assert answer.at == START + 50.0
    assert _vector(answer.value) == {
        Labels({"__name__": RUNNING, "pod": "pro-0"}): 3.0,
        Labels({"__name__": RUNNING, "pod": "pro-1"}): 40.0,
    }


def test_instant_range_function_and_aggregation(source: DatasetSource) -> None:
    expr = increase(Selector(SUCCESS).over(120)).sum(by=("finished_reason",))
    answer = source.instant(expr, START + 120.0)
    assert answer.promql == to_promql(expr)
    # 0 .. 80 over exactly the 120 s window: no extrapolation needed.
    assert _vector(answer.value) == {Labels({"finished_reason": "stop"}): 80.0}


def test_instant_no_data_is_an_empty_vector_never_zero(source: DatasetSource) -> None:
    for expr in (
        Selector(RUNNING, (Matcher.equal("pod", "absent"),)),
        increase(Selector("vllm:num_preemptions_total").over(60)).sum(),
    ):
        value = source.instant(expr, START + 60.0).value
        assert isinstance(value, Vector)
        assert len(value) == 0
    # Past the 5 minute lookback every series is gone.
    assert len(_vector(source.instant(Selector(RUNNING), START + 1000.0).value)) == 0


def test_instant_scalar_and_annotations(source: DatasetSource) -> None:
    answer = source.instant(Number(2.5), START)
    assert answer.value == 2.5
    assert answer.annotations == ()
    quantile = histogram_quantile(
        0.5, increase(Selector(f"{E2E}_bucket").over(120)).sum(by=("le",))
    )
    result = source.instant(quantile, START + 120.0)
    # 80 of 160 observations lie below 1 s: the median is the bucket's upper bound.
    assert _vector(result.value) == {Labels(): 1.0}
    assert result.annotations == _vector_annotations(result.value)


def _vector_annotations(value: Vector | float) -> tuple[object, ...]:
    assert isinstance(value, Vector)
    return value.annotations


def test_instant_refuses_bad_times_and_unsupported_nodes(dataset: Dataset) -> None:
    source = DatasetSource(dataset)
    for at in (math.nan, math.inf, "soon"):
        with pytest.raises(ConfigurationError, match=r"evaluation time .* is not a"):
            source.instant(Selector(RUNNING), at)  # type: ignore[arg-type]
    quantile = histogram_quantile(0.5, increase(Selector(f"{E2E}_bucket").over(60)).sum(by=("le",)))
    with pytest.raises(NotSupportedOffline, match="VictoriaMetrics"):
        DatasetSource(dataset, rules=Rules.VICTORIAMETRICS).instant(quantile, START + 60.0)


# --- range ------------------------------------------------------------------------


def test_range_is_step_aligned_from_start(source: DatasetSource) -> None:
    # 100 s at 30 s steps: evaluated at +0, +30, +60, +90 (not at the end, +100).
    matrix = source.range(Selector(RUNNING), _window(START, 100.0), 30.0)
    assert matrix.promql == RUNNING
    assert matrix.labels == (
        Labels({"__name__": RUNNING, "pod": "pro-0"}),
        Labels({"__name__": RUNNING, "pod": "pro-1"}),
    )
    base = round(START * 1000)
    assert matrix.offsets.tolist() == [0, 4, 8]
    assert matrix.t_ms.tolist() == [base + k * 30_000 for k in (0, 1, 2, 3)] * 2
    assert matrix.values.tolist() == [0.0, 2.0, 4.0, 6.0, 10.0, 30.0, 40.0, 40.0]


def test_range_includes_the_end_when_a_step_lands_on_it(source: DatasetSource) -> None:
    matrix = source.range(
        Selector(RUNNING, (Matcher.equal("pod", "pro-0"),)), _window(START, 60), 30
    )
    assert matrix.t_ms.tolist() == [round(START * 1000) + k * 30_000 for k in (0, 1, 2)]


def test_range_agrees_with_instant_at_every_step(source: DatasetSource) -> None:
    expr = max_over_time(Selector(RUNNING).over(30)).sum()
    window = _window(START - 30.0, 400.0)
    matrix = source.range(expr, window, 15.0)
    assert len(matrix) == 1
    for t, v in zip(matrix.t_ms.tolist(), matrix.values.tolist(), strict=True):
        assert _vector(source.instant(expr, t / 1000).value) == {Labels(): v}
    # A step without data has no point (never a zero): the last sample (+120 s)
    # stays in the 30 s range until +150 s; the first is at +0 s.
    assert matrix.t_ms.max() == round((START + 150.0) * 1000)
    assert matrix.t_ms.min() == round(START * 1000)


def test_range_of_a_scalar_is_one_unlabelled_series(source: DatasetSource) -> None:
    matrix = source.range(Number(1.0), _window(START, 30.0), 10.0)
    assert matrix.labels == (Labels(),)
    assert matrix.values.tolist() == [1.0] * 4


def test_range_without_data_is_empty(source: DatasetSource) -> None:
    matrix = source.range(Selector("vllm:num_requests_waiting"), _window(START, 60.0), 15.0)
    assert len(matrix) == 0
    assert matrix.offsets.tolist() == [0]
    assert matrix.t_ms.size == matrix.values.size == 0


def test_range_refuses_two_values_for_one_label_set_at_a_step(source: DatasetSource) -> None:
    # Both pods' series renamed to one label set: a range answer cannot hold them.
    same = label_replace(Selector(RUNNING), "pod", "same", "pod", ".*")
    with pytest.raises(QueryError, match=r"two values for one label set at 1792403200\.0 s"):
        source.range(same, _window(START, 60.0), 15.0)
    alone = label_replace(
        Selector(RUNNING, (Matcher.equal("pod", "pro-0"),)), "pod", "x", "pod", ".*"
    )
    assert source.range(alone, _window(START, 60.0), 15.0).values.tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (0.0, "range query step 0.0 s is below 1 ms"),
        (-15.0, "range query step -15.0 s is below 1 ms"),
        (0.0001, "range query step 0.0001 s is below 1 ms"),
        (math.nan, "range query step nan is not a finite number of seconds"),
    ],
)
def test_range_refuses_bad_steps(source: DatasetSource, step: float, message: str) -> None:
    # A step is an argument of the request, not part of the query.
    with pytest.raises(ConfigurationError, match=message):
        source.range(Selector(RUNNING), _window(START, 60.0), step)


# --- raw, series, labels ----------------------------------------------------------


def test_raw_includes_both_window_ends(source: DatasetSource) -> None:
    raw = source.raw(Selector(RUNNING), _window(START + 15.0, 30.0))
    assert raw.names == (RUNNING, RUNNING)
    assert raw.labels == (Labels({"pod": "pro-0"}), Labels({"pod": "pro-1"}))
    base = round(START * 1000)
    assert raw.t_ms.tolist() == [base + 15_000, base + 30_000, base + 45_000] * 2
    assert raw.values.tolist() == [1.0, 2.0, 3.0, 20.0, 30.0, 40.0]


def test_raw_selects_with_matchers_and_drops_empty_series(source: DatasetSource) -> None:
    later = _window(START + 60.0, 60.0)  # pro-1 stopped at +45 s
    raw = source.raw(Selector(None, (Matcher.regex("__name__", "vllm:num.*"),)), later)
    assert raw.labels == (Labels({"pod": "pro-0"}),)
    assert raw.values.tolist() == [4.0, 5.0, 6.0, 7.0, 8.0]
    none = source.raw(Selector(RUNNING, (Matcher.not_regex("pod", "pro-.*"),)), later)
    assert len(none) == 0
    assert none.offsets.tolist() == [0]


def test_raw_refuses_offset_and_at(source: DatasetSource) -> None:
    with pytest.raises(QueryError, match="offset or @"):
        source.raw(Selector(RUNNING, offset=60.0), _window(START, 60.0))


def test_series_are_sorted_label_sets_with_name(source: DatasetSource) -> None:
    found = source.series(Selector(None, (Matcher.equal("pod", "pro-0"),)), _window(START, 120))
    assert [one["__name__"] for one in found] == [
        f"{E2E}_bucket",
        f"{E2E}_bucket",
        f"{E2E}_sum",
        RUNNING,
        SUCCESS,
    ]
    assert [one.get("le") for one in found[:2]] == ["+Inf", "1.0"]
    assert source.series(Selector(RUNNING), _window(START + 500.0, 60)) == ()


def test_label_names_and_values_in_the_window(source: DatasetSource) -> None:
    window = _window(START, 120.0)
    assert source.label_names(window) == ("__name__", "finished_reason", "le", "pod")
    assert source.label_values("pod", window) == ("pro-0", "pro-1")
    assert source.label_values("__name__", window) == (
        f"{E2E}_bucket",
        f"{E2E}_sum",
        RUNNING,
        SUCCESS,
    )
    assert source.label_values("nowhere", window) == ()
    late = _window(START + 200.0, 200.0)  # only the custom metric, at +300 s
    assert source.label_values("__name__", late) == ("custom_not_in_catalogue",)
    assert source.label_names(_window(START + 1000.0, 10.0)) == ()


def test_a_series_is_present_by_a_sample_inside_the_window_edges_included(
    source: DatasetSource,
) -> None:
    # pro-1 has samples at +0, +15, +30, +45 s only; pro-0 every 15 s to +120 s.
    assert source.label_values("pod", _window(START + 45.0, 0.5)) == ("pro-0", "pro-1")
    assert source.label_values("pod", _window(START + 44.5, 0.5)) == ("pro-0", "pro-1")
    assert source.label_values("pod", _window(START + 46.0, 13.0)) == ()  # between scrapes
    assert source.label_values("pod", _window(START + 46.0, 14.0)) == ("pro-0",)  # +60 s
    # The custom metric's one sample (+300 s): samples before and after a window are not in it.
    assert source.label_values("__name__", _window(START + 121.0, 178.0)) == ()
    assert source.label_names(_window(START + 300.0, 0.5)) == ("__name__", "pod")


def test_series_present_in_any_window_are_those_with_a_sample_inside(tmp_path: Path) -> None:
    # Series with gaps: many windows lie between two samples of a series, inside its span
    # but with no sample of it. The expected answer is read off each series' own times.
    rng = np.random.default_rng(5)
    series = []
    for k in range(40):
        times = np.sort(rng.choice(np.arange(0, 600), size=int(rng.integers(1, 12)), replace=False))
        series.append(Series(RUNNING, {"gpu": f"g{k:02d}"}, START + 1.0 * times, times * 0.0))
    source = DatasetSource(
        write_dataset(tmp_path / "gaps", Manifest.model_validate(MANIFEST), series)
    )
    for _ in range(300):
        lo = float(rng.integers(-20, 620))
        seconds = float(rng.choice([0.5, 1.0, 3.0, 17.0, 90.0, 700.0]))
        expected = tuple(
            s.labels["gpu"]
            for s in series
            if np.any((s.timestamps >= START + lo) & (s.timestamps <= START + lo + seconds))
        )
        assert source.label_values("gpu", _window(START + lo, seconds)) == expected, (lo, seconds)


# --- metadata ---------------------------------------------------------------------


def test_metadata_from_the_catalogue(source: DatasetSource) -> None:
    everything = source.metadata()
    assert [m.metric for m in everything] == [E2E, RUNNING, SUCCESS]
    e2e = source.metadata(E2E)
    assert len(e2e) == 1
    assert e2e[0].type == "histogram"
    assert e2e[0].unit == "seconds"
    assert e2e[0].help
    assert source.metadata(SUCCESS)[0] == Metadata(
        SUCCESS, "counter", everything[2].help, everything[2].unit
    )


def test_metadata_of_absent_or_unknown_metrics_is_empty(source: DatasetSource) -> None:
    assert source.metadata("vllm:num_requests_waiting") == ()  # in the catalogue, not the data
    assert source.metadata("custom_not_in_catalogue") == ()  # in the data, not the catalogue
    assert source.metadata(f"{E2E}_bucket") == ()  # a histogram goes by its family name
