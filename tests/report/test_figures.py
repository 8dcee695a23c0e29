"""Figures on the bundled datasets, drawn from results: axes, data, PNG output, budgets and
the no-counters case."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from inference_obs.analyses.activity import ActivityResult, activity
from inference_obs.analyses.queueing import queueing
from inference_obs.analyses.rolling import rolling_quantiles
from inference_obs.deployment import Deployment
from inference_obs.metrics import dcgm
from inference_obs.query import to_promql
from inference_obs.report.figures import (
    NO_PROFILING,
    dram_vs_tensor_figure,
    gpu_heatmap_figure,
    queue_vs_gpu_figure,
    rolling_quantiles_figure,
)
from inference_obs.samples import Window
from inference_obs.source.dataset.source import DatasetSource

DATASETS = Path(__file__).parents[2] / "datasets"


@pytest.fixture(scope="module")
def pro_source() -> DatasetSource:
    return DatasetSource(DATASETS / "pro5000-vs-h20")


@pytest.fixture(scope="module")
def r1_source() -> DatasetSource:
    return DatasetSource(DATASETS / "r1-decode")


def _window(source: DatasetSource) -> Window:
    edges = source.dataset.manifest.window
    return Window(edges.start, edges.end)


def _deployment(source: DatasetSource, name: str) -> Deployment:
    return next(d for d in source.dataset.manifest.deployments if d.name == name)


def _seen(source: DatasetSource, name: str, **settings: Any) -> ActivityResult:
    return activity(source, _deployment(source, name), _window(source), **settings)


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=50)
    data = buffer.getvalue()
    assert data.startswith(b"\x89PNG")
    return data


def _texts(fig: Figure) -> str:
    parts = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        parts += [ax.get_title(), *(t.get_text() for t in ax.texts)]
    return " ".join(parts)


def test_rolling_quantiles_figure(pro_source: DatasetSource) -> None:
    window = _window(pro_source)
    result = rolling_quantiles(pro_source, _deployment(pro_source, "PRO"), window)
    fig = rolling_quantiles_figure(result)
    assert len(fig.axes) == 1
    lines = fig.axes[0].get_lines()
    assert len(lines) == 3
    assert all(np.asarray(line.get_xdata()).size > 0 for line in lines)
    assert "seconds" in fig.axes[0].get_ylabel()
    assert "whole-window P95" in _texts(fig)
    _png(fig)
    ticks = [label.get_text() for label in fig.axes[0].get_xticklabels()]
    assert ticks[0] == "17:40"  # the window's +08:00 local time, not UTC
    assert "UTC+0800" in fig.axes[0].get_xlabel()


def test_queue_vs_gpu_figure_shades_intervals(pro_source: DatasetSource) -> None:
    window = _window(pro_source)
    deployment = _deployment(pro_source, "H20")
    result = queueing(pro_source, deployment, window)
    seen = _seen(pro_source, "H20", step_seconds=60.0)
    fig = queue_vs_gpu_figure("H20", window, seen, result)
    assert len(fig.axes) == 2
    left, right = fig.axes
    assert len(left.get_lines()) == 2 * len(deployment.replicas)  # waiting + running per replica
    assert len(right.get_lines()) == 1
    assert all(
        np.asarray(line.get_xdata()).size > 0 for line in [*left.get_lines(), *right.get_lines()]
    )
    assert "%" in right.get_ylabel()
    assert "requests" in left.get_ylabel()
    _png(fig)


def test_queue_vs_gpu_figure_without_result(pro_source: DatasetSource) -> None:
    seen = _seen(pro_source, "PRO", step_seconds=60.0)
    fig = queue_vs_gpu_figure("PRO", _window(pro_source), seen)
    assert len(fig.axes) == 2
    assert not fig.axes[0].patches
    _png(fig)


def test_with_the_report_defaults_every_line_has_a_point_every_15_s(
    pro_source: DatasetSource,
) -> None:
    # The defaults a report uses: an hour at 15 s steps, so 241 points a line, not one.
    window = _window(pro_source)
    deployment = _deployment(pro_source, "H20")
    seen = activity(pro_source, deployment, window)
    fig = queue_vs_gpu_figure("H20", window, seen, queueing(pro_source, deployment, window))
    left, right = fig.axes
    sizes = {np.asarray(line.get_xdata()).size for line in [*left.get_lines(), *right.get_lines()]}
    assert min(sizes) > 200, sizes
    assert seen.waiting.step_seconds == 15.0


def test_gpu_heatmap_figure(pro_source: DatasetSource) -> None:
    seen = _seen(pro_source, "H20", step_seconds=60.0)
    fig = gpu_heatmap_figure("H20", _window(pro_source), seen.gpu_util)
    assert len(fig.axes) == 2  # the image and its colour bar
    images = [im for im in fig.axes[0].get_images() if isinstance(im, AxesImage)]
    assert len(images) == 1
    array: np.ma.MaskedArray[Any, Any] = np.ma.asarray(images[0].get_array())
    assert array.shape == (32, 61)  # 4 replicas x 8 GPUs, one column per minute
    assert np.ma.count(array) > 0.9 * array.size
    assert len(fig.axes[0].get_yticklabels()) == 32
    _png(fig)


def test_dram_vs_tensor_figure(r1_source: DatasetSource) -> None:
    fig = dram_vs_tensor_figure("R1", _seen(r1_source, "R1", step_seconds=60.0))
    assert len(fig.axes) == 1
    offsets = fig.axes[0].collections[0].get_offsets()
    assert np.asarray(offsets).shape[0] > 0
    assert NO_PROFILING not in _texts(fig)
    _png(fig)


def test_dram_vs_tensor_figure_without_counters_says_so(pro_source: DatasetSource) -> None:
    fig = dram_vs_tensor_figure("PRO", _seen(pro_source, "PRO", step_seconds=60.0))
    assert len(fig.axes) == 1
    assert not fig.axes[0].collections
    text = _texts(fig)
    assert NO_PROFILING in text
    assert "DCGM_FI_PROF_DRAM_ACTIVE" in text
    _png(fig)


def test_default_columns_shrink_once_gpus_times_columns_pass_the_budget(
    pro_source: DatasetSource,
) -> None:
    window = _window(pro_source)  # one hour: 240 columns of 15 s by default

    def columns(**settings: Any) -> int:
        seen = _seen(pro_source, "H20", **settings)  # 32 GPUs: 7,680 GPU-columns
        fig = gpu_heatmap_figure("H20", window, seen.gpu_util)
        (image,) = [im for im in fig.axes[0].get_images() if isinstance(im, AxesImage)]
        rows, cols = np.ma.asarray(image.get_array()).shape
        assert rows == 32
        return int(cols)

    assert columns() == 241
    # With a budget of 3,200 points, 32 GPUs get 100 columns: 36 s apart, 101 edges.
    assert columns(heatmap_cells=3_200) == 101


def test_the_scatter_keeps_within_its_own_budget(r1_source: DatasetSource) -> None:
    def points(**settings: Any) -> int:
        fig = dram_vs_tensor_figure("R1", _seen(r1_source, "R1", **settings))
        return int(np.asarray(fig.axes[0].collections[0].get_offsets()).shape[0])

    r1 = _deployment(r1_source, "R1")
    gpus = len(r1_source.series(dcgm.GPU_UTIL.select(r1.gpu_matchers), _window(r1_source)))
    assert points() > 6 * gpus
    assert 0 < points(scatter_points=5 * gpus) <= 6 * gpus  # 5 steps: 6 columns at most


class _Ranges:
    """Delegates to a source, remembering every range query's PromQL and step."""

    def __init__(self, source: DatasetSource) -> None:
        self._source = source
        self.asked: list[tuple[str, float]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)

    def range(self, expr: Any, window: Window, step: float) -> Any:
        self.asked.append((to_promql(expr), step))
        return self._source.range(expr, window, step)


def test_per_gpu_series_ask_whole_second_steps_and_only_the_labels_they_read(
    pro_source: DatasetSource,
) -> None:
    window = _window(pro_source)
    h20 = _deployment(pro_source, "H20")
    recorder = _Ranges(pro_source)
    # 32 GPUs within 3,000 cells: 3600 s x 32 / 3000 = 38.4 s, asked as 39 s.
    seen = activity(recorder, h20, window, heatmap_cells=3_000)
    (promql, step) = next(one for one in recorder.asked if one[0].startswith("max by"))
    assert step == 39.0
    assert promql.startswith("max by (Hostname, hostname, gpu, UUID, ")
    assert "DCGM_FI_DEV_GPU_UTIL{" in promql
    assert seen.gpu_util.promql == promql
    fig = gpu_heatmap_figure("H20", window, seen.gpu_util)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(labels) == 32
    assert all("/gpu" in name for name in labels), labels  # host/gpuN: names survive
