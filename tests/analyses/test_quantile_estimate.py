"""The quantile estimate from merged buckets and the exact mean: hand-derived cases, its
bounds, and its accuracy against the simulator's ground truth (the benchmark's core)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from benchmarks.quantile_accuracy import cases, main
from inference_obs.engine.histograms import histogram_quantile, quantile_bounds
from inference_obs.engine.quantile_estimate import mean_constrained_quantile
from inference_obs.engine.rules import Rules
from inference_obs.simulate.scenario import load_scenario

UPPER = np.array([1.0, 2.0, 4.0, 8.0, np.inf])


def _interpolated(q: float, upper: np.ndarray, cumulative: np.ndarray) -> float:
    one = np.zeros(upper.size, np.int64)
    return float(
        histogram_quantile(q, upper, cumulative, one, 1, rules=Rules.PROMETHEUS_3).values[0]
    )


def test_a_lowest_bucket_mostly_at_zero_reads_zero() -> None:
    # Eight observations of 0 and two of 0.25, all in [0, 1]: the true median is 0, the
    # mean 0.5 / 10 = 0.05; interpolation reads the median as half the bucket, 0.5.
    cumulative = np.array([10.0, 10.0, 10.0, 10.0, 10.0])
    assert _interpolated(0.5, UPPER, cumulative) == 0.5
    assert mean_constrained_quantile(0.5, UPPER, cumulative, 0.05) == 0.0
    # The P95 (rank 9.5 of 10) is 0.25 in truth: above 0, well below interpolation's 0.95.
    p95 = mean_constrained_quantile(0.95, UPPER, cumulative, 0.05)
    assert 0.0 < p95 < 0.5


def test_even_buckets_and_a_matching_mean_give_the_interpolation() -> None:
    # 10, 10, 20 and 40 observations in [0,1], [1,2], [2,4], [4,8]: 10 per unit everywhere,
    # spread evenly from 0 to 8, so the mean is (0.5*10 + 1.5*10 + 3*20 + 6*40) / 80 = 4.
    # Rank 0.375 x 80 = 30 is halfway through [2, 4]: 3, for interpolation and the truth.
    cumulative = np.array([10.0, 20.0, 40.0, 80.0, 80.0])
    assert _interpolated(0.375, UPPER, cumulative) == 3.0
    # The half observation added to each count before taking logarithms tilts it a little.
    value = mean_constrained_quantile(0.375, UPPER, cumulative, 4.0)
    assert math.isclose(value, 3.0, rel_tol=0.02), value


def test_a_falling_tail_puts_the_quantile_below_the_bucket_middle() -> None:
    # 800, 150, 40, 10 observations in [0,1], [1,2], [2,4], [4,8]: densities 800, 150, 20, 2.5
    # per unit fall across [2, 4], so half of its 40 observations lie below its middle, 3.
    # Rank 0.97 x 1000 = 970 is halfway through it: interpolation gives exactly 3.
    cumulative = np.array([800.0, 950.0, 990.0, 1000.0, 1000.0])
    assert _interpolated(0.97, UPPER, cumulative) == 3.0
    value = mean_constrained_quantile(0.97, UPPER, cumulative, None)
    assert 2.0 < value < 3.0


@settings(max_examples=200, deadline=None)
@given(
    per_bucket=st.lists(st.integers(0, 1000), min_size=5, max_size=5),
    mean_position=st.floats(0.0, 1.0),
    q=st.sampled_from([0.0, 0.5, 0.9, 0.95, 0.99, 1.0]),
)
def test_the_estimate_never_leaves_the_bucket(
    per_bucket: list[int], mean_position: float, q: float
) -> None:
    cumulative = np.cumsum(np.array(per_bucket, np.float64))
    if cumulative[-1] == 0:
        return
    # Any mean, even one the buckets cannot hold (past 8 when the +Inf bucket is empty).
    mean = 10.0 * mean_position
    value = mean_constrained_quantile(q, UPPER, cumulative, mean)
    low, high = quantile_bounds(q, UPPER, cumulative, np.zeros(5, np.int64), 1)
    assert low[0] <= value <= high[0], (value, low[0], high[0])


def test_on_a_simulated_scenario_it_is_closer_than_interpolation_and_inside_the_bounds() -> None:
    # One bundled scenario at a seed it does not ship with; the truth is requests.csv's and
    # the engines' records (benchmarks.quantile_accuracy), never the estimate's own inputs.
    seed = 7
    assert seed != load_scenario("h100-vs-h200").seed
    found = cases(["h100-vs-h200"], [seed])
    assert {c.metric for c in found} >= {"ttft", "e2e", "tpot", "itl"}
    assert all(c.held for c in found)
    assert all(c.lower <= c.values["estimate"] <= c.upper for c in found)
    errors = {
        e: statistics.median(x for c in found if (x := c.error(e)) is not None)
        for e in ("promql", "estimate")
    }
    assert errors["estimate"] <= errors["promql"], errors


def test_the_benchmark_prints_medians_per_quantile_level(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["--scenarios", "pro5000-vs-h20", "--seeds", "11"])
    out = capsys.readouterr().out
    assert "| quantile | cases | promql | estimate | aiperf | bounds hold |" in out
    assert all(f"| {level} |" in out for level in ("P50", "P90", "P95", "P99", "all"))
    # Every row of both tables says the bounds held the truth every time.
    rows = [line for line in out.splitlines() if line.startswith("| ") and "cases" not in line]
    assert rows
    assert all(line.endswith("| 1.000 |") for line in rows if "---" not in line)
