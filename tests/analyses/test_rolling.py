"""rolling_quantiles(): rolling TTFT quantiles on the bundled PRO 5000 vs H20 data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inference_obs.analyses.rolling import RollingQuantiles, rolling_quantiles
from inference_obs.deployment import Deployment
from inference_obs.errors import QueryError
from inference_obs.metrics import builders, vllm
from inference_obs.samples import Vector, Window
from inference_obs.source.dataset.source import DatasetSource

BUNDLED = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"


@pytest.fixture(scope="module")
def source() -> DatasetSource:
    return DatasetSource(BUNDLED)


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


def test_promql_uses_rate_and_merged_buckets(pro: RollingQuantiles) -> None:
    assert len(pro.promql) == 3
    for text in pro.promql:
        assert text.startswith("histogram_quantile(")
        assert "sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{" in text
        assert "[5m]" in text


def test_caveats_name_window_p95_and_request_weighting(pro: RollingQuantiles) -> None:
    text = " ".join(pro.caveats)
    assert "not the whole-window P95" in text
    assert "request-weighted" in text


def test_to_frame_is_long_and_timezone_aware(pro: RollingQuantiles, window: Window) -> None:
    frame = pro.to_frame()
    assert list(frame.columns) == ["time", "quantile", "value"]
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


@pytest.mark.parametrize(("q", "every"), [(1.5, 60.0), (0.5, 0.0)])
def test_bad_arguments_refused(
    source: DatasetSource, window: Window, q: float, every: float
) -> None:
    with pytest.raises(QueryError):
        rolling_quantiles(source, _deployment(source, "PRO"), window, quantiles=(q,), every=every)
