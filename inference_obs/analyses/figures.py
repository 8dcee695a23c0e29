"""Figures of analysis results and raw series, as matplotlib :class:`~matplotlib.figure.Figure`.

Every function builds a new ``Figure`` with the object-oriented API (no
pyplot global state, so any backend, ``Agg`` included, works) and returns it.
Time axes are in the window's timezone; titles and axis labels carry units.
A function reads everything it draws first (its independent questions
together), then draws: the reads of several figures may overlap, but
matplotlib's artists share caches between figures, so one figure is drawn at
a time (:data:`DRAWING`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, cast

import matplotlib.dates as mdates
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from inference_obs.analyses.gpu import gpu_name
from inference_obs.analyses.queueing import QueueClass, QueueingResult
from inference_obs.analyses.rolling import RollingQuantiles
from inference_obs.deployment import Deployment
from inference_obs.metrics import builders, dcgm, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Expr
from inference_obs.reading.alignment import gpu_label_sets
from inference_obs.samples import Floats as FloatArray, Labels, Matrix, Window
from inference_obs.source.base import Source
from inference_obs.source.remembering import together

__all__ = [
    "dram_vs_tensor_figure",
    "gpu_heatmap_figure",
    "queue_vs_gpu_figure",
    "rolling_quantiles_figure",
]

#: Held while a figure is drawn: figures may be read in several threads, drawn in one.
DRAWING = threading.Lock()
NO_PROFILING = "no profiling counters"
_SHADE = {QueueClass.CAPACITY: "tab:red", QueueClass.INCONSISTENT: "tab:purple"}
# matplotlib.dates ships without annotations: typed entry points, no untyped calls.
_date2num: Callable[[Any], Any] = mdates.date2num
_locator = cast("Callable[..., mdates.AutoDateLocator]", mdates.AutoDateLocator)
_formatter = cast("Callable[..., mdates.ConciseDateFormatter]", mdates.ConciseDateFormatter)


def _num(when: datetime) -> float:
    """A time as a matplotlib date number (days since matplotlib's epoch)."""
    return float(_date2num(when))


def _times(t_s: FloatArray) -> FloatArray:
    """Unix seconds as matplotlib date numbers (the axis formatter shows the timezone)."""
    epoch = _num(datetime.fromtimestamp(0, tz=UTC))
    return np.asarray(t_s, dtype=np.float64) / 86400.0 + epoch


def _time_axis(ax: Axes, window: Window) -> None:
    zone = window.start.tzinfo
    locator = _locator(tz=zone)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(_formatter(locator, tz=zone))
    ax.set_xlim(_num(window.start), _num(window.end))
    ax.set_xlabel(f"time ({window.start.strftime('UTC%z')})")


def _series(matrix: Matrix) -> Iterator[tuple[Labels, FloatArray, FloatArray]]:
    """Each series of ``matrix``: labels, times (unix s) and finite values."""
    for i, labels in enumerate(matrix.labels):
        t_ms, v = matrix.points(i)
        keep = np.isfinite(v)
        yield labels, t_ms[keep].astype(np.float64) / 1000.0, v[keep]


def _replica(labels: Labels) -> str:
    return next((labels[k] for k in dcgm.POD_LABELS if k in labels), "all")


#: Cells the GPU heat map draws at most by default (GPUs x columns): past it,
#: a fleet's map gets fewer columns, not an unreadable number of cells.
HEATMAP_CELLS = 30_000
#: Points per family the DRAM-vs-tensor scatter draws at most by default: the
#: cloud's shape is the same with fewer, and a fleet's answer much smaller.
SCATTER_POINTS = 10_000


def _step(window: Window, step: float | None, series: int = 1, budget: int = 1) -> float:
    """Seconds between columns: ``step``, or the window over 240 (at least 15 s), widened
    so that ``series`` rows of columns stay within ``budget`` points."""
    if step is not None:
        return step
    every = max(window.seconds / 240.0, 15.0, window.seconds * series / budget)
    # Whole seconds: every timestamp of the answer is then written without a fraction.
    return float(math.ceil(every))


def _per_gpu(family: Family, deployment: Deployment) -> Expr:
    """``max by (the labels naming a GPU) (x)``: one series per GPU, without the labels a
    figure does not read (driver, PCI bus, scrape target), which are most of a fleet's answer."""
    return family.select(deployment.gpu_matchers).max(by=dcgm.DISCOVERY_LABELS)


def _gpus(source: Source, deployment: Deployment, window: Window) -> int:
    """How many GPU series the deployment has (label sets only: no samples are read)."""
    return len(gpu_label_sets(source, deployment, dcgm.GPU_UTIL, window))


def rolling_quantiles_figure(result: RollingQuantiles) -> Figure:
    """Lines of each rolling quantile over the window.

    Parameters
    ----------
    result
        From :func:`~inference_obs.analyses.rolling.rolling_quantiles`.

    Returns
    -------
    Figure
        One axes, one line per quantile (in the family's unit), the caveat
        that a rolling quantile is not the whole-window one in a footnote.
    """
    with DRAWING:
        return _draw_rolling(result)


def _draw_rolling(result: RollingQuantiles) -> Figure:
    fig = Figure(figsize=(10, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for s in result.series:
        ax.plot(_times(s.t), s.values, label=f"P{s.quantile * 100:g}", linewidth=1.2)
    _time_axis(ax, result.window)
    ax.set_ylabel(f"{result.family} ({result.unit})")
    ax.set_title(
        f"{result.deployment}: rolling quantiles over {result.length:g} s, every {result.every:g} s"
    )
    if result.series:
        ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    note = "Rolling P95 ≠ whole-window P95; a mean of samples is not request-weighted."
    fig.text(0.01, 0.0, note, fontsize=7, va="bottom")
    return fig


def queue_vs_gpu_figure(
    source: Source,
    deployment: Deployment,
    window: Window,
    queueing: QueueingResult | None = None,
    *,
    step: float | None = None,
) -> Figure:
    """Waiting and running requests per replica, with mean GPU utilisation on a second axis.

    Parameters
    ----------
    source, deployment, window
        Where the series come from, whose, and over which window.
    queueing
        If given, its ``capacity`` and ``inconsistent`` intervals are shaded.
    step
        Seconds between points (default: the window over 240, at least 15 s).

    Returns
    -------
    Figure
        Two axes sharing x: requests (left) and GPU utilisation, percent (right).
    """
    every = _step(window, step)
    m = deployment.matchers
    gauges = (vllm.NUM_REQUESTS_WAITING, vllm.NUM_REQUESTS_RUNNING)
    util = builders.sample_mean(dcgm.GPU_UTIL, deployment.gpu_matchers, every)
    exprs: list[Expr] = [family.select(m).sum(by=dcgm.POD_LABELS[:1]) for family in gauges]
    *per_gauge, utilisation = together(
        source, [partial(source.range, expr, window, every) for expr in (*exprs, util)]
    )
    with DRAWING:
        fig = Figure(figsize=(11, 5), layout="constrained")
        ax = fig.add_subplot()
        right = ax.twinx()
        for family, style, matrix in zip(gauges, ("-", ":"), per_gauge, strict=True):
            for labels, t, v in _series(matrix):
                kind = family.name.rsplit("_", 1)[-1]
                ax.plot(_times(t), v, style, label=f"{kind} {_replica(labels)}", linewidth=1.0)
        for _, t, v in _series(utilisation):
            right.plot(_times(t), v, color="black", alpha=0.6, label="mean GPU util")
        _shade(ax, queueing, every)
        _time_axis(ax, window)
        ax.set_ylabel("requests (sampled gauge)")
        right.set_ylabel("GPU utilisation (%)")
        right.set_ylim(0, 105)
        ax.set_title(f"{deployment.name}: queue vs GPU utilisation")
        handles = ax.get_legend_handles_labels()
        extra = right.get_legend_handles_labels()
        if handles[0] or extra[0]:
            ax.legend(handles[0] + extra[0], handles[1] + extra[1], loc="upper left", fontsize=7)
        return fig


def _shade(ax: Axes, queueing: QueueingResult | None, every: float) -> None:
    """Shade the queueing result's capacity and inconsistent intervals."""
    if queueing is None:
        return
    for interval in queueing.intervals:
        color = _SHADE.get(interval.classification)
        if color is not None:
            # A one-sample interval (start == end) still gets half a step
            # either side, or its shading would have no width at all.
            pad = timedelta(seconds=every / 2) if interval.start == interval.end else timedelta()
            ax.axvspan(_num(interval.start - pad), _num(interval.end + pad),
                       color=color, alpha=0.15, linewidth=0)  # fmt: skip


def gpu_heatmap_figure(
    source: Source, deployment: Deployment, window: Window, *, step: float | None = None
) -> Figure:
    """Utilisation of each GPU over time; GPUs on the y axis.

    Parameters
    ----------
    source, deployment, window
        Where the series come from, whose GPUs, and over which window.
    step
        Seconds between columns (default: the window over 240, at least 15 s,
        and fewer columns past :data:`HEATMAP_CELLS` cells).

    Returns
    -------
    Figure
        An image axes (percent, 0-100; gaps blank) and its colour bar.
    """
    every = _step(window, step, _gpus(source, deployment, window), HEATMAP_CELLS)
    matrix = source.range(_per_gpu(dcgm.GPU_UTIL, deployment), window, every)
    grid = np.arange(window.start_s, window.end_s + every / 2, every)
    rows = sorted(((gpu_name(labels), t, v) for labels, t, v in _series(matrix)),
                  key=lambda r: r[0])  # fmt: skip
    image = np.full((len(rows), grid.size), np.nan)
    for k, (_, t, v) in enumerate(rows):
        cols = np.clip(np.rint((t - window.start_s) / every).astype(np.int64), 0, grid.size - 1)
        image[k, cols] = v
    with DRAWING:
        return _draw_heatmap(deployment, window, rows, image, grid.size)


def _draw_heatmap(
    deployment: Deployment,
    window: Window,
    rows: list[tuple[str, FloatArray, FloatArray]],
    image: FloatArray,
    columns: int,
) -> Figure:
    fig = Figure(figsize=(11, 1.5 + 0.3 * max(len(rows), 1)), layout="constrained")
    ax = fig.add_subplot()
    left, end = _num(window.start), _num(window.end)
    shown = image if rows else np.full((1, columns), np.nan)
    im = ax.imshow(
        np.ma.masked_invalid(shown),
        aspect="auto",
        interpolation="nearest",
        cmap="viridis",
        vmin=0,
        vmax=100,
        extent=(left, end, shown.shape[0], 0),
    )
    ax.set_yticks(np.arange(len(rows)) + 0.5, [r[0] for r in rows], fontsize=7)
    _time_axis(ax, window)
    ax.set_ylabel("GPU")
    ax.set_title(f"{deployment.name}: GPU utilisation per GPU (DCGM_FI_DEV_GPU_UTIL, %)")
    fig.colorbar(im, ax=ax, label="GPU utilisation (%)")
    return fig


def dram_vs_tensor_figure(
    source: Source, deployment: Deployment, window: Window, *, step: float | None = None
) -> Figure:
    """DRAM activity against tensor-pipe activity, one point per GPU and time.

    Parameters
    ----------
    source, deployment, window
        Where the series come from, whose GPUs, and over which window.
    step
        Seconds between points (default: the window over 240, at least 15 s,
        and fewer past :data:`SCATTER_POINTS` points per family).

    Returns
    -------
    Figure
        One scatter axes (both ratios 0-1). Without the DCGM profiling
        families, one blank axes saying "no profiling counters".
    """
    every = _step(window, step, _gpus(source, deployment, window), SCATTER_POINTS)
    families = (dcgm.PROF_DRAM_ACTIVE, dcgm.PROF_PIPE_TENSOR_ACTIVE)
    answers = together(
        source, [partial(source.range, _per_gpu(f, deployment), window, every) for f in families]
    )
    fetched = {
        family.name: {gpu_name(lb): (t, v) for lb, t, v in _series(matrix)}
        for family, matrix in zip(families, answers, strict=True)
    }
    with DRAWING:
        return _draw_scatter(deployment, fetched)


def _draw_scatter(
    deployment: Deployment, fetched: dict[str, dict[str, tuple[FloatArray, FloatArray]]]
) -> Figure:
    dram = fetched[dcgm.PROF_DRAM_ACTIVE.name]
    tensor = fetched[dcgm.PROF_PIPE_TENSOR_ACTIVE.name]
    fig = Figure(figsize=(6.5, 5.5), layout="constrained")
    ax = fig.add_subplot()
    xs: list[FloatArray] = []
    ys: list[FloatArray] = []
    for name in sorted(dram.keys() & tensor.keys()):
        (td, vd), (tt, vt) = dram[name], tensor[name]
        common, i, j = np.intersect1d(td, tt, return_indices=True)
        if common.size:
            xs.append(vd[i])
            ys.append(vt[j])
    title = f"{deployment.name}: DRAM active vs tensor pipe active"
    if not xs:
        missing = [name for name, got in fetched.items() if not got]
        ax.set_axis_off()
        ax.text(0.5, 0.5, f"{NO_PROFILING}\n({', '.join(missing) or 'no common samples'})",
                ha="center", va="center", transform=ax.transAxes)  # fmt: skip
        ax.set_title(title)
        return fig
    x, y = np.concatenate(xs), np.concatenate(ys)
    ax.scatter(x, y, s=6, alpha=0.4)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("DCGM_FI_PROF_DRAM_ACTIVE (ratio 0-1)")
    ax.set_ylabel("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (ratio 0-1)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return fig
