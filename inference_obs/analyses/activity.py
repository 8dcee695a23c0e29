"""Activity over time: the time series the report's figures draw, each with its query.

Queues and GPU utilisation are read as series at a regular step across the
window: requests waiting and running per replica (summed over its engines),
the deployment's mean GPU utilisation, each GPU's utilisation, and each
GPU's DRAM and tensor-pipe activity (DCGM profiling families, where
exported). The step is the window over 240, at least 15 s, widened so a
large fleet's answer stays within a number of points (the settings).

These are pictures, not statistics: a value is the server's reading at a
step, not a mean over it. The numbers to quote come from the other analyses.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np
import numpy.typing as npt
from pydantic import Field

from inference_obs.analyses.gpu import gpu_name
from inference_obs.analyses.unit import Analysis, Settings
from inference_obs.metrics import builders, dcgm, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, to_promql
from inference_obs.reading.alignment import gpu_label_sets
from inference_obs.reading.context import Reading
from inference_obs.reading.measurement import FrozenModel
from inference_obs.reading.result import AnalysisResult, FloatColumn
from inference_obs.samples import Labels, Matrix

__all__ = ["ActivityResult", "ActivitySettings", "Panel", "Timeline", "activity"]

FloatArray = npt.NDArray[np.float64]


class Timeline(FrozenModel):
    """One series of a panel: its name (a replica, a GPU, ``all``), times and values.

    ``t`` are unix seconds (ascending), ``values`` the reading at each, in
    the panel's unit; only finite readings are kept (a gap is no point).
    """

    name: str
    t: FloatColumn
    values: FloatColumn


class Panel(FrozenModel):
    """The series one range query gave, with the query and the step it was asked at."""

    promql: str
    unit: str
    step_seconds: float
    series: tuple[Timeline, ...]


class ActivitySettings(Settings):
    """How finely the series are read."""

    step_seconds: float | None = Field(
        None,
        gt=0,
        description="Seconds between points; default the window over 240, at least 15 s, "
        "widened to stay within the point budgets below.",
    )
    line_points: int = Field(
        20_000, gt=0, description="Points per gauge (waiting, running) across all replicas."
    )
    heatmap_cells: int = Field(
        30_000, gt=0, description="Cells of the per-GPU utilisation map (GPUs x columns)."
    )
    scatter_points: int = Field(
        10_000, gt=0, description="Points per profiling family across all GPUs."
    )


class ActivityResult(AnalysisResult):
    """The deployment's activity over the window, as the figures draw it.

    Attributes
    ----------
    waiting, running
        ``num_requests_waiting`` / ``num_requests_running`` per replica, requests.
    gpu_util_mean
        Mean ``DCGM_FI_DEV_GPU_UTIL`` over the deployment's GPUs, percent.
    gpu_util
        ``DCGM_FI_DEV_GPU_UTIL`` per GPU, percent.
    dram_active, tensor_active
        ``DCGM_FI_PROF_DRAM_ACTIVE`` / ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`` per
        GPU, ratio 0-1; no series without the profiling families.
    """

    waiting: Panel
    running: Panel
    gpu_util_mean: Panel
    gpu_util: Panel
    dram_active: Panel
    tensor_active: Panel


def _every(r: Reading, fixed: float | None, series: int, budget: int) -> float:
    """Seconds between points: ``fixed``, or the window over 240 (at least 15 s), widened
    so that ``series`` series stay within ``budget`` points."""
    if fixed is not None:
        return fixed
    every = max(r.seconds / 240.0, 15.0, r.seconds * max(series, 1) / budget)
    # Whole seconds: every timestamp of the answer is then written without a fraction.
    return float(math.ceil(every))


def _replica(labels: Labels) -> str:
    return next((labels[k] for k in dcgm.POD_LABELS if k in labels), "all")


def _panel(
    r: Reading, expr: Expr, unit: str, every: float, naming: Callable[[Labels], str]
) -> Panel:
    # A figure's own question (every GPU's series): not kept for the run once drawn from.
    matrix: Matrix = r.range(expr, every, remember=False)
    series = []
    for i, labels in enumerate(matrix.labels):
        t_ms, v = matrix.points(i)
        keep = np.isfinite(v)
        series.append(Timeline(name=naming(labels), t=t_ms[keep] / 1000.0, values=v[keep]))
    series.sort(key=lambda s: s.name)
    return Panel(promql=to_promql(expr), unit=unit, step_seconds=every, series=tuple(series))


def _per_gpu(family: Family, r: Reading) -> Expr:
    """``max by (the labels naming a GPU) (x)``: one series per GPU, without the labels no
    figure reads (driver, PCI bus, scrape target), which are most of a fleet's answer."""
    return family.select(r.deployment.gpu_matchers).max(by=dcgm.DISCOVERY_LABELS)


def _activity(r: Reading, settings: ActivitySettings) -> ActivityResult:
    """The series behind the queue, GPU heat-map and DRAM-vs-tensor figures."""
    fixed = settings.step_seconds
    gpus = len(gpu_label_sets(r.source, r.deployment, dcgm.GPU_UTIL, r.window))
    replicas = max(len(r.deployment.replicas), 1)
    lines = _every(r, fixed, replicas, settings.line_points)
    cells = _every(r, fixed, gpus, settings.heatmap_cells)
    points = _every(r, fixed, gpus, settings.scatter_points)
    by_pod = dcgm.POD_LABELS[:1]
    app = r.matchers
    mean_util = builders.sample_mean(dcgm.GPU_UTIL, r.deployment.gpu_matchers, lines)
    asked: list[tuple[Expr, str, float, Callable[[Labels], str]]] = [
        (vllm.NUM_REQUESTS_WAITING.select(app).sum(by=by_pod), "requests", lines, _replica),
        (vllm.NUM_REQUESTS_RUNNING.select(app).sum(by=by_pod), "requests", lines, _replica),
        (mean_util, "percent", lines, _replica),
        (_per_gpu(dcgm.GPU_UTIL, r), "percent", cells, gpu_name),
        (_per_gpu(dcgm.PROF_DRAM_ACTIVE, r), "ratio", points, gpu_name),
        (_per_gpu(dcgm.PROF_PIPE_TENSOR_ACTIVE, r), "ratio", points, gpu_name),
    ]
    panels = r.together([partial(_panel, r, *one) for one in asked])
    waiting, running, mean, util, dram, tensor = panels
    return ActivityResult(
        waiting=waiting,
        running=running,
        gpu_util_mean=mean,
        gpu_util=util,
        dram_active=dram,
        tensor_active=tensor,
    )


activity = Analysis(
    name="activity",
    title="Activity over time",
    entry=_activity,
    result=ActivityResult,
    settings=ActivitySettings,
    summary="Queues and GPU activity as time series, for the figures.",
)
