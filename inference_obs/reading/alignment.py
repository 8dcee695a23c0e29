"""Aligning application samples with GPU activity: replicas, timestamps and tolerance.

vLLM and dcgm-exporter are scraped independently, so a vLLM sample and the
GPUs of the same replica are matched by the labels they share and by time.
The app gauges are read raw (every scrape is classified); a GPU family is
averaged per replica by the server (:func:`gpu_per_replica`: the mean of
the replica's GPUs at every GPU scrape interval), so what is downloaded
grows with replicas and steps, not with GPUs and samples. Used by the
queueing and boundary analyses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from inference_obs.deployment import Deployment
from inference_obs.errors import SourceUnavailable
from inference_obs.metrics import dcgm
from inference_obs.metrics.family import Family
from inference_obs.query import (
    Aggregate,
    Expr,
    Selector,
    count_over_time,
    last_over_time,
    to_promql,
)
from inference_obs.samples import Floats, Ints, Labels, SampleSet, Vector, Window, is_stale
from inference_obs.source.base import Source

__all__ = [
    "GpuSteps",
    "gpu_label_query",
    "gpu_label_sets",
    "gpu_per_replica",
    "interval_ms",
    "nearest",
    "replica_keys",
    "replica_of",
    "scrape_interval_ms",
    "sum_by_replica",
]


def gpu_label_query(deployment: Deployment, family: Family, seconds: float) -> Expr:
    """``group by (labels) (last_over_time(x[seconds]))``: see :func:`gpu_label_sets`."""
    keep = (*dcgm.DISCOVERY_LABELS, *(m.label for m in deployment.gpu_matchers))
    selector = family.select(deployment.gpu_matchers)
    return Aggregate("group", last_over_time(selector.over(seconds)), by=tuple(dict.fromkeys(keep)))


def gpu_label_sets(
    source: Source, deployment: Deployment, family: Family, window: Window
) -> tuple[Labels, ...]:
    """The deployment's ``family`` series with samples in ``window``, by the labels analyses read.

    One instant query (:func:`gpu_label_query`) keeping the labels of
    :data:`~inference_obs.metrics.dcgm.DISCOVERY_LABELS` and of the
    deployment's GPU selector: which GPU, which replica, which model. A GPU
    series carries a dozen labels more (driver, PCI bus, device, scrape
    target), so this is a fraction of the series endpoint's answer; series
    alike in all these labels are one label set.
    """
    grouped = gpu_label_query(deployment, family, window.seconds)
    answer = source.instant(grouped, window.end_s).value
    return tuple(answer.labels) if isinstance(answer, Vector) else ()


def replica_keys(
    deployment: Deployment, app: Sequence[Labels], gpu: Sequence[Labels]
) -> tuple[str, ...]:
    """Label names identifying a replica on both app and GPU series (their label sets)."""
    common = {k for labels in app for k in labels} & {k for labels in gpu for k in labels}
    wanted = [m.label for m in deployment.gpu_matchers] + list(dcgm.POD_LABELS)
    return tuple(dict.fromkeys(k for k in wanted if k in common))


def replica_of(labels: Labels, keys: tuple[str, ...]) -> str:
    """The replica a series belongs to: its values of ``keys`` joined (``all`` when none)."""
    return "/".join(labels[k] for k in keys if k in labels) or "all"


def sum_by_replica(samples: SampleSet, keys: tuple[str, ...]) -> dict[str, dict[int, float]]:
    """Per replica: timestamp (ms) -> value summed over its series; stale and NaN dropped."""
    out: dict[str, dict[int, float]] = {}
    for i, labels in enumerate(samples.labels):
        lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
        values = samples.values[lo:hi]
        keep = ~is_stale(values) & ~np.isnan(values)
        target = out.setdefault(replica_of(labels, keys), {})
        for t, v in zip(samples.t_ms[lo:hi][keep].tolist(), values[keep].tolist(), strict=True):
            target[t] = target.get(t, 0.0) + v
    return out


def interval_ms(samples: SampleSet) -> float:
    """Median spacing of raw samples over every series, ms (0 when unknown)."""
    gaps = [
        np.diff(samples.t_ms[int(samples.offsets[i]) : int(samples.offsets[i + 1])])
        for i in range(len(samples))
    ]
    joined = np.concatenate(gaps) if gaps else np.zeros(0)
    return float(np.median(joined)) if joined.size else 0.0


def scrape_interval_ms(source: Source, selector: Selector, window: Window) -> int:
    """The scrape interval of ``selector``'s series, whole ms (0 when none has a sample).

    One instant query at the window end, ``quantile(0.5, count_over_time(x[w]))``:
    the median number of samples per series, ``n``, gives ``w / n`` (a series
    scraped every ``i`` seconds has ``w / i`` samples in ``w`` on average, so
    this is within ``i / n`` of ``i``; series that lived part of the window
    only are outvoted by the median). One number, whatever the fleet's size.

    Raises
    ------
    SourceUnavailable
        When the answer is no median count (NaN, infinite or below 1).
    """
    median = count_over_time(selector.over(window.seconds)).quantile(0.5)
    answer = source.instant(median, window.end_s).value
    if not isinstance(answer, Vector) or not len(answer):
        return 0
    n = float(answer.values[0])
    # Each series counted has at least one sample, so their median is finite and >= 1:
    # anything else (NaN, infinite, 1e-320 that overflows the division) is no count.
    if not 1 <= n < math.inf:
        raise SourceUnavailable(
            f"malformed answer: {n!r} is not a median number of samples",
            promql=to_promql(median),
        )
    return round(window.seconds * 1000 / n)


@dataclass(frozen=True, slots=True)
class GpuSteps:
    """A GPU gauge family averaged per replica by the server, every ``step_ms`` over a window.

    At each step Prometheus takes, for each GPU series, its latest sample at
    or before the step within the look-back (5 min by default; a series ended
    by a staleness marker is absent at once), then ``avg by (keys)``: the
    mean over the replica's GPUs that have a sample. A GPU without one is
    left out of the mean, never counted as 0; a NaN sample makes the step's
    mean NaN. With the step equal to the scrape interval, a step's value is
    the scrape made during the step before it, on average half a step old:
    :meth:`at` places it there (see there), so that an app scrape is compared
    with GPU samples around it rather than, on average, half an interval
    before it.

    Attributes
    ----------
    step_ms
        Step of the range query, ms: the family's scrape interval (0 when it
        has no series, and then no replica).
    replicas
        Per replica (named as :func:`replica_of` names it): the step times
        (unix ms) where at least one of its GPUs had a sample, and the mean
        of those GPUs' values (the family's unit).
    queries
        The ``avg`` expression asked, for the provenance.
    """

    step_ms: int
    replicas: dict[str, tuple[Ints, Floats]]
    queries: tuple[Expr, ...]

    def at(self, replica: str, times_ms: Ints, tolerance_ms: float) -> Floats:
        """Per app scrape time (unix ms): the replica's GPU mean at the aligned step.

        A step ``s`` stands for the time ``s - step_ms / 2`` (the middle of
        the step its samples were scraped in); the step whose time is
        nearest the scrape is taken (the earlier on a tie), among those where
        the replica had a value. Where that time is more than
        ``tolerance_ms`` from the scrape, or the replica has no step, the
        mean is NaN: no GPU aligned.
        """
        if replica not in self.replicas:
            return np.full(times_ms.size, np.nan)
        steps, means = self.replicas[replica]
        middles = steps - self.step_ms // 2
        right = np.clip(np.searchsorted(middles, times_ms), 0, middles.size - 1)
        left = np.clip(right - 1, 0, middles.size - 1)
        gap_left, gap_right = np.abs(times_ms - middles[left]), np.abs(middles[right] - times_ms)
        pick = np.where(gap_left <= gap_right, left, right)
        near = np.abs(middles[pick] - times_ms) <= tolerance_ms
        aligned: Floats = np.where(near, means[pick], np.nan)
        return aligned


def gpu_per_replica(
    source: Source, selector: Selector, keys: tuple[str, ...], window: Window
) -> GpuSteps:
    """``avg by (keys) (x)`` every scrape interval over ``window``.

    Two requests (the interval, then one range query) whose answers grow with
    replicas and steps, not with GPUs. See :class:`GpuSteps` for what a step
    holds.
    """
    mean_expr = selector.avg(by=keys)
    step = scrape_interval_ms(source, selector, window)
    replicas: dict[str, tuple[Ints, Floats]] = {}
    if step > 0:
        matrix = source.range(mean_expr, window, step / 1000)
        for i, labels in enumerate(matrix.labels):
            t_ms, means = matrix.points(i)
            if t_ms.size:
                replicas[replica_of(labels, keys)] = (t_ms, means)
    return GpuSteps(step, replicas, (mean_expr,))


def nearest(
    times: npt.NDArray[np.int64], values: npt.NDArray[np.float64], at: int, tolerance: float
) -> float | None:
    """The value of the sample nearest ``at`` (ms) within ``tolerance`` (ms), else None."""
    if not times.size:
        return None
    i = int(np.searchsorted(times, at))
    best: float | None = None
    gap = math.inf
    for j in (i - 1, i):
        if 0 <= j < times.size and abs(int(times[j]) - at) < gap:
            gap, best = abs(int(times[j]) - at), float(values[j])
    return best if gap <= tolerance else None
