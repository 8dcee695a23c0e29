"""Latency at matched concurrency: the fair comparison when two deployments ran at different load.

A P95 taken over a window mixes every load the deployment saw. When one
side carried far more requests in flight, its tail may be load, not
hardware. :func:`matched_concurrency` keeps, on each side, only the
intervals (``step`` seconds each) whose mean requests in flight lie in the
band both sides reached (from the larger of their 5th percentiles to the
smaller of their 95th), adds those intervals' bucket increases, and
estimates the quantiles from them, with the bucket as bounds. When the
bands do not overlap there is no fair comparison in the data, and the
result says so instead of inventing one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

import numpy as np
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from inference_obs.deployment import Deployment
from inference_obs.engine.histograms import histogram_quantile, parse_le, quantile_bounds
from inference_obs.errors import Annotation
from inference_obs.metrics import vllm
from inference_obs.metrics.family import Family
from inference_obs.query import avg_over_time, increase, to_promql
from inference_obs.reading.context import Reading, Source
from inference_obs.reading.measurement import Bounds, Measurement, Status, note_lowest_bucket
from inference_obs.samples import Matrix, Window

__all__ = ["MatchedConcurrency", "matched_concurrency"]

ANALYSIS = "matched_concurrency"
#: The band is where both sides spent time: between these percentiles of each side's load.
BAND_PERCENTILES = (5.0, 95.0)
#: Fewer kept intervals than this on a side is said in the reason: the quantiles rest on little.
MIN_INTERVALS = 5


class MatchedConcurrency(BaseModel):
    """Quantiles of one latency histogram over intervals of matched requests in flight."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    family: str
    band: tuple[float, float] | None = Field(description="Requests in flight kept, or None.")
    step_seconds: float
    intervals: dict[str, int] = Field(description="Deployment -> intervals inside the band.")
    kept: dict[str, tuple[AwareDatetime, ...]] = Field(
        default_factory=dict, description="Deployment -> end of each interval kept."
    )
    observations: dict[str, float] = Field(
        default_factory=dict, description="Deployment -> observations in the kept intervals."
    )
    quantiles: dict[str, dict[str, Measurement]] = Field(
        description="Deployment -> 'p50'/'p95' -> Measurement (seconds)."
    )
    reason: str


def _per_step(matrix: Matrix) -> dict[int, float]:
    """Timestamp (ms) -> value of a one-series answer (NaN dropped)."""
    if not len(matrix):
        return {}
    t_ms, values = matrix.points(0)
    keep = ~np.isnan(values)
    return dict(zip(t_ms[keep].tolist(), values[keep].tolist(), strict=True))


def _load(
    source: Source, d: Deployment, window: Window, step: float
) -> tuple[dict[int, float], str]:
    expr = avg_over_time(vllm.NUM_REQUESTS_RUNNING.select(d.matchers).over(step)).sum()
    return _per_step(source.range(expr, window, step)), to_promql(expr)


def _buckets(
    source: Source, family: Family, d: Deployment, window: Window, step: float
) -> tuple[dict[int, dict[float, float]], str]:
    """Timestamp (ms) -> upper bound -> observations in the interval ending there."""
    expr = increase(family.select(d.matchers, "bucket").over(step)).sum(by=("le",))
    matrix = source.range(expr, window, step)
    bounds = parse_le([labels.get("le", "") for labels in matrix.labels])
    out: dict[int, dict[float, float]] = {}
    for i, bound in enumerate(bounds):
        if math.isnan(bound):
            continue
        t_ms, values = matrix.points(i)
        for t, v in zip(t_ms.tolist(), values.tolist(), strict=True):
            if not math.isnan(v):
                out.setdefault(t, {})[float(bound)] = out.get(t, {}).get(float(bound), 0.0) + v
    return out, to_promql(expr)


def _quantiles(
    d: Deployment,
    window: Window,
    family: Family,
    counts: dict[float, float],
    promql: tuple[str, ...],
    source: Source,
    computation: str,
    matched_with: str,
) -> dict[str, Measurement]:
    reading = Reading(source, d, window, ANALYSIS)
    rules = source.info().rules
    upper = np.array(sorted(counts), dtype=np.float64)
    totals = np.array([counts[u] for u in sorted(counts)], dtype=np.float64)
    groups = np.zeros(upper.size, dtype=np.int64)
    out = {}
    for label, q in (("p50", 0.5), ("p95", 0.95)):
        statistic = f"{family.name.split(':')[-1]}_{label}_matched_with_{matched_with}"
        value: float | None = None
        bounds = None
        if upper.size and totals[-1] > 0:
            value = float(histogram_quantile(q, upper, totals, groups, 1, rules=rules).values[0])
            low, high = quantile_bounds(q, upper, totals, groups, 1)
            bounds = Bounds(lower=float(low[0]), upper=float(high[0]))
        ok = value is not None and not math.isnan(value)
        out[label] = note_lowest_bucket(
            reading.made(
                statistic,
                value if ok else None,
                family.unit,
                Status.OK if ok else Status.NO_DATA,
                promql=promql,
                computation=computation,
                bounds=bounds,
                annotations=() if ok else (Annotation("no_data", "no observation in the band"),),
            )
        )
    return out


def matched_concurrency(
    source: Source,
    deployments: Sequence[Deployment],
    windows: dict[str, Window],
    family: Family = vllm.INTER_TOKEN_LATENCY,
    *,
    step: float = 60.0,
) -> MatchedConcurrency:
    """P50 and P95 of ``family`` on each side, over intervals of matched requests in flight.

    Parameters
    ----------
    source
        Where the series come from.
    deployments
        The deployments compared (two or more).
    windows
        Each deployment's window, by name.
    family
        A latency histogram (default inter-token latency, the most load-sensitive).
    step
        Interval length, seconds: the load and the bucket increases are taken per step.

    Returns
    -------
    MatchedConcurrency
        The band and, per deployment, the intervals kept and the quantiles
        (seconds, each with its bucket as bounds); no band and ``no_data``
        quantiles when the loads never overlap, with the reason.
    """
    loads, sources = {}, {}
    for d in deployments:
        loads[d.name], sources[d.name] = _load(source, d, windows[d.name], step)
    silent = [name for name, series in loads.items() if not series]
    if silent:
        why = f"no load series for {', '.join(silent)}"
        return _empty(family, step, deployments, windows, source, why, sources)
    spans = [np.percentile(list(series.values()), BAND_PERCENTILES) for series in loads.values()]
    low, high = max(float(s[0]) for s in spans), min(float(s[1]) for s in spans)
    if low > high:
        why = "the loads never overlap: " + ", ".join(
            f"{n} ran {float(s[0]):.3g}-{float(s[1]):.3g} requests in flight"
            for n, s in zip(loads, spans, strict=True)
        )
        return _empty(family, step, deployments, windows, source, why, sources)
    kept: dict[str, int] = {}
    ends: dict[str, tuple[datetime, ...]] = {}
    observations: dict[str, float] = {}
    quantiles = {}
    computation = (
        f"bucket increases summed over the {step:g} s intervals whose mean requests in flight "
        f"lie in [{low:.3g}, {high:.3g}]; quantiles of the sum"
    )
    for d in deployments:
        buckets, promql = _buckets(source, family, d, windows[d.name], step)
        chosen = [t for t, load in loads[d.name].items() if low <= load <= high and t in buckets]
        kept[d.name] = len(chosen)
        zone = windows[d.name].start.tzinfo
        ends[d.name] = tuple(datetime.fromtimestamp(t / 1000, tz=zone) for t in sorted(chosen))
        summed: dict[float, float] = {}
        for t in chosen:
            for bound, count in buckets[t].items():
                summed[bound] = summed.get(bound, 0.0) + count
        observations[d.name] = summed.get(math.inf, 0.0)
        others = "_".join(o.name for o in deployments if o.name != d.name)
        quantiles[d.name] = _quantiles(
            d,
            windows[d.name],
            family,
            summed,
            (sources[d.name], promql),
            source,
            computation,
            others,
        )
    return MatchedConcurrency(
        family=family.name,
        band=(low, high),
        step_seconds=step,
        intervals=kept,
        kept=ends,
        observations=observations,
        quantiles=quantiles,
        reason=f"{step:g} s intervals with {low:.3g}-{high:.3g} requests in flight on every side"
        + (
            ""
            if min(kept.values()) >= MIN_INTERVALS
            else f" (fewer than {MIN_INTERVALS} on a side)"
        ),
    )


def _empty(
    family: Family,
    step: float,
    deployments: Sequence[Deployment],
    windows: dict[str, Window],
    source: Source,
    reason: str,
    load_promql: dict[str, str],
) -> MatchedConcurrency:
    return MatchedConcurrency(
        family=family.name,
        band=None,
        step_seconds=step,
        intervals={d.name: 0 for d in deployments},
        quantiles={
            d.name: _quantiles(
                d,
                windows[d.name],
                family,
                {},
                (load_promql[d.name],),
                source,
                reason,
                "_".join(o.name for o in deployments if o.name != d.name),
            )
            for d in deployments
        },
        reason=reason,
    )
