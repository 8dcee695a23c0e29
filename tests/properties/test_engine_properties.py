"""Properties of the engine's range functions and histogram maths.

The vectorised functions are checked against a slow, per-series reference
written here straight from ``shared/reference/promql-semantics.md`` (plain
Python loops over plain floats, independent of the engine's code), on random
series and windows.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Sequence

import numpy as np
from hypothesis import given, settings, strategies as st

from inference_obs.engine import functions as f
from inference_obs.engine.histograms import histogram_quantile, parse_le, quantile_bounds
from inference_obs.engine.result import Evaluation
from inference_obs.engine.rules import Rules
from inference_obs.engine.windows import TimeIndex
from inference_obs.samples import SampleSet, Series

P2, P3, VM = Rules.PROMETHEUS_2, Rules.PROMETHEUS_3, Rules.VICTORIAMETRICS
Points = list[tuple[int, float]]
Data = tuple[list[Points], int, int]

# -- strategies ---------------------------------------------------------------

#: Whole numbers: sums of them are exact, whatever the order of additions.
whole = st.integers(-50, 1000).map(float)
#: Any float64, specials included, biased towards awkward magnitudes.
awkward = st.one_of(
    whole,
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 1e100, -1e100, 5e-324]),
    st.floats(allow_nan=True, allow_infinity=True),
)


@st.composite
def data(draw: st.DrawFn, values: st.SearchStrategy[float] = awkward) -> Data:
    """A few series (int ms timestamps, values) and a window [start, end] in ms."""
    members: list[Points] = []
    for _ in range(draw(st.integers(1, 4))):
        size = draw(st.integers(0, 3) | st.integers(4, 16))
        first = draw(st.integers(-120_000, 120_000))
        gaps = draw(st.lists(st.integers(1, 90_000), min_size=size, max_size=size))
        times = list(itertools.accumulate(gaps, initial=first))[1:]
        members.append(
            list(zip(times, draw(st.lists(values, min_size=size, max_size=size)), strict=True))
        )
    # The window starts near a sample, often exactly on one (where closed and
    # left-open windows differ), and may end on one too.
    times = [t for points in members for t, _ in points] or [0]
    start = draw(st.sampled_from(times)) + draw(
        st.sampled_from([0, -1, 1]) | st.integers(-120_000, 120_000)
    )
    later = [t for t in times if t > start]
    end = draw(st.sampled_from([*later, start + draw(st.integers(1, 900_000))]))
    return members, start, end


@st.composite
def counters(draw: st.DrawFn) -> Data:
    """Counters without resets: non-negative, non-decreasing."""
    members, start, end = draw(data(st.integers(0, 100).map(float)))
    cumulative = [
        [
            (t, v)
            for (t, _), v in zip(points, itertools.accumulate(v for _, v in points), strict=True)
        ]
        for points in members
    ]
    return cumulative, start, end


def engine(
    function: Callable[..., Evaluation], case: Data, rules: Rules, *extra: float
) -> list[float | None]:
    members, start, end = case
    samples = SampleSet.from_series(
        Series("x", {"i": str(i)}, [t / 1000 for t, _ in points], [v for _, v in points])
        for i, points in enumerate(members)
    )
    windows = TimeIndex(samples).window(start, end, left_open=rules.left_open)
    result = function(*extra, samples, windows, range_s=(end - start) / 1000, rules=rules)
    return [float(v) if p else None for v, p in zip(result.values, result.present, strict=True)]


def same(a: float | None, b: float | None, rel: float = 0.0) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    # Below the smallest normal double, precision is absolute, not relative:
    # the same interpolation in another order differs in the last subnormal bits.
    subnormal = rel * sys.float_info.min if rel else 0.0
    return a == b or math.isclose(a, b, rel_tol=rel, abs_tol=subnormal)


# -- the slow reference (section numbers of the reference document) -----------


def window(points: Points, start: int, end: int, rules: Rules) -> Points:
    # Section 2: [start, end] in 2.42, (start, end] in 3.x (and VictoriaMetrics).
    if rules.left_open:
        return [(t, v) for t, v in points if start < t <= end]
    return [(t, v) for t, v in points if start <= t <= end]


def extrapolated(
    s: Points, start: int, end: int, r: float, rules: Rules, counter: bool, is_rate: bool
) -> float | None:
    # Section 3.
    n = len(s)
    if n < 2:
        return None
    d = s[-1][1] - s[0][1]
    if counter:
        for (_, p), (_, c) in itertools.pairwise(s):
            if c < p:
                d += p
    gap_start = (s[0][0] - start) / 1000
    gap_end = (end - s[-1][0]) / 1000
    covered = (s[-1][0] - s[0][0]) / 1000
    step = covered / (n - 1)
    limit = 1.1 * step
    clamp = counter and d > 0 and s[0][1] >= 0
    if rules is P2:
        if clamp:
            gap_start = min(gap_start, covered * s[0][1] / d)
        ext = covered
        ext += gap_start if gap_start < limit else step / 2
        ext += gap_end if gap_end < limit else step / 2
    else:
        if gap_start >= limit:
            gap_start = step / 2
        if clamp:
            gap_start = min(gap_start, covered * s[0][1] / d)
        if gap_end >= limit:
            gap_end = step / 2
        ext = covered + gap_start + gap_end
    result = d * ext / covered
    return result / r if is_rate else result


def add(x: float, total: float, c: float, v254: bool) -> tuple[float, float]:
    # Section 5, compensated addition.
    t = total + x
    if v254 and math.isinf(t):
        c = 0.0
    elif abs(total) >= abs(x):
        c += (total - t) + x
    else:
        c += (x - t) + total
    return t, c


def sum_ref(v: Sequence[float], rules: Rules) -> float:
    total, c = 0.0, 0.0
    for x in v:
        total, c = add(x, total, c, rules is not P2)
    return total if math.isinf(total) else total + c


def avg_ref(v: Sequence[float], rules: Rules) -> float:
    if rules is P2:
        mean, c = 0.0, 0.0
        for k, x in enumerate(v, 1):
            if math.isinf(mean) and ((math.isinf(x) and (mean > 0) == (x > 0)) or math.isfinite(x)):
                continue
            mean, c = add(x / k - mean / k, mean, c, False)
        return mean if math.isinf(mean) else mean + c
    total, c, mean, incremental = v[0], 0.0, 0.0, False
    for k, x in enumerate(v[1:], 2):
        if not incremental:
            new_total, new_c = add(x, total, c, True)
            if not math.isinf(new_total):
                total, c = new_total, new_c
                continue
            incremental, mean, c = True, total / (k - 1), c / (k - 1)
        q = (k - 1) / k
        mean, c = add(x / k, q * mean, q * c, True)
    return mean + c if incremental else total / len(v) + c / len(v)


def best(v: Sequence[float], better: Callable[[float, float], bool]) -> float:
    # Section 5: replace when better, or when the best so far is NaN.
    result = v[0]
    for x in v[1:]:
        if better(x, result) or math.isnan(result):
            result = x
    return result


def quantile_ref(q: float, v: Sequence[float]) -> float:
    if math.isnan(q):
        return math.nan
    if q < 0 or q > 1:
        return -math.inf if q < 0 else math.inf
    ordered = sorted(v, key=lambda x: (not math.isnan(x), 0.0 if math.isnan(x) else x))
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    weight = rank - low
    return ordered[low] * (1 - weight) + ordered[high] * weight


def reference(name: str, case: Data, rules: Rules, q: float = 0.5) -> list[float | None]:
    members, start, end = case
    out: list[float | None] = []
    for points in members:
        s = window(points, start, end, rules)
        v = [x for _, x in s]
        pairs = list(itertools.pairwise(v))
        if name in ("rate", "increase", "delta"):
            counter, is_rate = name != "delta", name == "rate"
            out.append(extrapolated(s, start, end, (end - start) / 1000, rules, counter, is_rate))
        elif name in ("irate", "idelta"):
            if len(s) < 2:
                out.append(None)
                continue
            (tp, p), (tl, last) = s[-2], s[-1]
            if name == "idelta":
                out.append(last - p)
                continue
            value = (last if last < p else last - p) / ((tl - tp) / 1000)
            out.append(math.nan if rules is P3 and (math.isnan(p) or math.isnan(last)) else value)
        elif not v:
            out.append(None)
        elif name == "resets":
            out.append(float(sum(c < p for p, c in pairs)))
        elif name == "changes":
            changed = (c != p and not (math.isnan(c) and math.isnan(p)) for p, c in pairs)
            out.append(float(sum(changed)))
        elif name == "sum_over_time":
            out.append(sum_ref(v, rules))
        elif name == "avg_over_time":
            out.append(avg_ref(v, rules))
        elif name == "count_over_time":
            out.append(float(len(v)))
        elif name == "min_over_time":
            out.append(best(v, lambda x, y: x < y))
        elif name == "max_over_time":
            out.append(best(v, lambda x, y: x > y))
        elif name == "last_over_time":
            out.append(v[-1])
        elif name == "quantile_over_time":
            out.append(quantile_ref(q, v))
    return out


def vm_reference(name: str, case: Data) -> list[float | None]:
    """Section 11 as the engine documents it: NaN ignored, base before the window."""
    members, start, end = case
    out: list[float | None] = []
    for points in members:
        clean = [(t, v) for t, v in points if not math.isnan(v)]
        inside = window(clean, start, end, VM)
        earlier = [p for p in clean if p[0] <= start]
        used = (earlier[-1:] + inside) if inside else []
        if name in ("increase", "rate", "delta"):
            if len(used) < 2:
                out.append(None)
                continue
            d = used[-1][1] - used[0][1]
            if name != "delta":
                d += sum(p for (_, p), (_, c) in itertools.pairwise(used) if c < p)
            if name == "rate":
                d /= (used[-1][0] - used[0][0]) / 1000
            out.append(None if math.isnan(d) else d)
            continue
        v = [x for _, x in inside]
        if not v:
            out.append(None)
            continue
        total = 0.0
        for x in v:
            total += x
        value = {
            "sum_over_time": total,
            "avg_over_time": total / len(v),
            "count_over_time": float(len(v)),
        }[name]
        out.append(None if math.isnan(value) else value)
    return out


# -- properties ---------------------------------------------------------------

EXACT = ["resets", "changes", "sum_over_time", "avg_over_time", "count_over_time",
         "min_over_time", "max_over_time", "last_over_time", "irate", "idelta"]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(data(), st.sampled_from([P2, P3]), st.sampled_from(EXACT))
def test_vectorised_functions_equal_the_per_series_reference(
    case: Data, rules: Rules, name: str
) -> None:
    got = engine(f.RANGE_FUNCTIONS[name], case, rules)
    want = reference(name, case, rules)
    assert all(same(a, b) for a, b in zip(got, want, strict=True)), (got, want)


@settings(max_examples=300, deadline=None)
@given(data(whole), st.sampled_from([P2, P3]), st.sampled_from(["rate", "increase", "delta"]))
def test_extrapolation_equals_the_per_series_reference(case: Data, rules: Rules, name: str) -> None:
    got = engine(f.RANGE_FUNCTIONS[name], case, rules)
    want = reference(name, case, rules)
    assert all(same(a, b, rel=1e-12) for a, b in zip(got, want, strict=True)), (got, want)


@settings(max_examples=200, deadline=None)
@given(
    data(), st.sampled_from([P2, P3]), st.floats(-0.5, 1.5) | st.sampled_from([0.0, 1.0, math.nan])
)
def test_quantile_over_time_equals_the_reference(case: Data, rules: Rules, q: float) -> None:
    got = engine(f.quantile_over_time, case, rules, q)
    want = reference("quantile_over_time", case, rules, q)
    assert all(same(a, b) for a, b in zip(got, want, strict=True)), (got, want)


@settings(max_examples=200, deadline=None)
@given(
    data(st.one_of(whole, st.just(math.nan))),
    st.sampled_from(
        ["increase", "rate", "delta", "sum_over_time", "avg_over_time", "count_over_time"]
    ),
)
def test_victoriametrics_model_equals_the_reference(case: Data, name: str) -> None:
    got = engine(f.RANGE_FUNCTIONS[name], case, VM)
    want = vm_reference(name, case)
    assert all(same(a, b, rel=1e-12) for a, b in zip(got, want, strict=True)), (got, want)


@settings(max_examples=300, deadline=None)
@given(counters(), st.sampled_from([P2, P3, VM]))
def test_increase_of_a_counter_without_resets_is_not_negative(case: Data, rules: Rules) -> None:
    for name in ("increase", "rate"):
        assert all(v is None or v >= 0 for v in engine(f.RANGE_FUNCTIONS[name], case, rules))


@settings(max_examples=300, deadline=None)
@given(data(st.floats(-1e12, 1e12)), st.sampled_from([P2, P3, VM]))
def test_avg_over_time_lies_within_min_and_max(case: Data, rules: Rules) -> None:
    means = engine(f.avg_over_time, case, rules)
    lows, highs = engine(f.min_over_time, case, rules), engine(f.max_over_time, case, rules)
    for mean, low, high in zip(means, lows, highs, strict=True):
        assert (mean is None) == (low is None)
        if mean is not None and low is not None and high is not None:
            # Rounding may put an incremental mean an ulp or so outside.
            slack = 4 * np.spacing(max(abs(low), abs(high)))
            assert low - slack <= mean <= high + slack


# -- histograms ---------------------------------------------------------------

BOUNDS = ["-1", "-0.5", "0", "0.1", "0.2", "2e-1", ".5", "1", "1.0", "2.5", "10", "+Inf", "+inf"]


@st.composite
def histograms(draw: st.DrawFn) -> list[list[tuple[str, float]]]:
    """Groups of (le, cumulative count), mostly monotonic, sometimes not."""
    groups = []
    for _ in range(draw(st.integers(1, 4))):
        les = draw(st.lists(st.sampled_from(BOUNDS), min_size=1, max_size=8))
        if draw(st.integers(0, 9)) > 0:
            les.append("+Inf")
        les.sort(key=lambda le: float(le.replace("inf", "Inf")))
        # No subnormal counts: q * total must not round to 0 for q > 0.
        step = st.just(0.0) | st.floats(1e-3, 100)
        steps = draw(st.lists(step, min_size=len(les), max_size=len(les)))
        counts = list(itertools.accumulate(steps))
        if draw(st.booleans()):
            counts = draw(st.permutations(counts))
        groups.append(list(zip(les, counts, strict=True)))
    return groups


def flat(groups: list[list[tuple[str, float]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    les = [le for group in groups for le, _ in group]
    counts = np.array([c for group in groups for _, c in group], dtype=np.float64)
    index = np.array([g for g, group in enumerate(groups) for _ in group], dtype=np.int64)
    return parse_le(les), counts, index, len(groups)


def bucket_quantile_ref(q: float, buckets: list[tuple[float, float]], rules: Rules) -> float:
    # Section 6, step by step.
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    ordered = sorted(buckets, key=lambda b: b[0])
    if ordered[-1][0] != math.inf:
        return math.nan
    merged: list[list[float]] = []
    for upper, count in ordered:
        if merged and merged[-1][0] == upper:
            merged[-1][1] += count
        else:
            merged.append([upper, count])
    counts = [c for _, c in merged]
    if rules is P2:
        for i in range(1, len(counts)):
            counts[i] = max(counts[i], counts[i - 1])
    else:
        prev = counts[0]
        for i in range(1, len(counts)):
            c = counts[i]
            if c == prev:
                continue
            if abs(c - prev) < 1e-12 * (abs(c) + abs(prev)) or c < prev:
                counts[i] = prev
            else:
                prev = c
    if len(merged) < 2:
        return math.nan
    total = counts[-1]
    if total == 0:
        return math.nan
    rank = q * total
    b = next((i for i in range(len(counts) - 1) if counts[i] >= rank), len(counts) - 1)
    bounds = [u for u, _ in merged]
    if b == len(counts) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    low = 0.0 if b == 0 else bounds[b - 1]
    below = 0.0 if b == 0 else counts[b - 1]
    if counts[b] - below == 0:
        return math.nan
    return low + (bounds[b] - low) * (rank - below) / (counts[b] - below)


@settings(max_examples=300, deadline=None)
@given(histograms(), st.sampled_from([P2, P3]), st.floats(-0.2, 1.2))
def test_histogram_quantile_equals_the_reference(
    groups: list[list[tuple[str, float]]], rules: Rules, q: float
) -> None:
    got = histogram_quantile(q, *flat(groups), rules=rules).values.tolist()
    want = [
        bucket_quantile_ref(q, [(float(parse_le([le])[0]), c) for le, c in group], rules)
        for group in groups
    ]
    assert all(same(a, b, rel=1e-12) for a, b in zip(got, want, strict=True)), (got, want)


@settings(max_examples=300, deadline=None)
@given(histograms(), st.sampled_from([P2, P3]), st.floats(0, 1), st.floats(0, 1))
def test_histogram_quantile_is_monotone_in_q(
    groups: list[list[tuple[str, float]]], rules: Rules, q1: float, q2: float
) -> None:
    low_q, high_q = sorted((q1, q2))
    low = histogram_quantile(low_q, *flat(groups), rules=rules).values
    high = histogram_quantile(high_q, *flat(groups), rules=rules).values
    comparable = ~np.isnan(low) & ~np.isnan(high)
    assert np.all(low[comparable] <= high[comparable] + 1e-12 * np.abs(high[comparable]))


@settings(max_examples=300, deadline=None)
@given(histograms(), st.floats(1e-9, 1))
def test_histogram_quantile_lies_within_its_bucket_bounds(
    groups: list[list[tuple[str, float]]], q: float
) -> None:
    value = histogram_quantile(q, *flat(groups), rules=P3).values
    low, high = quantile_bounds(q, *flat(groups))
    known = ~np.isnan(value)
    # Interpolation may round an ulp past an edge.
    slack = 2 * np.spacing(np.abs(value[known]))
    assert np.all(low[known] - slack <= value[known])
    assert np.all(value[known] <= high[known] + slack)


@settings(max_examples=200, deadline=None)
@given(data(st.floats(-1e6, 1e6)), st.floats(0, 1), st.floats(0, 1))
def test_quantile_over_time_is_monotone_in_q(case: Data, q1: float, q2: float) -> None:
    low_q, high_q = sorted((q1, q2))
    low = engine(f.quantile_over_time, case, P3, low_q)
    high = engine(f.quantile_over_time, case, P3, high_q)
    for a, b in zip(low, high, strict=True):
        if a is not None and b is not None:
            assert a <= b + 1e-9 * max(abs(a), abs(b), 1.0)
