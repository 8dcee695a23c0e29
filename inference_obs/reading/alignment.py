"""Aligning application samples with GPU activity: replicas, sample times and tolerance.

vLLM and dcgm-exporter are scraped independently, so a vLLM sample and the
GPUs of the same replica are matched by the labels they share and by time.
The app gauges are read raw (every scrape is classified). A GPU family is
averaged per replica by the server (:func:`gpu_per_replica`), so what is
downloaded grows with replicas and time, not with GPUs.

**The pairing rule.** An app scrape at ``t`` is paired with the replica's
GPU reading whose *sample time* is nearest ``t``, if that is at most the
tolerance away (by default the larger of the app's and the GPU family's
scrape intervals); on a tie, the earlier reading (the one already scraped
when the app was); farther than the tolerance, nothing is paired and the
scrape is unknown. A GPU reading is the mean of the replica's GPUs at one
of their scrapes, and its time is that scrape's time (the newest sample
time among those GPUs). Nothing in the rule names the report's window: a
scrape is paired with the same reading, so gets the same class, in an
hourly, a daily or a weekly report.

**How the readings are read.** Two range queries on one grid, per replica
``avg by (keys) (x)`` and ``max by (keys) (timestamp(x))``: the mean of the
GPUs' latest samples at each step and the newest of those samples' times.
Consecutive steps that hold the same sample time hold the same scrape, and
are one reading (the first step's). The grid's step is half the family's
scrape interval, in whole seconds (:func:`grid_step_ms`): as long as
consecutive scrapes are at least a step apart, every scrape is the latest
at some step, so every reading is found whatever the step. The grid is
anchored on multiples of the step since the epoch, not on the window's
start, and reaches beyond the window by twice the larger scrape interval
(more than the default tolerance), so that a scrape near a window's edge
sees the readings on both sides of it. A window therefore only decides
which scrapes are classified, never what they are paired with. One corner
is the grid's: a GPU that stopped without a staleness marker stays in the
mean for the 5-minute look-back, and a reading within a step of that
look-back's end may or may not hold it, as its first step falls. (The
alternative, a step of one scrape interval anchored on the window's start,
pairs a scrape with whichever scrape the step happened to catch, and so
with another reading when the window moves.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

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
    timestamp,
    to_promql,
)
from inference_obs.reading.schedule import together
from inference_obs.samples import Floats, Ints, Labels, SampleSet, Vector, Window, is_stale
from inference_obs.source.base import Source

__all__ = [
    "READS",
    "STEPS_PER_INTERVAL",
    "GpuScrapes",
    "gpu_label_query",
    "gpu_label_sets",
    "gpu_per_replica",
    "grid_step_ms",
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


#: Grid steps per scrape interval: two, so that a scrape up to half an interval
#: early or late (jitter, a slow exporter) is still the latest sample at a step.
STEPS_PER_INTERVAL = 2


def grid_step_ms(interval_ms: int) -> int:
    """The grid step for a family scraped every ``interval_ms``: see the module.

    Half the interval, rounded down to whole seconds (scrape intervals are
    whole seconds, so a measured 14.9 s and 15.1 s both give 7 s); below 2 s,
    half the interval in ms. 0 for no interval.

    Examples
    --------
    >>> grid_step_ms(15_000), grid_step_ms(60_000), grid_step_ms(14_900), grid_step_ms(1_000)
    (7000, 30000, 7000, 500)
    """
    if interval_ms <= 0:
        return 0
    half = interval_ms // STEPS_PER_INTERVAL
    return half // 1000 * 1000 or max(1, half)


def _grid(window: Window, step_ms: int, reach_ms: float) -> Window:
    """Multiples of ``step_ms`` since the epoch from ``reach_ms`` before the window to after it."""
    lo = math.floor((window.start_s * 1000 - reach_ms) / step_ms) * step_ms
    hi = math.ceil((window.end_s * 1000 + reach_ms) / step_ms) * step_ms
    zone = window.start.tzinfo
    return Window(datetime.fromtimestamp(lo / 1000, zone), datetime.fromtimestamp(hi / 1000, zone))


@dataclass(frozen=True, slots=True)
class GpuScrapes:
    """A GPU gauge family averaged per replica by the server, one reading per scrape.

    A reading is the mean of the replica's GPUs that have a sample (the
    latest, within the 5-minute look-back; a series ended by a staleness
    marker is absent at once): a GPU without one is left out of the mean,
    never counted as 0, and a NaN sample makes the mean NaN. Its time is the
    newest of those samples' times. See the module for how they are read.

    Attributes
    ----------
    interval_ms
        The family's scrape interval, ms: the median spacing of the readings
        (else the interval measured by :func:`scrape_interval_ms`; 0 when the
        family has no series, and then no replica).
    step_ms
        Step of the grid the readings were read at, ms (:func:`grid_step_ms`).
    replicas
        Per replica (named as :func:`replica_of` names it): the readings'
        sample times (unix ms, ascending) and means (the family's unit).
    queries
        The ``avg`` and ``max ... timestamp`` expressions asked, for the provenance.
    """

    interval_ms: int
    step_ms: int
    replicas: dict[str, tuple[Ints, Floats]]
    queries: tuple[Expr, ...]

    def at(self, replica: str, times_ms: Ints, tolerance_ms: float) -> Floats:
        """Per app scrape time (unix ms): the mean of the reading paired with it.

        The reading whose sample time is nearest the scrape (the earlier on
        a tie); NaN where that is more than ``tolerance_ms`` away or the
        replica has no reading: no GPU aligned.
        """
        if replica not in self.replicas or not self.replicas[replica][0].size:
            return np.full(times_ms.size, np.nan)
        samples, means = self.replicas[replica]
        right = np.clip(np.searchsorted(samples, times_ms), 0, samples.size - 1)
        left = np.clip(right - 1, 0, samples.size - 1)
        gap_left, gap_right = np.abs(times_ms - samples[left]), np.abs(samples[right] - times_ms)
        pick = np.where(gap_left <= gap_right, left, right)
        near = np.abs(samples[pick] - times_ms) <= tolerance_ms
        aligned: Floats = np.where(near, means[pick], np.nan)
        return aligned


def _readings(means: Floats, newest: Floats) -> tuple[Ints, Floats]:
    """One reading per sample time: the first step that held it (see the module)."""
    # timestamp() answers unix seconds with ms precision: back to whole ms.
    times = np.round(newest * 1000).astype(np.int64)
    _, first = np.unique(times, return_index=True)
    return times[first], means[first]


def _read(
    source: Source, exprs: tuple[Expr, Expr], keys: tuple[str, ...], grid: Window, step_ms: int
) -> dict[str, tuple[Ints, Floats]]:
    """Per replica, its readings: the two range queries on ``grid`` (see the module)."""
    # Asked at once: one round trip where the source runs questions in parallel.
    mean_m, time_m = together([partial(source.range, e, grid, step_ms / 1000) for e in exprs])
    newest = {replica_of(labels, keys): time_m.points(i) for i, labels in enumerate(time_m.labels)}
    replicas: dict[str, tuple[Ints, Floats]] = {}
    for i, labels in enumerate(mean_m.labels):
        name = replica_of(labels, keys)
        if name not in newest:
            continue
        steps, means = mean_m.points(i)
        # Both answers come from the same samples at the same steps; keep the shared ones.
        both, at_mean, at_time = np.intersect1d(steps, newest[name][0], return_indices=True)
        if both.size:
            replicas[name] = _readings(means[at_mean], newest[name][1][at_time])
    return replicas


def _spacing_ms(replicas: dict[str, tuple[Ints, Floats]]) -> int:
    """Median spacing of consecutive readings over every replica, whole ms (0: none)."""
    gaps = [np.diff(times) for times, _ in replicas.values()]
    joined = np.concatenate(gaps) if gaps else np.zeros(0, dtype=np.int64)
    return round(float(np.median(joined))) if joined.size else 0


#: Reads of the grid at most: the first at half the measured interval, then at half
#: the readings' own spacing while the step was over 3/4 of it (each read at least
#: shrinks the step by a third).
READS = 4


def gpu_per_replica(
    source: Source,
    selector: Selector,
    keys: tuple[str, ...],
    window: Window,
    *,
    reach_ms: float = 0.0,
) -> GpuScrapes:
    """The replicas' GPU readings near ``window``: ``avg by (keys) (x)`` at each scrape.

    An instant query for the scrape interval, then two range queries on one
    grid (see the module), whose answers grow with replicas and time, not
    with GPUs. The interval measured by :func:`scrape_interval_ms` is too
    long when the series lived part of the window only (samples per series
    counted against the whole window); the readings' own median spacing is
    not, so where the step read at was over 3/4 of it, the grid is read
    again at half of it (at most :data:`READS` reads in all). Readings
    are read from twice the larger of ``reach_ms`` and the interval before
    the window to as far after it: pass the app's scrape interval, so that
    every reading within the default tolerance of a scrape in the window is
    found.
    """
    exprs = (selector.avg(by=keys), Aggregate("max", timestamp(selector), by=keys))
    interval = scrape_interval_ms(source, selector, window)
    step = grid_step_ms(interval)
    replicas: dict[str, tuple[Ints, Floats]] = {}
    for _ in range(READS if step > 0 else 0):
        grid = _grid(window, step, 2 * max(reach_ms, interval))
        replicas = _read(source, exprs, keys, grid, step)
        spacing = _spacing_ms(replicas)
        interval = spacing or interval
        # A step up to 3/4 of the spacing still has every reading at a step, with room
        # for jitter; a coarser one may have skipped some: read again, finer.
        if not spacing or 4 * step <= 3 * spacing:
            break
        step = grid_step_ms(spacing)
    return GpuScrapes(interval, step, replicas, exprs)


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
