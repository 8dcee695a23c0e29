"""Figures on the bundled datasets, drawn from results: axes, data, PNG output and budgets.

The report's figures are drawn as the command line draws them: the report built with its
defaults (``inference_obs.report.from_source.report``), then ``draw_figures``; what they
must show is read from their drawn artists and checked against the dataset's raw samples.
"""

from __future__ import annotations

import importlib
import io
import itertools
import tracemalloc
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from inference_obs.analyses.activity import ActivityResult, Panel, Timeline, activity
from inference_obs.analyses.bottleneck import BottleneckSettings, bottleneck
from inference_obs.analyses.latency import latency
from inference_obs.analyses.queueing import QueueClass, queueing
from inference_obs.analyses.rolling import rolling_itl
from inference_obs.analyses.timeline.events import Event, EventKind, Severity
from inference_obs.deployment import Deployment
from inference_obs.errors import NoDataError
from inference_obs.metrics import dcgm, vllm
from inference_obs.query import to_promql
from inference_obs.report.document import FigureRef, Paragraph
from inference_obs.report.figures import (
    HEATMAP_NAMED_ROWS,
    HEATMAP_STRIP_ROWS,
    SHADES,
    STALL_MARK,
    dram_vs_tensor_figure,
    draw_figures,
    gpu_heatmap_figure,
    queue_vs_gpu_figure,
    rolling_quantiles_figure,
)
from inference_obs.report.from_source import report
from inference_obs.report.model import Report
from inference_obs.report.sections import sections
from inference_obs.report.write import figure_png
from inference_obs.samples import Window
from inference_obs.source.dataset.source import DatasetSource

DATASETS = Path(__file__).parents[2] / "datasets"


@pytest.fixture(scope="module")
def pro_source() -> DatasetSource:
    return DatasetSource(DATASETS / "pro5000-vs-h20")


@pytest.fixture(scope="module")
def r1_source() -> DatasetSource:
    return DatasetSource(DATASETS / "r1-decode")


@pytest.fixture(scope="module")
def pro_report(pro_source: DatasetSource) -> Report:
    return report(pro_source)  # the command line's defaults


@pytest.fixture(scope="module")
def pro_figures(pro_report: Report) -> dict[str, Figure]:
    return draw_figures(pro_report)


@pytest.fixture(scope="module")
def r1_report(r1_source: DatasetSource) -> Report:
    return report(r1_source)


@pytest.fixture(scope="module")
def r1_figures(r1_report: Report) -> dict[str, Figure]:
    return draw_figures(r1_report)


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


def _heatmap(fig: Figure) -> np.ma.MaskedArray[Any, Any]:
    """The map's image: its strips, top to bottom, each at most HEATMAP_STRIP_ROWS rows."""
    images = [im for im in fig.axes[0].get_images() if isinstance(im, AxesImage)]
    strips: list[np.ma.MaskedArray[Any, Any]] = [np.ma.asarray(im.get_array()) for im in images]
    assert all(len(strip) <= HEATMAP_STRIP_ROWS for strip in strips)
    # Each strip's extent starts where the last one ended: the rows are in order.
    tops = [im.get_extent()[3] for im in images]
    assert tops == list(np.cumsum([0, *(len(strip) for strip in strips[:-1])]))
    stacked: np.ma.MaskedArray[Any, Any] = np.ma.concatenate(strips)  # type: ignore[no-untyped-call]
    return stacked


def _texts(fig: Figure) -> str:
    parts = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        parts += [ax.get_title(), *(t.get_text() for t in ax.texts)]
    return " ".join(parts)


def test_gpu_heatmap_figure(pro_source: DatasetSource) -> None:
    seen = _seen(pro_source, "H20", step_seconds=60.0)
    fig = gpu_heatmap_figure("H20", _window(pro_source), seen.gpu_util)
    assert len(fig.axes) == 2  # the image and its colour bar
    array = _heatmap(fig)
    assert array.shape == (32, 61)  # 4 replicas x 8 GPUs, one column per minute
    assert np.ma.count(array) > 0.9 * array.size
    assert len(fig.axes[0].get_yticklabels()) == 32
    _png(fig)


def test_a_fleet_s_heatmap_draws_every_gpu_and_names_one_row_in_k() -> None:
    window = Window(datetime(2026, 3, 2, tzinfo=UTC), datetime(2026, 3, 2, 1, tzinfo=UTC))
    t = window.start_s + 60.0 * np.arange(61)
    gpus = tuple(
        Timeline(name=f"r{k // 8:02d}/gpu{k % 8}", t=t, values=t * 0 + k % 100) for k in range(300)
    )
    fig = gpu_heatmap_figure(
        "H100", window, Panel(promql="x", unit="%", step_seconds=60.0, series=gpus)
    )
    assert _heatmap(fig).shape == (300, 61)  # every GPU is a row
    # 300 rows over 64 named: every 5th named (ceil(300 / 64) = 5), 60 names from the first.
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [f"r{k // 8:02d}/gpu{k % 8}" for k in range(0, 300, 5)]
    assert fig.axes[0].get_ylabel() == "GPU (1 in 5 named)"
    # As tall as 64 rows of 0.3 inch and the 1.5 inch of title and time axis, not 91.5 inches.
    assert fig.get_size_inches()[1] == pytest.approx(1.5 + 0.3 * HEATMAP_NAMED_ROWS)
    assert HEATMAP_NAMED_ROWS == 64


def test_drawing_a_fleet_s_heatmap_holds_as_much_memory_as_a_small_one() -> None:
    """A map is drawn in strips: resampling one image of 512 GPUs to its 1,100 x 4,000
    pixels (its height at 128 named rows) held about 115 MiB of float arrays (30 bytes a
    pixel), one of 32 GPUs 33 MiB."""
    window = Window(datetime(2026, 3, 2, tzinfo=UTC), datetime(2026, 3, 2, 1, tzinfo=UTC))
    t = window.start_s + 15.0 * np.arange(241)

    def held_while_drawn(gpus: int) -> float:
        series = tuple(
            Timeline(name=f"r{k // 8:03d}/gpu{k % 8}", t=t, values=(t / 15 + k) % 100)
            for k in range(gpus)
        )
        fig = gpu_heatmap_figure(
            "H100", window, Panel(promql="x", unit="%", step_seconds=15.0, series=series)
        )
        tracemalloc.start()
        try:
            figure_png(fig)
            return tracemalloc.get_traced_memory()[1] / 2**20
        finally:
            tracemalloc.stop()

    # A strip of 8 rows at 0.3 inch and 100 dpi is 240 x 1,100 pixels: about 8 MiB of
    # arrays; 32 MiB leaves room for the PNG and matplotlib's own, and is under one image.
    assert held_while_drawn(512) < 32
    assert held_while_drawn(32) < 32


def test_default_columns_shrink_once_gpus_times_columns_pass_the_budget(
    pro_source: DatasetSource,
) -> None:
    window = _window(pro_source)  # one hour: 240 columns of 15 s by default

    def columns(**settings: Any) -> int:
        seen = _seen(pro_source, "H20", **settings)  # 32 GPUs: 7,680 GPU-columns
        fig = gpu_heatmap_figure("H20", window, seen.gpu_util)
        rows, cols = _heatmap(fig).shape
        assert rows == 32
        return int(cols)

    assert columns() == 241
    # With a budget of 3,200 points, 32 GPUs get 100 columns: 36 s apart, 101 edges.
    assert columns(heatmap_cells=3_200) == 101


def test_the_scatter_keeps_within_its_own_budget(r1_source: DatasetSource) -> None:
    found = bottleneck(r1_source, _deployment(r1_source, "R1"), _window(r1_source))

    def points(**settings: Any) -> int:
        fig = dram_vs_tensor_figure("R1", _seen(r1_source, "R1", **settings), found)
        return _scattered(fig.axes[0])

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


BEIJING = timezone(timedelta(hours=8))


def _at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 10, 19, hour, minute, second, tzinfo=BEIJING)


def _panel(fig: Figure, replica: str) -> Axes:
    return next(ax for ax in fig.axes if ax.get_title(loc="left") == replica)


def _date(number: float) -> datetime:
    """A matplotlib date number (days since its epoch, 1970 by default) in +08:00."""
    epoch = datetime.fromisoformat(str(matplotlib.rcParams["date.epoch"])).replace(tzinfo=UTC)
    return (epoch + timedelta(days=float(number))).astimezone(BEIJING)


def _line(ax: Axes, label: str) -> tuple[list[datetime], np.ndarray[Any, Any]]:
    (line,) = [one for one in ax.get_lines() if one.get_label() == label]
    x = np.asarray(line.get_xdata(), dtype=np.float64)
    return [_date(v) for v in x], np.asarray(line.get_ydata())


Span = tuple[str, datetime, datetime, tuple[float, float, float]]


def _spans(ax: Axes) -> list[Span]:
    """Each shaded span: its class, start, end and colour (without alpha)."""
    out = []
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_gid():
            x0, x1 = patch.get_x(), patch.get_x() + patch.get_width()
            r, g, b, _ = to_rgba(patch.get_facecolor())
            out.append((str(patch.get_gid()), _date(x0), _date(x1), (r, g, b)))
    return out


def _raw_waiting(source: DatasetSource, name: str) -> list[tuple[datetime, float]]:
    d = _deployment(source, name)
    (raw,) = list(source.raw(vllm.NUM_REQUESTS_WAITING.select(d.matchers), _window(source)))
    return [
        (datetime.fromtimestamp(t, tz=BEIJING), v)
        for t, v in zip(raw.timestamps.tolist(), raw.values.tolist(), strict=True)
    ]


def test_the_pro_queue_and_the_1824_stall_are_visible_in_the_report_figure(
    pro_source: DatasetSource, pro_report: Report, pro_figures: dict[str, Figure]
) -> None:
    fig = pro_figures["PRO-queue-vs-gpu"]
    ax = _panel(fig, "llm/pro-model-01")
    times, waiting = _line(ax, "waiting")
    raw = _raw_waiting(pro_source, "PRO")
    # Every scrape is a point (60 in the hour, a minute apart), at its own time and value.
    assert len(times) == len(raw) == 60
    for (t, value), (drawn_t, drawn) in zip(raw, zip(times, waiting, strict=True), strict=True):
        assert abs((drawn_t - t).total_seconds()) < 0.01
        assert drawn == value
    spans = _spans(ax)
    capacity = to_rgba(SHADES[QueueClass.CAPACITY][0])[:3]
    # 17:54-17:56: the queue (waiting > 0 at each scrape) inside one capacity span.
    burst = [(t, v) for t, v in raw if _at(17, 54) <= t < _at(17, 57)]
    assert len(burst) == 3
    assert all(v > 0 for _, v in burst)
    assert any(
        cls == "capacity" and colour == capacity and start <= burst[0][0] and burst[-1][0] <= end
        for cls, start, end, colour in spans
    ), spans
    # 18:24:25: requests waited while the GPUs read 0; a shaded span covers the scrape.
    (stall,) = [(t, v) for t, v in raw if _at(18, 24) <= t < _at(18, 25)]
    assert stall[1] > 0
    assert abs((stall[0] - _at(18, 24, 25)).total_seconds()) < 1
    # Its class (running beside 0 %), and the stall the time line and Summary name it.
    covering = [cls for cls, start, end, _ in spans if start <= stall[0] <= end]
    assert covering == ["inconsistent", "stall"]
    (event,) = [e for e in pro_report.timeline.of("PRO") if e.kind is EventKind.STALL]
    assert event.replicas == ("llm/pro-model-01",)
    (marked,) = [(start, end) for cls, start, end, _ in spans if cls == "stall"]
    assert marked[0] < event.start <= event.end < marked[1]
    # Outlined, not filled: the class's shade shows through.
    (patch,) = [p for p in ax.patches if p.get_gid() == "stall"]
    assert not patch.get_fill()
    assert to_rgba(patch.get_edgecolor())[:3] == to_rgba(STALL_MARK[0])[:3]


def test_capacity_and_starved_are_shaded_in_distinct_colours_and_in_the_legend(
    pro_figures: dict[str, Figure],
) -> None:
    fig = pro_figures["PRO-queue-vs-gpu"]
    spans = _spans(_panel(fig, "llm/pro-model-01"))
    colours = {cls: colour for cls, _, _, colour in spans}
    assert {"capacity", "starved", "inconsistent"} <= set(colours)
    assert len({colours["capacity"], colours["starved"], colours["inconsistent"]}) == 3
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    for cls in (QueueClass.CAPACITY, QueueClass.STARVED, QueueClass.INCONSISTENT):
        words = SHADES[cls][1]
        assert words in texts
        handle = legend.legend_handles[texts.index(words)]
        assert handle is not None
        assert tuple(to_rgba(handle.get_facecolor())[:3]) == colours[cls.value]  # type: ignore[attr-defined]


def test_the_stall_mark_is_in_the_legend_only_where_a_stall_is_drawn(
    pro_figures: dict[str, Figure],
) -> None:
    def legend(name: str) -> list[str]:
        (drawn,) = pro_figures[name].legends
        return [t.get_text() for t in drawn.get_texts()]

    assert STALL_MARK[1] in legend("PRO-queue-vs-gpu")
    # H20's time line names no stall: nothing marked, nothing in its key.
    assert STALL_MARK[1] not in legend("H20-queue-vs-gpu")
    h20 = pro_figures["H20-queue-vs-gpu"]
    assert not [p for ax in h20.axes for p in ax.patches if p.get_gid() == "stall"]


def test_the_queue_figure_s_caption_says_a_stall_is_hatched_only_where_one_is(
    pro_report: Report,
) -> None:
    captions = {b.name: b.caption for b in sections(pro_report) if isinstance(b, FigureRef)}
    assert captions["PRO-queue-vs-gpu"].endswith(
        "rows shaded, and the stall named in What happened hatched."
    )
    assert captions["H20-queue-vs-gpu"].endswith("inconsistent rows shaded.")


def test_a_replica_with_a_stall_gets_a_panel_before_larger_queues(
    pro_report: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = next(r for r in pro_report.deployments if r.deployment.name == "H20")
    queue = run.of(queueing)
    smallest = min(queue.rows, key=lambda rows: (float(np.max(rows.waiting)), rows.replica))
    at = datetime.fromtimestamp(float(smallest.t[10]), tz=BEIJING)
    stall = Event(
        deployment="H20",
        replicas=(smallest.replica,),
        start=at,
        end=at,
        kind=EventKind.STALL,
        severity=Severity.CRITICAL,
        pieces=(EventKind.STALL,),
        text="a stall",
        keys=(),
    )
    figures = importlib.import_module("inference_obs.report.figures")
    monkeypatch.setattr(figures, "QUEUE_PANELS", 1)
    without = queue_vs_gpu_figure("H20", run.window, queue)
    with_stall = queue_vs_gpu_figure("H20", run.window, queue, [stall])

    def drawn(fig: Figure) -> list[str]:
        return [ax.get_title(loc="left") for ax in fig.axes if ax.get_title(loc="left")]

    assert drawn(without) != [smallest.replica]
    assert drawn(with_stall) == [smallest.replica]
    assert "those with a stall, then the largest queues" in with_stall.get_suptitle()
    assert "those with a stall" not in without.get_suptitle()
    (ax,) = [ax for ax in with_stall.axes if ax.get_title(loc="left") == smallest.replica]
    (marked,) = [(start, end) for cls, start, end, _ in _spans(ax) if cls == "stall"]
    assert marked[0] < at < marked[1]


def test_each_replica_has_its_panel_and_tiles_are_drawn_across_their_width(
    pro_source: DatasetSource, pro_figures: dict[str, Figure]
) -> None:
    fig = pro_figures["H20-queue-vs-gpu"]
    titles = [ax.get_title(loc="left") for ax in fig.axes if ax.get_title(loc="left")]
    # The four replicas, by the pod each one's series carry, in name order.
    assert titles == [f"llm/h20-model-0{k}" for k in range(1, 5)]
    _png(fig)
    # In 300 s tiles a row is a tile: its point sits mid-tile, its shading spans the tile.
    window = _window(pro_source)
    tiled = queueing(pro_source, _deployment(pro_source, "PRO"), window, step=300.0)
    fig = queue_vs_gpu_figure("PRO", window, tiled)
    ax = _panel(fig, "llm/pro-model-01")
    times, _ = _line(ax, "waiting")
    assert len(times) == 12
    assert times[0] == _at(17, 42, 30)
    assert all(
        (b - a).total_seconds() == pytest.approx(300.0, abs=0.01)
        for a, b in itertools.pairwise(times)
    )
    widths = {round((end - start).total_seconds()) % 300 for _, start, end, _ in _spans(ax)}
    assert widths == {0}


def test_a_queue_figure_without_rows_is_refused(pro_source: DatasetSource) -> None:
    window = _window(pro_source)
    nothing = _deployment(pro_source, "PRO").model_copy(update={"selector": {"pod": "nomatch"}})
    with pytest.raises(NoDataError, match="PRO"):
        queue_vs_gpu_figure("PRO", window, queueing(pro_source, nothing, window))


def test_rolling_quantiles_carry_the_metric_name_and_whole_window_references(
    pro_report: Report, pro_figures: dict[str, Figure]
) -> None:
    fig = pro_figures["PRO-rolling-quantiles"]
    (ax,) = fig.axes
    assert vllm.TIME_TO_FIRST_TOKEN.name in ax.get_title()
    assert ax.get_ylabel() == "seconds"
    ttft = pro_report.deployments[0].of(latency).ttft
    dashed = {
        str(line.get_label()): float(np.asarray(line.get_ydata())[0])
        for line in ax.get_lines()
        if line.get_linestyle() == "--"
    }
    expected = {"P50": ttft.p50.value, "P95": ttft.p95.value, "P99": ttft.p99.value}
    assert len(dashed) == 3
    for level, value in expected.items():
        (label,) = [label for label in dashed if label.startswith(f"whole-window {level} ")]
        assert dashed[label] == value
    solid = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
    assert [line.get_label() for line in solid] == ["rolling P50", "rolling P95", "rolling P99"]
    # The rolling P95 of the burst rises far above the window's P95: both visible.
    assert float(np.max(np.asarray(solid[1].get_ydata()))) > 2 * (ttft.p95.value or 0)
    ticks = [label.get_text() for label in ax.get_xticklabels()]
    assert ticks[0] == "17:40"  # the window's +08:00 local time, not UTC
    assert "UTC+0800" in ax.get_xlabel()
    assert "whole-window P95" in _texts(fig) + (fig.get_supxlabel() or "")
    _png(fig)


def test_rolling_quantiles_are_drawn_as_their_buckets_with_the_line_inside(
    pro_figures: dict[str, Figure],
) -> None:
    fig = pro_figures["PRO-rolling-quantiles"]
    (ax,) = fig.axes
    bands = {str(c.get_gid()): c for c in ax.collections if str(c.get_gid()).startswith("bucket")}
    assert sorted(bands) == ["bucket P50", "bucket P95", "bucket P99"]
    (p99,) = bands["bucket P99"].get_paths()
    # 18:26-18:29 (+08:00): the P99 of the requests these 5-minute intervals hold is 56.6 s
    # (requests.csv: 15 first tokens at 18:24:41 after 51-56.6 s), in the (40, 80] s bucket.
    # The band covers that bucket there and nothing outside it; the line (about 78 s, an
    # interpolation above every request) lies inside it.
    times, values = _line(ax, "rolling P99")
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "rolling P99")
    xs = np.asarray(line.get_xdata(), dtype=np.float64)
    for minute in (26, 27, 28, 29):
        at = times.index(_at(18, minute))
        x = float(xs[at])
        inside = p99.contains_points([(x, 41.0), (x, 56.6), (x, 79.0)])
        outside = p99.contains_points([(x, 39.0), (x, 81.0)])
        assert inside.all()
        assert not outside.any()
        assert 56.6 < values[at] < 80.0
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert "rolling P99: interpolated (line) in its bucket (shaded)" in texts
    # The whole-window quantiles with their buckets, as the report's tables show them
    # (requests.csv: the true P50, P95 and P99 of PRO's TTFT are 0.106, 22.09 and 40.45 s;
    # 0.25 s is the lowest bucket's bound, so the P50 is known only as at most 250 ms).
    assert "whole-window P50 ≤ 250 ms" in texts
    assert any(t.startswith("whole-window P95 ") and t.endswith(" s [20, 40]") for t in texts)
    assert any(t.startswith("whole-window P99 ") and t.endswith(" s [40, 80]") for t in texts)


def test_itl_without_buckets_has_no_figure_and_the_report_says_why(
    pro_source: DatasetSource, pro_report: Report, pro_figures: dict[str, Figure]
) -> None:
    window = _window(pro_source)
    pro = _deployment(pro_source, "PRO")
    # The dataset has inter-token latency's _count but no _bucket series (dropped).
    family = vllm.INTER_TOKEN_LATENCY
    assert pro_source.series(family.select(pro.matchers, "count"), window)
    assert not pro_source.series(family.select(pro.matchers, "bucket"), window)
    assert "PRO-rolling-itl" not in pro_figures
    said = [b.text for b in sections(pro_report) if isinstance(b, Paragraph)]
    (why,) = [text for text in said if text.startswith("PRO, H20: No rolling quantiles of")]
    assert family.name in why
    assert "relabelling" in why
    with pytest.raises(NoDataError, match=family.name):
        rolling_quantiles_figure(rolling_itl(pro_source, pro, window))


def test_itl_with_buckets_is_drawn_with_its_name(r1_figures: dict[str, Figure]) -> None:
    (ax,) = r1_figures["R1-rolling-itl"].axes
    assert vllm.INTER_TOKEN_LATENCY.name in ax.get_title()
    solid = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
    assert len(solid) == 3
    assert all(np.asarray(line.get_xdata()).size > 50 for line in solid)


def test_dram_vs_tensor_draws_the_classifier_thresholds(
    r1_source: DatasetSource, r1_report: Report, r1_figures: dict[str, Figure]
) -> None:
    (ax,) = r1_figures["R1-dram-vs-tensor"].axes
    lines: list[Line2D] = ax.get_lines()
    vertical = {float(np.asarray(ln.get_xdata())[0]) for ln in lines if _flat(ln.get_xdata())}
    horizontal = {float(np.asarray(ln.get_ydata())[0]) for ln in lines if _flat(ln.get_ydata())}
    defaults = BottleneckSettings()
    assert defaults.dram_high in vertical
    assert {defaults.tensor_low, defaults.tensor_high} <= horizontal
    found = r1_report.deployments[0].of(bottleneck)
    (star,) = [ln for ln in lines if ln.get_marker() == "*"]
    assert float(np.asarray(star.get_xdata())[0]) == found.dram_active.value
    assert float(np.asarray(star.get_ydata())[0]) == found.tensor_active.value
    assert "bandwidth bound decode" in str(star.get_label())
    assert _scattered(ax) > 0
    # The run's own thresholds, not the defaults: an override moves the line.
    moved = bottleneck(r1_source, _deployment(r1_source, "R1"), _window(r1_source), dram_high=0.7)
    fig = dram_vs_tensor_figure("R1", r1_report.deployments[0].of(activity), moved)
    xs = {
        float(np.asarray(ln.get_xdata())[0])
        for ln in fig.axes[0].get_lines()
        if _flat(ln.get_xdata())
    }
    assert 0.7 in xs
    assert defaults.dram_high not in xs
    _png(fig)


def _scattered(ax: Axes) -> int:
    """Points of the scatter (the one PathCollection; the regions are PolyCollections)."""
    (points,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    return int(np.asarray(points.get_offsets()).shape[0])


def _flat(data: Any) -> bool:
    """A straight axis line: two equal coordinates."""
    values = np.asarray(data, dtype=np.float64)
    return values.size == 2 and values[0] == values[1]


def _cited(report_: Report) -> set[str]:
    return {b.name for b in sections(report_) if isinstance(b, FigureRef)}


def test_no_placeholder_without_profiling_counters(
    pro_report: Report, pro_figures: dict[str, Figure], pro_source: DatasetSource
) -> None:
    assert not pro_source.series(
        dcgm.PROF_DRAM_ACTIVE.select(_deployment(pro_source, "PRO").gpu_matchers),
        _window(pro_source),
    )
    assert (
        set(pro_figures)
        == _cited(pro_report)
        == {
            f"{d}-{figure}"
            for d in ("PRO", "H20")
            for figure in ("rolling-quantiles", "queue-vs-gpu", "gpu-heatmap")
        }
    )
    said = [b.text for b in sections(pro_report) if isinstance(b, Paragraph)]
    # Both lack the counters for one reason: one sentence names both.
    (why,) = [text for text in said if text.startswith("PRO, H20: No DRAM-vs-tensor figure")]
    assert dcgm.PROF_DRAM_ACTIVE.name in why
    with pytest.raises(NoDataError):
        dram_vs_tensor_figure(
            "PRO", pro_report.deployments[0].of(activity), pro_report.deployments[0].of(bottleneck)
        )


def test_with_profiling_counters_every_figure_is_drawn_and_cited(
    r1_report: Report, r1_figures: dict[str, Figure]
) -> None:
    assert (
        set(r1_figures)
        == _cited(r1_report)
        == {
            f"R1-{figure}"
            for figure in (
                "rolling-quantiles",
                "rolling-itl",
                "queue-vs-gpu",
                "gpu-heatmap",
                "dram-vs-tensor",
            )
        }
    )
    for fig in r1_figures.values():
        _png(fig)


@pytest.mark.parametrize("seconds", [0.5, 30.0, 3600.0, 3 * 86400.0, 400 * 86400.0])
@pytest.mark.parametrize("zone", [UTC, timezone(timedelta(hours=8))])
def test_time_axis_ticks_are_the_automatic_date_locators(seconds: float, zone: timezone) -> None:
    # The ticks are found once for the window's limits: they must be those matplotlib's own
    # automatic locator finds when the axis asks it at draw time (the reference here).
    from inference_obs.report.figures import _time_axis

    window = Window.parse(datetime(2026, 3, 2, 0, 0, 7, tzinfo=zone), seconds)
    ours = Figure().add_subplot()
    _time_axis(ours, window)
    reference = Figure().add_subplot()
    automatic: Any = matplotlib.dates.AutoDateLocator  # matplotlib.dates has no annotations
    reference.xaxis.set_major_locator(automatic(tz=zone))
    reference.set_xlim(ours.get_xlim())
    assert ours.get_xticks().tolist() == reference.get_xticks().tolist()
    assert len(ours.get_xticks()) >= 2


def test_a_written_report_holds_one_figure_at_a_time(
    pro_report: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    write = importlib.import_module("inference_obs.report.write")
    drawn: list[Figure] = []

    def render(fig: Figure) -> bytes:
        # Every figure drawn before this one has been rendered and cleared already.
        assert all(not earlier.axes for earlier in drawn), "a previous figure is still held"
        drawn.append(fig)
        return figure_png(fig)

    monkeypatch.setattr(write, "figure_png", render)
    written = write.write_report(pro_report, tmp_path / "out", ("md",))
    assert len(drawn) == len(draw_figures(pro_report)) > 1
    assert sum(key.startswith("figure:") for key in written) == len(drawn)
    for fig in drawn:
        assert not fig.axes
