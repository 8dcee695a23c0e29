"""The report's figures, drawn from a run's results: no figure reads a source.

Every function builds a new matplotlib :class:`~matplotlib.figure.Figure`
with the object-oriented API (no pyplot global state, so any backend,
``Agg`` included, works). Time axes are in the window's timezone; titles
and axis labels carry units. matplotlib's artists share caches between
figures, so one figure is drawn at a time (:data:`DRAWING`).

A figure with nothing to draw is not drawn (no placeholder image): which
figures a deployment has is decided once, in
:func:`~inference_obs.report.figure_plan.nothing_to_draw`, for the drawing
here and for the sections that cite them. Drawing one anyway raises
:class:`~inference_obs.errors.NoDataError`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

import matplotlib.dates as mdates
import numpy as np
import numpy.typing as npt
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator

from inference_obs.analyses.activity import ActivityResult, Panel, activity
from inference_obs.analyses.bottleneck import BottleneckResult, bottleneck
from inference_obs.analyses.latency import QUANTILES, HistogramSummary
from inference_obs.analyses.queueing import QueueClass, QueueingResult, QueueRows, queueing
from inference_obs.analyses.rolling import QuantileSeries, RollingQuantiles
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.timeline.events import Event, EventKind
from inference_obs.errors import NoDataError
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.wording import cell, duration_cell
from inference_obs.report.figure_plan import (
    DRAM_VS_TENSOR,
    FIGURES,
    GPU_HEATMAP,
    QUEUE_VS_GPU,
    ROLLING,
    figure_name,
    latency_summary,
    nothing_to_draw,
    profiling_pairs,
    queue_stalls,
)
from inference_obs.samples import Window

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = [
    "DRAWING",
    "HEATMAP_NAMED_ROWS",
    "HEATMAP_STRIP_ROWS",
    "QUEUE_PANELS",
    "SHADES",
    "STALL_MARK",
    "deployment_figures",
    "dram_vs_tensor_figure",
    "draw_figure",
    "draw_figures",
    "each_figure",
    "gpu_heatmap_figure",
    "queue_vs_gpu_figure",
    "rolling_quantiles_figure",
]

FloatArray = npt.NDArray[np.float64]
#: Held while a figure is drawn: figures may be drawn in several threads, one at a time.
DRAWING = threading.Lock()
#: The queue classes the queue figure shades, their colours and legend words.
SHADES: dict[QueueClass, tuple[str, str]] = {
    QueueClass.CAPACITY: ("tab:red", "capacity: queue, GPUs busy"),
    QueueClass.STARVED: ("tab:orange", "starved: queue, GPUs idle"),
    QueueClass.INCONSISTENT: ("tab:purple", "inconsistent: running, GPUs at 0 %"),
}
#: How the queue figure marks a stall the time line names (What happened): its rows outlined
#: and hatched over their class's shade, so the figure says what the Summary says of them.
STALL_MARK = ("tab:red", "stall (What happened)")
#: Replicas the queue figure draws a panel for (those with the largest queues): more panels
#: would be too small to read; the title says how many were left out.
QUEUE_PANELS = 6
#: GPU rows a heat map draws 0.3 inch tall, each with its name. A larger fleet's rows share
#: the height of this many and every k-th row is named (k the fewest that keeps the names
#: within this count): 1,024 GPUs would otherwise draw two maps 155 inches tall, 4.5 s of
#: laying out, naming and resampling each, and about 430 MiB more peak memory. At 64 the
#: map is 2,070 pixels tall, 3.75 a GPU at 512 GPUs (an idle GPU's stripe still shows), and
#: its canvas 9 MiB while rendered (17 MiB at 128 rows, the largest figure of a fleet).
HEATMAP_NAMED_ROWS = 64
#: GPUs (rows) of a heat map drawn as one image: a taller map is drawn in strips of
#: this many, so the memory drawing it takes stops growing past them.
HEATMAP_STRIP_ROWS = 8
# matplotlib.dates ships without annotations: typed entry points, no untyped calls.
_date2num: Callable[[Any], Any] = mdates.date2num
_num2date: Callable[..., datetime] = mdates.num2date
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
    """Date ticks over the window, in its timezone, found once for the fixed limits.

    The automatic date locator's ticks for these limits, fixed: a draw under a
    constrained layout asks each axis for its ticks many times (each panel of
    the queue figure, its twin and every layout pass), and the automatic
    locator works them out from the calendar at every call (about a tenth
    of that figure's drawing). The ticks, and so the pixels, are the same.
    """
    zone = window.start.tzinfo
    locator = _locator(tz=zone)
    lo, hi = _num(window.start), _num(window.end)
    tick_values = cast("Callable[..., Sequence[float]]", locator.tick_values)  # untyped
    ticks = tick_values(_num2date(lo, tz=zone), _num2date(hi, tz=zone))
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(_formatter(locator, tz=zone))
    ax.set_xlim(lo, hi)
    ax.set_xlabel(f"time ({window.start.strftime('UTC%z')})")


def draw_figures(report: Report) -> dict[str, Figure]:
    """Every figure of the report, keyed by its name (``<deployment>-<figure>``)."""
    return dict(each_figure(report))


def each_figure(report: Report) -> Iterator[tuple[str, Figure]]:
    """Every figure of the report with its name, as :func:`draw_figures` keys them, each
    drawn when asked for: a writer that renders and drops one before the next holds one
    figure's arrays and canvas at a time (a fleet's heat maps are tens of MiB each)."""
    for run in report.deployments:
        for figure in FIGURES:
            if nothing_to_draw(run, figure) is None:
                yield figure_name(run, figure), _draw(run, figure)


def deployment_figures(run: DeploymentResults) -> dict[str, Figure]:
    """One deployment's figures with something to draw, in :data:`FIGURES` order, keyed by name.

    The rolling quantiles of time to first token and of inter-token latency
    (with the latency analysis's whole-window quantiles), queues against GPU
    utilisation per replica, utilisation per GPU, and DRAM against tensor
    activity with the bottleneck classifier's thresholds.
    """
    return {
        figure_name(run, figure): _draw(run, figure)
        for figure in FIGURES
        if nothing_to_draw(run, figure) is None
    }


def draw_figure(run: DeploymentResults, figure: str) -> Figure:
    """One figure of ``run``: ``figure`` is one of :data:`FIGURES`.

    Raises
    ------
    ConfigurationError
        When ``figure`` is not one of :data:`FIGURES`.
    NoDataError
        When the figure has nothing to draw (:func:`nothing_to_draw` says why).
    """
    why = nothing_to_draw(run, figure)
    if why is not None:
        raise NoDataError(f"{run.deployment.name}: {why}")
    return _draw(run, figure)


def _draw(run: DeploymentResults, figure: str) -> Figure:
    """:func:`draw_figure` once :func:`nothing_to_draw` has said there is something to draw."""
    name = run.deployment.name
    if figure in ROLLING:
        result = run.of(ROLLING[figure])
        return rolling_quantiles_figure(result, latency_summary(run, result.family))
    if figure == QUEUE_VS_GPU:
        return queue_vs_gpu_figure(name, run.window, run.of(queueing), queue_stalls(run))
    if figure == GPU_HEATMAP:
        return gpu_heatmap_figure(name, run.window, run.of(activity).gpu_util)
    assert figure == DRAM_VS_TENSOR
    return dram_vs_tensor_figure(name, run.of(activity), run.of(bottleneck))


def rolling_quantiles_figure(
    result: RollingQuantiles, whole: HistogramSummary | None = None
) -> Figure:
    """Each rolling quantile over the window as the bucket that must hold it (shaded, lower to
    upper bound) with the interpolated value inside it (a line), in the family's unit, titled
    with the family's name; ``whole``'s quantiles of the same levels as dashed reference lines
    labelled with their buckets, and the caveat that a rolling quantile is not the
    whole-window one in a footnote.

    A point in the ``+Inf`` bucket is shaded from the highest finite bound to the top of the
    axes: nothing above that bound is known.

    Raises
    ------
    NoDataError
        When no quantile has a point (the histogram's buckets have no series).
    """
    if not any(s.t.size for s in result.series):
        raise NoDataError(f"{result.deployment}: no rolling quantile of {result.family} to draw")
    with DRAWING:
        fig = Figure(figsize=(12, 4.5), layout="constrained")
        ax = fig.add_subplot()
        handles: list[Artist | tuple[Artist, ...]] = []
        labels: list[str] = []
        colors: list[str] = []
        for s in result.series:
            level = f"P{s.quantile * 100:g}"
            x = _times(s.t)
            (line,) = ax.plot(x, s.values, label=f"rolling {level}", linewidth=1.2)
            color = to_hex(line.get_color())
            colors.append(color)
            # The +Inf bucket has no top: shaded up to the axes' top once it is known.
            top = np.where(np.isinf(s.upper), np.nan, s.upper)
            # step="mid": each point's bucket is flat around it; a slope between two
            # buckets would draw values no bucket said.
            band = ax.fill_between(x, s.lower, top, step="mid", color=color, alpha=0.2, linewidth=0)
            band.set_gid(f"bucket {level}")
            handles.append((band, line))
            labels.append(f"rolling {level}: interpolated (line) in its bucket (shaded)")
            reference = _whole_window(whole, s.quantile)
            if reference is not None and reference.value is not None:
                text = f"whole-window {level} {_shown(reference)}"
                handles.append(
                    ax.axhline(
                        reference.value, color=color, linestyle="--", linewidth=0.9, label=text
                    )
                )
                labels.append(text)
        _beyond_the_last_bound(ax, result.series, colors)
        _time_axis(ax, result.window)
        ax.set_ylabel(result.unit)
        ax.set_title(
            f"{result.deployment}: {result.family}, rolling quantiles over "
            f"{result.length:g} s, every {result.every:g} s"
        )
        # A (band, line) handle draws the line over its band: matplotlib's HandlerTuple
        # overlays a tuple's artists (its stubs name only single artists, hence the cast).
        # Beside the axes: inside, it would hide the bands of early spikes.
        keys = cast("list[Artist]", handles)
        fig.legend(keys, labels, loc="outside right upper", fontsize=8)
        ax.grid(alpha=0.3)
        note = (
            "Shaded: the bucket that must hold each rolling quantile (only the bucket is "
            "certain); the line is interpolated inside it.\nRolling P95 ≠ whole-window P95 "
            "(dashed: the window's, from merged buckets); a mean of samples is not "
            "request-weighted."
        )
        _footnote(fig, note)
        return fig


def _footnote(fig: Figure, text: str) -> None:
    """A small note under everything: as the figure's x label, so the layout makes room."""
    fig.supxlabel(text, x=0.01, ha="left", fontsize=7)


def _beyond_the_last_bound(
    ax: Axes, series: Sequence[QuantileSeries], colors: Sequence[str]
) -> None:
    """Shade points in the ``+Inf`` bucket from the highest finite bound up to the axes' top
    (all that is known of them), keeping the limits the finite data set."""
    bottom, top = ax.get_ylim()
    for s, color in zip(series, colors, strict=True):
        beyond = np.isinf(s.upper)
        if beyond.any():
            band = ax.fill_between(
                _times(s.t),
                s.lower,
                top,
                where=beyond,
                step="mid",
                color=color,
                alpha=0.2,
                linewidth=0,
            )
            band.set_gid(f"bucket P{s.quantile * 100:g} beyond the last bound")
    ax.set_ylim(bottom, top)


def _whole_window(whole: HistogramSummary | None, quantile: float) -> Measurement | None:
    """The whole-window quantile of level ``quantile`` in ``whole``, if computed."""
    for label, q in QUANTILES if whole is not None else ():
        if q == quantile:
            m: Measurement = getattr(whole, label)
            return m
    return None


def _shown(m: Measurement) -> str:
    """A whole-window quantile as the report's tables show it: value and bucket, or
    "≤ upper" in the lowest bucket; times in ms or s."""
    if m.unit == "seconds":
        return duration_cell(m)
    return f"{cell(m)} {m.unit}"


def gpu_heatmap_figure(deployment: str, window: Window, panel: Panel) -> Figure:
    """Utilisation of each GPU over time, GPUs on the y axis: an image axes (percent, 0-100;
    gaps blank) and its colour bar. Past :data:`HEATMAP_NAMED_ROWS` GPUs every row is still
    drawn, in a figure of that many rows' height, and every k-th row is named."""
    every = panel.step_seconds
    grid = np.arange(window.start_s, window.end_s + every / 2, every)
    image = np.full((len(panel.series), grid.size), np.nan)
    for k, s in enumerate(panel.series):
        cols = np.clip(np.rint((s.t - window.start_s) / every).astype(np.int64), 0, grid.size - 1)
        image[k, cols] = s.values
    rows = max(len(panel.series), 1)
    every = -(-rows // HEATMAP_NAMED_ROWS)  # named rows: every k-th
    with DRAWING:
        fig = Figure(figsize=(11, 1.5 + 0.3 * min(rows, HEATMAP_NAMED_ROWS)), layout="constrained")
        ax = fig.add_subplot()
        shown = np.ma.masked_invalid(image if panel.series else np.full((1, grid.size), np.nan))
        left, right = _num(window.start), _num(window.end)
        # In strips: an image is resampled to its pixels through float arrays of about 30
        # bytes a pixel, so one image of a 128-GPU map held some 130 MiB while drawn.
        for top in range(0, shown.shape[0], HEATMAP_STRIP_ROWS):
            strip = shown[top : top + HEATMAP_STRIP_ROWS]
            im = ax.imshow(
                strip,
                aspect="auto",
                interpolation="nearest",
                cmap="viridis",
                vmin=0,
                vmax=100,
                extent=(left, right, top + strip.shape[0], top),
            )
        ax.set_xlim(left, right)
        ax.set_ylim(shown.shape[0], 0)
        named = np.arange(0, len(panel.series), every)
        ax.set_yticks(named + 0.5, [panel.series[k].name for k in named], fontsize=7)
        _time_axis(ax, window)
        ax.set_ylabel("GPU" if every == 1 else f"GPU (1 in {every} named)")
        ax.set_title(f"{deployment}: GPU utilisation per GPU (DCGM_FI_DEV_GPU_UTIL, %)")
        fig.colorbar(im, ax=ax, label="GPU utilisation (%)")
        return fig


def _stalled(stalls: Sequence[Event]) -> set[str]:
    return {replica for e in stalls for replica in e.replicas}


def _panels(queue: QueueingResult, stalls: Sequence[Event] = ()) -> tuple[list[QueueRows], int]:
    """The replicas to draw, in name order (at most :data:`QUEUE_PANELS`: those a stall of
    ``stalls`` names, then those with the largest queue, then the most rows in a shaded
    class), and how many had rows."""
    seen = [rows for rows in queue.rows if rows.t.size]
    stalled = _stalled(stalls)

    def queued(rows: QueueRows) -> tuple[bool, float, int, str]:
        shaded = sum(cls in SHADES for cls in rows.classes)
        return rows.replica not in stalled, -float(np.max(rows.waiting)), -shaded, rows.replica

    drawn = sorted(seen, key=queued)[:QUEUE_PANELS]
    return sorted(drawn, key=lambda rows: rows.replica), len(seen)


def queue_vs_gpu_figure(
    deployment: str, window: Window, queue: QueueingResult, stalls: Sequence[Event] = ()
) -> Figure:
    """One panel per replica of the rows queueing classified, each row a point: requests
    waiting and running (left axis, requests) against the replica's mean GPU utilisation
    (right axis, percent, with the busy threshold dashed), the capacity, starved and
    inconsistent rows shaded in the colours of :data:`SHADES`.

    ``stalls`` are the time line's stall events of the deployment
    (:func:`~inference_obs.report.figure_plan.queue_stalls`, as the report draws it): each
    is outlined over its replica's rows (:data:`STALL_MARK`), and the replicas they name
    are drawn first.

    Raises
    ------
    NoDataError
        When no replica has a row (no ``num_requests_waiting`` series).
    """
    panels, replicas = _panels(queue, stalls)
    if not panels:
        raise NoDataError(f"{deployment}: no queue rows to draw")
    per = "scrape" if queue.step_seconds is None else f"{queue.step_seconds:g} s tile"
    first = "those with a stall, then " if _stalled(stalls) else ""
    some = f" ({len(panels)} of {replicas} replicas: {first}the largest queues)"
    with DRAWING:
        fig = Figure(figsize=(11, 1.6 + 2.4 * len(panels)), layout="constrained")
        axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        marked = False
        for ax, rows in zip(axes, panels, strict=True):
            marked |= _queue_panel(ax, rows, queue, stalls)
        _time_axis(axes[-1], window)
        fig.suptitle(
            f"{deployment}: requests waiting and running against mean GPU utilisation, "
            f"one point per {per}{some if replicas > len(panels) else ''}"
        )
        handles = _queue_legend(queue, marked)
        fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=8)
        return fig


def _queue_panel(ax: Axes, rows: QueueRows, queue: QueueingResult, stalls: Sequence[Event]) -> bool:
    """One replica's rows: the gauges left, its mean GPU utilisation right, classes shaded,
    the stalls naming it outlined; whether one was."""
    # A tile's point sits in its middle; a scrape's at the scrape (begin == t).
    x = _times((rows.begin + rows.t) / 2.0)
    ax.plot(x, rows.waiting, "-o", color="tab:blue", markersize=3, linewidth=1.2, label="waiting")
    ax.plot(x, rows.running, ":.", color="tab:green", markersize=4, linewidth=1.0, label="running")
    ax.set_ylabel("requests")
    ax.set_title(rows.replica, loc="left", fontsize=9)
    ax.grid(alpha=0.3)
    # Both axes leave the same 5 % below zero, so 0 requests and 0 % lie on one line.
    top = max(float(np.max(rows.waiting)), float(np.max(rows.running)), 1.0)
    ax.set_ylim(-0.05 * top, 1.05 * top)
    right = ax.twinx()
    right.plot(x, rows.gpu_util, color="black", alpha=0.55, linewidth=1.0, label="mean GPU util")
    right.axhline(queue.busy_threshold, color="grey", linestyle="--", linewidth=0.8)
    right.set_ylim(-5, 105)
    right.set_ylabel("GPU util (%)")
    # Per scrape, a row stands for the half interval either side of it; a tile for itself.
    pad = timedelta(seconds=queue.row_seconds / 2 if queue.step_seconds is None else 0.0)
    for interval in queue.intervals:
        shade = SHADES.get(interval.classification)
        if shade is None or interval.replica != rows.replica:
            continue
        start, end = _num(interval.start - pad), _num(interval.end + pad)
        span = ax.axvspan(start, end, color=shade[0], alpha=0.22, linewidth=0)
        span.set_gid(interval.classification.value)
    mine = [e for e in stalls if rows.replica in e.replicas]
    for e in mine:
        # The event's first and last rows, each standing for what its shade stands for.
        start, end = _num(e.start - pad), _num(e.end + pad)
        mark = ax.axvspan(
            start, end, fill=False, hatch="//", edgecolor=STALL_MARK[0], linewidth=1.2
        )
        mark.set_gid(EventKind.STALL.value)
    return bool(mine)


def _queue_legend(queue: QueueingResult, stalls: bool = False) -> list[Line2D | Patch]:
    """The key to every panel: the three lines, the threshold, each shaded class, and the
    stall mark when ``stalls`` (a panel has one)."""
    lines: list[Line2D | Patch] = [
        Line2D([], [], color="tab:blue", marker="o", markersize=3, label="waiting (requests)"),
        Line2D([], [], color="tab:green", marker=".", linestyle=":", label="running (requests)"),
        Line2D([], [], color="black", alpha=0.55, label="mean GPU util (%)"),
        Line2D(
            [], [], color="grey", linestyle="--", label=f"busy at {queue.busy_threshold:g} % util"
        ),
    ]
    shades = [Patch(color=color, alpha=0.22, label=words) for color, words in SHADES.values()]
    if stalls:
        colour, words = STALL_MARK
        shades.append(Patch(fill=False, hatch="//", edgecolor=colour, linewidth=1.2, label=words))
    return lines + shades


def dram_vs_tensor_figure(deployment: str, seen: ActivityResult, found: BottleneckResult) -> Figure:
    """DRAM activity against tensor-pipe activity, one point per GPU and time (both ratios
    0-1), with the bottleneck classifier's lines (``found.thresholds``), its regions, and the
    window means it classified (a star, labelled with the class).

    Raises
    ------
    NoDataError
        Without a GPU and time with both profiling readings.
    """
    dram, tensor = profiling_pairs(seen)
    if not dram.size:
        raise NoDataError(f"{deployment}: no DRAM and tensor-pipe readings in common to draw")
    t = found.thresholds
    with DRAWING:
        fig = Figure(figsize=(7, 6), layout="constrained")
        ax = fig.add_subplot()
        ax.fill_between([t.dram_high, 1.0], 0.0, t.tensor_low, color="tab:blue", alpha=0.08)
        ax.fill_between([0.0, 1.0], t.tensor_high, 1.0, color="tab:red", alpha=0.08)
        ax.text(0.99, 0.01, "bandwidth-bound decode", ha="right", va="bottom", fontsize=8)
        ax.text(0.99, 0.99, "compute-bound", ha="right", va="top", fontsize=8)
        ax.scatter(dram, tensor, s=6, alpha=0.35, label="one GPU at one time")
        ax.axvline(
            t.dram_high, color="tab:gray", linestyle="--", label=f"DRAM high {t.dram_high:g}"
        )
        ax.axhline(
            t.tensor_low, color="tab:gray", linestyle=":", label=f"tensor low {t.tensor_low:g}"
        )
        ax.axhline(
            t.tensor_high, color="tab:gray", linestyle="--", label=f"tensor high {t.tensor_high:g}"
        )
        x, y = found.dram_active.value, found.tensor_active.value
        if x is not None and y is not None:
            ax.plot([x], [y], "*", color="black", markersize=14, label=_mean_label(found))
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("DCGM_FI_PROF_DRAM_ACTIVE (ratio 0-1)")
        ax.set_ylabel("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (ratio 0-1)")
        ax.set_title(f"{deployment}: DRAM active vs tensor pipe active")
        ax.legend(loc="center left", fontsize=8)
        ax.grid(alpha=0.3)
        _footnote(
            fig,
            "The class reads the window means (star) against these lines; starved "
            f"(GPU_UTIL mean < {t.util_low:g} %) is decided first, outside this plane.",
        )
        return fig


def _mean_label(found: BottleneckResult) -> str:
    return f"window mean: {found.classification.value.replace('_', ' ')}"
