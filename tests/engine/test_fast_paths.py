"""The engine's fast paths give the same bits as Prometheus's step-by-step arithmetic.

Compensated sums and means are computed three ways (exact windows, finite
windows, a fold for the rest), window edges are found by a guess checked
against neighbours, counter resets are added from cached positions, and
groupings are remembered. Each is compared here with a plain scalar loop
written from Prometheus's Go code, bit for bit, on data built to reach every
path: many windows over several blocks, ragged and regular layouts, whole
numbers, floats of every magnitude, signed zeros, NaN and infinities.
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Callable, Iterator
from typing import Literal

import numpy as np
import pytest

from inference_obs.engine import blocks, windows as windows_module
from inference_obs.engine.aggregation import aggregate
from inference_obs.engine.evaluate import Evaluator
from inference_obs.engine.facts import Facts
from inference_obs.engine.functions import avg_over_time, increase, sum_over_time
from inference_obs.engine.result import Evaluation
from inference_obs.engine.rules import Rules
from inference_obs.engine.windows import TimeIndex
from inference_obs.query import Selector, rate
from inference_obs.samples import Labels, SampleSet, Series, Vector

P2, P3, VM = Rules.PROMETHEUS_2, Rules.PROMETHEUS_3, Rules.VICTORIAMETRICS

# -- scalar references, as Prometheus's Go code computes them --------------------


def kahan_inc(inc: float, total: float, c: float, v254: bool) -> tuple[float, float]:
    t = total + inc
    if v254 and math.isinf(t):
        return t, 0.0
    if abs(total) >= abs(inc):
        return t, c + ((total - t) + inc)
    return t, c + ((inc - t) + total)


def ref_sum(v: list[float], rules: Rules) -> float:
    if rules is VM:
        total = 0.0
        for x in v:
            total += x
        return total
    total, c = 0.0, 0.0
    for x in v:
        total, c = kahan_inc(x, total, c, rules is P3)
    return total if math.isinf(total) else total + c


def ref_avg(v: list[float], rules: Rules) -> float:
    if rules is VM:
        return ref_sum(v, VM) / len(v)
    if rules is P2:
        mean, c, count = 0.0, 0.0, 0.0
        for x in v:
            count += 1
            if math.isinf(mean):
                if math.isinf(x) and (mean > 0) == (x > 0):
                    continue
                if not math.isinf(x) and not math.isnan(x):
                    continue
            mean, c = kahan_inc(x / count - mean / count, mean, c, False)
        return mean if math.isinf(mean) else mean + c
    total, c, mean, incremental = v[0], 0.0, 0.0, False
    for k, x in enumerate(v[1:], 2):
        if not incremental:
            new_total, new_c = kahan_inc(x, total, c, True)
            if not math.isinf(new_total):
                total, c = new_total, new_c
                continue
            incremental, mean, c = True, total / (k - 1), c / (k - 1)
        q = (k - 1) / k
        mean, c = kahan_inc(x / k, q * mean, q * c, True)
    return mean + c if incremental else total / len(v) + c / len(v)


def ref_increase_change(v: list[float]) -> float:
    # extrapolatedRate's counter correction, before extrapolation.
    result = v[-1] - v[0]
    last = 0.0
    for x in v:
        if x < last:
            result += last
        last = x
    return result


def bits(x: float) -> int:
    return 0x7FF8000000000000 if math.isnan(x) else struct.unpack("<q", struct.pack("<d", x))[0]


# -- data -------------------------------------------------------------------------

STEP_MS = 15_000


def series_values(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "counter":
        return np.cumsum(rng.poisson(3.0, n)).astype(np.float64)
    if kind == "old_counter":
        return 1e6 + np.cumsum(rng.poisson(40.0, n)).astype(np.float64)
    if kind == "resets":
        values = np.cumsum(rng.poisson(3.0, n)).astype(np.float64)
        for at in rng.integers(0, n, 3):
            values[at:] -= values[at] - rng.integers(0, 3)
        return values
    if kind == "gauge":
        return rng.normal(0.5, 0.3, n)
    if kind == "rising_gauge":
        return np.cumsum(rng.random(n)) + rng.random()
    if kind == "wide":
        return rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-300, 300, n)
    if kind == "cancelling":
        return rng.choice([1e16, -1e16, 1.0, 3.5, -2.25], n) * rng.integers(1, 4, n)
    if kind == "integers":
        return rng.integers(-1000, 1000, n).astype(np.float64)
    if kind == "quarters":
        return rng.integers(-400, 400, n) / 4.0
    if kind == "zeros":
        return rng.choice([0.0, -0.0, 5e-324, -5e-324], n)
    if kind == "huge":
        return rng.choice([1e308, 9.9e307, -1e308, 1.0], n)
    if kind == "specials":
        values = rng.normal(0, 1e3, n)
        values[rng.random(n) < 0.02] = np.nan
        values[rng.random(n) < 0.02] = np.inf
        values[rng.random(n) < 0.02] = -np.inf
        return values
    raise ValueError(kind)


KINDS = [
    "counter",
    "old_counter",
    "resets",
    "gauge",
    "rising_gauge",
    "wide",
    "cancelling",
    "integers",
    "quarters",
    "zeros",
    "huge",
    "specials",
]


def sample_set(kinds: list[str], n: int, *, ragged: bool, seed: int) -> SampleSet:
    rng = np.random.default_rng(seed)
    members = []
    for i in range(len(kinds) * 4):
        kind = kinds[i % len(kinds)]
        size = int(rng.integers(0, n + 1)) if ragged else n
        if ragged:
            times = np.cumsum(STEP_MS + rng.integers(-2000, 2000, size))
            times = times + int(rng.integers(0, 10 * STEP_MS))
        else:
            times = np.arange(size) * STEP_MS
        members.append(
            Series("m", {"i": str(i), "kind": kind}, times / 1000, series_values(kind, size, rng))
        )
    return SampleSet.from_series(members)


def layouts() -> Iterator[tuple[str, bool, int, int]]:
    """(name, ragged, samples per series, window edges in steps)."""
    yield "regular-whole", False, 300, 0
    yield "regular-part", False, 300, 120
    yield "ragged", True, 300, 0
    yield "ragged-part", True, 300, 150


def check(
    function: Callable[..., Evaluation],
    reference: Callable[[list[float], Rules], float],
    samples: SampleSet,
    start: int,
    end: int,
    rules: Rules,
) -> None:
    windows = TimeIndex(samples).window(start, end, left_open=rules.left_open)
    got = function(samples, windows, range_s=(end - start) / 1000, rules=rules)
    for i in range(len(samples)):
        window = samples.values[windows.lo[i] : windows.hi[i]].tolist()
        if rules is VM:
            window = [x for x in window if not math.isnan(x)]
        if not window:
            assert not got.present[i]
            continue
        want = reference(window, rules)
        if rules is VM and math.isnan(want):
            assert not got.present[i]
            continue
        assert got.present[i]
        assert bits(float(got.values[i])) == bits(want), (samples.labels[i], got.values[i], want)


@pytest.fixture(params=[1 << 16, 64], ids=["blocks-default", "blocks-tiny"])
def block_size(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    # Tiny blocks make every window cross many block boundaries.
    monkeypatch.setattr(blocks, "_BLOCK", request.param)
    return int(request.param)


@pytest.mark.parametrize("rules", [P2, P3, VM])
@pytest.mark.parametrize("layout", list(layouts()), ids=lambda x: x[0])
@pytest.mark.parametrize("kinds", [KINDS, ["counter"], ["old_counter", "rising_gauge"]])
def test_sums_and_means_equal_prometheus_bit_for_bit(
    rules: Rules, layout: tuple[str, bool, int, int], kinds: list[str], block_size: int
) -> None:
    _, ragged, n, edge = layout
    samples = sample_set(kinds, n, ragged=ragged, seed=len(kinds) * 7 + n)
    start, end = edge * STEP_MS, (n - edge // 3) * STEP_MS
    check(sum_over_time, ref_sum, samples, start, end, rules)
    check(avg_over_time, ref_avg, samples, start, end, rules)


def test_first_sample_window_and_single_windows(block_size: int) -> None:
    samples = sample_set(KINDS, 40, ragged=True, seed=3)
    for end in (0, STEP_MS, 5 * STEP_MS, 50 * STEP_MS):
        for rules in (P2, P3, VM):
            check(avg_over_time, ref_avg, samples, -1, end, rules)
            check(sum_over_time, ref_sum, samples, -1, end, rules)


def ref_increase(t: list[int], v: list[float], start: int, end: int, rules: Rules) -> float:
    """extrapolatedRate (isCounter, not isRate) in 2.42's or 2.51+'s order; VM: no extrapolation."""
    if rules is VM:
        correction = 0.0
        for previous, current in itertools.pairwise(v):
            if current < previous:
                correction += previous
        return v[-1] - v[0] + correction
    d = ref_increase_change(v)
    gap_start, gap_end = (t[0] - start) / 1000, (end - t[-1]) / 1000
    covered = (t[-1] - t[0]) / 1000
    step = covered / (len(v) - 1)
    limit = step * 1.1
    clamp = d > 0 and v[0] >= 0
    if rules is P2:
        if clamp:
            gap_start = min(gap_start, covered * v[0] / d)
        gap_start = gap_start if gap_start < limit else step / 2
    else:
        gap_start = step / 2 if gap_start >= limit else gap_start
        if clamp:
            gap_start = min(gap_start, covered * v[0] / d)
    gap_end = gap_end if gap_end < limit else step / 2
    return d * (covered + gap_start + gap_end) / covered


@pytest.mark.parametrize("rules", [P2, P3, VM])
def test_reset_corrections_are_added_in_prometheus_order(rules: Rules) -> None:
    rng = np.random.default_rng(11)
    members = []
    for i in range(30):
        # Float counters that reset often: the order of additions shows in the bits.
        values = np.cumsum(rng.random(200) * 10.0 ** rng.uniform(-3, 6))
        values[rng.random(200) < 0.2] *= rng.random()
        times = np.cumsum(15_000 + rng.integers(-2000, 2000, 200))
        members.append(Series("c", {"i": str(i)}, times / 1000, values))
    samples = SampleSet.from_series(members)
    index = TimeIndex(samples)
    checked = 0
    for start, end in ((0, 3_000_000), (450_000, 1_200_000), (10, 2_000_000), (-5, 100_000)):
        windows = index.window(start, end, left_open=rules.left_open)
        got = increase(samples, windows, range_s=(end - start) / 1000, rules=rules)
        for i in range(len(samples)):
            lo, hi = int(windows.lo[i]), int(windows.hi[i])
            if rules is VM and lo > int(samples.offsets[i]):
                lo -= 1  # the sample before the window is the base
            v, t = samples.values[lo:hi].tolist(), samples.t_ms[lo:hi].tolist()
            if len(v) < 2:
                continue
            expected = ref_increase(t, v, start, end, rules)
            assert bits(float(got.values[i])) == bits(expected), (i, got.values[i], expected)
            checked += 1
    assert checked > 100


# 0: every edge guessed from the series' own rate (the path of large sets);
# the default: 200 series' edges found by one plain search.
@pytest.mark.parametrize("direct_edges", [0, windows_module._DIRECT_EDGES])
def test_window_edges_match_a_binary_search(
    direct_edges: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(windows_module, "_DIRECT_EDGES", direct_edges)
    rng = np.random.default_rng(5)
    members = []
    for i in range(200):
        size = int(rng.integers(0, 60))
        gaps = rng.choice([1, 15_000, 15_000, 15_000, 60_000, 1_000_000], size) + rng.integers(
            -2000, 2000, size
        )
        times = np.cumsum(np.maximum(gaps, 1)) + int(rng.integers(-(10**6), 10**6))
        members.append(Series("x", {"i": str(i)}, times / 1000, np.zeros(size)))
    samples = SampleSet.from_series(members)
    index = TimeIndex(samples)
    t = samples.t_ms
    edges = [int(x) for x in rng.choice(t, 200)]
    edges += [int(x) for x in rng.integers(-3 * 10**6, 10**8, 200)]
    for start in edges:
        for end in (start + 1, start + 15_000, start + 3_600_000):
            for left_open in (False, True):
                got = index.window(start, end, left_open=left_open)
                for i in range(len(samples)):
                    lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
                    own = t[lo:hi]
                    side: Literal["left", "right"] = "right" if left_open else "left"
                    assert got.lo[i] == lo + np.searchsorted(own, start, side=side)
                    assert got.hi[i] == lo + np.searchsorted(own, end, side="right")


def test_exactly_summable_windows_add_up_exactly_in_any_order() -> None:
    rng = np.random.default_rng(9)
    samples = sample_set(KINDS, 200, ragged=True, seed=9)
    facts = Facts(samples)
    index = TimeIndex(samples)
    for _ in range(20):
        start = int(rng.integers(0, 100)) * STEP_MS
        windows = index.window(start, start + int(rng.integers(1, 300)) * STEP_MS, left_open=True)
        certified = facts.exactly_summable(windows.lo, windows.hi)
        for i in np.flatnonzero(certified):
            v = samples.values[windows.lo[i] : windows.hi[i]]
            exact = math.fsum(v.tolist())
            assert float(np.sum(v)) == exact
            assert float(np.sum(v[::-1])) == exact
            running = 0.0
            for x in v.tolist():
                running += x
            assert running == exact


def test_a_repeated_aggregation_reuses_its_grouping() -> None:
    labels = tuple(Labels({"pod": f"p{i % 7}", "le": str(i % 3)}) for i in range(40))
    vector = Vector(labels, np.arange(40, dtype=np.float64))
    first = aggregate("sum", vector, ("le",), None)
    second = aggregate("sum", Vector(labels, np.arange(40, dtype=np.float64) * 2), ("le",), None)
    assert second.labels is first.labels
    assert second.values.tolist() == [2 * v for v in first.values.tolist()]
    by_pod = aggregate("sum", vector, ("pod",), None)
    assert len(by_pod) == 7
    # An equal but distinct tuple is grouped afresh, with the same result.
    again = aggregate("sum", Vector(tuple(labels), vector.values.copy()), ("le",), None)
    assert again.as_dict() == first.as_dict()


def test_repeated_queries_on_one_evaluator_answer_as_fresh_ones() -> None:
    samples = sample_set(["counter", "resets"], 400, ragged=True, seed=2)
    evaluator = Evaluator(samples, rules=P3)
    expr = rate(Selector("m").over(900)).sum(by=("kind",))
    at = 300 * STEP_MS / 1000
    first = evaluator.evaluate(expr, at)
    assert isinstance(first, Vector)
    for _ in range(3):
        again = evaluator.evaluate(expr, at)
        assert isinstance(again, Vector)
        assert again.as_dict() == first.as_dict()
    fresh = Evaluator(samples, rules=P3).evaluate(expr, at)
    assert isinstance(fresh, Vector)
    assert fresh.as_dict() == first.as_dict()
