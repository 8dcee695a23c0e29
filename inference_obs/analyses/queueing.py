"""Queues against GPU activity: when requests wait, were the GPUs busy or idle?

Each replica's rows (:mod:`~inference_obs.reading.rows`: its app scrapes of
``vllm:num_requests_running`` / ``vllm:num_requests_waiting``, or tiles of
``step`` seconds for a large scope) are read against ``DCGM_FI_DEV_GPU_UTIL``
averaged over the replica's GPUs by the server, and each row is classified:

- ``capacity``: waiting > 0 while the replica's mean GPU utilisation is at or
  above the busy threshold (the GPUs are busy; more capacity would help);
- ``starved``: waiting > 0 while the GPUs are idle (below the threshold): look
  at the host, transfers or scheduling, not at GPU capacity;
- ``inconsistent``: running > 0 while every GPU reads 0: investigate, the
  independent scrapes may simply be misaligned;
- ``busy`` / ``idle`` otherwise; ``unknown`` where no GPU reading aligns.

Per scrape, a GPU reading is the replica's mean at the step (one per GPU
scrape interval) nearest the scrape, within a tolerance. Per tile, a row holds
each engine's largest sample in the tile (summed over the engines) and the
mean of the replica's GPU samples in the same tile.

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

from inference_obs.deployment import Deployment
from inference_obs.metrics import dcgm, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, max_over_time
from inference_obs.reading.alignment import gpu_label_sets
from inference_obs.reading.measurement import Measurement, local_measurement
from inference_obs.reading.result import AnalysisResult
from inference_obs.reading.rows import align_gpu, app_rows
from inference_obs.samples import Vector, Window
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
TILED = (
    "Read in tiles: a row is a tile, holding each engine's largest sample in it and the mean "
    "of the GPUs' samples in it, so a tile with a queue and busy GPUs need not have had both "
    "at the same moment."
)
SAMPLED = "Counts of scraped samples, not of wall time: what happens between scrapes is not seen."
SAMPLED_TILES = "Counts of tiles, not of wall time or of scrapes."
CORRELATION = (
    "Pearson correlation of sampled queue depth against GPU idle (100 - util), pooled over "
    "replicas; correlation is not causation, and a lag is in rows (samples, or tiles), not "
    "seconds."
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
    """Consecutive rows (app samples, or tiles) of one replica in one class.

    Attributes
    ----------
    start, end
        Times of the first and last sample, in the window's timezone; per
        tile, the start of the first tile and the end of the last.
    samples
        Number of rows in the interval: app samples, or tiles.
    max_waiting, max_running
        Largest sampled ``num_requests_waiting`` / ``num_requests_running`` (requests).
    mean_gpu_util
        Mean over the rows of the replica's mean GPU utilisation, percent
        (0-100); ``None`` when no GPU reading aligned.
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
    step_seconds
        ``None`` when each row is an app scrape; else the tile width, seconds.
    intervals
        Consecutive same-class rows per replica, in time order.
    peak_waiting
        Largest sampled queue (requests); ``peak_time`` is when (window
        timezone; per tile, the end of the tile).
    class_share
        Share (ratio 0-1) of rows in each class.
    peak_waiting_by_reason
        Per ``reason`` label value, the largest sampled
        ``num_requests_waiting_by_reason`` of one series (requests).
    gpu_alignment
        Number of rows with an aligned GPU reading; ``no_data`` naming the
        GPU family when there is none.
    best_lag, best_lag_correlation
        Lag (rows; positive: GPU idle follows the queue) with the strongest
        correlation between waiting and GPU idle, and that coefficient.
    """

    step_seconds: float | None
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
    step: float | None = None,
    tolerance_s: float | None = None,
    busy_threshold: float = 50.0,
) -> QueueingResult:
    """Classify each app scrape (or tile) of ``deployment`` by queue state and GPU activity.

    Parameters
    ----------
    source
        Where the samples come from.
    deployment
        The deployment; its matchers select the vLLM series, its GPU matchers
        the DCGM series.
    window
        The window; interval times are given in its timezone.
    step
        ``None`` (default) to classify every app scrape; else the width,
        seconds, of the tiles to classify (it must divide the window; see
        :func:`~inference_obs.reading.resolution.tile_step`).
    tolerance_s
        Per scrape only: largest distance, seconds, between an app sample and
        the GPU step aligned with it. Default: the larger of the app's median
        scrape interval and the GPU scrape interval (the step).
    busy_threshold
        Mean GPU utilisation, percent (0-100), at or above which the GPUs count
        as busy. Default 50.

    Returns
    -------
    QueueingResult
        Intervals per class, peak queue (requests) and time, share of rows
        per class (ratio), GPU alignment count and the best lag correlation.
    """
    if step is not None and tolerance_s is not None:
        raise ValueError(
            f"tolerance_s={tolerance_s!r} aligns app scrapes with GPU steps; with "
            f"step={step!r} a row is a tile and its app and GPU readings come from the same "
            "tile: give one or the other"
        )
    sel_gpu = dcgm.GPU_UTIL.select(deployment.gpu_matchers)
    # Label sets only: the GPU samples themselves are reduced per replica by the server.
    gpu_labels = gpu_label_sets(source, deployment, dcgm.GPU_UTIL, window)
    rows = app_rows(source, deployment, window, gpu_labels, step)
    tolerance = None if tolerance_s is None else tolerance_s * 1000.0
    gpu = align_gpu(source, rows, sel_gpu, window, tolerance_ms=tolerance)
    selectors: list[Expr] = [*rows.reads, gpu.query]

    zone = window.start.tzinfo
    intervals: list[QueueInterval] = []
    counts = dict.fromkeys(QueueClass, 0)
    pairs: dict[int, tuple[list[float], list[float]]] = {lag: ([], []) for lag in LAGS}
    peak: tuple[float, int, str] | None = None
    aligned = 0
    for replica, times in rows.times.items():
        classified: list[tuple[int, int, float, float, float | None, QueueClass]] = []
        for begin, t, w, r, mean in zip(
            rows.starts(replica).tolist(), times.tolist(), rows.waiting[replica].tolist(),
            rows.running[replica].tolist(), gpu.means[replica].tolist(), strict=True,
        ):  # fmt: skip
            # The mean over the GPUs that reported; a NaN sample makes the step unusable.
            util = mean if np.isfinite(mean) else None
            aligned += util is not None
            cls = _classify(w, r, util, busy_threshold)
            counts[cls] += 1
            classified.append((begin, t, w, r, util, cls))
            if peak is None or w > peak[0]:
                peak = (w, t, replica)
        series = [(w, u) for *_, w, _, u, _ in classified]
        for lag in LAGS:
            for k, (w, _) in enumerate(series):
                if 0 <= k + lag < len(series):
                    u = series[k + lag][1]
                    if u is not None:
                        pairs[lag][0].append(w)
                        pairs[lag][1].append(100.0 - u)
        start = 0
        for k in range(1, len(classified) + 1):
            if k == len(classified) or classified[k][5] is not classified[start][5]:
                chunk = classified[start:k]
                utils = [c[4] for c in chunk if c[4] is not None]
                intervals.append(
                    QueueInterval(
                        classification=chunk[0][5],
                        replica=replica,
                        start=_time(chunk[0][0], zone),
                        end=_time(chunk[-1][1], zone),
                        samples=len(chunk),
                        max_waiting=max(c[2] for c in chunk),
                        max_running=max(c[3] for c in chunk),
                        mean_gpu_util=sum(utils) / len(utils) if utils else None,
                    )
                )
                start = k
    intervals.sort(key=lambda i: (i.start, i.replica))
    sampled, aligned_how = (SAMPLED, ALIGNMENT) if step is None else (SAMPLED_TILES, TILED)

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

    no_app = [] if rows.found else [vllm.NUM_REQUESTS_WAITING]
    no_gpu = [] if gpu_labels else [dcgm.GPU_UTIL]
    unit = "samples" if step is None else "tiles"
    row = "app samples" if step is None else f"{step:g} s tiles"
    total = sum(counts.values())
    shares = {
        cls.value: local(
            f"share_{cls.value}",
            counts[cls] / total if total else None,
            "ratio",
            f"{row} classified {cls.value} / all {row}",
            (sampled, aligned_how),
            no_app,
        )
        for cls in QueueClass
    }
    matched = ", ".join(rows.keys) or "nothing: all pooled"
    if step is None:
        how_aligned = (
            f"app samples with a step of the same replica's GPUs (avg by replica, "
            f"every {gpu.step_ms / 1000:g} s, each GPU's latest sample at or before the step) "
            f"within {gpu.tolerance_ms / 1000:g} s (replicas matched on {matched})"
        )
    else:
        how_aligned = (
            f"{row} with a GPU sample of the same replica in the tile (replicas matched on "
            f"{matched})"
        )
    alignment = local(
        "gpu_aligned_samples", float(aligned) if aligned else None, unit, how_aligned,
        (aligned_how,), no_app + no_gpu,
    )  # fmt: skip
    peak_m = local(
        "peak_waiting",
        peak[0] if peak else None,
        "requests",
        "max of raw num_requests_waiting samples, per replica (series summed)"
        if step is None
        else f"max over {row} of the sum over the replica's engines of each one's largest "
        "num_requests_waiting sample in the tile",
        (sampled,),
        no_app,
        rows.reads[:1],
    )
    sel_reason = vllm.NUM_REQUESTS_WAITING_BY_REASON.select(deployment.matchers)
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
    how = f"Pearson r of waiting[k] vs 100 - util[k + lag], lags -2..+2 {row}; largest |r|"
    lag_m = local(
        "best_lag", None if best is None else float(best[0]), unit, how, (CORRELATION,),
        no_app + no_gpu,
    )  # fmt: skip
    r_m = local(
        "best_lag_correlation", None if best is None else best[1], "ratio", how, (CORRELATION,),
        no_app + no_gpu,
    )  # fmt: skip
    return QueueingResult(
        step_seconds=step,
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
