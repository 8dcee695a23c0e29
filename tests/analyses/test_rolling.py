"""rolling_quantiles(): rolling TTFT quantiles on the bundled PRO 5000 vs H20 data.

The buckets each point carries are checked against the dataset's ``requests.csv`` (the
simulator's ground truth), never against the code under test.
"""

from __future__ import annotations

import html
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference_obs.analyses.rolling import (
    RollingPoint,
    RollingQuantiles,
    RollingSettings,
    rolling_expr,
    rolling_quantiles,
)
from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError, QueryError
from inference_obs.metrics import builders, vllm
from inference_obs.samples import Vector, Window
from inference_obs.source.dataset.source import DatasetSource
from tests.analyses.ground_truth import requests_of, scrapes, true_quantile

BUNDLED = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"


@pytest.fixture(scope="module")
def window(source: DatasetSource) -> Window:
    edges = source.dataset.manifest.window
    return Window(edges.start, edges.end)


def _deployment(source: DatasetSource, name: str) -> Deployment:
    return next(d for d in source.dataset.manifest.deployments if d.name == name)


@pytest.fixture(scope="module")
def pro(source: DatasetSource, window: Window) -> RollingQuantiles:
    return rolling_quantiles(source, _deployment(source, "PRO"), window)


def test_one_point_per_step_inside_window(pro: RollingQuantiles, window: Window) -> None:
    assert [s.quantile for s in pro.series] == [0.5, 0.95, 0.99]
    for s in pro.series:
        assert s.t.size == s.values.size
        assert s.t.size >= int(window.seconds / pro.every) - 3  # rate() needs two samples
        assert np.all((s.t >= window.start_s) & (s.t <= window.end_s))
        assert np.all(np.diff(s.t) == pro.every)
        assert np.all(np.mod(s.t - window.start_s, pro.every) == 0)
        assert s.t[-1] == window.end_s


def test_values_non_negative_and_ordered(pro: RollingQuantiles) -> None:
    p50, p95, p99 = pro.series
    for s in pro.series:
        assert np.all(np.isfinite(s.values))
        assert np.all(s.values >= 0)
    common = np.intersect1d(np.intersect1d(p50.t, p95.t), p99.t)
    assert common.size
    pick = [s.values[np.isin(s.t, common)] for s in (p50, p95, p99)]
    assert np.all(pick[0] <= pick[1] + 1e-12)
    assert np.all(pick[1] <= pick[2] + 1e-12)


def test_rolling_p95_peaks_far_above_whole_window_p95(
    source: DatasetSource, window: Window, pro: RollingQuantiles
) -> None:
    deployment = _deployment(source, "PRO")
    expr = builders.histogram_quantile_merged(
        vllm.TIME_TO_FIRST_TOKEN, 0.95, deployment.matchers, window.seconds
    )
    whole = source.instant(expr, window.end_s).value
    assert isinstance(whole, Vector)
    hourly = float(whole.values[0])
    assert float(pro.get(0.95).values.max()) > 2 * hourly


def _true_quantile_at(
    source: DatasetSource, window: Window, result: RollingQuantiles, t: float, q: float
) -> float:
    """The true ``q``-quantile of the TTFTs the rolling point at ``t`` (unix s) counted.

    rate(h_bucket[5m]) at ``t`` reads the scrapes in [t - 300, t] (the dataset follows
    Prometheus 2 rules: a closed range) and extrapolates the increase between the first and
    the last of them; every bucket of the one replica is scraped together, so extrapolation
    scales them all alike and the bucket holding the quantile is that of the requests
    observed between those two scrapes. vLLM observes TTFT at a request's first token
    (aborted requests included), so these are the requests whose ``first_token`` lies in
    (first scrape, last scrape].
    """
    assert source.rules.value == "prometheus-2"
    dep = _deployment(source, "PRO")
    (replica,) = dep.replicas  # one replica: no per-replica extrapolation factors to merge
    (offsets,) = scrapes(source, dep, window)
    end = t - window.start_s
    seen = offsets[(offsets >= end - result.length) & (offsets <= end)]
    requests = requests_of(source)
    rows = requests[(requests["replica"] == replica) & requests["ttft"].notna()]
    counted = (rows["first_token"] > seen[0]) & (rows["first_token"] <= seen[-1])
    return true_quantile(rows.loc[counted, "ttft"].to_numpy(dtype=np.float64), q)


@pytest.mark.parametrize("q", [0.5, 0.95, 0.99])
def test_each_points_bucket_holds_the_true_quantile(
    source: DatasetSource, window: Window, pro: RollingQuantiles, q: float
) -> None:
    points = pro.get(q).points()
    assert len(points) >= 55
    for p in points:
        truth = _true_quantile_at(source, window, pro, p.t, q)
        # Buckets are (lower, upper]: the true quantile lies in the one the point names.
        assert p.lower < truth <= p.upper, (p, truth)
        assert p.lower <= p.value <= p.upper


def test_the_1824_spike_is_the_40_to_80_s_bucket_not_78_s(
    source: DatasetSource, window: Window, pro: RollingQuantiles
) -> None:
    # 15 requests arriving at 18:23:44 (+08:00) got their first token at 18:24:41 after 51.4
    # to 56.6 s (requests.csv), the P95 and P99 of the four 5-minute intervals holding them
    # 56.5-56.6 s; the rolling P99 interpolates about 78 s, above every one of them. Their
    # bucket, [40, 80] s, is what is known.
    spike = [datetime(2026, 10, 19, 18, m, tzinfo=window.start.tzinfo) for m in (26, 27, 28, 29)]
    for q in (0.95, 0.99):
        by_time = {p.t: p for p in pro.get(q).points()}
        for moment in spike:
            p = by_time[moment.timestamp()]
            assert (p.lower, p.upper) == (40.0, 80.0)
            truth = _true_quantile_at(source, window, pro, p.t, q)
            assert 56.5 < truth < 56.61
    p99 = {p.t: p for p in pro.get(0.99).points()}
    assert all(p99[m.timestamp()].value > 75.0 for m in spike)  # the interpolation artefact


def test_points_are_typed_and_a_lowest_bucket_reads_at_most_upper(pro: RollingQuantiles) -> None:
    points = pro.get(0.5).points()
    assert all(isinstance(p, RollingPoint) for p in points)
    # PRO's median TTFT sits in the lowest bucket (requests.csv: about 0.1 s) most of the hour.
    lowest = [p for p in points if p.lowest_bucket]
    assert len(lowest) > len(points) / 2
    assert all(p.lower == 0.0 and p.bounds.upper == p.upper for p in lowest)


def test_promql_uses_rate_and_merged_buckets(pro: RollingQuantiles) -> None:
    assert len(pro.promql) == 3
    for text in pro.promql:
        assert text.startswith("histogram_quantile(")
        assert "sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{" in text
        assert "[5m]" in text
    # The bounds come from the same merged bucket rates, asked once for every quantile.
    assert pro.promql[0].removeprefix("histogram_quantile(0.5, ").removesuffix(")") == (
        pro.buckets_promql
    )


def test_caveats_name_window_p95_and_request_weighting(pro: RollingQuantiles) -> None:
    text = " ".join(pro.caveats)
    assert "not the whole-window P95" in text
    assert "request-weighted" in text


def test_to_frame_is_long_and_timezone_aware(pro: RollingQuantiles, window: Window) -> None:
    frame = pro.to_frame()
    assert list(frame.columns) == ["time", "quantile", "value", "lower", "upper"]
    assert len(frame) == sum(s.t.size for s in pro.series)
    assert set(frame["quantile"]) == {0.5, 0.95, 0.99}
    first = frame["time"].iloc[0].to_pydatetime()
    assert first.utcoffset() == window.start.utcoffset()


def test_result_is_frozen(pro: RollingQuantiles) -> None:
    with pytest.raises(ValueError, match="frozen"):
        pro.every = 1.0  # type: ignore[misc]


def test_absent_family_gives_empty_series(source: DatasetSource, window: Window) -> None:
    deployment = _deployment(source, "PRO").model_copy(update={"selector": {"pod": "nomatch"}})
    result = rolling_quantiles(source, deployment, window, quantiles=(0.5,))
    assert result.series[0].t.size == 0
    assert result.to_frame().empty


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("quantiles", (1.5,)),
        ("quantiles", ()),
        ("every", 0.0),
        ("every", math.inf),
        ("length", -300.0),
        ("family", vllm.NUM_REQUESTS_RUNNING),
        ("family", "vllm:time_to_first_token_seconds_bucket"),
        ("family", "vllm:no_such_family"),
        ("window_s", 60.0),
    ],
)
def test_bad_settings_raise_a_configuration_error_naming_them(
    source: DatasetSource, window: Window, setting: str, value: object
) -> None:
    bad: dict[str, Any] = {setting: value}
    with pytest.raises(ConfigurationError, match=f"rolling_quantiles\\.{setting}"):
        rolling_quantiles(source, _deployment(source, "PRO"), window, **bad)


def test_bad_quantile_refused_by_the_expression_too(source: DatasetSource) -> None:
    with pytest.raises(QueryError, match=r"quantile 1\.5"):
        rolling_expr(vllm.TIME_TO_FIRST_TOKEN, 1.5, _deployment(source, "PRO"), 300.0)


def test_settings_defaults_are_the_former_keyword_defaults() -> None:
    # Before the settings model: family=TIME_TO_FIRST_TOKEN, quantiles=(0.5, 0.95, 0.99),
    # every=60.0, length=300.0; the report runs it with these.
    assert RollingSettings().model_dump() == {
        "family": vllm.TIME_TO_FIRST_TOKEN.name,
        "quantiles": (0.5, 0.95, 0.99),
        "every": 60.0,
        "length": 300.0,
    }
    assert rolling_quantiles.settings is RollingSettings


def test_settings_from_text_as_the_command_line_gives_them() -> None:
    chosen = rolling_quantiles.configure(
        {"family": "vllm:e2e_request_latency_seconds", "quantiles": "0.5, 0.9", "every": "30"}
    )
    assert chosen.quantiles == (0.5, 0.9)
    assert chosen.every == 30.0
    assert chosen.family == vllm.E2E_REQUEST_LATENCY.name


def test_another_family_by_its_family_object(source: DatasetSource, window: Window) -> None:
    d = _deployment(source, "PRO")
    result = rolling_quantiles(source, d, window, family=vllm.E2E_REQUEST_LATENCY, quantiles=(0.9,))
    assert result.family == vllm.E2E_REQUEST_LATENCY.name
    assert result.unit == "seconds"
    (series,) = result.series
    assert "rate(vllm:e2e_request_latency_seconds_bucket{" in series.promql
    assert series.t.size > 0
    # The same numbers as the query the series names, asked directly.
    matrix = source.range(rolling_expr(vllm.E2E_REQUEST_LATENCY, 0.9, d, 300.0), window, 60.0)
    kept = np.isfinite(matrix.values)
    assert np.array_equal(series.values, matrix.values[kept])


def test_table_shows_each_series_query(pro: RollingQuantiles) -> None:
    table = pro._repr_html_()
    assert table.count("<tr>") == 1 + len(pro.series)
    for s in pro.series:
        assert html.escape(s.promql) in table


def test_table_shows_the_highest_point_with_its_bucket(pro: RollingQuantiles) -> None:
    # PRO's highest rolling P99 (18:26, requests.csv: those requests waited at most 56.6 s)
    # lies in the (40, 80] s bucket; the table shows that bucket beside the interpolation.
    table = pro._repr_html_()
    (p99_row,) = [row for row in table.split("<tr>") if row.startswith("<td>0.99</td>")]
    assert "[40, 80]</td>" in p99_row
