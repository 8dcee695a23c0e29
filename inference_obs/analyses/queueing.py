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

Per scrape, a scrape is read against the replica's GPU reading (the mean of
its GPUs at one of their scrapes) whose sample time is nearest the scrape,
the earlier on a tie, within a tolerance (by default the larger of the two
scrape intervals): the rule of :mod:`~inference_obs.reading.alignment`, which
does not depend on the window, so a scrape has one class in every report
that holds it. Per tile (tiles anchored on multiples of their width since
the epoch, :func:`~inference_obs.reading.resolution.tile_window`), a row holds
each engine's largest sample in the tile (summed over the engines) and the
mean of the replica's GPU samples in the same tile.

Beyond the classes, the same rows are counted in a 2x2 table of requests
waiting against GPUs idle, per replica and pooled, with its odds ratio, phi
and Fisher's exact p-value (:mod:`~inference_obs.analyses.waiting_idle`):
whether queues and idle GPUs went together more often than chance, next to
the lag of the strongest Pearson correlation. Correlation is not causation.

Low hourly utilisation and minutes of substantial queueing are compatible: a
published PRO 5000 vs H20 observation had both in one hour. GPU series are
matched to replicas by the label names of the deployment's GPU selector (e.g.
``pod``) that both the app and the GPU series carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from enum import StrEnum
from functools import partial

import numpy as np
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from inference_obs.analyses.unit import Analysis, Settings
from inference_obs.analyses.waiting_idle import TwoByTwo, WaitingIdle, waiting_idle
from inference_obs.metrics import dcgm, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, max_over_time
from inference_obs.reading.alignment import gpu_label_sets
from inference_obs.reading.context import Reading
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.result import AnalysisResult, FloatColumn
from inference_obs.reading.rows import AlignedGpu, AppRows, align_gpu, app_rows, tolerance_ms
from inference_obs.samples import Floats, Vector

__all__ = [
    "QueueClass",
    "QueueInterval",
    "QueueRows",
    "QueueingResult",
    "QueueingSettings",
    "queueing",
]

LAGS = (-2, -1, 0, 1, 2)
ALIGNMENT = (
    "App and GPU metrics are scraped independently; a sample is aligned with the replica's "
    "GPU reading (the mean of its GPUs at one of their scrapes) nearest in time within the "
    "tolerance, so a few seconds of activity can be attributed to the wrong class. Classify "
    "intervals, not single points."
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
BY_REASON = "A scheduler classification, not a diagnosis (e.g. not 'memory full')."


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


class QueueRows(BaseModel):
    """One replica's classified rows, as read: what the queue figure draws.

    Attributes
    ----------
    replica
        The replica.
    begin, t
        Where each row begins and its time, unix seconds (ascending): both the
        scrape time per scrape; per tile, the tile's start and end.
    waiting, running
        ``num_requests_waiting`` / ``num_requests_running`` at each row
        (requests, summed over the replica's engines).
    gpu_util
        The replica's mean GPU utilisation at each row, percent (0-100); NaN
        where no GPU reading aligned.
    classes
        Each row's class.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    replica: str
    begin: FloatColumn
    t: FloatColumn
    waiting: FloatColumn
    running: FloatColumn
    gpu_util: FloatColumn
    classes: tuple[QueueClass, ...]


class QueueingResult(AnalysisResult):
    """Queues and GPU activity of one deployment over one window.

    Attributes
    ----------
    step_seconds
        ``None`` when each row is an app scrape; else the tile width, seconds.
    row_seconds
        How far apart rows are, seconds: the median app scrape interval (0
        without app series), or the tile width.
    gpu_seconds
        How far apart the GPU readings aligned with the rows are, seconds:
        the GPU utilisation family's scrape interval (0 without its series),
        or the tile width. A row's reading is the one nearest it, up to half
        the longer of the two apart.
    busy_threshold
        Mean GPU utilisation, percent (0-100), at and above which a replica's
        GPUs counted as busy (the setting the rows were classified with).
    rows
        Per replica (sorted by name), every classified row.
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
    waiting_idle, waiting_idle_by_replica
        Rows counted by requests waiting against GPUs idle (below
        ``busy_threshold``), with odds ratio, phi and Fisher's exact p-value:
        every replica pooled, and per replica (keys ``waiting_idle_*[replica]``).
    """

    step_seconds: float | None
    row_seconds: float
    gpu_seconds: float
    busy_threshold: float
    rows: tuple[QueueRows, ...]
    intervals: tuple[QueueInterval, ...]
    peak_waiting: Measurement
    peak_time: AwareDatetime | None
    peak_replica: str | None
    class_share: dict[str, Measurement]
    peak_waiting_by_reason: dict[str, Measurement]
    gpu_alignment: Measurement
    best_lag: Measurement
    best_lag_correlation: Measurement
    waiting_idle: WaitingIdle
    waiting_idle_by_replica: dict[str, WaitingIdle]


class QueueingSettings(Settings):
    """When a replica's GPUs count as busy, and how far a GPU reading may be from its scrape."""

    busy_threshold: float = Field(
        50.0,
        ge=0,
        le=100,
        description="Mean GPU utilisation, percent (0-100), of a replica's GPUs at or above "
        "which they count as busy: a row with requests waiting is then capacity, else starved.",
    )
    tolerance_s: float | None = Field(
        None,
        ge=0,
        description="Per scrape only (refused with a tile step): largest distance, seconds, "
        "between an app scrape and the sample time of the GPU reading aligned with it; a "
        "scrape farther from every reading is unknown. None: the larger of the app's median "
        "scrape interval and the GPU scrape interval.",
    )


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


def _pearson(a: Floats, b: Floats) -> float | None:
    if len(a) < 3:
        return None
    if float(np.std(a)) == 0.0 or float(np.std(b)) == 0.0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def _time(t_ms: int, zone: tzinfo | None) -> datetime:
    return datetime.fromtimestamp(t_ms / 1000.0, tz=zone)


@dataclass(frozen=True, slots=True)
class _Row:
    """One classified row: its start and time (unix ms), the gauges and the GPU mean."""

    begin: int
    t: int
    waiting: float
    running: float
    util: float | None
    cls: QueueClass


@dataclass(slots=True)
class _Walk:
    """What classifying every replica's rows found, before it becomes Measurements."""

    busy_threshold: float
    intervals: list[QueueInterval] = field(default_factory=list)
    rows: list[QueueRows] = field(default_factory=list)
    tables: dict[str, TwoByTwo] = field(default_factory=dict)
    counts: dict[QueueClass, int] = field(default_factory=lambda: dict.fromkeys(QueueClass, 0))
    #: Per lag, each replica's (waiting, 100 - utilisation) pairs, in row order.
    pairs: dict[int, tuple[list[Floats], list[Floats]]] = field(
        default_factory=lambda: {lag: ([], []) for lag in LAGS}
    )
    peak: tuple[float, int, str] | None = None
    aligned: int = 0

    def add(self, replica: str, rows: list[_Row], zone: tzinfo | None) -> None:
        """Count ``replica``'s classified rows, pair them for the lags, cut them into intervals."""
        cells = [0, 0, 0, 0]  # waiting & idle, waiting & busy, not waiting & idle, & busy
        for row in rows:
            self.aligned += row.util is not None
            self.counts[row.cls] += 1
            if self.peak is None or row.waiting > self.peak[0]:
                self.peak = (row.waiting, row.t, replica)
            if row.util is not None:
                cells[2 * (row.waiting <= 0) + (row.util >= self.busy_threshold)] += 1
        self.tables[replica] = TwoByTwo(*cells)
        self.rows.append(_rows(replica, rows))
        waiting = np.array([row.waiting for row in rows], dtype=np.float64)
        util = np.array([np.nan if row.util is None else row.util for row in rows], np.float64)
        for lag in LAGS:
            # Row k's waiting against row k + lag's utilisation, where that row has one.
            lead = waiting[max(0, -lag) : len(rows) - max(0, lag)]
            lagged = util[max(0, lag) : len(rows) + min(0, lag)]
            known = ~np.isnan(lagged)
            self.pairs[lag][0].append(lead[known])
            self.pairs[lag][1].append(100.0 - lagged[known])
        start = 0
        for k in range(1, len(rows) + 1):
            if k == len(rows) or rows[k].cls is not rows[start].cls:
                chunk = rows[start:k]
                utils = [c.util for c in chunk if c.util is not None]
                self.intervals.append(
                    QueueInterval(
                        classification=chunk[0].cls,
                        replica=replica,
                        start=_time(chunk[0].begin, zone),
                        end=_time(chunk[-1].t, zone),
                        samples=len(chunk),
                        max_waiting=max(c.waiting for c in chunk),
                        max_running=max(c.running for c in chunk),
                        mean_gpu_util=sum(utils) / len(utils) if utils else None,
                    )
                )
                start = k

    def best_lag(self) -> tuple[int, float] | None:
        """The lag with the largest |Pearson r| (the earliest on a tie), and that r."""
        best: tuple[int, float] | None = None
        for lag in LAGS:
            x, y = self.pairs[lag]
            coef = _pearson(np.concatenate([[], *x]), np.concatenate([[], *y]))
            if coef is not None and (best is None or abs(coef) > abs(best[1])):
                best = (lag, coef)
        return best


def _rows(replica: str, rows: list[_Row]) -> QueueRows:
    """``replica``'s classified rows as arrays, times in unix seconds."""

    def column(values: list[float]) -> Floats:
        return np.asarray(values, dtype=np.float64)

    return QueueRows(
        replica=replica,
        begin=column([row.begin / 1000.0 for row in rows]),
        t=column([row.t / 1000.0 for row in rows]),
        waiting=column([row.waiting for row in rows]),
        running=column([row.running for row in rows]),
        gpu_util=column([np.nan if row.util is None else row.util for row in rows]),
        classes=tuple(row.cls for row in rows),
    )


def _walk(rows: AppRows, gpu: AlignedGpu, busy_threshold: float, zone: tzinfo | None) -> _Walk:
    """Classify every row of every replica (see the module), replicas in name order."""
    walk = _Walk(busy_threshold)
    for replica, times in sorted(rows.times.items()):
        columns = (
            rows.starts(replica),
            times,
            rows.waiting[replica],
            rows.running[replica],
            gpu.means[replica],
        )
        classified = []
        for begin, t, waiting, running, mean in zip(*(c.tolist() for c in columns), strict=True):
            # The mean over the GPUs that reported; a NaN sample makes the step unusable.
            util = mean if np.isfinite(mean) else None
            cls = _classify(waiting, running, util, busy_threshold)
            classified.append(_Row(begin, t, waiting, running, util, cls))
        walk.add(replica, classified, zone)
    walk.intervals.sort(key=lambda i: (i.start, i.replica))
    return walk


def _peak_by_reason(r: Reading) -> dict[str, Measurement]:
    """Per ``reason``, the largest ``num_requests_waiting_by_reason`` sample of one series."""
    selector = vllm.NUM_REQUESTS_WAITING_BY_REASON.select(r.matchers)
    # Each series' largest sample in the window, then the largest per reason: one small answer.
    top_reason = max_over_time(selector.over(r.seconds)).max(by=("reason",))
    answer = r.instant(top_reason).value
    reasons: dict[str, float] = {}
    if isinstance(answer, Vector):
        for labels, top in zip(answer.labels, answer.values.tolist(), strict=True):
            if not np.isnan(top):  # every sample NaN: nothing was sampled
                reasons[labels.get("reason", "unlabelled")] = top
    return {
        name: r.local(
            f"peak_waiting[{name}]",
            top,
            "requests",
            reads=[top_reason],
            computation="max by (reason) (max_over_time(num_requests_waiting_by_reason[window])): "
            "the largest sample of one series of that reason, at the window end",
            caveats=(SAMPLED, BY_REASON),
        )
        for name, top in sorted(reasons.items())
    }


def _alignment_how(r: Reading, rows: AppRows, gpu: AlignedGpu, row: str) -> str:
    """How the rows were aligned with the GPUs, for the provenance."""
    matched = ", ".join(rows.keys) or "nothing: all pooled"
    if r.step is None:
        return (
            "each app sample with the same replica's GPU reading (avg by replica of its GPUs' "
            "latest samples) whose sample time (max by replica of timestamp()) is nearest, "
            f"the earlier on a tie, within {gpu.tolerance_ms / 1000:g} s (GPUs scraped every "
            f"{gpu.step_ms / 1000:g} s; replicas matched on {matched})"
        )
    return (
        f"{row} with a GPU sample of the same replica in the tile (replicas matched on {matched})"
    )


def _queueing(r: Reading, settings: QueueingSettings) -> QueueingResult:
    """Classify each app scrape (or tile) of the deployment by queue state and GPU activity.

    Rows are every app scrape (``r.step`` None) or tiles of ``r.step``
    seconds (see :func:`~inference_obs.reading.resolution.tile_step`); a
    replica's GPUs are busy at ``settings.busy_threshold`` percent mean
    utilisation, and per scrape the GPU reading nearest in time is aligned
    within ``settings.tolerance_s`` seconds. Intervals per class (times in the
    window's timezone), the peak queue (requests) and when, the share of rows
    per class (ratio 0-1), the rows with an aligned GPU reading (samples or
    tiles) and the lag (rows) with the strongest waiting-vs-idle correlation
    (Pearson r).
    """
    tolerance = tolerance_ms(r.analysis, r.step, settings.tolerance_s)
    # Label sets only: the GPU samples themselves are reduced per replica by the server.
    gpu_labels = gpu_label_sets(r.source, r.deployment, dcgm.GPU_UTIL, r.window)
    rows = app_rows(r.source, r.deployment, r.window, gpu_labels, r.step)
    selector = dcgm.GPU_UTIL.select(r.deployment.gpu_matchers)
    gpu = align_gpu(r.source, rows, selector, r.window, tolerance_ms=tolerance)
    walk = _walk(rows, gpu, settings.busy_threshold, r.window.start.tzinfo)
    reads = [*rows.reads, *gpu.reads]
    sampled, aligned_how = (SAMPLED, ALIGNMENT) if r.step is None else (SAMPLED_TILES, TILED)
    no_app: list[Family] = [] if rows.found else [vllm.NUM_REQUESTS_WAITING]
    no_gpu: list[Family] = [] if gpu_labels else [dcgm.GPU_UTIL]
    unit = "samples" if r.step is None else "tiles"
    row = "app samples" if r.step is None else f"{r.step:g} s tiles"
    total = sum(walk.counts.values())
    shares = {
        cls.value: r.local(
            f"share_{cls.value}",
            walk.counts[cls] / total if total else None,
            "ratio",
            reads=reads,
            computation=f"{row} classified {cls.value} / all {row}",
            caveats=(sampled, aligned_how),
            missing=no_app,
        )
        for cls in QueueClass
    }
    alignment = r.local(
        "gpu_aligned_samples",
        float(walk.aligned) if walk.aligned else None,
        unit,
        reads=reads,
        computation=_alignment_how(r, rows, gpu, row),
        caveats=(aligned_how,),
        missing=no_app + no_gpu,
    )
    peak = walk.peak
    peak_m = r.local(
        "peak_waiting",
        peak[0] if peak else None,
        "requests",
        reads=rows.reads[:1],
        computation="max of raw num_requests_waiting samples, per replica (series summed)"
        if r.step is None
        else f"max over {row} of the sum over the replica's engines of each one's largest "
        "num_requests_waiting sample in the tile",
        caveats=(sampled,),
        missing=no_app,
    )
    best = walk.best_lag()
    how = f"Pearson r of waiting[k] vs 100 - util[k + lag], lags -2..+2 {row}; largest |r|"

    def lagged(statistic: str, value: float | None, unit: str) -> Measurement:
        return r.local(
            statistic,
            value,
            unit,
            reads=reads,
            computation=how,
            caveats=(CORRELATION,),
            missing=no_app + no_gpu,
        )

    zone = r.window.start.tzinfo
    pooled, by_replica = _tables(r, walk, unit, tuple(reads))
    return QueueingResult(
        step_seconds=r.step,
        row_seconds=rows.interval_ms / 1000.0 if r.step is None else r.step,
        gpu_seconds=gpu.step_ms / 1000.0,
        busy_threshold=settings.busy_threshold,
        rows=tuple(walk.rows),
        intervals=tuple(walk.intervals),
        peak_waiting=peak_m,
        peak_time=_time(peak[1], zone) if peak else None,
        peak_replica=peak[2] if peak else None,
        class_share=shares,
        peak_waiting_by_reason=_peak_by_reason(r),
        gpu_alignment=alignment,
        best_lag=lagged("best_lag", None if best is None else float(best[0]), unit),
        best_lag_correlation=lagged(
            "best_lag_correlation", None if best is None else best[1], "ratio"
        ),
        waiting_idle=pooled,
        waiting_idle_by_replica=by_replica,
    )


def _tables(
    r: Reading, walk: _Walk, unit: str, reads: tuple[Expr, ...]
) -> tuple[WaitingIdle, dict[str, WaitingIdle]]:
    """The waiting-vs-idle tables as Measurements: every replica pooled, then each replica."""
    made = partial(waiting_idle, r, unit=unit, busy_threshold=walk.busy_threshold, reads=reads)
    pooled = sum(walk.tables.values(), TwoByTwo(0, 0, 0, 0))
    return made(pooled, None), {name: made(t, name) for name, t in walk.tables.items()}


queueing = Analysis(
    name="queueing",
    title="Queues and GPU activity",
    entry=_queueing,
    result=QueueingResult,
    settings=QueueingSettings,
    summary="Each app scrape (or tile) classified by queue and GPU activity: capacity or starved.",
)
