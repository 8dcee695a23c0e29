"""Per replica: latency from each replica's own buckets and exact means, in fixed requests.

The deployment's latency (:mod:`~inference_obs.analyses.latency`) merges
every replica; a slow replica among many hardly moves it. Here each
replica's TTFT, E2E and TPOT are summarised on their own:

- P50 and P95 from the replica's OWN buckets summed across its series
  (``histogram_quantile(q, sum by (<replica>, le) (increase(h_bucket[w])))``):
  never an average of quantiles, and each with the bucket that must hold it
  (``bounds``), widened by the replica's requests at the window's edges as
  the deployment's quantiles are (:func:`~inference_obs.analyses.latency.window_bounds`);
- the request-weighted mean from the exact changes of ``_sum`` and
  ``_count`` per replica (:func:`~inference_obs.reading.counter_ratios.counter_ratios_grouped`);
- the queue share of TTFT: the replica's mean queue time over its mean TTFT
  (a ratio of means).

Measurement keys are ``D/replicas/ttft_p50[<replica>]``. The questions are
grouped by the replica label and pushed down: one query for every
histogram's buckets and quantiles, and one set of requests for every mean,
whatever the number of replicas; the answers grow with the replicas, the
requests do not, and no replica's raw series is read. Which replicas stand
out is judged apart, from these and the other analyses' per-replica
numbers (:mod:`~inference_obs.analyses.outliers`).
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from inference_obs.analyses.latency import (
    METRICS,
    scraped_query,
    unseen_observations,
    window_bounds,
)
from inference_obs.analyses.throughput import replica_label
from inference_obs.analyses.unit import Analysis, NoSettings
from inference_obs.engine.histograms import parse_le
from inference_obs.errors import Annotation
from inference_obs.metrics import builders, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, increase
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import Ratio, counter_ratios_grouped, mean_ratio
from inference_obs.reading.measurement import Bounds, Measurement, derive, note_lowest_bucket
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Instant, Labels, Vector

__all__ = ["QUANTILES", "SUMMARISED", "ReplicasResult", "replicas"]

#: Histograms summarised per replica (keys of the latency analysis's METRICS).
SUMMARISED: tuple[str, ...] = ("ttft", "e2e", "tpot")
#: Quantiles taken per replica: the median and the tail most SLAs name.
QUANTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p95", 0.95))

_OWN_BUCKETS = (
    "From this replica's own buckets summed across its series, never an average of "
    "quantiles; only the bucket (bounds) is certain."
)
_SHARE = "A ratio of this replica's request-weighted means, not any request's share."


class ReplicasResult(AnalysisResult):
    """Latency per replica of one deployment over one window.

    Attributes
    ----------
    label
        The label naming a replica (``pod``, or ``instance`` without one).
    statistics
        Per statistic (``ttft_p50``, ``ttft_p95``, ``ttft_mean``, the same for
        ``e2e`` and ``tpot``, and ``queue_share_of_ttft``), per replica: its
        Measurement (seconds; the share a ratio 0-1), quantiles with ``bounds``.
    instances
        Each app scrape target (``instance``) and the replica it serves, for
        what names a target rather than a replica (a scrape gap, a restart).
    """

    label: str
    statistics: dict[str, dict[str, Measurement]]
    instances: dict[str, str]


def _buckets_by(r: Reading, family: Family, label: str) -> Expr:
    """``sum by (<label>, le) (increase(h_bucket{m}[w]))``: each replica's own buckets."""
    expr: Expr = increase(family.select(r.matchers, "bucket").over(r.seconds))
    return expr.sum(by=(label, "le"))


def _bounds_by(
    answer: Instant, scraped: Instant, label: str, q: float, names: tuple[str, ...]
) -> dict[str, tuple[Bounds, Annotation | None]]:
    """Per replica, the edges of the bucket that must hold the ``q``-quantile of its
    requests in the window (:func:`~inference_obs.analyses.latency.window_bounds`), and
    the annotation of bounds that hold for its counted requests only."""
    if not isinstance(answer.value, Vector) or not len(answer.value):
        return {}
    seen: dict[str, float] = {}
    if isinstance(scraped.value, Vector):
        seen = {
            labels.get(label, ""): float(v)
            for labels, v in zip(scraped.value.labels, scraped.value.values.tolist(), strict=True)
        }
    by_name: dict[str, list[tuple[float, float]]] = {}
    for labels, v in zip(answer.value.labels, answer.value.values.tolist(), strict=True):
        if labels.get(label) in names:
            by_name.setdefault(labels[label], []).append(
                (float(parse_le([labels.get("le", "")])[0]), float(v))
            )
    out = {}
    for name, pairs in by_name.items():
        kept = sorted((le, v) for le, v in pairs if not math.isnan(le))
        upper = np.array([le for le, _ in kept], np.float64)
        counts, unseen = unseen_observations(np.array([v for _, v in kept]), seen.get(name))
        bounds, note = window_bounds(q, upper, counts, unseen)
        if bounds is not None:
            out[name] = (bounds, note)
    return out


def _quantiles(r: Reading, label: str, names: tuple[str, ...]) -> dict[str, dict[str, Measurement]]:
    """P50 and P95 of each summarised histogram per replica: one query for all of them."""
    asked: list[tuple[str, Family, tuple[str, ...], list[Expr]]] = []
    for key in SUMMARISED:
        family, caveats = METRICS[key]
        quantiles = [
            builders.histogram_quantile_merged(family, q, r.matchers, r.seconds, by=(label,))
            for _, q in QUANTILES
        ]
        scraped = scraped_query(r, family, by=(label,))
        asked.append((key, family, caveats, [_buckets_by(r, family, label), *quantiles, scraped]))
    answers = r.ask([expr for *_, exprs in asked for expr in exprs])
    out: dict[str, dict[str, Measurement]] = {}
    size = len(QUANTILES) + 2
    for i, (key, family, caveats, exprs) in enumerate(asked):
        buckets, *rest, scraped_answer = answers[i * size : (i + 1) * size]
        for (tag, q), expr, answer in zip(QUANTILES, exprs[1:-1], rest, strict=True):
            bounds = _bounds_by(buckets, scraped_answer, label, q, names)
            wanted = {Labels({label: n}): f"{key}_{tag}[{n}]" for n in names}
            measured = r.measure_by(
                wanted, expr, (label,), family.unit, caveats=(*caveats, _OWN_BUCKETS), answer=answer
            )
            out[f"{key}_{tag}"] = {
                g[label]: note_lowest_bucket(_bounded(m, bounds.get(g[label])))
                for g, m in measured.items()
            }
    return out


def _bounded(m: Measurement, found: tuple[Bounds, Annotation | None] | None) -> Measurement:
    """``m`` with its bounds (none where it has no value) and their annotation, if any."""
    if not m.ok:
        return m
    if found is None:
        return m.model_copy(update={"bounds": None})
    bounds, note = found
    notes = m.annotations if note is None else (*m.annotations, note)
    return m.model_copy(update={"bounds": bounds, "annotations": notes})


def _means(r: Reading, label: str, names: tuple[str, ...]) -> dict[str, dict[str, Measurement]]:
    """Exact request-weighted means per replica (TTFT, E2E, TPOT, queue): one set of requests."""
    keys = (*SUMMARISED, "queue")
    ratios = [
        mean_ratio(r, METRICS[key][0], f"{key}_mean", caveats=METRICS[key][1], by=(label,))
        for key in keys
    ]

    def statistic(ratio: Ratio, group: Labels) -> str:
        return f"{ratio.statistic}[{group[label]}]"

    found = counter_ratios_grouped(
        r, ratios, by=(label,), groups=[Labels({label: n}) for n in names], statistic=statistic
    )
    return {
        f"{key}_mean": {g[label]: m for g, m in one.items()}
        for key, one in zip(keys, found, strict=True)
    }


def _replicas(r: Reading, settings: NoSettings) -> ReplicasResult:
    """Each replica's latency quantiles (own buckets) and exact means, seconds."""
    label, names = replica_label(r, vllm.GENERATION_TOKENS)
    means = r.soon(partial(_means, r, label, names))
    statistics = _quantiles(r, label, names)
    found = means.result()
    queue = found.pop("queue_mean")
    statistics.update(found)
    ttft = found["ttft_mean"]
    statistics["queue_share_of_ttft"] = {
        n: derive(
            f"queue_share_of_ttft[{n}]",
            _share(queue[n].value, ttft[n].value),
            "ratio",
            [queue[n], ttft[n]],
            "queue_mean / ttft_mean of the replica",
            (_SHARE,),
        )
        for n in names
    }
    # The same series request replica_label made (a report asks it once).
    seen = r.series(vllm.GENERATION_TOKENS.select(r.matchers))
    instances = {
        labels["instance"]: labels[label]
        for labels in seen
        if "instance" in labels and label in labels
    }
    return ReplicasResult(label=label, statistics=statistics, instances=instances)


def _share(top: float | None, bottom: float | None) -> float | None:
    """``top / bottom``; None where either is missing or ``bottom`` is not positive."""
    if top is None or bottom is None or bottom <= 0:
        return None
    return top / bottom


replicas = Analysis(
    name="replicas",
    title="Replicas",
    entry=_replicas,
    result=ReplicasResult,
    settings=NoSettings,
    summary="Each replica's latency quantiles from its own buckets and exact means.",
)
