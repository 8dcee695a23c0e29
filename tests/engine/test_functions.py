"""Golden cases for the range functions, in Prometheus series notation.

Each expected number is derived by hand in a comment from
``shared/reference/promql-semantics.md`` (sections 3-5 for Prometheus, 11 for
VictoriaMetrics). Samples are one step (60 s unless stated) apart from t=0;
``[a, b]`` is the window in seconds (left end excluded under 3.x and VM rules).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

import numpy as np
import pytest

from inference_obs.engine.functions import (
    RANGE_FUNCTIONS,
    avg_over_time,
    changes,
    count_over_time,
    delta,
    idelta,
    increase,
    irate,
    last_over_time,
    max_over_time,
    min_over_time,
    quantile_over_time,
    rate,
    resets,
    sum_over_time,
)
from inference_obs.engine.result import Evaluation
from inference_obs.engine.rules import Rules
from inference_obs.engine.windows import TimeIndex, drop_stale
from inference_obs.errors import ConfigurationError
from inference_obs.samples import SampleSet, Series
from inference_obs.testing import series

P2, P3, VM = Rules.PROMETHEUS_2, Rules.PROMETHEUS_3, Rules.VICTORIAMETRICS
PROMETHEUS = [P2, P3]


def sample_set(
    *notations: str, step: float = 60, labels: Mapping[str, str] | None = None
) -> SampleSet:
    """One series per notation, labelled ``i="0"``, ``i="1"``..."""
    return SampleSet.from_series(
        Series("x", {"i": str(i), **(labels or {})}, *series(text, step=step))
        for i, text in enumerate(notations)
    )


@pytest.mark.parametrize("text", ["1 2x", "0+x3", "stale2", "1,2"])
def test_series_notation_names_a_token_it_cannot_read(text: str) -> None:
    token = next(t for t in text.split() if t not in ("1", "2"))
    with pytest.raises(ConfigurationError, match=re.escape(f"not series notation: '{token}'; w")):
        series(text)


def evaluation(
    function: Callable[..., Evaluation],
    data: SampleSet,
    start_s: float,
    end_s: float,
    rules: Rules,
    *extra: float,
) -> Evaluation:
    samples = drop_stale(data)
    windows = TimeIndex(samples).window(
        round(start_s * 1000), round(end_s * 1000), left_open=rules.left_open
    )
    return function(*extra, samples, windows, range_s=end_s - start_s, rules=rules)


def values(
    function: Callable[..., Evaluation],
    data: SampleSet,
    start_s: float,
    end_s: float,
    rules: Rules,
    *extra: float,
) -> list[float | None]:
    """The function's value per series, None where the series is not in the output."""
    result = evaluation(function, data, start_s, end_s, rules, *extra)
    return [float(v) if p else None for v, p in zip(result.values, result.present, strict=True)]


def is_nan(value: float | None) -> bool:
    """A present NaN (not an absent series)."""
    return value is not None and math.isnan(value)


def test_range_functions_are_named_as_in_promql() -> None:
    assert set(RANGE_FUNCTIONS) == {
        "avg_over_time", "changes", "count_over_time", "delta", "idelta", "increase", "irate",
        "last_over_time", "max_over_time", "min_over_time", "quantile_over_time", "rate",
        "resets", "sum_over_time",
    }  # fmt: skip
    assert RANGE_FUNCTIONS["rate"] is rate


# -- rate, increase, delta (section 3) ----------------------------------------


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_rate_of_a_steady_counter_is_its_slope(rules: Rules) -> None:
    # 0+10x10 over [0, 600]:
    # 2.42 takes 11 samples 0..100: d = 100 over 600 s covered, both edges
    #   on a sample, so no extrapolation: increase 100, rate 100/600.
    # 3.x drops t=0: 10 samples 10..100, d = 90 over 540 s; the start gap of
    #   60 s is below 1.1 * 60 s, so extrapolated in full: 90 * 600/540 = 100.
    data = sample_set("0+10x10")
    assert values(increase, data, 0, 600, rules) == [pytest.approx(100)]
    assert values(rate, data, 0, 600, rules) == [pytest.approx(100 / 600)]


def test_one_minute_window_on_one_minute_data_is_empty_in_3x() -> None:
    # 0+10x10 over [540, 600]: 2.42 sees 90 and 100 (d = 10 over 60 s, no
    # gaps): rate 10/60. 3.x sees only 100: fewer than 2 samples, no output.
    data = sample_set("0+10x10")
    assert values(rate, data, 540, 600, P2) == [pytest.approx(10 / 60)]
    result = evaluation(rate, data, 540, 600, P3)
    assert not result.present.any()
    (note,) = result.annotations
    assert note.kind == "too_few_samples"
    assert "1 series" in note.message


def test_counter_reset_adds_the_value_before_the_drop() -> None:
    data = sample_set("0 10 20 5 15")
    # 2.42, [0, 240]: d = 15 - 0, plus 20 for the drop 20 -> 5: 35; no gaps.
    assert values(increase, data, 0, 240, P2) == [pytest.approx(35)]
    # 3.x, (0, 240]: 10 20 5 15, d = 5 + 20 = 25 over 180 s; start gap 60 s
    # (< 66 s, and the zero point 180 * 10/25 = 72 s is further): 25 * 240/180.
    assert values(increase, data, 0, 240, P3) == [pytest.approx(25 * 240 / 180)]
    # delta ignores resets: 15 - 0.
    assert values(delta, data, 0, 240, P2) == [pytest.approx(15)]


def test_series_starting_inside_the_window() -> None:
    # _x5 10 20 30 over [0, 600]: samples at 300, 360, 420; d = 20 over 120 s,
    # spacing 60 s, limit 66 s; start gap 300 s, end gap 180 s (both beyond).
    # Zero point before the first sample: 120 * 10/20 = 60 s.
    data = sample_set("_x5 10 20 30")
    # 2.42 clamps first: min(300, 60) = 60 < 66, so 60 s is added in full;
    # end: half a spacing, 30 s. 20 * (120 + 60 + 30)/120 = 35.
    assert values(increase, data, 0, 600, P2) == [pytest.approx(35)]
    # 3.x tests first: 300 >= 66 -> 30, then min(30, 60) = 30; end 30.
    # 20 * (120 + 30 + 30)/120 = 30.
    assert values(increase, data, 0, 600, P3) == [pytest.approx(30)]
    # delta has no zero clamp: half a spacing at both ends in both versions.
    assert values(delta, data, 0, 600, P2) == [pytest.approx(30)]
    assert values(delta, data, 0, 600, P3) == [pytest.approx(30)]


def test_zero_clamp_order_reference_example() -> None:
    # functions.test, load 4m, rate(x[20m]) at 10m; slope 1/s from 180/240/300:
    # window [-600, 600] holds t = 0, 240, 480, d = 480 over 480 s, spacing
    # 240 s, limit 264 s, start gap 600 s, end gap 120 s (< 264: in full).
    # Zero points: 480 * v0/480 = 180, 240, 300 s.
    data = sample_set("180+240x10", "240+240x10", "300+240x10", step=240)
    # 2.42: start gap clamped to 180 / 240 (< 264: in full) / 300 (-> 120):
    # (480 + 180 + 120)/1200 = 0.65, (480 + 240 + 120)/1200 = 0.7, 720/1200 = 0.6.
    assert values(rate, data, -600, 600, P2) == pytest.approx([0.65, 0.7, 0.6])
    # 3.x: 600 >= 264 -> 120 first, then min(120, zero point) = 120 for all.
    assert values(rate, data, -600, 600, P3) == pytest.approx([0.6, 0.6, 0.6])


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_delta_of_a_gauge_extrapolates(rules: Rules) -> None:
    # Reference section 12: 10, 20, 30 at t = 0, 15, 30; delta(x[1m]) at 40 s.
    # Window [-20, 40]: d = 20 over 30 s, spacing 15 s, limit 16.5 s; start
    # gap 20 s -> 7.5 s, end gap 10 s in full: 20 * (30 + 7.5 + 10)/30 = 31.67.
    data = sample_set("10 20 30", step=15)
    assert values(delta, data, -20, 40, rules) == [pytest.approx(31.666666666666668)]


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_fewer_than_two_samples_gives_no_result(rules: Rules) -> None:
    # Window [30, 150]: series 0 has one sample (5 at 60 s), series 1 none
    # (its only sample is at 180 s).
    data = sample_set("_ 5", "_x3 1")
    result = evaluation(increase, data, 30, 150, rules)
    assert not result.present.any()
    # Only the series with exactly one sample is reported.
    (note,) = result.annotations
    assert "1 series" in note.message


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_infinite_samples(rules: Rules) -> None:
    # delta over (0, 60] of 1 2 3 4 +Inf at 10 s steps: d = +Inf, stretched: +Inf.
    data = sample_set("1 2 3 4 Inf", step=10)
    assert values(delta, data, 0, 60, rules) == [math.inf]


# -- irate, idelta -------------------------------------------------------------


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_irate_and_idelta_use_the_last_two_samples(rules: Rules) -> None:
    data = sample_set("0 10 20 5")
    # Last two: 20 then 5, a reset: irate takes 5 alone over 60 s.
    assert values(irate, data, 0, 180, rules) == [pytest.approx(5 / 60)]
    # idelta: 5 - 20.
    assert values(idelta, data, 0, 180, rules) == [-15.0]
    # One sample: nothing.
    assert values(irate, data, 150, 180, rules) == [None]


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_irate_is_nan_when_either_sample_is_nan(rules: Rules) -> None:
    # v3.4 made the rule explicit; 2.42's arithmetic gives the same NaN.
    data = sample_set("1 NaN", "NaN 1")
    got = values(irate, data, -1, 60, rules)
    assert all(is_nan(v) for v in got)


# -- VictoriaMetrics (section 11): base sample before the window, no extrapolation


def test_vm_uses_the_sample_before_the_window() -> None:
    # 0+10x10, window (540, 600]: only 100 at 600 inside; 90 at 540 is the base.
    data = sample_set("0+10x10")
    assert values(increase, data, 540, 600, VM) == [10.0]
    assert values(delta, data, 540, 600, VM) == [10.0]
    assert values(rate, data, 540, 600, VM) == [pytest.approx(10 / 60)]
    assert values(irate, data, 540, 600, VM) == [pytest.approx(10 / 60)]
    # Prometheus 3 returns nothing there.
    assert values(increase, data, 540, 600, P3) == [None]


def test_vm_does_not_extrapolate_and_divides_by_the_span_used() -> None:
    # _x5 10 20 30 over (0, 600]: no sample before the window, so the base is
    # the first one (10 at 300 s): increase 30 - 10 = 20 (Prometheus 3: 30);
    # rate 20 over the 120 s between base and last (not over 600 s).
    data = sample_set("_x5 10 20 30")
    assert values(increase, data, 0, 600, VM) == [20.0]
    assert values(rate, data, 0, 600, VM) == [pytest.approx(20 / 120)]


def test_vm_single_sample_without_earlier_one_gives_no_result() -> None:
    data = sample_set("_x5 10")
    result = evaluation(increase, data, 0, 600, VM)
    assert not result.present.any()
    assert [a.kind for a in result.annotations] == ["too_few_samples"]


def test_vm_ignores_nan_samples_and_corrects_resets() -> None:
    # 0 10 NaN 30, window (0, 180]: NaN dropped; base 0 at t=0: 30 - 0 = 30.
    assert values(increase, sample_set("0 10 NaN 30"), 0, 180, VM) == [30.0]
    # 10 20 5, window (0, 120]: base 10, last 5, plus 20 for the reset: 15.
    assert values(increase, sample_set("10 20 5"), 0, 120, VM) == [15.0]


# -- resets, changes (section 4) ----------------------------------------------


@pytest.mark.parametrize("rules", [P2, P3, VM])
def test_resets_count_strict_decreases(rules: Rules) -> None:
    # 5 1 2 2 0: drops 5->1 and 2->0 (2->2 is not a decrease): 2.
    # The single-sample window counts 0; the empty one is absent.
    data = sample_set("5 1 2 2 0", "7", "_x9 1")
    assert values(resets, data, -1, 240, rules) == [2.0, 1.0 - 1.0, None]


def test_nan_never_counts_as_a_reset() -> None:
    # 3 NaN 1: both comparisons involve NaN, so 0 resets in Prometheus;
    # VictoriaMetrics drops the NaN first and sees 3 -> 1.
    data = sample_set("3 NaN 1")
    assert values(resets, data, -1, 120, P2) == [0.0]
    assert values(resets, data, -1, 120, VM) == [1.0]


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_changes_treat_two_nans_as_equal(rules: Rules) -> None:
    # 1 1 2 NaN NaN 2: 1->2, 2->NaN, NaN->2 change; 1->1 and NaN->NaN do not: 3.
    data = sample_set("1 1 2 NaN NaN 2")
    assert values(changes, data, -1, 300, rules) == [3.0]


def test_empty_window_at_the_end_of_the_sample_set() -> None:
    # The last series' window is empty and lies past every sample.
    data = sample_set("1 2 1", "1 2")
    assert values(resets, data, 100, 130, P3) == [1.0 - 1.0, None]
    assert values(changes, data, 100, 130, P3) == [0.0, None]


# -- *_over_time (section 5) --------------------------------------------------


def test_compensated_sum_and_the_two_avg_algorithms() -> None:
    # 1, 1e100, 1, -1e100 at 10..40 s, window [0, 60] (no sample at 0).
    data = sample_set("_ 1 1e100 1 -1e100", step=10)
    # Neumaier: the two 1s lost in 1e100 are kept in the compensation: 2.
    assert values(sum_over_time, data, 0, 60, P2) == [2.0]
    assert values(sum_over_time, data, 0, 60, P3) == [2.0]
    # 2.42's incremental mean loses them (value confirmed on a 2.42 server).
    assert values(avg_over_time, data, 0, 60, P2) == [pytest.approx(-2.43e83, rel=1e-2)]
    # 3.5+: compensated sum 0 with compensation 2, over 4 samples: 0.5.
    assert values(avg_over_time, data, 0, 60, P3) == [0.5]
    # VictoriaMetrics: a plain left-to-right sum, 1 + 1e100 + 1 - 1e100 = 0.
    assert values(sum_over_time, data, 0, 60, VM) == [0.0]
    assert values(avg_over_time, data, 0, 60, VM) == [0.0]


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_avg_stays_finite_where_sum_overflows(rules: Rules) -> None:
    # Two samples of 9.99e307: the sum overflows to +Inf, the mean does not.
    data = sample_set("9.99e307 9.99e307")
    assert values(sum_over_time, data, -1, 60, rules) == [math.inf]
    assert values(avg_over_time, data, -1, 60, rules) == [9.99e307]


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_avg_with_infinities(rules: Rules) -> None:
    # 1, +Inf: +Inf. +Inf, 1, -Inf: opposite infinities give NaN.
    data = sample_set("1 Inf", "Inf 1 -Inf")
    got = values(avg_over_time, data, -1, 120, rules)
    assert got[0] == math.inf
    assert is_nan(got[1])


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_min_max_skip_nan_unless_all_nan(rules: Rules) -> None:
    # functions.test data: a NaN best is always replaced; NaN only if all NaN.
    data = sample_set("2 0 3", "NaN NaN NaN", "2 0 NaN", "2 NaN 1", "NaN 0 1", step=10)
    low = values(min_over_time, data, -1, 60, rules)
    high = values(max_over_time, data, -1, 60, rules)
    assert low[0::2] == [0.0, 0.0, 0.0]
    assert low[3] == 1.0
    assert high[0::2] == [3.0, 2.0, 1.0]
    assert high[3] == 2.0
    assert is_nan(low[1])
    assert is_nan(high[1])


def test_vm_over_time_ignores_nan_and_drops_nan_results() -> None:
    data = sample_set("1 NaN 3", "NaN NaN")
    # Mean of 1 and 3; two samples counted; the all-NaN series disappears.
    assert values(avg_over_time, data, -1, 120, VM) == [2.0, None]
    assert values(count_over_time, data, -1, 120, VM) == [2.0, None]
    assert values(max_over_time, data, -1, 120, VM) == [3.0, None]
    # Prometheus keeps NaN: the mean is NaN, and all three samples count.
    p3 = values(avg_over_time, data, -1, 120, P3)
    assert is_nan(p3[0])
    assert values(count_over_time, data, -1, 120, P3) == [3.0, 2.0]


@pytest.mark.parametrize("rules", [P2, P3, VM])
def test_count_and_last_skip_gaps_and_staleness_markers(rules: Rules) -> None:
    # 1 _ 3 stale 5: samples at 0, 120, 240 plus a marker at 180, dropped.
    data = sample_set("1 _ 3 stale 5")
    assert values(count_over_time, data, -1, 240, rules) == [3.0]
    assert values(last_over_time, data, -1, 200, rules) == [3.0]


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_quantile_over_time(rules: Rules) -> None:
    data = sample_set("4 1 3 2")
    # Sorted 1 2 3 4; q = 0.5 -> rank 1.5 -> 2 * 0.5 + 3 * 0.5 = 2.5.
    assert values(quantile_over_time, data, -1, 180, rules, 0.5) == [2.5]
    assert values(quantile_over_time, data, -1, 180, rules, 0.0) == [1.0]
    assert values(quantile_over_time, data, -1, 180, rules, 1.0) == [4.0]
    # Out of range: -Inf below 0, +Inf above 1; NaN q: NaN.
    assert values(quantile_over_time, data, -1, 180, rules, -1.0) == [-math.inf]
    assert values(quantile_over_time, data, -1, 180, rules, 2.0) == [math.inf]
    (nan,) = values(quantile_over_time, data, -1, 180, rules, math.nan)
    assert is_nan(nan)


def test_quantile_over_time_sorts_nan_first() -> None:
    # NaN 1 2: sorted NaN 1 2, so q = 0 is NaN and q = 1 is 2.
    data = sample_set("NaN 1 2")
    (low,) = values(quantile_over_time, data, -1, 120, P3, 0.0)
    assert is_nan(low)
    assert values(quantile_over_time, data, -1, 120, P3, 1.0) == [2.0]
    # VictoriaMetrics ignores the NaN: q = 0 is 1.
    assert values(quantile_over_time, data, -1, 120, VM, 0.0) == [1.0]


def test_functions_evaluate_many_series_in_one_call() -> None:
    # Different lengths, an empty window and a lone sample, in one call.
    data = sample_set("0+1x20", "_x15 1 2", "_x30 1", "5", step=10)
    got = values(sum_over_time, data, 100, 200, P3)
    # Series 0: 11..20 (sum 155); series 1: 1 + 2 at 150, 160; series 2: no
    # samples before 300; series 3: the lone sample at 0 is outside.
    assert got == [155.0, 3.0, None, None]
    assert np.array_equal(evaluation(count_over_time, data, 100, 200, P2).values[:2], [11.0, 2.0])
