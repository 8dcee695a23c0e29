"""The interpreter: selection, lookback, staleness, aggregation, matching, histograms.

Each expected number is derived in a comment from the data written here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from inference_obs.engine.evaluate import Evaluator, evaluate
from inference_obs.engine.rules import Rules
from inference_obs.errors import NotSupportedOffline, QueryFailed
from inference_obs.metrics import builders as b, dcgm
from inference_obs.query import (
    Binary,
    Matcher,
    Number,
    Selector,
    Subquery,
    absent,
    clamp,
    histogram_quantile,
    ignoring,
    increase,
    label_replace,
    on,
    rate,
    scalar,
    timestamp,
    vector,
)
from inference_obs.samples import STALE_NAN, Labels, SampleSet, Series, Vector

MINUTE = 60.0
TIMES = np.arange(0.0, 601.0, MINUTE)  # 0, 60, ..., 600 s: 11 samples


def _set(*series: Series) -> SampleSet:
    return SampleSet.from_series(series)


def _values(result: object) -> dict[tuple[tuple[str, str], ...], float]:
    assert isinstance(result, Vector)
    return {tuple(labels.items()): value for labels, value in result.as_dict().items()}


COUNTERS = _set(
    Series("c_total", {"pod": "a"}, TIMES, TIMES * 1.0),  # 1/s
    Series("c_total", {"pod": "b"}, TIMES, TIMES * 2.0),  # 2/s
    Series("g", {"pod": "a", "node": "n1"}, TIMES, np.full_like(TIMES, 10.0)),
    Series("g", {"pod": "b", "node": "n2"}, TIMES, np.full_like(TIMES, 30.0)),
)
C = Selector("c_total")
G = Selector("g")


def test_rate_and_increase_over_aligned_samples() -> None:
    # Prometheus 2: [0, 600] holds samples at both ends, no extrapolation: 600 and 1200.
    result = evaluate(increase(C.over(600)), COUNTERS, 600)
    assert _values(result) == {(("pod", "a"),): 600.0, (("pod", "b"),): 1200.0}
    assert _values(evaluate(rate(C.over(600)).sum(), COUNTERS, 600)) == {(): 3.0}


def test_left_open_window_drops_the_sample_at_the_start() -> None:
    # Prometheus 3: (0, 600] holds 60..600 (10 samples, 540 s covered); the
    # start gap of 60 s is within 1.1 x the 60 s spacing, so it extrapolates
    # the full 60 s back: increase = 540 * 600/540 = 600, the same here.
    result = evaluate(increase(C.over(600)), COUNTERS, 600, rules=Rules.PROMETHEUS_3)
    assert _values(result)[(("pod", "a"),)] == pytest.approx(600.0)
    # A 1-minute window over 1-minute samples holds one sample on 3.x: no rate.
    assert _values(evaluate(rate(C.over(60)), COUNTERS, 600, rules=Rules.PROMETHEUS_3)) == {}
    assert len(_values(evaluate(rate(C.over(60)), COUNTERS, 600))) == 2


def test_instant_selector_lookback_and_name() -> None:
    result = _values(evaluate(G, COUNTERS, 600))
    assert result[(("__name__", "g"), ("node", "n1"), ("pod", "a"))] == 10.0
    # The newest sample is at 600 s; at 900 s it is exactly 5 minutes old:
    # visible on Prometheus 2 (closed lookback), gone on 3.x (left-open).
    assert len(_values(evaluate(G, COUNTERS, 900))) == 2
    assert _values(evaluate(G, COUNTERS, 900, rules=Rules.PROMETHEUS_3)) == {}
    assert _values(evaluate(G, COUNTERS, 900.001)) == {}


def test_staleness_marker_hides_the_series_but_not_older_range_samples() -> None:
    stale = _set(Series("s", {}, [0.0, 60.0, 120.0], [1.0, 2.0, STALE_NAN]))
    assert _values(evaluate(Selector("s"), stale, 130)) == {}
    assert _values(evaluate(Selector("s"), stale, 100)) == {(("__name__", "s"),): 2.0}
    # Range functions never see the marker: sum_over_time = 1 + 2.
    from inference_obs.query import sum_over_time

    assert _values(evaluate(sum_over_time(Selector("s").over(300)), stale, 130)) == {(): 3.0}


def test_matchers_select_series() -> None:
    selected = G.where(Matcher.regex("pod", "a|c"))
    assert list(_values(evaluate(selected, COUNTERS, 600))) == [
        (("__name__", "g"), ("node", "n1"), ("pod", "a"))
    ]
    by_name = Selector(None, (Matcher.regex("__name__", "g|c_total"),))
    assert len(_values(evaluate(by_name, COUNTERS, 600))) == 4


def test_aggregations() -> None:
    assert _values(evaluate(G.sum(), COUNTERS, 600)) == {(): 40.0}
    assert _values(evaluate(G.avg(), COUNTERS, 600)) == {(): 20.0}
    assert _values(evaluate(G.max(by=("node",)), COUNTERS, 600)) == {
        (("node", "n1"),): 10.0,
        (("node", "n2"),): 30.0,
    }
    assert _values(evaluate(G.count(without=("pod",)), COUNTERS, 600)) == {
        (("node", "n1"),): 1.0,
        (("node", "n2"),): 1.0,
    }
    # quantile over {10, 30}: rank 0.5 * (2 - 1) = 0.5 -> 20.
    assert _values(evaluate(G.quantile(0.5), COUNTERS, 600)) == {(): 20.0}
    assert list(_values(evaluate(G.topk(1), COUNTERS, 600)).values()) == [30.0]


def test_min_max_ignore_nan_unless_all_nan() -> None:
    data = _set(Series("n", {"i": "1"}, [0.0], [math.nan]), Series("n", {"i": "2"}, [0.0], [5.0]))
    assert _values(evaluate(Selector("n").min(), data, 0)) == {(): 5.0}
    only_nan = _set(Series("n", {"i": "1"}, [0.0], [math.nan]))
    assert math.isnan(_values(evaluate(Selector("n").max(), only_nan, 0))[()])


def test_binary_arithmetic_and_matching() -> None:
    # One-to-one on identical label sets (names dropped): g / g = 1.
    assert set(_values(evaluate(G / G, COUNTERS, 600)).values()) == {1.0}
    # Counter rate per pod divided by the gauge per pod, matched on pod only.
    ratio = Binary("/", rate(C.over(600)), G, matching=on("pod"))
    assert _values(evaluate(ratio, COUNTERS, 600)) == {
        (("pod", "a"),): 1.0 / 10.0,
        (("pod", "b"),): 2.0 / 30.0,
    }
    # Many-to-one: every g series times the single total, keeping g's labels.
    total = G.sum()
    many = Binary("*", G, total, matching=on().group_left())
    assert set(_values(evaluate(many, COUNTERS, 600)).values()) == {400.0, 1200.0}
    scaled = evaluate(G * 2 + 1, COUNTERS, 600)
    assert set(_values(scaled).values()) == {21.0, 61.0}
    assert evaluate(Number(2) * Number(3), COUNTERS, 600) == 6.0


def test_comparisons_filter_or_return_bool() -> None:
    kept = _values(evaluate(Binary(">", G, Number(20)), COUNTERS, 600))
    assert kept == {(("__name__", "g"), ("node", "n2"), ("pod", "b")): 30.0}
    flags = _values(evaluate(Binary(">", G, Number(20), bool_=True), COUNTERS, 600))
    assert sorted(flags.values()) == [0.0, 1.0]
    assert all(("__name__", "g") not in key for key in flags)


def test_set_operators() -> None:
    high = Binary(">", G, Number(20))
    assert len(_values(evaluate(Binary("and", G, high), COUNTERS, 600))) == 1
    assert len(_values(evaluate(Binary("unless", G, high), COUNTERS, 600))) == 1
    assert len(_values(evaluate(Binary("or", high, G), COUNTERS, 600))) == 2


def test_many_to_many_is_an_execution_error() -> None:
    both = Binary("/", G, G, matching=ignoring("pod", "node"))
    with pytest.raises(QueryFailed, match="many-to-many") as info:
        evaluate(both, COUNTERS, 600)
    assert info.value.error_type == "execution"


def test_instant_functions() -> None:
    assert set(_values(evaluate(clamp(G, 15, 25), COUNTERS, 600)).values()) == {15.0, 25.0}
    replaced = evaluate(label_replace(G, "host", "node-$1", "node", "n(.*)"), COUNTERS, 600)
    assert {dict(k).get("host") for k in _values(replaced)} == {"node-1", "node-2"}
    assert _values(evaluate(absent(Selector("nope", (Matcher.equal("a", "b"),))), COUNTERS, 0)) == {
        (("a", "b"),): 1.0
    }
    assert _values(evaluate(absent(G), COUNTERS, 600)) == {}
    assert evaluate(scalar(G.sum()), COUNTERS, 600) == 40.0
    assert _values(evaluate(vector(Number(7)), COUNTERS, 600)) == {(): 7.0}


def test_timestamp_of_a_selector_is_the_time_of_the_sample_it_took() -> None:
    jittered = _set(
        Series("j", {"pod": "a"}, [3.342, 63.343, 123.35], [1.0, 2.0, 3.0]),
        Series("j", {"pod": "b"}, [10.0, 70.0, 130.0, 131.0], [1.0, 2.0, 3.0, STALE_NAN]),
    )
    # At 100 s each series' newest sample is its second: 63.343 s and 70 s, not 100 s.
    assert _values(evaluate(timestamp(Selector("j")), jittered, 100)) == {
        (("pod", "a"),): 63.343,
        (("pod", "b"),): 70.0,
    }
    # At 140 s b's newest is a staleness marker: absent, as the selector itself is.
    assert _values(evaluate(timestamp(Selector("j")), jittered, 140)) == {(("pod", "a"),): 123.35}
    # Of anything but a selector, the evaluation time (Prometheus funcTimestamp).
    assert _values(evaluate(timestamp(Selector("j").sum()), jittered, 100)) == {(): 100.0}


def test_histogram_quantile_merges_buckets_across_series() -> None:
    # Two replicas; per replica 60 observations a minute. Replica a puts all
    # in (0.1, 0.5], replica b all in (0.5, 1]. Merged over 10 minutes: 600
    # below 0.5 and 1200 in (0.5, 1]; the median (rank 900) lies in (0.5, 1]
    # at (900 - 600) / 1200 of the way: 0.5 + 0.5 * 0.25 = 0.625.
    series = []
    for pod, fill in (
        ("a", {"0.1": 0, "0.5": 1, "1.0": 1, "+Inf": 1}),
        ("b", {"0.1": 0, "0.5": 0, "1.0": 2, "+Inf": 2}),
    ):
        for le, per_second in fill.items():
            series.append(Series("h_bucket", {"pod": pod, "le": le}, TIMES, TIMES * per_second))
    data = SampleSet.from_series(series)
    merged = histogram_quantile(0.5, increase(Selector("h_bucket").over(600)).sum(by=("le",)))
    assert _values(evaluate(merged, data, 600)) == {(): pytest.approx(0.625)}
    per_pod = histogram_quantile(0.5, increase(Selector("h_bucket").over(600)))
    # Per pod: a's median is 0.1 + 0.4 * 0.5 = 0.3; b's is 0.5 + 0.5 * 0.5 = 0.75.
    assert _values(evaluate(per_pod, data, 600)) == {
        (("pod", "a"),): pytest.approx(0.3),
        (("pod", "b"),): pytest.approx(0.75),
    }


def test_builders_evaluate_offline() -> None:
    # The published recheck queries, over data with a known answer.
    gpus = SampleSet.from_series(
        [
            Series("DCGM_FI_DEV_GPU_UTIL", {"gpu": "0"}, TIMES, np.full_like(TIMES, 100.0)),
            Series("DCGM_FI_DEV_GPU_UTIL", {"gpu": "1"}, TIMES, np.zeros_like(TIMES)),
            Series("DCGM_FI_DEV_GPU_UTIL", {"gpu": "2"}, TIMES[:3], np.full_like(TIMES[:3], 50.0)),
        ]
    )
    # 11 samples at 100, 11 at 0, 3 at 50: (1100 + 0 + 150) / 25 = 50, zeros included.
    assert _values(evaluate(b.sample_mean(dcgm.GPU_UTIL, [], 600), gpus, 600)) == {(): 50.0}
    evaluator = Evaluator(COUNTERS)
    assert _values(evaluator.evaluate(b.maximum(dcgm.GPU_UTIL, [], 600), 600)) == {}
    with pytest.raises(NotSupportedOffline, match="Subquery") as info:
        evaluator.evaluate(Subquery(G, 600, 60), 600)
    assert "g[10m:1m]" in str(info.value)


def test_labels_type_is_hashable_mapping() -> None:
    assert Labels({"b": "1", "a": "2"}) == {"a": "2", "b": "1"}
