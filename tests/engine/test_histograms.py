"""Golden cases for classic-bucket histograms (reference sections 6 and 7).

Buckets are written as ``{le: cumulative count}``; each expected number is
derived by hand in a comment.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pytest

from inference_obs.engine.histograms import (
    fraction_below,
    histogram_fraction,
    histogram_quantile,
    parse_le,
    quantile_bounds,
    quantile_bounds_with_unseen,
)
from inference_obs.engine.rules import Rules
from inference_obs.errors import NotSupportedOffline

P2, P3, VM = Rules.PROMETHEUS_2, Rules.PROMETHEUS_3, Rules.VICTORIAMETRICS
PROMETHEUS = [P2, P3]
Buckets = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.int64], int]

#: 10 observations <= 0.1, 20 more <= 0.2, 10 above: 40 in all.
SIMPLE = {"0.1": 10.0, "0.2": 30.0, "+Inf": 40.0}
#: Prometheus's testhistogram{start="negative"}: bounds -0.2, -0.1, 0.3.
NEGATIVE = {"-.2": 10.0, "-0.1": 20.0, "0.3": 20.0, "+Inf": 30.0}


def buckets(*groups: Mapping[str, float]) -> Buckets:
    """Flat (upper, counts, groups, n_groups) arrays for the given groups."""
    les = [le for group in groups for le in group]
    counts = [count for group in groups for count in group.values()]
    index = [g for g, group in enumerate(groups) for _ in group]
    return parse_le(les), np.array(counts), np.array(index, dtype=np.int64), len(groups)


def quantile(q: float, rules: Rules, *groups: Mapping[str, float]) -> list[float]:
    result = histogram_quantile(q, *buckets(*groups), rules=rules)
    assert result.present.all()
    return [float(v) for v in result.values]


def test_parse_le_follows_go_parse_float() -> None:
    texts = ["1", "1.0", "1e0", ".2", "+Inf", "+inf", "-Inf", "Infinity", "0x1p-2", "-0"]
    assert parse_le(texts).tolist() == [1.0, 1.0, 1.0, 0.2, math.inf, math.inf, -math.inf,
                                        math.inf, 0.25, -0.0]  # fmt: skip
    # Unparsable, missing, out of float64 range (Go: range error) or NaN:
    # NaN, meaning "ignore this sample".
    ignored = ["", "Hello World", " 1", "1_000", "1e400", "+nan", "NaN", "0x1"]
    assert np.isnan(parse_le(ignored)).all()


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_linear_interpolation_within_buckets(rules: Rules) -> None:
    # q = 0.5: rank 20 falls in (0.1, 0.2] (counts 10 -> 30): 0.1 + 0.1 * 10/20.
    assert quantile(0.5, rules, SIMPLE) == [pytest.approx(0.15)]
    # q = 0.2: rank 8 in the lowest bucket, interpolated from 0: 0.1 * 8/10.
    assert quantile(0.2, rules, SIMPLE) == [pytest.approx(0.08)]
    # q = 0.9: rank 36 is beyond 30, in the +Inf bucket: highest finite bound.
    assert quantile(0.9, rules, SIMPLE) == [0.2]
    assert quantile(1.0, rules, SIMPLE) == [0.2]
    # q = 0: rank 0 in the lowest bucket: 0.
    assert quantile(0.0, rules, SIMPLE) == [0.0]


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_lowest_bucket_with_bound_at_or_below_zero(rules: Rules) -> None:
    # q = 0: rank 0 in the lowest bucket, whose bound -0.2 <= 0: -0.2 itself.
    assert quantile(0.0, rules, NEGATIVE) == [-0.2]
    # q = 0.5: rank 15 in (-0.2, -0.1] (10 -> 20): -0.2 + 0.1 * 5/10 = -0.15.
    assert quantile(0.5, rules, NEGATIVE) == [pytest.approx(-0.15)]


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_q_is_checked_before_the_buckets(rules: Rules) -> None:
    no_inf = {"1": 5.0, "2": 10.0}
    assert quantile(2.0, rules, no_inf, SIMPLE) == [math.inf, math.inf]
    assert quantile(-0.1, rules, no_inf, SIMPLE) == [-math.inf, -math.inf]
    assert all(math.isnan(v) for v in quantile(math.nan, rules, no_inf, SIMPLE))
    # Within [0, 1], no +Inf bucket: NaN, but the group is still in the output.
    assert math.isnan(quantile(0.5, rules, no_inf)[0])


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_too_few_buckets_and_no_observations_give_nan(rules: Rules) -> None:
    only_inf = {"+Inf": 10.0}
    # "+Inf" and "+inf" are one bound: merged, a single bucket remains.
    merged_to_one = {"+Inf": 5.0, "+inf": 5.0}
    empty = {"1": 0.0, "+Inf": 0.0}
    assert all(math.isnan(v) for v in quantile(0.5, rules, only_inf, merged_to_one, empty))


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_equal_bounds_are_merged_by_adding(rules: Rules) -> None:
    # 0.2, 2e-1 and 2.0e-1 are one bucket with 10 + 10 + 10 = 30, so this is
    # SIMPLE again: q = 0.5 -> 0.15.
    mixed = {"0.1": 10.0, "0.2": 10.0, "2e-1": 10.0, "2.0e-1": 10.0, "+Inf": 40.0}
    assert quantile(0.5, rules, mixed) == [pytest.approx(0.15)]


@pytest.mark.parametrize("rules", PROMETHEUS)
def test_non_monotonic_buckets_are_repaired_and_annotated(rules: Rules) -> None:
    # histograms.test nonmonotonic_bucket: 20 10 50 40 90 80 become
    # 20 20 50 50 90 90; total 90.
    data = {"0.1": 20.0, "1": 10.0, "10": 50.0, "100": 40.0, "1000": 90.0, "+Inf": 80.0}
    # q = 0.5: rank 45 in (1, 10] (20 -> 50): 1 + 9 * 25/30 = 8.5.
    assert quantile(0.5, rules, SIMPLE, data) == [pytest.approx(0.15), pytest.approx(8.5)]
    # q = 0.99: rank 89.1 in (100, 1000] (50 -> 90): 100 + 900 * 39.1/40.
    assert quantile(0.99, rules, data) == [pytest.approx(979.75)]
    result = histogram_quantile(0.5, *buckets(SIMPLE, data), rules=rules)
    (note,) = result.annotations
    assert note.kind == "monotonicity_forced"
    assert "[1]" in note.message


def test_noise_level_differences_2_42_vs_2_49() -> None:
    # 1e-11 on 100 is a relative 5e-14, below 2.49's 1e-12 threshold.
    noisy = {"1": 100.0, "2": 100.0 + 1e-11, "+Inf": 100.0 + 1e-11}
    # 2.42 keeps the noise: q = 1, rank 100 + 1e-11 is first reached in
    # (1, 2], whose whole width it covers: 2.
    assert quantile(1.0, P2, noisy) == [pytest.approx(2.0)]
    # 2.49+ flattens both counts to 100: rank 100 is reached in the lowest
    # bucket at its top: 0 + 1 * 100/100 = 1. Noise is not reported.
    assert quantile(1.0, P3, noisy) == [1.0]
    assert histogram_quantile(1.0, *buckets(noisy), rules=P3).annotations == ()


def test_groups_without_buckets_are_absent() -> None:
    upper, counts, groups, _ = buckets(SIMPLE)
    result = histogram_quantile(0.5, upper, counts, groups + 1, 3, rules=P3)
    assert result.present.tolist() == [False, True, False]


def test_victoriametrics_histograms_are_not_modelled() -> None:
    with pytest.raises(NotSupportedOffline, match="VictoriaMetrics"):
        histogram_quantile(0.5, *buckets(SIMPLE), rules=VM)
    with pytest.raises(NotSupportedOffline, match="VictoriaMetrics"):
        histogram_fraction(0, 1, *buckets(SIMPLE), rules=VM)


# -- histogram_fraction (section 7) -------------------------------------------


def fraction(lower: float, upper: float, *groups: Mapping[str, float]) -> list[float]:
    result = histogram_fraction(lower, upper, *buckets(*groups), rules=P3)
    assert result.present.all()
    return [float(v) for v in result.values]


def test_fraction_is_empty_on_classic_buckets_in_2_42() -> None:
    result = histogram_fraction(0, 1, *buckets(SIMPLE, NEGATIVE), rules=P2)
    assert not result.present.any()
    assert [a.kind for a in result.annotations] == ["empty_by_rules"]


def test_fraction_3_4() -> None:
    data = {"1": 10.0, "2": 30.0, "+Inf": 40.0}
    # (0, 1]: the count at 1 is 10 (at the next bucket's lower edge), at 0 it
    # is 0 (the lowest bucket starts at 0): 10/40.
    assert fraction(0, 1, data) == [0.25]
    # 1.5 is halfway through (1, 2]: 10 + 20 * 0.5 = 20; 20/40.
    assert fraction(0, 1.5, data) == [0.5]
    # +Inf: beyond every bucket, the total: (40 - 20)/40.
    assert fraction(1.5, math.inf, data) == [0.5]
    assert fraction(-math.inf, math.inf, data) == [1.0]
    # Both inside the +Inf bucket: the count below it for both: 0.
    assert fraction(5, 10, data) == [0.0]
    # lower >= upper: 0.
    assert fraction(2, 2, data) == [0.0]
    assert fraction(3, 1, data) == [0.0]


def test_fraction_nan_cases() -> None:
    data = {"1": 10.0, "2": 30.0, "+Inf": 40.0}
    assert math.isnan(fraction(0, math.nan, data)[0])
    # No +Inf bucket, or no observations: NaN.
    no_inf = {"1": 10.0, "2": 30.0}
    empty = {"1": 0.0, "+Inf": 0.0}
    assert all(math.isnan(v) for v in fraction(0, 1, no_inf, empty))


def test_fraction_lowest_bucket_reaching_minus_infinity() -> None:
    # Bound -1 <= 0, so the lowest bucket spans (-Inf, -1] and any x inside it
    # counts the whole bucket: 10/40 for (-Inf, -2].
    data = {"-1": 10.0, "1": 30.0, "+Inf": 40.0}
    assert fraction(-math.inf, -2, data) == [0.25]
    # 0 is halfway through (-1, 1]: 10 + 20 * 0.5 = 20 -> (20 - 10)/40 from -1.
    assert fraction(-1, 0, data) == [0.25]


# -- bounds and intervals -----------------------------------------------------


def test_quantile_bounds() -> None:
    def bounds(q: float, *groups: Mapping[str, float]) -> list[tuple[float, float]]:
        low, high = quantile_bounds(q, *buckets(*groups))
        return list(zip(low.tolist(), high.tolist(), strict=True))

    # Rank 20 lies in (0.1, 0.2]; rank 8 in the lowest bucket, from 0.
    assert bounds(0.5, SIMPLE) == [(0.1, 0.2)]
    assert bounds(0.2, SIMPLE) == [(0.0, 0.1)]
    # In the +Inf bucket: (highest finite bound, +Inf).
    assert bounds(0.9, SIMPLE) == [(0.2, math.inf)]
    # q = 0: the first bucket holding an observation.
    assert bounds(0.0, {"0.1": 0.0, "0.2": 30.0, "+Inf": 40.0}) == [(0.1, 0.2)]
    # A lowest bound <= 0 leaves the lowest bucket open below.
    assert bounds(0.1, NEGATIVE) == [(-math.inf, -0.2)]
    # Out-of-range q as histogram_quantile; no quantile: NaN.
    assert bounds(-1, SIMPLE) == [(-math.inf, -math.inf)]
    assert bounds(2, SIMPLE) == [(math.inf, math.inf)]
    (no_quantile,) = bounds(0.5, {"1": 5.0})
    assert all(math.isnan(v) for v in no_quantile)


def test_fraction_below() -> None:
    def share(threshold: float, *groups: Mapping[str, float]) -> list[tuple[float, float]]:
        low, high = fraction_below(threshold, *buckets(*groups))
        return list(zip(low.tolist(), high.tolist(), strict=True))

    # On a bucket edge: exact, 10/40.
    assert share(0.1, SIMPLE) == [(0.25, 0.25)]
    # Between edges: between the shares at 0.1 and 0.2.
    assert share(0.15, SIMPLE) == [(0.25, 0.75)]
    # Inside the lowest bucket (from 0): between 0 and 10/40.
    assert share(0.05, SIMPLE) == [(0.0, 0.25)]
    # Below 0 with a positive lowest bound: nothing (observations start at 0).
    assert share(-1, SIMPLE) == [(0.0, 0.0)]
    # Inside the +Inf bucket: between 30/40 and everything.
    assert share(0.3, SIMPLE) == [(0.75, 1.0)]
    assert share(math.inf, SIMPLE) == [(1.0, 1.0)]
    # A lowest bound <= 0 gives no such floor: below -1, up to 10/40.
    assert share(-5, {"-1": 10.0, "+Inf": 40.0}) == [(0.0, 0.25)]
    (unknown,) = share(math.nan, SIMPLE)
    assert all(math.isnan(v) for v in unknown)


def test_quantile_bounds_with_unseen_cover_every_placement_of_the_unseen() -> None:
    # 100 observations: 50 <= 10, 40 in (10, 20], 9 in (20, 40], 1 in (40, 80]. Their P99
    # is the 99th smallest, in (20, 40]. Two more anywhere: both below 10 make the 99th of
    # 102 (rank ceil(100.98) = 101) the 99th of the 100, still in (20, 40]; both above 80
    # make it the 101st of 102 = one of the two, in (80, +Inf].
    up = parse_le(["10", "20", "40", "80", "+Inf"])
    counts = np.array([50.0, 90.0, 99.0, 100.0, 100.0])
    assert quantile_bounds_with_unseen(0.99, up, counts, 0) == (20.0, 40.0)
    assert quantile_bounds_with_unseen(0.99, up, counts, 2) == (20.0, math.inf)
    # The median of 102 is the 51st: with both below 10, 52 lie at or below 10, so it is
    # there; with both above 80 it is the 51st of the 100, in (10, 20].
    assert quantile_bounds_with_unseen(0.5, up, counts, 2) == (0.0, 20.0)
    # Every placement of the two falls inside: add them bucket by bucket and recompute.
    low, high = quantile_bounds_with_unseen(0.99, up, counts, 2)
    for first in range(5):
        for second in range(5):
            added = counts.copy()
            added[first:] += 1
            added[second:] += 1
            one = np.zeros(5, np.int64)
            lo, hi = quantile_bounds(0.99, up, added, one, 1)
            assert low <= lo[0]
            assert hi[0] <= high
