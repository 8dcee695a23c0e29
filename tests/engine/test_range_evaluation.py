"""Range evaluation node by node, the values kept between queries, and the window search."""

from __future__ import annotations

import math

import numpy as np
import pytest

from inference_obs.engine import windows as windows_module
from inference_obs.engine.evaluate import Evaluator
from inference_obs.engine.memo import Memo
from inference_obs.engine.windows import TimeIndex
from inference_obs.query import (
    Aggregate,
    Binary,
    Expr,
    Number,
    Selector,
    clamp_min,
    count_over_time,
    histogram_quantile,
    label_replace,
    last_over_time,
    max_over_time,
    on,
    quantile_over_time,
    rate,
    sum_over_time,
)
from inference_obs.samples import STALE_NAN, SampleSet, Series, Vector

START = 1_700_000_000.0


def _fleet() -> SampleSet:
    """Irregular scrapes, a gap, a staleness marker, a restart and buckets: what ranges meet."""
    rng = np.random.default_rng(7)
    series = []
    for pod in ("a", "b", "c"):
        times = START + np.cumsum(rng.uniform(10.0, 20.0, 120))
        if pod == "b":
            times = np.concatenate((times[:40], times[70:]))  # a gap of about 7 minutes
        counter = np.cumsum(rng.uniform(0.0, 5.0, times.size))
        if pod == "c":
            counter[60:] -= counter[60]  # a restart
        gauge = rng.integers(0, 4, times.size).astype(np.float64)
        gauge[-1] = STALE_NAN if pod == "a" else gauge[-1]
        series.append(Series("c_total", {"pod": pod}, times, counter))
        series.append(Series("g", {"pod": pod, "node": f"n-{pod}"}, times, gauge))
        for le, share in (("0.1", 0.3), ("1.0", 0.8), ("+Inf", 1.0)):
            series.append(Series("h_bucket", {"pod": pod, "le": le}, times, counter * share))
    return SampleSet.from_series(series)


C, G, H = Selector("c_total"), Selector("g"), Selector("h_bucket")
BUSY = Binary(">", max_over_time(G.over(45)), Number(0))
SHARED: list[Expr] = [
    rate(C.over(60)).sum(by=("pod",)),
    sum_over_time(G.over(45)).sum(by=("pod",)) / max_over_time(G.over(45)).sum(by=("pod",)),
    Binary("and", rate(C.over(60)), BUSY, matching=on("pod")),
    Binary("or", Binary("<", G, Number(2)), BUSY),
    histogram_quantile(0.9, rate(H.over(120)).sum(by=("le",))),
    histogram_quantile(0.5, rate(H.over(120)).sum(by=("le", "pod"))),
    last_over_time(Selector("g", offset=30.0).over(60)),
    quantile_over_time(0.75, G.over(90)),
    label_replace(clamp_min(G, 1.0), "where", "$1", "node", "n-(.*)"),
    G.topk(2),
    # Reduced over all steps at once where the steps share their label tuple (0/0 is NaN).
    (G / G).min(),
    (G / G).max(by=("node",)),
    rate(C.over(60)).avg(without=("pod",)),
    G.count(by=("pod",)),
    Aggregate("group", G, by=("node",)),
    G * 2 - rate(C.over(60)).sum(by=("pod",)).max(),
]


def _same(a: object, b: object) -> None:
    if isinstance(a, Vector):
        assert isinstance(b, Vector)
        assert a.labels == b.labels
        assert np.array_equal(a.values, b.values, equal_nan=True)
        assert a.annotations == b.annotations
    else:
        assert a == b or (math.isnan(a) and math.isnan(b))  # type: ignore[arg-type]


@pytest.mark.parametrize("expr", SHARED, ids=range(len(SHARED)))
def test_each_step_of_a_range_is_what_an_instant_query_gives(expr: Expr) -> None:
    samples = _fleet()
    shared = Evaluator(samples)
    for other in SHARED:  # parts of the other queries kept, as in a report
        shared.evaluate_range(other, 1_700_000_300_000, 1_700_001_500_000, 45_000)
    start_ms, end_ms, step_ms = 1_700_000_000_000, 1_700_001_900_000, 30_000
    steps = shared.evaluate_range(expr, start_ms, end_ms, step_ms)
    times = range(start_ms, end_ms + 1, step_ms)
    assert len(steps) == len(times)
    for t, got in zip(times, steps, strict=True):
        _same(got, Evaluator(samples).evaluate(expr, t / 1000))


def test_a_part_two_queries_share_is_evaluated_once_and_kept_read_only() -> None:
    evaluator = Evaluator(_fleet())
    part = rate(C.over(60)).sum(by=("pod",))
    first = evaluator.evaluate(part, START + 900)
    # label_replace hands on its operand's values array: the same array again
    # means the operand was not evaluated again.
    again = evaluator.evaluate(label_replace(part, "x", "y", "pod", "nothing"), START + 900)
    assert isinstance(first, Vector)
    assert isinstance(again, Vector)
    assert again.values is first.values
    assert not first.values.flags.writeable
    other_time = evaluator.evaluate(part, START + 901)
    assert isinstance(other_time, Vector)
    assert other_time.values is not first.values


def test_a_negative_zero_never_shares_the_value_of_a_positive_one() -> None:
    evaluator = Evaluator(_fleet())
    plus = Binary("/", Number(1), Binary("*", G.sum(), Number(0.0)))
    minus = Binary("/", Number(1), Binary("*", G.sum(), Number(-0.0)))
    assert plus == minus  # what makes the case: equal nodes, different values
    for first, second, sign in ((plus, minus, -1.0), (minus, plus, 1.0)):
        evaluator.evaluate(first, START + 600)
        value = evaluator.evaluate(second, START + 600)
        assert isinstance(value, Vector)
        assert value.values.tolist() == [sign * math.inf]


def test_the_memo_keeps_what_fits_its_budget_least_recently_used_first() -> None:
    memo = Memo(budget=10)
    made: list[str] = []

    def make(name: str) -> str:
        made.append(name)
        return name

    for key in ("a", "b", "a", "c"):  # a (4) and b (4) fit; a is used again; c (4) drops b
        memo.get_or_make(key, lambda k=key: make(k), lambda _: 4)  # type: ignore[misc]
    memo.get_or_make("a", lambda: make("a"), lambda _: 4)
    memo.get_or_make("b", lambda: make("b"), lambda _: 4)
    memo.get_or_make("huge", lambda: make("huge"), lambda _: 11)
    memo.get_or_make("huge", lambda: make("huge"), lambda _: 11)
    assert made == ["a", "b", "c", "b", "huge", "huge"]


def test_kept_hits_count_parts_answered_by_an_earlier_query_and_forget_drops_them() -> None:
    evaluator = Evaluator(_fleet())
    # The running mean's two sides share one selector's windows inside one
    # query: sharing inside a query is not a kept answer.
    mean = sum_over_time(G.over(300)).sum() / count_over_time(G.over(300)).sum()
    first = evaluator.evaluate(mean, START + 900)
    assert evaluator.kept_hits == 0
    # The same query again: its root is answered by the first query's value.
    again = evaluator.evaluate(mean, START + 900)
    assert evaluator.kept_hits == 1
    assert isinstance(first, Vector)
    assert isinstance(again, Vector)
    assert again.values is first.values
    # Emptied before each query, nothing comes from an earlier one, and the
    # answer is computed again (a new array) with the same value.
    for _ in range(3):
        evaluator.forget()
        cold = evaluator.evaluate(mean, START + 900)
        assert isinstance(cold, Vector)
        assert cold.values is not first.values
        assert cold.values.tolist() == first.values.tolist()
    assert evaluator.kept_hits == 1


def test_the_memo_counts_hits_on_values_of_earlier_rounds_only() -> None:
    memo = Memo(budget=10)
    memo.get_or_make("a", lambda: "a", lambda _: 1)
    memo.get_or_make("a", lambda: "a", lambda _: 1)  # same round: not counted
    assert memo.kept_hits == 0
    memo.next_round()
    memo.get_or_make("a", lambda: "a", lambda _: 1)  # made in round 0, found in round 1
    memo.get_or_make("b", lambda: "b", lambda _: 1)
    memo.get_or_make("b", lambda: "b", lambda _: 1)  # made in round 1: not counted
    assert memo.kept_hits == 1
    memo.clear()
    made: list[str] = []

    def make() -> str:
        made.append("a")
        return "a"

    memo.get_or_make("a", make, lambda _: 1)
    assert made == ["a"]  # cleared: made again
    assert memo.kept_hits == 1


@pytest.mark.parametrize("direct_edges", [0, windows_module._DIRECT_EDGES])
@pytest.mark.parametrize("left_open", [False, True])
def test_windows_found_together_are_each_window_found_alone(
    left_open: bool, direct_edges: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 0: edges guessed from each series' rate; the default: one plain search.
    monkeypatch.setattr(windows_module, "_DIRECT_EDGES", direct_edges)
    samples = _fleet()
    empty = SampleSet.from_series([])
    ends = [int(START * 1000) + k for k in range(-60_000, 2_400_000, 37_123)]
    starts = [end - 45_000 for end in ends]
    for subset in (samples, empty):
        index = TimeIndex(subset)
        together = index.windows(starts, ends, left_open=left_open)
        assert len(together) == len(ends)
        for found, a, b in zip(together, starts, ends, strict=True):
            alone = index.window(a, b, left_open=left_open)
            assert (found.start_ms, found.end_ms) == (a, b)
            assert np.array_equal(found.lo, alone.lo)
            assert np.array_equal(found.hi, alone.hi)
