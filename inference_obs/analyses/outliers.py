"""Replicas as a distribution, and the replicas that stand out from their deployment's others.

A judging analysis: it reads each deployment's results
(:class:`~inference_obs.analyses.run.DeploymentResults`) and the time line,
never a source. For every per-replica statistic (latency quantiles from
each replica's own buckets and exact means, :mod:`~.replicas`; output and
request rates, :mod:`~.throughput`; GPU utilisation, :mod:`~.gpu`; KV-cache
peak, :mod:`~.memory`; restarts and scrape gaps, the time line's events) it
gives the fleet's distribution across replicas (minimum, median, maximum,
with the bucket of each for a quantile) and names the outliers.

The rule, per deployment and statistic, over the replicas with a value
(at least :data:`MIN_REPLICAS`; fewer are not judged):

- **an exact number** (a mean, a rate, a share, a peak, a count) is an
  outlier when its modified z-score, ``0.6745 (x - median) / MAD`` with MAD
  the median absolute deviation from the median, exceeds
  :data:`MAD_LIMIT` in either direction (Iglewicz and Hoaglin's 3.5), and
  it differs from the median by at least :data:`SMALLEST_DIFFERENCE` of the
  median: a tight fleet's 3 % (or a tail quantile's usual 20 %) is not
  worth a name. A share (a ratio or a percent) must also differ by
  :data:`SMALLEST_SHARE_POINTS` percentage points: a share near zero moves by
  half itself on a few requests (6 % of TTFT spent queueing against the
  others' 4 %, in a fleet of identical replicas). Where MAD is 0 (half the
  replicas or more at the median, e.g. no restart), any value that differs
  by that much is an outlier.
- **a quantile** is known only to its bucket, so it is an outlier when its
  bucket lies wholly above the bucket of the others' median (the median of
  the other replicas' quantiles; its lower edge at or above that bucket's
  upper edge: certain, whatever the interpolation), and its interpolated
  value passes the exact rule above: a tail quantile drawn from a handful of
  a replica's requests often lands one bucket up by chance, which the
  spread of the fleet's values shows. Only slow quantiles are outliers; a
  replica with a faster bucket is not named for it.

A sampled peak (the KV-cache peak: the largest of one gauge's scrapes) is
shown in the distribution but never names an outlier: the maximum of a
noisy series scatters widely across identical replicas (in simulated
fleets of identical replicas, one of four read 78 % against the others'
55 %), so it says more about when the scrapes fell than about the replica.

Each outlier says what makes it one: its value (and bucket), the others'
median, and the rule it broke.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.gpu import gpu
from inference_obs.analyses.memory import memory
from inference_obs.analyses.replicas import replicas
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.throughput import throughput
from inference_obs.analyses.timeline import EventKind, Timeline
from inference_obs.reading.measurement import Bounds, FrozenModel, Measurement
from inference_obs.reading.wording import duration, number

__all__ = [
    "MAD_LIMIT",
    "MIN_REPLICAS",
    "NOT_JUDGED",
    "SMALLEST_DIFFERENCE",
    "SMALLEST_SHARE_POINTS",
    "WORDS",
    "Fleet",
    "Outlier",
    "ReplicaValue",
    "Spread",
    "by_replica",
    "fleet",
    "outlier_text",
    "value_text",
]

#: Modified z-score beyond which an exact number is an outlier (Iglewicz and Hoaglin, 1993).
MAD_LIMIT = 3.5
#: 0.6745: the median absolute deviation of a normal distribution in standard deviations,
#: so that the modified z-score reads like a z-score.
_MAD_SCALE = 0.6745
#: Smallest difference from the median, as a share of it, that makes an outlier: among many
#: replicas, a tail quantile or a peak a fifth off the median is common and not worth a name.
SMALLEST_DIFFERENCE = 0.25
#: Smallest difference from the median of a share (unit ``ratio`` or ``percent``), in
#: percentage points (module docs).
SMALLEST_SHARE_POINTS = 10.0
#: Fewest replicas with a value for a statistic to be judged: with fewer, "the others"
#: are one or two replicas and a median says nothing.
MIN_REPLICAS = 4

#: Statistics shown as a distribution only, never naming an outlier (module docs).
NOT_JUDGED = frozenset({"kv_cache_usage_max"})

#: statistic -> how it is said (quantiles in :mod:`~.replicas` are judged by bucket).
WORDS: dict[str, str] = {
    "ttft_p50": "TTFT P50",
    "ttft_p95": "TTFT P95",
    "ttft_mean": "TTFT mean",
    "e2e_p50": "E2E P50",
    "e2e_p95": "E2E P95",
    "e2e_mean": "E2E mean",
    "tpot_p50": "TPOT P50",
    "tpot_p95": "TPOT P95",
    "tpot_mean": "TPOT mean",
    "queue_share_of_ttft": "queue share of TTFT",
    "output_tokens_per_second": "output tokens/s",
    "requests_per_second": "requests/s",
    "gpu_utilization": "GPU utilisation",
    "kv_cache_usage_max": "KV-cache peak",
    "restarts": "restarts",
    "scrape_gaps": "scrape gaps",
}


class ReplicaValue(FrozenModel):
    """One replica's value of one statistic (the per-replica frame's row)."""

    replica: str
    statistic: str
    value: float | None = Field(description="In ``unit``; None: no data.")
    unit: str
    bounds: Bounds | None = Field(None, description="A quantile's bucket, in ``unit``.")
    key: str | None = Field(None, description="The Measurement's key; None for an event count.")

    def text(self) -> str:
        """The value as a sentence shows it, with its bucket (:func:`value_text`)."""
        return value_text(self.value, self.unit, self.bounds)

    def plain(self) -> str:
        """The value as a sentence shows it, without its bucket (:func:`value_text`)."""
        return value_text(self.value, self.unit)


class Spread(BaseModel):
    """One statistic's distribution across a deployment's replicas.

    ``minimum``/``median``/``maximum`` are over the replicas with a value
    (``replicas`` of them; the lower median of an even count, so it is one
    replica's value, with its bucket for a quantile).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    statistic: str
    unit: str
    quantile: bool = Field(description="Judged by bucket (a quantile) or by MAD (exact).")
    replicas: int
    minimum: ReplicaValue | None
    median: ReplicaValue | None
    maximum: ReplicaValue | None

    def words(self) -> str:
        """How the statistic is said (:data:`WORDS`; its name where none is given)."""
        return WORDS.get(self.statistic, self.statistic)


class Outlier(BaseModel):
    """A replica far from its deployment's others on one statistic, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    replica: str
    statistic: str
    value: float = Field(description="In ``unit``.")
    unit: str
    bounds: Bounds | None = Field(None, description="Its bucket, for a quantile.")
    fleet_median: float = Field(
        description="The median of the deployment's other replicas, in ``unit``."
    )
    reason: str = Field(description="The rule it broke, with the numbers.")
    key: str | None = None

    def text(self) -> str:
        """What makes it an outlier, in words (:func:`outlier_text`)."""
        return outlier_text(self)


class Fleet(BaseModel):
    """One deployment's replicas: each statistic's distribution, the outliers, every value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    deployment: str
    replicas: tuple[str, ...]
    spreads: tuple[Spread, ...]
    outliers: tuple[Outlier, ...]
    values: tuple[ReplicaValue, ...]

    @staticmethod
    def thresholds() -> tuple[float, float]:
        """The rule an exact number breaks to be an outlier: the modified z-score it must
        exceed (:data:`MAD_LIMIT`) and the least difference from the median, as a share of
        it (:data:`SMALLEST_DIFFERENCE`)."""
        return MAD_LIMIT, SMALLEST_DIFFERENCE

    def by_replica(self) -> dict[str, list[Outlier]]:
        """The outliers grouped by replica, the replica with the most statistics first
        (:func:`by_replica`)."""
        return by_replica(self.outliers)


def _value(replica: str, statistic: str, m: Measurement) -> ReplicaValue:
    return ReplicaValue(
        replica=replica,
        statistic=statistic,
        value=m.value,
        unit=m.unit,
        bounds=m.bounds,
        key=m.key,
    )


def _columns(run: DeploymentResults, timeline: Timeline) -> dict[str, list[ReplicaValue]]:
    """Every per-replica statistic of one deployment, as the analyses measured it."""
    out: dict[str, list[ReplicaValue]] = {}
    names: set[str] = set()
    targets: dict[str, str] = {}
    if replicas.name in run.results:  # a run of chosen analyses may lack it
        latency = run.of(replicas)
        for statistic, by in latency.statistics.items():
            out[statistic] = [_value(n, statistic, m) for n, m in by.items()]
            names |= set(by)
        targets = latency.instances
    rates = run.of(throughput).per_replica
    names |= set(rates)
    for k, statistic in enumerate(("output_tokens_per_second", "requests_per_second")):
        out[statistic] = [_value(n, statistic, pair[k]) for n, pair in rates.items()]
    out["gpu_utilization"] = [
        _value(m.statistic[m.statistic.index("[") + 1 : -1], "gpu_utilization", m)
        for m in run.of(gpu).utilization_per_replica
        if "[" in m.statistic
    ]
    kv = run.of(memory).kv_cache_usage_max_per_replica
    out["kv_cache_usage_max"] = [_value(n, "kv_cache_usage_max", m) for n, m in kv.items()]
    for statistic, kind in (("restarts", EventKind.RESTART), ("scrape_gaps", EventKind.SCRAPE_GAP)):
        counts = dict.fromkeys(sorted(names), 0)
        for e in timeline.events:
            if e.deployment == run.deployment.name and e.kind is kind:
                for n in e.replicas:
                    # The time line names a replica by its namespace and pod
                    # (``serving/chat-07``) where the series carry both, and by its scrape
                    # target (``10.0.0.7:8000``) where no queue row places a gap.
                    own = n if n in counts else targets.get(n, n.rsplit("/", 1)[-1])
                    if own in counts:
                        counts[own] += 1
        unit = "restarts" if kind is EventKind.RESTART else "gaps"
        out[statistic] = [
            ReplicaValue(replica=n, statistic=statistic, value=float(c), unit=unit)
            for n, c in counts.items()
        ]
    return out


def _spread(statistic: str, values: Sequence[ReplicaValue], quantile: bool) -> Spread:
    known = sorted((v for v in values if v.value is not None), key=lambda v: v.value or 0.0)
    unit = values[0].unit if values else ""
    middle = known[(len(known) - 1) // 2] if known else None
    return Spread(
        statistic=statistic,
        unit=unit,
        quantile=quantile,
        replicas=len(known),
        minimum=known[0] if known else None,
        median=middle,
        maximum=known[-1] if known else None,
    )


def _smallest_gap(median: float, unit: str) -> float:
    """The least difference from the median that can name an outlier, in ``unit``."""
    points = {"ratio": SMALLEST_SHARE_POINTS / 100, "percent": SMALLEST_SHARE_POINTS}
    return max(SMALLEST_DIFFERENCE * abs(median), points.get(unit, 0.0))


def _exact_outliers(statistic: str, values: Sequence[ReplicaValue]) -> list[Outlier]:
    """The replicas whose modified z-score passes :data:`MAD_LIMIT` (module docs)."""
    known = [v for v in values if v.value is not None and math.isfinite(v.value)]
    if len(known) < MIN_REPLICAS:
        return []
    x = np.array([v.value for v in known], np.float64)
    median = float(np.median(x))
    mad = float(np.median(np.abs(x - median)))
    smallest = _smallest_gap(median, known[0].unit)
    out = []
    for v, value in zip(known, x.tolist(), strict=True):
        gap = value - median
        if abs(gap) < smallest or gap == 0:
            continue
        z = math.inf if mad == 0 else _MAD_SCALE * gap / mad
        if abs(z) <= MAD_LIMIT:
            continue
        others = float(np.median(np.delete(x, known.index(v))))
        side = "above" if gap > 0 else "below"
        score = (
            "half the replicas or more at the median" if mad == 0 else f"modified z-score {z:+.1f}"
        )
        out.append(
            Outlier(
                replica=v.replica,
                statistic=statistic,
                value=value,
                unit=v.unit,
                fleet_median=others,
                reason=f"{side} the median ({score}; the rule: beyond {MAD_LIMIT:g})",
                key=v.key,
            )
        )
    return out


def _quantile_outliers(statistic: str, values: Sequence[ReplicaValue]) -> list[Outlier]:
    """The replicas whose bucket lies wholly above the others' median bucket (module docs)."""
    known = sorted(
        (v for v in values if v.value is not None and v.bounds is not None),
        key=lambda v: v.value or 0.0,
    )
    n = len(known)
    if n < MIN_REPLICAS:
        return []
    out = []
    far = {o.replica for o in _exact_outliers(statistic, known)}
    middle = (n - 2) // 2  # the lower median of the n - 1 others
    for i, v in enumerate(known):
        other = known[middle + 1] if i <= middle else known[middle]
        if not (v.bounds and other.bounds and v.value is not None):
            continue  # never: ``known`` holds only values with bounds
        if v.bounds.lower < other.bounds.upper or v.replica not in far:
            continue
        out.append(
            Outlier(
                replica=v.replica,
                statistic=statistic,
                value=v.value,
                unit=v.unit,
                bounds=v.bounds,
                fleet_median=other.value or 0.0,
                reason=(
                    f"its bucket [{v.bounds.lower:g}, {v.bounds.upper:g}] {v.unit} lies wholly "
                    f"above the others' median bucket [{other.bounds.lower:g}, "
                    f"{other.bounds.upper:g}], and its value is far from the median"
                ),
                key=v.key,
            )
        )
    return out


def _quantile(statistic: str) -> bool:
    return statistic.rsplit("_", 1)[-1] in ("p50", "p90", "p95", "p99")


def deployment_fleet(run: DeploymentResults, timeline: Timeline) -> Fleet:
    """One deployment's :class:`Fleet` from its results and the time line."""
    columns = _columns(run, timeline)
    spreads, outliers, values = [], [], []
    names: set[str] = set()
    for statistic, found in columns.items():
        quantile = _quantile(statistic)
        spreads.append(_spread(statistic, found, quantile))
        judge = _quantile_outliers if quantile else _exact_outliers
        if statistic not in NOT_JUDGED:
            outliers.extend(judge(statistic, found))
        values.extend(found)
        names.update(v.replica for v in found)
    order = list(columns)
    outliers.sort(key=lambda o: (o.replica, order.index(o.statistic)))
    return Fleet(
        deployment=run.deployment.name,
        replicas=tuple(sorted(names)),
        spreads=tuple(spreads),
        outliers=tuple(outliers),
        values=tuple(values),
    )


def fleet(runs: Sequence[DeploymentResults], timeline: Timeline) -> dict[str, Fleet]:
    """Per deployment name, its replicas' distributions and outliers (module docs)."""
    return {run.deployment.name: deployment_fleet(run, timeline) for run in runs}


def value_text(value: float | None, unit: str, bounds: Bounds | None = None) -> str:
    """One per-replica value as a sentence shows it: a time in ms or s with its bucket,
    a ratio as a percent, anything else with its unit."""
    if value is None:
        return "no data"
    if unit == "seconds":
        return duration(value, bounds)
    if unit == "ratio":
        return f"{number(100 * value)}%"
    if unit in ("restarts", "gaps"):
        return number(value)
    if unit == "percent":
        return f"{number(value)}%"
    return f"{number(value)} {unit}"


def outlier_text(o: Outlier) -> str:
    """``TTFT P50 120 ms [100, 250] (others' median 42 ms)``: what makes one outlier."""
    words = WORDS.get(o.statistic, o.statistic)
    return (
        f"{words} {value_text(o.value, o.unit, o.bounds)} "
        f"(others' median {value_text(o.fleet_median, o.unit)})"
    )


def by_replica(outliers: Sequence[Outlier]) -> dict[str, list[Outlier]]:
    """The outliers grouped by replica, the replica with the most statistics first."""
    grouped: dict[str, list[Outlier]] = {}
    for o in outliers:
        grouped.setdefault(o.replica, []).append(o)
    return dict(sorted(grouped.items(), key=lambda kv: (-len(kv[1]), kv[0])))
