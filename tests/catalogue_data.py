"""Synthetic series for every catalogue family, with the answers each builder must give.

Two replicas over one hour, one scrape a minute, aligned so that Prometheus
2.42 (both window ends closed) sees a sample exactly at each end and needs no
extrapolation:

- counters grow at 1/s (replica a) and 2/s (replica b): increase 10,800;
- gauges are constant, a quarter and three quarters up their value range:
  the sample-weighted mean is the middle, the maximum the upper value;
- histograms observe one value per second per unit of rate, exactly at a
  middle bucket edge ``x``: mean ``x``, and the q-quantile interpolates
  between the bucket below and ``x`` (``lo + (x - lo) * q``).

The expected numbers are derived here from that construction, independently
of the code under test. In this aligned case every rule set (Prometheus 2
and 3, VictoriaMetrics) must give the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from inference_obs.metrics import FAMILIES, builders as b
from inference_obs.metrics.family import Family, MetricType
from inference_obs.query import Expr
from inference_obs.samples import Series

HOUR = 3600.0
STEP = 60.0
RATES = {"a": 1.0, "b": 2.0}
# Recent enough for VictoriaMetrics' wall-clock retention, aligned to the minute.
T0 = math.floor(1.7e9 / 3600) * 3600.0
T_END = T0 + HOUR
TIMES = np.arange(T0, T_END + STEP / 2, STEP)
LABEL_VALUES = {
    "finished_reason": "stop",
    "reason": "capacity",
    "source": "local_compute",
    "cache_source": "device",  # SGLang's GPU radix cache, which a standard query selects
    "position": "0",
    "operation": "get",
    "status": "success",
    "engine": "0",
    "model_name": "m",
    "modelName": "NVIDIA H20",
    "Hostname": "node-1",
}
# SGLang families whose default buckets are unknown get these for the test.
FALLBACK_BUCKETS = (1.0, 10.0, 100.0)


@dataclass(frozen=True)
class Truth:
    """What the builders must return for one family on the synthetic data."""

    total: float  # counter or histogram-count increase over the hour, both replicas
    value: float  # histogram observation, or gauge mean
    low_bucket: float  # bucket edge below the observation (0 for the first bucket)
    high: float  # largest gauge value


def _buckets(family: Family) -> tuple[float, ...]:
    return family.buckets or FALLBACK_BUCKETS


def _truth(family: Family) -> Truth:
    total = sum(RATES.values()) * HOUR
    if family.type is MetricType.HISTOGRAM:
        buckets = _buckets(family)
        k = len(buckets) // 2
        low = buckets[k - 1] if k else 0.0
        return Truth(total, buckets[k], low, math.nan)
    lo, hi = family.value_range or (0.0, 40.0)
    a, b_ = lo + 0.25 * (hi - lo), lo + 0.75 * (hi - lo)
    if family.type is MetricType.INFO:
        a = b_ = 1.0
    return Truth(total, (a + b_) / 2, math.nan, b_)


def _series_for(family: Family) -> list[Series]:
    truth = _truth(family)
    out = []
    for replica, rate in RATES.items():
        labels = {label: LABEL_VALUES.get(label, "x") for label in family.labels}
        labels |= {
            "pod": f"replica-{replica}",
            "instance": f"10.0.0.{rate:.0f}:8000",
            "gpu": str(int(rate)),
        }
        count = rate * (TIMES - T0)
        if family.type is MetricType.COUNTER:
            out.append(Series(family.name, labels, TIMES, count))
        elif family.type is MetricType.HISTOGRAM:
            out.append(Series(f"{family.name}_count", labels, TIMES, count))
            out.append(Series(f"{family.name}_sum", labels, TIMES, count * truth.value))
            for bound in (*_buckets(family), math.inf):
                le = b.bucket_bound_spellings(bound)[0]
                filled = count if bound >= truth.value else np.zeros_like(count)
                out.append(Series(f"{family.name}_bucket", labels | {"le": le}, TIMES, filled))
        else:
            lo, hi = family.value_range or (0.0, 40.0)
            level = 0.25 if replica == "a" else 0.75
            value = 1.0 if family.type is MetricType.INFO else lo + level * (hi - lo)
            out.append(Series(family.name, labels, TIMES, np.full_like(TIMES, value)))
    return out


SERIES = [s for family in FAMILIES for s in _series_for(family)]


def _checks(family: Family) -> list[tuple[str, Expr, float]]:
    """(what, expression, expected value) for each builder that fits the family."""
    truth = _truth(family)
    if family.type is MetricType.COUNTER and not family.already_rate:
        return [
            ("increase", b.increase_total(family, [], HOUR), truth.total),
            ("rate", b.per_second(family, [], HOUR), truth.total / HOUR),
        ]
    if family.type is MetricType.HISTOGRAM:
        x, lo = truth.value, truth.low_bucket
        return (
            [
                ("count", b.histogram_count(family, [], HOUR), truth.total),
                ("mean", b.histogram_mean(family, [], HOUR), x),
                ("p50", b.histogram_quantile_merged(family, 0.5, [], HOUR), lo + (x - lo) * 0.5),
                ("p95", b.histogram_quantile_merged(family, 0.95, [], HOUR), lo + (x - lo) * 0.95),
                ("share<=x", b.share_at_or_below(family, x, [], HOUR), 1.0),
                ("share<=lo", b.share_at_or_below(family, lo, [], HOUR), 0.0),
            ]
            if lo > 0
            else [
                ("count", b.histogram_count(family, [], HOUR), truth.total),
                ("mean", b.histogram_mean(family, [], HOUR), x),
            ]
        )
    return [
        ("sample mean", b.sample_mean(family, [], HOUR), truth.value),
        ("maximum", b.maximum(family, [], HOUR), truth.high),
    ]


CHECKS = [
    (family, what, expr, expected)
    for family in FAMILIES
    for what, expr, expected in _checks(family)
]


def close(actual: float, expected: float) -> bool:
    """Equal to 1e-9 relative (VictoriaMetrics keeps about 12 significant digits)."""
    return math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12)
