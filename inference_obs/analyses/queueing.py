"""Queues against GPU activity: when requests wait, were the GPUs busy or idle?

Raw app scrapes (``vllm:num_requests_running`` / ``vllm:num_requests_waiting``)
are aligned per replica with ``DCGM_FI_DEV_GPU_UTIL`` reduced per replica by
the server (:func:`~inference_obs.analyses.alignment.gpu_per_replica`: the mean
of the replica's GPUs at every GPU scrape interval, each GPU read at its
latest sample at or before the step) at the step nearest the scrape
within a tolerance, and each aligned sample is classified:

- ``capacity``: waiting > 0 while the replica's mean GPU utilisation is at or
  above the busy threshold (the GPUs are busy; more capacity would help);
- ``starved``: waiting > 0 while the GPUs are idle (below the threshold): look
  at the host, transfers or scheduling, not at GPU capacity;
- ``inconsistent``: running > 0 while every GPU reads 0: investigate, the
  independent scrapes may simply be misaligned;
- ``busy`` / ``idle`` otherwise; ``unknown`` where no GPU step aligns.

Low hourly utilisation and minutes of substantial queueing are compatible: a
published PRO 5000 vs H20 observation had both in one hour. GPU series are
matched to replicas by the label names of the deployment's GPU selector (e.g.
``pod``) that both the app and the GPU series carry.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, tzinfo
from enum import StrEnum

import numpy as np
from pydantic import AwareDatetime, BaseModel, ConfigDict

from inference_obs.analyses.alignment import (
    gpu_per_replica,
    interval_ms,
    replica_keys,
    sum_by_replica,
)
from inference_obs.analyses.measurement import Measurement, local_measurement
from inference_obs.analyses.result import AnalysisResult
from inference_obs.deployment import Deployment
from inference_obs.engine.vector import Vector
from inference_obs.metrics import dcgm, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, max_over_time
from inference_obs.samples import Window
from inference_obs.source.base import Source

__all__ = ["QueueClass", "QueueInterval", "QueueingResult", "queueing"]

ANALYSIS = "queueing"
LAGS = (-2, -1, 0, 1, 2)
ALIGNMENT = (
    "App and GPU metrics are scraped independently; a sample is aligned with the replica's "
    "GPUs at the nearest step (one per GPU scrape interval) within the tolerance, each GPU at "
    "its latest sample at or before that step, so a few seconds of activity can be attributed "
    "to the wrong class. Classify intervals, not single points."
)
SAMPLED = "Counts of scraped samples, not of wall time: what happens between scrapes is not seen."
CORRELATION = (
    "Pearson correlation of sampled queue depth against GPU idle (100 - util), pooled over "
    "replicas; correlation is not causation, and a lag is in samples, not seconds."
)


class QueueClass(StrEnum):
    """What an aligned app sample shows."""

    CAPACITY = "capacity"
    STARVED = "starved"
    INCONSISTENT = "inconsistent"
    BUSY = "busy"
    IDLE = "idle"
    UNKNOWN = "unknown"


class QueueInterval(BaseModel):
    """Consecutive samples of one replica in one class.

    Attributes
    ----------
    start, end
        Times of the first and last sample, in the window's timezone.
    samples
        Number of aligned app samples in the interval.
    max_waiting, max_running
        Largest sampled ``num_requests_waiting`` / ``num_requests_running`` (requests).
    mean_gpu_util
        Mean over the samples of the replica's mean GPU utilisation, percent
        (0-100); ``None`` when no GPU step aligned.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    classification: QueueClass
    replica: str
    start: AwareDatetime
    end: AwareDatetime
    samples: int
    max_waiting: float
    max_running: float
    mean_gpu_util: float | None


class QueueingResult(AnalysisResult):
    """Queues and GPU activity of one deployment over one window.

    Attributes
    ----------
    intervals
        Consecutive same-class samples per replica, in time order.
    peak_waiting
        Largest sampled queue (requests); ``peak_time`` is when (window timezone).
    class_share
        Share (ratio 0-1) of aligned samples in each class.
    peak_waiting_by_reason
        Per ``reason`` label value, the largest sampled
        ``num_requests_waiting_by_reason`` of one series (requests).
    gpu_alignment
        Number of app samples with an aligned GPU step; ``no_data`` naming
        the GPU family when there is none.
    best_lag, best_lag_correlation
        Lag (samples; positive: GPU idle follows the queue) with the strongest
        correlation between waiting and GPU idle, and that coefficient.
    """

    intervals: tuple[QueueInterval, ...]
    peak_waiting: Measurement
    peak_time: AwareDatetime | None
    peak_replica: str | None
    class_share: dict[str, Measurement]
    peak_waiting_by_reason: dict[str, Measurement]
    gpu_alignment: Measurement
    best_lag: Measurement
    best_lag_correlation: Measurement


def _classify(
    waiting: float, running: float, util: float | None, busy_threshold: float
) -> QueueClass:
    """The class of one app sample; ``util`` is the replica's mean GPU utilisation (0-100)."""
    if util is None:
        return QueueClass.UNKNOWN
    # GPU_UTIL lies in 0-100, so every GPU reads 0 exactly when their mean (and sum) is 0.
    if running > 0 and util == 0:
        return QueueClass.INCONSISTENT
    if waiting > 0:
        return QueueClass.CAPACITY if util >= busy_threshold else QueueClass.STARVED
    return QueueClass.BUSY if running > 0 or util >= busy_threshold else QueueClass.IDLE


def _pearson(x: list[float], y: list[float]) -> float | None:
    if len(x) < 3:
        return None
    a, b = np.asarray(x), np.asarray(y)
    if float(np.std(a)) == 0.0 or float(np.std(b)) == 0.0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def _time(t_ms: int, zone: tzinfo | None) -> datetime:
    return datetime.fromtimestamp(t_ms / 1000.0, tz=zone)


def queueing(
    source: Source,
    deployment: Deployment,
    window: Window,
    *,
    tolerance_s: float | None = None,
    busy_threshold: float = 50.0,
) -> QueueingResult:
    """Classify each app scrape of ``deployment`` by queue state and GPU activity.

    Parameters
    ----------
    source
        Where the raw samples come from.
    deployment
        The deployment; its matchers select the vLLM series, its GPU matchers
        the DCGM series.
    window
        The window; interval times are given in its timezone.
    tolerance_s
        Largest distance, seconds, between an app sample and the GPU step
        aligned with it. Default: the larger of the app's median scrape
        interval and the GPU scrape interval (the step).
    busy_threshold
        Mean GPU utilisation, percent (0-100), at or above which the GPUs count
        as busy. Default 50.

    Returns
    -------
    QueueingResult
        Intervals per class, peak queue (requests) and time, share of samples
        per class (ratio), GPU alignment count and the best lag correlation.
    """
    m, gm = deployment.matchers, deployment.gpu_matchers
    sel_wait = vllm.NUM_REQUESTS_WAITING.select(m)
    sel_run = vllm.NUM_REQUESTS_RUNNING.select(m)
    sel_gpu = dcgm.GPU_UTIL.select(gm)
    waiting_raw = source.raw(sel_wait, window)
    running_raw = source.raw(sel_run, window)
    # Label sets only: the GPU samples themselves are reduced per replica by the server.
    gpu_labels = source.series(sel_gpu, window)
    keys = replica_keys(deployment, waiting_raw.labels, gpu_labels)
    gpu = gpu_per_replica(source, sel_gpu, keys, window)
    selectors: list[Expr] = [sel_wait, sel_run, *gpu.queries]
    waiting = sum_by_replica(waiting_raw, keys)
    running = sum_by_replica(running_raw, keys)
    if tolerance_s is None:
        tolerance = max(interval_ms(waiting_raw), float(gpu.step_ms))
    else:
        tolerance = tolerance_s * 1000.0

    zone = window.start.tzinfo
    intervals: list[QueueInterval] = []
    counts = dict.fromkeys(QueueClass, 0)
    pairs: dict[int, tuple[list[float], list[float]]] = {lag: ([], []) for lag in LAGS}
    peak: tuple[float, int, str] | None = None
    aligned = 0
    for replica in sorted(waiting):
        rows: list[tuple[int, float, float, float | None, QueueClass]] = []
        run = running.get(replica, {})
        times = np.array(sorted(waiting[replica]), dtype=np.int64)
        means = gpu.at(replica, times, tolerance)
        for t, mean in zip(times.tolist(), means.tolist(), strict=True):
            w, r = waiting[replica][t], run.get(t, 0.0)
            # The mean over the GPUs that reported; a NaN sample makes the step unusable.
            util = mean if np.isfinite(mean) else None
            aligned += util is not None
            cls = _classify(w, r, util, busy_threshold)
            counts[cls] += 1
            rows.append((t, w, r, util, cls))
            if peak is None or w > peak[0]:
                peak = (w, t, replica)
        series = [(w, u) for _, w, _, u, _ in rows]
        for lag in LAGS:
            for k, (w, _) in enumerate(series):
                if 0 <= k + lag < len(series):
                    u = series[k + lag][1]
                    if u is not None:
                        pairs[lag][0].append(w)
                        pairs[lag][1].append(100.0 - u)
        start = 0
        for k in range(1, len(rows) + 1):
            if k == len(rows) or rows[k][4] is not rows[start][4]:
                chunk = rows[start:k]
                utils = [u for *_, u, _ in chunk if u is not None]
                intervals.append(
                    QueueInterval(
                        classification=chunk[0][4],
                        replica=replica,
                        start=_time(chunk[0][0], zone),
                        end=_time(chunk[-1][0], zone),
                        samples=len(chunk),
                        max_waiting=max(c[1] for c in chunk),
                        max_running=max(c[2] for c in chunk),
                        mean_gpu_util=sum(utils) / len(utils) if utils else None,
                    )
                )
                start = k
    intervals.sort(key=lambda i: (i.start, i.replica))

    def local(
        statistic: str,
        value: float | None,
        unit: str,
        computation: str,
        caveats: Sequence[str],
        missing: Sequence[Family] = (),
        used: Sequence[Expr] = selectors,
    ) -> Measurement:
        return local_measurement(
            source,
            deployment,
            window,
            analysis=ANALYSIS,
            statistic=statistic,
            value=value,
            unit=unit,
            selectors=used,
            computation=computation,
            caveats=caveats,
            missing=[f.name for f in missing],
        )

    no_app = [] if len(waiting_raw) else [vllm.NUM_REQUESTS_WAITING]
    no_gpu = [] if gpu_labels else [dcgm.GPU_UTIL]
    total = sum(counts.values())
    shares = {
        cls.value: local(
            f"share_{cls.value}",
            counts[cls] / total if total else None,
            "ratio",
            f"aligned app samples classified {cls.value} / all app samples",
            (SAMPLED, ALIGNMENT),
            no_app,
        )
        for cls in QueueClass
    }
    alignment = local(
        "gpu_aligned_samples",
        float(aligned) if aligned else None,
        "samples",
        f"app samples with a step of the same replica's GPUs (avg by replica, "
        f"every {gpu.step_ms / 1000:g} s, each GPU's latest sample at or before the step) "
        f"within {tolerance / 1000:g} s "
        f"(replicas matched on {', '.join(keys) or 'nothing: all pooled'})",
        (ALIGNMENT,),
        no_app + no_gpu,
    )
    peak_m = local(
        "peak_waiting",
        peak[0] if peak else None,
        "requests",
        "max of raw num_requests_waiting samples, per replica (series summed)",
        (SAMPLED,),
        no_app,
        [sel_wait],
    )
    sel_reason = vllm.NUM_REQUESTS_WAITING_BY_REASON.select(m)
    # Each series' largest sample in the window, then the largest per reason: one small answer.
    top_reason = max_over_time(sel_reason.over(window.seconds)).max(by=("reason",))
    answer = source.instant(top_reason, window.end_s).value
    reasons: dict[str, float] = {}
    if isinstance(answer, Vector):
        for labels, top in zip(answer.labels, answer.values.tolist(), strict=True):
            if not np.isnan(top):  # every sample NaN: nothing was sampled
                reasons[labels.get("reason", "unlabelled")] = top
    peak_reason = {
        name: local(
            f"peak_waiting[{name}]",
            top,
            "requests",
            "max by (reason) (max_over_time(num_requests_waiting_by_reason[window])): the largest "
            "sample of one series of that reason, at the window end",
            (SAMPLED, "A scheduler classification, not a diagnosis (e.g. not 'memory full')."),
            (),
            [top_reason],
        )
        for name, top in sorted(reasons.items())
    }
    best: tuple[int, float] | None = None
    for lag in LAGS:
        coef = _pearson(*pairs[lag])
        if coef is not None and (best is None or abs(coef) > abs(best[1])):
            best = (lag, coef)
    how = "Pearson r of waiting[k] vs 100 - util[k + lag], lags -2..+2 samples; largest |r|"
    lag_m = local(
        "best_lag", None if best is None else float(best[0]), "samples", how, (CORRELATION,),
        no_app + no_gpu,
    )  # fmt: skip
    r_m = local(
        "best_lag_correlation", None if best is None else best[1], "ratio", how, (CORRELATION,),
        no_app + no_gpu,
    )  # fmt: skip
    return QueueingResult(
        intervals=tuple(intervals),
        peak_waiting=peak_m,
        peak_time=_time(peak[1], zone) if peak else None,
        peak_replica=peak[2] if peak else None,
        class_share=shares,
        peak_waiting_by_reason=peak_reason,
        gpu_alignment=alignment,
        best_lag=lag_m,
        best_lag_correlation=r_m,
    )
