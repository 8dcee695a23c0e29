"""The report's figures, drawn from a run's results: no figure reads a source.

Every function builds a new matplotlib :class:`~matplotlib.figure.Figure`
with the object-oriented API (no pyplot global state, so any backend,
``Agg`` included, works). Time axes are in the window's timezone; titles
and axis labels carry units. matplotlib's artists share caches between
figures, so one figure is drawn at a time (:data:`DRAWING`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

import matplotlib.dates as mdates
import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from inference_obs.analyses.activity import ActivityResult, Panel, activity
from inference_obs.analyses.queueing import QueueClass, QueueingResult, queueing
from inference_obs.analyses.rolling import RollingQuantiles, rolling_quantiles
from inference_obs.analyses.run import DeploymentResults
from inference_obs.samples import Window

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = [
    "DRAWING",
    "deployment_figures",
    "dram_vs_tensor_figure",
    "draw_figures",
    "gpu_heatmap_figure",
    "queue_vs_gpu_figure",
    "rolling_quantiles_figure",
]

FloatArray = npt.NDArray[np.float64]
#: Held while a figure is drawn: figures may be drawn in several threads, one at a time.
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


def draw_figures(report: Report) -> dict[str, Figure]:
    """Every figure of the report, keyed by its name (``<deployment>-<figure>``)."""
    return {name: fig for d in report.deployments for name, fig in deployment_figures(d).items()}


def deployment_figures(run: DeploymentResults) -> dict[str, Figure]:
    """One deployment's figures, from its run's rolling quantiles, activity and queueing."""
    name = run.deployment.name
    seen = run.of(activity)
    return {
        f"{name}-rolling-quantiles": rolling_quantiles_figure(run.of(rolling_quantiles)),
        f"{name}-queue-vs-gpu": queue_vs_gpu_figure(name, run.window, seen, run.of(queueing)),
        f"{name}-gpu-heatmap": gpu_heatmap_figure(name, run.window, seen.gpu_util),
        f"{name}-dram-vs-tensor": dram_vs_tensor_figure(name, seen),
    }


def rolling_quantiles_figure(result: RollingQuantiles) -> Figure:
    """Lines of each rolling quantile over the window, in the family's unit, with the caveat
    that a rolling quantile is not the whole-window one in a footnote."""
    with DRAWING:
        fig = Figure(figsize=(10, 4.5), layout="constrained")
        ax = fig.add_subplot()
        for s in result.series:
            ax.plot(_times(s.t), s.values, label=f"P{s.quantile * 100:g}", linewidth=1.2)
        _time_axis(ax, result.window)
        ax.set_ylabel(f"{result.family} ({result.unit})")
        ax.set_title(
            f"{result.deployment}: rolling quantiles over {result.length:g} s, "
            f"every {result.every:g} s"
        )
        if result.series:
            ax.legend(loc="upper left")
        ax.grid(alpha=0.3)
        note = "Rolling P95 ≠ whole-window P95; a mean of samples is not request-weighted."
        fig.text(0.01, 0.0, note, fontsize=7, va="bottom")
        return fig


def queue_vs_gpu_figure(
    deployment: str, window: Window, seen: ActivityResult, queue: QueueingResult | None = None
) -> Figure:
    """Waiting and running requests per replica (left axis), mean GPU utilisation, percent
    (right axis); ``queue``'s capacity and inconsistent intervals shaded."""
    with DRAWING:
        fig = Figure(figsize=(11, 5), layout="constrained")
        ax = fig.add_subplot()
        right = ax.twinx()
        for kind, style, panel in (("waiting", "-", seen.waiting), ("running", ":", seen.running)):
            for s in panel.series:
                ax.plot(_times(s.t), s.values, style, label=f"{kind} {s.name}", linewidth=1.0)
        for s in seen.gpu_util_mean.series:
            right.plot(_times(s.t), s.values, color="black", alpha=0.6, label="mean GPU util")
        _shade(ax, queue, seen.waiting.step_seconds)
        _time_axis(ax, window)
        ax.set_ylabel("requests (sampled gauge)")
        right.set_ylabel("GPU utilisation (%)")
        right.set_ylim(0, 105)
        ax.set_title(f"{deployment}: queue vs GPU utilisation")
        handles = ax.get_legend_handles_labels()
        extra = right.get_legend_handles_labels()
        if handles[0] or extra[0]:
            ax.legend(handles[0] + extra[0], handles[1] + extra[1], loc="upper left", fontsize=7)
        return fig


def _shade(ax: Axes, queue: QueueingResult | None, every: float) -> None:
    """Shade the queueing result's capacity and inconsistent intervals."""
    for interval in queue.intervals if queue is not None else ():
        color = _SHADE.get(interval.classification)
        if color is None:
            continue
        # A one-sample interval (start == end) still gets half a step either side,
        # or its shading would have no width at all.
        pad = timedelta(seconds=every / 2) if interval.start == interval.end else timedelta()
        start, end = _num(interval.start - pad), _num(interval.end + pad)
        ax.axvspan(start, end, color=color, alpha=0.15, linewidth=0)


def gpu_heatmap_figure(deployment: str, window: Window, panel: Panel) -> Figure:
    """Utilisation of each GPU over time, GPUs on the y axis: an image axes (percent, 0-100;
    gaps blank) and its colour bar."""
    every = panel.step_seconds
    grid = np.arange(window.start_s, window.end_s + every / 2, every)
    image = np.full((len(panel.series), grid.size), np.nan)
    for k, s in enumerate(panel.series):
        cols = np.clip(np.rint((s.t - window.start_s) / every).astype(np.int64), 0, grid.size - 1)
        image[k, cols] = s.values
    with DRAWING:
        fig = Figure(figsize=(11, 1.5 + 0.3 * max(len(panel.series), 1)), layout="constrained")
        ax = fig.add_subplot()
        shown = image if panel.series else np.full((1, grid.size), np.nan)
        im = ax.imshow(
            np.ma.masked_invalid(shown),
            aspect="auto",
            interpolation="nearest",
            cmap="viridis",
            vmin=0,
            vmax=100,
            extent=(_num(window.start), _num(window.end), shown.shape[0], 0),
        )
        names = [s.name for s in panel.series]
        ax.set_yticks(np.arange(len(names)) + 0.5, names, fontsize=7)
        _time_axis(ax, window)
        ax.set_ylabel("GPU")
        ax.set_title(f"{deployment}: GPU utilisation per GPU (DCGM_FI_DEV_GPU_UTIL, %)")
        fig.colorbar(im, ax=ax, label="GPU utilisation (%)")
        return fig


def dram_vs_tensor_figure(deployment: str, seen: ActivityResult) -> Figure:
    """DRAM activity against tensor-pipe activity, one point per GPU and time (both ratios
    0-1). Without the DCGM profiling families, one blank axes saying "no profiling counters"."""
    dram = {s.name: s for s in seen.dram_active.series}
    tensor = {s.name: s for s in seen.tensor_active.series}
    xs: list[FloatArray] = []
    ys: list[FloatArray] = []
    for name in sorted(dram.keys() & tensor.keys()):
        common, i, j = np.intersect1d(dram[name].t, tensor[name].t, return_indices=True)
        if common.size:
            xs.append(dram[name].values[i])
            ys.append(tensor[name].values[j])
    with DRAWING:
        fig = Figure(figsize=(6.5, 5.5), layout="constrained")
        ax = fig.add_subplot()
        ax.set_title(f"{deployment}: DRAM active vs tensor pipe active")
        if not xs:
            missing = [
                family
                for family, got in (
                    ("DCGM_FI_PROF_DRAM_ACTIVE", dram),
                    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", tensor),
                )
                if not got
            ]
            why = ", ".join(missing) or "no common samples"
            ax.set_axis_off()
            text = f"{NO_PROFILING}\n({why})"
            ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
            return fig
        ax.scatter(np.concatenate(xs), np.concatenate(ys), s=6, alpha=0.4)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("DCGM_FI_PROF_DRAM_ACTIVE (ratio 0-1)")
        ax.set_ylabel("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (ratio 0-1)")
        ax.grid(alpha=0.3)
        return fig
