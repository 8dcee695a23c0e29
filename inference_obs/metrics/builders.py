"""Typed builders: the statistically right query for each kind of question.

Each builder takes a :class:`~inference_obs.metrics.family.Family`, the
deployment's matchers, a window in seconds and optional grouping labels, and
returns an expression (never text). The rules of the library live here:

- counters are turned into per-series ``increase``/``rate`` first, then summed
  (a restart resets one series, not the sum);
- request means are ``sum(increase(_sum)) / sum(increase(_count))``;
- quantiles come from buckets summed ``by (le)`` across every replica;
- gauge means are sample-weighted over every series, zeros included;
- gauges that are already rates are never ``rate()``-d.

A builder refuses a family of the wrong type with a QueryError naming it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from inference_obs.errors import QueryError
from inference_obs.metrics.family import Family, MetricType, Part
from inference_obs.query import (
    Aggregate,
    Expr,
    Matcher,
    Range,
    count_over_time,
    histogram_quantile,
    increase,
    last_over_time,
    max_over_time,
    rate,
    resets,
    sum_over_time,
)

__all__ = [
    "bucket_bound_spellings",
    "histogram_count",
    "histogram_mean",
    "histogram_quantile_merged",
    "increase_total",
    "last_value",
    "le_matcher",
    "maximum",
    "per_second",
    "resets_total",
    "sample_count",
    "sample_mean",
    "share_at_or_below",
    "summed",
]

Matchers = Sequence[Matcher]
By = tuple[str, ...]


def _require(family: Family, allowed: tuple[MetricType, ...], what: str) -> None:
    if family.type not in allowed:
        kinds = " or ".join(t.value for t in allowed)
        raise QueryError(f"{what} needs a {kinds} family; {family.name} is a {family.type.value}")


def _counter_window(
    family: Family, matchers: Matchers, window: float, part: Part | None = None
) -> Range:
    """The family's counter series over ``window``, checked to be a true counter."""
    if family.already_rate:
        raise QueryError(
            f"{family.name} is already a per-second rate ({family.unit}); "
            "never rate() or increase() it: use sample_mean"
        )
    if part is None:
        _require(family, (MetricType.COUNTER,), "a counter function")
    else:
        _require(family, (MetricType.HISTOGRAM,), f"histogram part {part!r}")
    return family.select(matchers, part).over(window)


def summed(expr: Expr, by: By) -> Aggregate:
    """``sum by (by) (expr)``, or ``sum(expr)`` when ``by`` is empty (every series pooled)."""
    return expr.sum(by=by) if by else expr.sum()


def increase_total(family: Family, matchers: Matchers, window: float, by: By = ()) -> Expr:
    """Counter increase over ``window``, per series then summed: ``sum(increase(c[w]))``.

    Unit: the family's unit (tokens, requests, ...). Prometheus extrapolates to
    the window edges, so the result is fractional even for integer counters.
    """
    return summed(increase(_counter_window(family, matchers, window)), by)


def per_second(family: Family, matchers: Matchers, window: float, by: By = ()) -> Expr:
    """Mean per-second rate over ``window`` (wall clock): ``sum(rate(c[w]))``.

    Unit: the family's unit per second.
    """
    return summed(rate(_counter_window(family, matchers, window)), by)


def resets_total(family: Family, matchers: Matchers, window: float, by: By = ()) -> Expr:
    """Number of counter resets (restarts) seen in ``window``: ``sum(resets(c[w]))``."""
    return summed(resets(_counter_window(family, matchers, window)), by)


def histogram_count(family: Family, matchers: Matchers, window: float, by: By = ()) -> Expr:
    """Observations in ``window``: ``sum(increase(h_count[w]))`` (extrapolated, fractional)."""
    return summed(increase(_counter_window(family, matchers, window, "count")), by)


def histogram_mean(family: Family, matchers: Matchers, window: float, by: By = ()) -> Expr:
    """Observation-weighted mean: ``sum(increase(h_sum[w])) / sum(increase(h_count[w]))``.

    For request histograms this is the request-weighted mean, in the family's
    unit. It is NaN when no observation fell in the window.
    """
    total = summed(increase(_counter_window(family, matchers, window, "sum")), by)
    return total / histogram_count(family, matchers, window, by)


def histogram_quantile_merged(
    family: Family, q: float, matchers: Matchers, window: float, by: By = ()
) -> Expr:
    """The q-quantile of observations in ``window``, buckets merged across series.

    ``histogram_quantile(q, sum by (le, ...) (increase(h_bucket[w])))``: the
    buckets of every replica are added before the quantile is estimated, never
    the replicas' quantiles averaged. Linear interpolation inside the bucket
    that holds the quantile; a quantile in the ``+Inf`` bucket is reported as
    the highest finite bound.
    """
    if isinstance(q, bool) or not isinstance(q, int | float) or not 0 <= q <= 1:
        raise QueryError(f"quantile {q!r} for {family.name}: must be a number in [0, 1]")
    buckets = increase(_counter_window(family, matchers, window, "bucket"))
    return histogram_quantile(q, buckets.sum(by=("le", *by)))


def bucket_bound_spellings(bound: float) -> tuple[str, ...]:
    """The ``le`` strings an exporter may use for ``bound``.

    Python's prometheus_client writes ``1.0`` and ``1e+06``; Go clients and
    Prometheus 3 normalisation write ``1`` and ``1e+06``. A literal ``le``
    matcher must accept each, or it silently selects nothing.

    Examples
    --------
    >>> bucket_bound_spellings(20)
    ('20.0', '20')
    >>> bucket_bound_spellings(2097152)
    ('2.097152e+06', '2097152', '2097152.0')
    """
    if not math.isfinite(bound):
        if bound > 0:
            return ("+Inf",)
        raise QueryError(f"bucket bound {bound!r} is not an upper bound a histogram can have")
    value = float(bound)
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6 and "e" not in text:
        # prometheus_client's floatToGoString: exponent form from 1e6 upwards.
        mantissa = (text[0] + "." + text[1:dot] + text[dot + 1 :]).rstrip("0").rstrip(".")
        text = f"{mantissa}e+{dot - 1:02d}"
    spellings = [text]
    if value.is_integer():
        spellings += [str(int(value)), f"{int(value)}.0"]
    return tuple(dict.fromkeys(spellings))


def le_matcher(bound: float) -> Matcher:
    """A matcher selecting the bucket with upper bound ``bound`` in any spelling."""
    return Matcher.one_of("le", bucket_bound_spellings(bound))


def share_at_or_below(
    family: Family, bound: float, matchers: Matchers, window: float, by: By = ()
) -> Expr:
    """Share (0-1) of observations in ``window`` at or below ``bound``.

    Exact when ``bound`` is a bucket upper bound present in the data; otherwise
    no bucket matches and the result is empty (no data, not zero). Numerator
    and denominator come from the same buckets (``le="+Inf"`` is the count).
    """
    below = _counter_window(family, [*matchers, le_matcher(bound)], window, "bucket")
    everything = _counter_window(family, [*matchers, le_matcher(math.inf)], window, "bucket")
    return summed(increase(below), by) / summed(increase(everything), by)


def _gauge_window(family: Family, matchers: Matchers, window: float) -> Range:
    _require(family, (MetricType.GAUGE, MetricType.INFO), "a gauge reduction")
    return family.select(matchers).over(window)


def sample_mean(family: Family, matchers: Matchers, window: float, by: By = ()) -> Expr:
    """Sample-weighted mean of a gauge over every series, zeros included.

    ``sum(sum_over_time(g[w])) / sum(count_over_time(g[w]))``: each scraped
    sample counts once, so a GPU at 0 pulls the mean down and a GPU with more
    samples weighs more. Not a time-weighted mean with irregular scrapes.
    Series with no samples in the window are absent, not zero: list them with
    :func:`sample_count`.
    """
    samples = _gauge_window(family, matchers, window)
    return summed(sum_over_time(samples), by) / summed(count_over_time(samples), by)


def sample_count(family: Family, matchers: Matchers, window: float, by: By = ()) -> Expr:
    """Number of samples in ``window`` (per ``by`` group): ``sum(count_over_time(x[w]))``.

    Works for any family type: it counts scrapes, not values.
    """
    part: Part | None = "count" if family.type is MetricType.HISTOGRAM else None
    return summed(count_over_time(family.select(matchers, part).over(window)), by)


def maximum(family: Family, matchers: Matchers, window: float, by: By = ()) -> Expr:
    """Largest sampled value of a gauge in ``window``: ``max(max_over_time(g[w]))``.

    A sampled maximum: a peak between two scrapes is not seen.
    """
    samples = _gauge_window(family, matchers, window)
    aggregated = max_over_time(samples)
    return aggregated.max(by=by) if by else aggregated.max()


def last_value(family: Family, matchers: Matchers, window: float, by: By) -> Expr:
    """The newest sample of each group in ``window``: ``max by (...) (last_over_time(g[w]))``.

    For info-style gauges and codes (the last XID), not for means.
    """
    return last_over_time(_gauge_window(family, matchers, window)).max(by=by)
