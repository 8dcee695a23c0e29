"""Latency: request-weighted means and merged-bucket quantiles, each quantile with its bucket.

For TTFT, per-request TPOT, inter-token latency, E2E, queue, prefill and
decode time, :func:`latency` reports the request-weighted mean
(the change of ``_sum`` over the change of ``_count``, exact: see
:mod:`~inference_obs.reading.counter_ratios`) and P50/P90/P95/P99 from
the buckets of every replica added together before the quantile is
estimated, never an average of per-replica quantiles. Each quantile carries
in ``bounds`` the edges of the bucket that must hold the true quantile of the
window's requests: the value inside it is an estimate, the bucket is not. The
counters miss the requests between the window's edges and each series' first
and last scrape, so the bucket is the one that must hold the quantile however
that many more observations fall (:func:`unseen_observations`), which can span
two buckets or more. The value uses the buckets' counts and the exact mean
(:func:`~inference_obs.engine.quantile_estimate.mean_constrained_quantile`);
Prometheus's ``histogram_quantile`` stays in ``provenance.promql_value``, its
query first in ``provenance.promql``, for rechecking. A quantile
in the lowest bucket also carries a ``lowest_bucket`` annotation: it is
known only as at most the bucket's upper bound.

The pieces other analyses share (the merged-bucket fetch, the share of
observations at or below a threshold, a histogram's summary) live here too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from inference_obs.analyses.unit import Analysis, NoSettings
from inference_obs.engine.histograms import (
    fraction_below,
    parse_le,
    quantile_bounds_with_unseen,
)
from inference_obs.engine.quantile_estimate import mean_constrained_quantile
from inference_obs.errors import Annotation
from inference_obs.metrics import builders, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, increase, max_over_time, min_over_time, to_promql
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import (
    counter_ratios,
    histogram_mean,
    mean_ratio,
    share_ratio,
)
from inference_obs.reading.counter_resets import closed_range
from inference_obs.reading.measurement import (
    Bounds,
    Measurement,
    Status,
    derive,
    note_lowest_bucket,
)
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Instant, Vector

__all__ = [
    "HistogramSummary",
    "LatencyResult",
    "MergedBuckets",
    "buckets_query",
    "latency",
    "merged_buckets",
    "share_within",
    "shares_within",
    "unseen_observations",
    "window_bounds",
]

QUANTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.5),
    ("p90", 0.9),
    ("p95", 0.95),
    ("p99", 0.99),
)

_ABORTS = (
    "Client-aborted requests are missing from vLLM's finished-request histograms: "
    "the slowest requests, abandoned by their clients, are not in these numbers."
)
_SERVER_SIDE = "Recorded by the server; not client-side latency to a final answer."
_TPOT = (
    "TPOT is recorded as 0 for requests with at most one output token (benchmark clients "
    "exclude them), so server and benchmark TPOT statistics cannot be pooled."
)
_ITL = (
    "Inter-token latency counts engine steps (output events), not tokens: with speculative "
    "decoding one event can carry several tokens, so it is not time per token."
)
#: metric key -> (family, caveats specific to it)
METRICS: dict[str, tuple[Family, tuple[str, ...]]] = {
    "ttft": (vllm.TIME_TO_FIRST_TOKEN, (_SERVER_SIDE,)),
    "tpot": (vllm.REQUEST_TIME_PER_OUTPUT_TOKEN, (_TPOT, _ABORTS)),
    "itl": (vllm.INTER_TOKEN_LATENCY, (_ITL,)),
    "e2e": (vllm.E2E_REQUEST_LATENCY, (_SERVER_SIDE, _ABORTS)),
    "queue": (vllm.REQUEST_QUEUE_TIME, (_ABORTS,)),
    "prefill": (vllm.REQUEST_PREFILL_TIME, (_ABORTS,)),
    "decode": (vllm.REQUEST_DECODE_TIME, (_ABORTS,)),
}


class MergedBuckets(BaseModel):
    """Bucket increases over a window, summed across replicas by ``le``.

    ``upper`` holds the parsed bounds (ascending, ``+Inf`` last) and
    ``counts`` the cumulative observation counts; both empty when the
    family's ``_bucket`` series are absent (dropped by relabelling, or no data).
    """

    model_config = ConfigDict(frozen=True)

    promql: str
    upper: tuple[float, ...]
    counts: tuple[float, ...]

    def arrays(self) -> tuple[Any, Any, Any]:
        """``upper``, ``counts`` and one-group indices as numpy arrays."""
        size = len(self.upper)
        return (
            np.array(self.upper, np.float64),
            np.array(self.counts, np.float64),
            np.zeros(size, np.int64),
        )


def buckets_query(r: Reading, family: Family) -> Expr:
    """``sum by (le) (increase(h_bucket{m}[w]))``: the merged buckets' query."""
    expr: Expr = increase(family.select(r.matchers, "bucket").over(r.seconds))
    return expr.sum(by=("le",))


def merged_buckets(r: Reading, family: Family, *, answer: Instant | None = None) -> MergedBuckets:
    """Fetch ``sum by (le) (increase(h_bucket{m}[w]))`` and parse ``le``.

    ``answer`` is the query's answer at the window's end, when asked
    already. Counts are observations; bounds are in the family's unit.
    """
    expr = buckets_query(r, family)
    if answer is None:
        answer = r.instant(expr)
    les: list[str] = []
    values: list[float] = []
    if isinstance(answer.value, Vector):
        les = [labels.get("le", "") for labels in answer.value.labels]
        values = [float(v) for v in answer.value.values]
    upper = parse_le(les)
    order = [i for i in np.argsort(upper, kind="stable") if not math.isnan(upper[i])]
    text = to_promql(expr)
    return MergedBuckets(
        # As read: the data's own name for the family where it holds an older one.
        promql=r.as_read(text),
        upper=tuple(float(upper[i]) for i in order),
        counts=tuple(values[i] for i in order),
    )


def _no_buckets(m: Measurement, family: Family, deployment: str) -> Measurement:
    note = Annotation("no_data", f"no series of {family.name}_bucket for {deployment}")
    kept = tuple(a for a in m.annotations if a.message != "no observation in the window")
    return m.model_copy(update={"annotations": (*kept, note)})


def share_within(
    r: Reading,
    family: Family,
    threshold: float,
    *,
    statistic: str | None = None,
    caveats: Sequence[str] = (),
) -> Measurement:
    """Share (ratio 0-1) of the window's observations of ``family`` at or below ``threshold``.

    Exact when ``threshold`` is a bucket bound (``histogram_share``,
    ``bounds`` equal to the value). Otherwise ``bounds`` hold the shares at
    the bucket bounds around it and the value is interpolated linearly
    inside that bucket (an estimate). ``threshold`` is in the family's unit
    (seconds, tokens); ``statistic`` defaults to ``<family>_share_le_<threshold>``.
    A family without buckets gives ``no_data`` naming it.
    """
    statistic = statistic or f"{family.name.split(':')[-1]}_share_le_{threshold:g}"
    return shares_within(r, family, [threshold], [statistic], caveats=caveats)[0]


def shares_within(
    r: Reading,
    family: Family,
    thresholds: Sequence[float],
    statistics: Sequence[str],
    *,
    caveats: Sequence[str] = (),
) -> list[Measurement]:
    """:func:`share_within` at each of ``thresholds`` (named ``statistics``), from one read of
    the merged buckets and one set of requests for the exact shares at bucket bounds."""
    buckets = merged_buckets(r, family)
    if not buckets.upper:
        exprs = [builders.share_at_or_below(family, t, r.matchers, r.seconds) for t in thresholds]
        asked = r.together(
            [
                partial(r.measure, statistic, expr, "ratio", caveats=caveats, answer=answer)
                for statistic, expr, answer in zip(statistics, exprs, r.ask(exprs), strict=True)
            ],
        )
        return [_no_buckets(m, family, r.deployment.name) for m in asked]
    edges = [i for i, threshold in enumerate(thresholds) if threshold in buckets.upper]
    ratios = [share_ratio(r, family, thresholds[i], statistics[i], caveats=caveats) for i in edges]
    out: dict[int, Measurement] = {}
    for i, m in zip(edges, counter_ratios(r, ratios), strict=True):
        exact = Bounds(lower=m.value, upper=m.value) if m.value is not None else None
        out[i] = m.model_copy(update={"bounds": exact}) if exact else m
    return [
        out[i] if i in out else _interpolated(r, threshold, buckets, statistics[i], caveats)
        for i, threshold in enumerate(thresholds)
    ]


def _interpolated(
    r: Reading, threshold: float, buckets: MergedBuckets, statistic: str, caveats: Sequence[str]
) -> Measurement:
    """The share at ``threshold`` (not a bucket bound), between the shares at the bounds
    around it."""
    upper, counts, groups = buckets.arrays()
    low, high = fraction_below(threshold, upper, counts, groups, 1)
    status, value, bounds = Status.NO_DATA, None, None
    if not math.isnan(low[0]):
        status, bounds = Status.OK, Bounds(lower=float(low[0]), upper=float(high[0]))
        above = int(np.argmax(upper > threshold))
        below = upper[above - 1] if above else 0.0
        span = upper[above] - below
        frac = (threshold - below) / span if math.isfinite(span) and span > 0 else 0.0
        value = bounds.lower + (bounds.upper - bounds.lower) * min(max(frac, 0.0), 1.0)
    how = (
        f"{threshold:g} is not a bucket bound: bounds are the shares at the bucket "
        "bounds around it (fraction_below); value interpolated linearly between them"
    )
    notes = () if value is not None else (Annotation("no_data", "no observation"),)
    return r.made(
        statistic,
        value,
        "ratio",
        status,
        promql=(buckets.promql,),
        computation=how,
        bounds=bounds,
        annotations=notes,
        caveats=caveats,
    )


class HistogramSummary(BaseModel):
    """Request-weighted mean and merged-bucket quantiles of one histogram, in its unit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mean: Measurement
    p50: Measurement
    p90: Measurement
    p95: Measurement
    p99: Measurement

    @staticmethod
    def labels() -> tuple[str, ...]:
        """The quantiles' labels, in :data:`QUANTILES` order (``p50`` ... ``p99``)."""
        return tuple(label for label, _ in QUANTILES)

    def statistics(self) -> dict[str, Measurement]:
        """The mean, then each quantile, by label (``mean``, ``p50`` ... ``p99``)."""
        return {"mean": self.mean, **self.quantiles()}

    def quantiles(self) -> dict[str, Measurement]:
        """Each quantile by its label, in :data:`QUANTILES` order."""
        return {label: getattr(self, label) for label in self.labels()}

    def counted_only(self, label: str) -> bool:
        """Whether the bracket of the quantile ``label`` holds for the requests counted
        between the first and last scrape only (:data:`COUNTED_ONLY`, :func:`window_bounds`)."""
        quantile: Measurement = getattr(self, label)
        return any(a.kind == COUNTED_ONLY for a in quantile.annotations)


def questions(r: Reading, family: Family) -> list[Expr]:
    """What :func:`summarise` asks in one query: the merged buckets, each quantile's, then
    the observations the counters hold (:func:`scraped_query`)."""
    quantiles = [
        builders.histogram_quantile_merged(family, q, r.matchers, r.seconds) for _, q in QUANTILES
    ]
    return [buckets_query(r, family), *quantiles, scraped_query(r, family)]


def scraped_query(r: Reading, family: Family, by: tuple[str, ...] = ()) -> Expr:
    """``sum(max_over_time(h_count{m}[w]) - min_over_time(h_count{m}[w]))`` (``by`` the labels).

    The observations counted between each series' first and last sample in
    the window (a series that restarted counts less, so the unseen ones
    :func:`unseen_observations` derives from it are more, never fewer).
    """
    closed = closed_range(family.select(r.matchers, "count"), r.seconds, r.info().rules)
    change: Expr = max_over_time(closed) - min_over_time(closed)
    return change.sum(by=by) if by else change.sum()


#: Standard deviations of a Poisson count added to the expected number of unseen
#: observations: arrivals in the uncovered time are random, and the expectation alone
#: would be exceeded about half the time.
UNSEEN_MARGIN_SIGMAS = 3.0


def unseen_observations(counts: Any, seen: float | None) -> tuple[Any, float]:
    """Cumulative bucket counts of the observations the counters hold, and how many of the
    window's observations they may lack, at most.

    The window's requests include those between its edges and each series'
    first and last scrape, which no counter holds. ``increase()`` estimates
    them (the counter's rate times the uncovered time) and adds them to the
    merged ``counts`` in each bucket's proportion; here they are taken out
    again (the counts scaled to ``seen``, the observations counted between
    the scrapes, :func:`scraped_query`: exact for one series, each series' own
    proportion otherwise) and counted as unseen: the estimate plus
    :data:`UNSEEN_MARGIN_SIGMAS` Poisson standard deviations, rounded up.
    Where either number is unknown, or extrapolation added nothing, the
    counts are kept and nothing is unseen.

    Parameters
    ----------
    counts
        Extrapolated cumulative counts (numpy array, ``+Inf`` last).
    seen
        Observations counted between the scrapes, or None when unknown.

    Returns
    -------
    tuple
        Cumulative counts (numpy array, observations) and the unseen count.
    """
    counts = np.asarray(counts, np.float64)
    if not counts.size or seen is None or not math.isfinite(seen) or seen <= 0:
        return counts, 0.0
    total = float(counts[-1])
    expected = total - seen
    if not math.isfinite(expected) or expected <= 0:
        return counts, 0.0
    unseen = math.ceil(expected + UNSEEN_MARGIN_SIGMAS * math.sqrt(expected))
    return counts * (seen / total), float(unseen)


#: Annotation kind of a quantile whose bounds hold for the counted requests only.
COUNTED_ONLY = "bounds_counted_requests"


def window_bounds(
    q: float, upper: Any, counts: Any, unseen: float
) -> tuple[Bounds | None, Annotation | None]:
    """The bucket that holds the ``q``-quantile of the window's requests, from the counts of
    those counted and the ``unseen`` ones (:func:`unseen_observations`).

    Where placing the unseen requests anywhere would stretch the bucket to
    ``+Inf`` (a tail quantile whose tail the unseen ones outnumber), such a
    bound says nothing: the counted requests' bucket is kept, and an
    annotation (:data:`COUNTED_ONLY`) says it holds for them, not for the
    window's edges.
    """
    low, high = quantile_bounds_with_unseen(q, upper, counts, unseen)
    if math.isnan(low):
        return None, None
    if not math.isinf(high) or unseen == 0:
        return Bounds(lower=low, upper=high), None
    low, high = quantile_bounds_with_unseen(q, upper, counts, 0)
    if math.isinf(high):
        return Bounds(lower=low, upper=high), None
    counted = round(float(counts[-1]))
    note = Annotation(
        COUNTED_ONLY,
        f"bounds hold for the {counted:,} requests counted between the first and last scrape; "
        f"up to {unseen:,.0f} more at the window's edges, not in the counters, could move "
        f"P{q * 100:g} above {high:g}",
    )
    return Bounds(lower=low, upper=high), note


def summarise(
    r: Reading,
    family: Family,
    name: str,
    *,
    caveats: Sequence[str] = (),
    mean: Measurement | None = None,
    answers: Sequence[Instant] | None = None,
) -> HistogramSummary:
    """Mean and P50/P90/P95/P99 of ``family``, each quantile with its bucket as bounds.

    A quantile in the lowest bucket carries a ``lowest_bucket`` annotation
    (:func:`~inference_obs.reading.measurement.note_lowest_bucket`).

    ``mean`` and ``answers`` (to :func:`questions`, in order) when asked
    already, with other histograms'.
    """
    exprs = questions(r, family)
    if mean is None:
        # The mean alongside one query for the buckets and every quantile.
        asked = r.soon(partial(histogram_mean, r, family, f"{name}_mean", caveats=caveats))
        answers = r.ask(exprs)
        mean = asked.result()
    elif answers is None:
        answers = r.ask(exprs)
    buckets = merged_buckets(r, family, answer=answers[0])
    upper, counts, _ = buckets.arrays()
    scraped = answers[-1].value
    seen = float(scraped.values[0]) if isinstance(scraped, Vector) and len(scraped) else None
    counts, unseen = unseen_observations(counts, seen)
    out: dict[str, Measurement] = {"mean": mean}
    for (label, q), expr, answer in zip(QUANTILES, exprs[1:-1], answers[1:-1], strict=True):
        bounds, note = window_bounds(q, upper, counts, unseen) if buckets.upper else (None, None)
        m = r.measure(
            f"{name}_{label}", expr, family.unit, caveats=caveats, bounds=bounds, answer=answer
        )
        if bounds is not None and m.value is not None:
            m = _estimated(m, q, buckets, mean, bounds)
        if note is not None and m.bounds is not None:
            m = m.model_copy(update={"annotations": (*m.annotations, note)})
        out[label] = _no_buckets(m, family, r.deployment.name) if not buckets.upper else m
        out[label] = note_lowest_bucket(out[label])
    return HistogramSummary(**out)


def _estimated(
    m: Measurement, q: float, buckets: MergedBuckets, mean: Measurement, bounds: Bounds
) -> Measurement:
    """``m`` (``histogram_quantile``'s value) with the estimate that also uses the exact mean
    as its value, inside ``bounds``; PromQL's value kept in the provenance for rechecking."""
    exact_mean = mean.value if mean.status is Status.OK else None
    upper, counts, _ = buckets.arrays()
    value = mean_constrained_quantile(q, upper, counts, exact_mean)
    if math.isnan(value):
        return m
    # The estimate lies inside the bucket by construction; clipping guards only rounding.
    value = min(max(value, bounds.lower), bounds.upper)
    uses = "" if exact_mean is None else f" and the exact {mean.statistic} ({exact_mean:.6g})"
    how = (
        f"histogram_quantile (first query) gives promql_value; the value is estimated from "
        f"the merged buckets (second query){uses} by mean_constrained_quantile, inside the "
        "bucket that holds the quantile (docs/quantile-estimate.md)"
    )
    provenance = m.provenance.model_copy(
        update={
            "promql": tuple(dict.fromkeys((*m.provenance.promql, buckets.promql))),
            "computation": how,
            "promql_value": m.value,
        }
    )
    return m.model_copy(update={"value": value, "provenance": provenance})


class LatencyResult(AnalysisResult):
    """Latency of one deployment over one window (seconds throughout).

    Each field summarises one histogram: ``ttft`` (time to first token),
    ``tpot`` (per-request time per output token), ``itl`` (inter-token
    latency, per engine step), ``e2e`` (server end-to-end), ``queue``,
    ``prefill`` and ``decode`` time. ``queue_share_of_ttft`` is the mean
    queue time over the mean TTFT (ratio 0-1; a ratio of means).
    """

    ttft: HistogramSummary
    tpot: HistogramSummary
    itl: HistogramSummary
    e2e: HistogramSummary
    queue: HistogramSummary
    prefill: HistogramSummary
    decode: HistogramSummary
    queue_share_of_ttft: Measurement
    caveats: tuple[str, ...]

    def metrics(self) -> dict[str, HistogramSummary]:
        """Each histogram's summary by its metric key (``ttft`` ... ``decode``), in
        :data:`METRICS` order."""
        return {key: getattr(self, key) for key in METRICS}

    def summary_of(self, family: str) -> HistogramSummary | None:
        """The summary of the histogram family whose catalogue name is ``family``, or None
        where this analysis does not summarise it."""
        for key, (known, _) in METRICS.items():
            if known.name == family:
                summary: HistogramSummary = getattr(self, key)
                return summary
        return None


def _latency(r: Reading, settings: NoSettings) -> LatencyResult:
    """Request-weighted means and merged-bucket P50/P90/P95/P99 of every latency histogram.

    All replicas are merged; every statistic covers observations recorded
    inside the window. Values in seconds; a family the deployment does not
    export is ``no_data`` with the family named, never 0.
    """
    # Every histogram's mean in one set of requests, alongside one query for every
    # histogram's buckets and quantiles.
    ratios = [
        mean_ratio(r, family, f"{key}_mean", caveats=caveats)
        for key, (family, caveats) in METRICS.items()
    ]
    means = r.soon(partial(counter_ratios, r, ratios))
    answers = r.ask_each([questions(r, family) for family, _ in METRICS.values()])
    summaries = r.together(
        [
            partial(
                summarise,
                r,
                family,
                key,
                caveats=caveats,
                mean=mean,
                answers=asked,
            )
            for (key, (family, caveats)), mean, asked in zip(
                METRICS.items(), means.result(), answers, strict=True
            )
        ],
    )
    fields = dict(zip(METRICS, summaries, strict=True))
    caveats = (
        _TPOT,
        _ITL,
        _ABORTS,
        "Quantiles are estimated inside the bucket holding them from the buckets' counts and "
        "the exact mean (Prometheus's interpolated value is in the appendix); only the bucket "
        "(bounds) is certain. Replicas' buckets are merged before the quantile is taken.",
    )
    share = derive(
        "queue_share_of_ttft",
        _ratio(fields["queue"].mean.value, fields["ttft"].mean.value),
        "ratio",
        [fields["queue"].mean, fields["ttft"].mean],
        "queue_mean / ttft_mean",
        (
            "A ratio of request-weighted means, not any request's share: P95s are never "
            "divided or subtracted. TTFT is recorded at the first token, queue time when the "
            "request finishes (its first wait only): the means cover nearly, not exactly, "
            "the same requests.",
        ),
    )
    return LatencyResult(**fields, queue_share_of_ttft=share, caveats=caveats)


def _ratio(top: float | None, bottom: float | None) -> float | None:
    """``top / bottom``; None where either is missing, NaN for 0/0, inf for x/0 (invalid)."""
    if top is None or bottom is None:
        return None
    if bottom == 0:
        return math.nan if top == 0 else math.inf
    return top / bottom


def _first_questions(r: Reading, settings: NoSettings) -> list[Expr]:
    """Every histogram's buckets, quantiles and counted observations: what :func:`_latency`
    asks first, in one query."""
    return [expr for family, _ in METRICS.values() for expr in questions(r, family)]


latency = Analysis(
    name="latency",
    title="Latency",
    entry=_latency,
    result=LatencyResult,
    settings=NoSettings,
    summary="Request-weighted means and merged-bucket quantiles of every latency histogram.",
    questions=_first_questions,
)
