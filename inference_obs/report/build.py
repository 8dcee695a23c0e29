"""Run every analysis a report needs, for every deployment, and keep the results together.

:func:`build_report` is the report's only contact with a source: the
renderers (:mod:`~.markdown`, :mod:`~.html`, :mod:`~.report_json`) format
what it returns and query nothing. Progress goes to a callback, and a
deadline stops the run between analyses with a clear error rather than
leaving a half-written report.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

import pandas as pd
from matplotlib.figure import Figure
from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.bottleneck import BottleneckResult, bottleneck
from inference_obs.analyses.boundaries.stages import BoundariesResult, boundaries
from inference_obs.analyses.cache import CacheResult, cache
from inference_obs.analyses.configuration import ConfigurationResult, configuration
from inference_obs.analyses.cost import CostResult, cost
from inference_obs.analyses.figures import (
    dram_vs_tensor_figure,
    gpu_heatmap_figure,
    queue_vs_gpu_figure,
    rolling_quantiles_figure,
)
from inference_obs.analyses.gpu import GpuResult, gpu
from inference_obs.analyses.latency import LatencyResult, latency
from inference_obs.analyses.queueing import QueueingResult, queueing
from inference_obs.analyses.rolling import rolling_quantiles
from inference_obs.analyses.shapes import ShapesResult, shapes
from inference_obs.analyses.throughput import ThroughputResult, throughput
from inference_obs.analyses.validity.verdicts import ValidityResult, validity, windows_by_name
from inference_obs.deployment import Deployment
from inference_obs.errors import InferenceObsError
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.resolution import Resolution, step_for
from inference_obs.reading.result import measurements_frame
from inference_obs.report.baseline import Baseline
from inference_obs.samples import Window
from inference_obs.source.base import Source
from inference_obs.source.remembering import Pending, RememberingSource, soon

__all__ = ["WORKERS", "DeploymentReport", "Report", "ReportTimeout", "Scope", "build_report"]

Progress = Callable[[str], None]
T = TypeVar("T")
#: Threads a report reading a server runs its analyses and questions in. Many wait on
#: answers other threads are fetching, so there are more threads than requests in
#: flight: over a link with 50 ms each way (and a round trip more per connection) the
#: bundled two-deployment report built in 5.5 s with 8 threads, 3.4 s with 16, 2.2 s with
#: 32 and 1.9 s with 48 (``benchmarks/live_link.py``). The source bounds the requests in
#: flight.
WORKERS = 32


class ReportTimeout(InferenceObsError, TimeoutError):
    """The report's time budget ran out before every analysis was done."""


class Scope(BaseModel):
    """What a report read: the source, its engine and rules, and the windows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(description="Where the samples came from (no credentials).")
    engine: str
    rules: str
    windows: dict[str, Window] = Field(description="Deployment name -> window.")
    scrape_interval_seconds: float | None = None


class DeploymentReport(BaseModel):
    """Every analysis of one deployment over its window."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    deployment: Deployment
    window: Window
    step_seconds: float | None = Field(
        description="Tile width the per-scrape analyses (queueing, stage boundaries, sampled "
        "shares) read at, seconds; None: every app scrape."
    )
    shapes: ShapesResult
    latency: LatencyResult
    throughput: ThroughputResult
    cache: CacheResult
    gpu: GpuResult
    queueing: QueueingResult
    bottleneck: BottleneckResult
    configuration: ConfigurationResult
    boundaries: BoundariesResult
    cost: CostResult | None = Field(None, description="Only with a GPU-hour price.")

    @property
    def has_data(self) -> bool:
        """Whether any vLLM replica or GPU of the deployment had series in the window."""
        return self.throughput.replicas_seen.ok or bool(self.gpu.gpus_with_samples.value)

    def measurements(self) -> tuple[Measurement, ...]:
        """Every Measurement of every analysis, in report order."""
        parts = (
            self.shapes,
            self.latency,
            self.throughput,
            self.cache,
            self.gpu,
            self.queueing,
            self.bottleneck,
            self.configuration,
            self.boundaries,
            self.cost,
        )
        return tuple(m for part in parts if part is not None for m in part.measurements())


class Report(BaseModel):
    """A whole observation report: scope, deployments, verdicts and figures."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    title: str
    scope: Scope
    deployments: tuple[DeploymentReport, ...]
    validity: ValidityResult | None = Field(None, description="With two or more deployments.")
    figures: dict[str, Figure] = Field(default_factory=dict, exclude=True)
    methodology: tuple[str, ...] = ()
    baseline: Baseline | None = Field(None, description="Against an earlier report.json.")

    def to_frame(self) -> pd.DataFrame:
        """Every Measurement of the report, one row each (see ``measurements_frame``)."""
        return measurements_frame(self.measurements())

    def _repr_html_(self) -> str:
        from inference_obs.report.summary import summary_html

        return summary_html(self)

    def measurements(self) -> tuple[Measurement, ...]:
        """Every Measurement of the report (latency at matched load included)."""
        matched = (
            m
            for pair in (self.validity.pairs if self.validity else ())
            for found in pair.matched
            for quantiles in found.quantiles.values()
            for m in quantiles.values()
        )
        return (*(m for d in self.deployments for m in d.measurements()), *matched)


def build_report(
    source: Source,
    deployments: Sequence[Deployment],
    window: Window | Mapping[str, Window],
    *,
    title: str,
    source_name: str,
    gpu_hour_prices: Mapping[str, float] | None = None,
    topologies: Mapping[str, str] | None = None,
    scrape_interval_seconds: float | None = None,
    methodology: Sequence[str] = (),
    figures: bool = True,
    progress: Progress | None = None,
    budget_s: float | None = None,
    resolution: Resolution = "auto",
    workers: int | None = None,
) -> Report:
    """Run the analyses, the comparison checks and the figures for ``deployments``.

    Parameters
    ----------
    source
        Where the series come from (read-only).
    deployments
        What to report on; two or more are also compared.
    window
        One window for all, or one per deployment name.
    title, source_name
        The report's title, and how it names its source (a URL without
        credentials, or a dataset path).
    gpu_hour_prices
        GPU-hour rent per deployment name; cost per token only with one.
    topologies
        ``nvidia-smi topo -m`` text per deployment name, to check declared
        parallelism against the wiring.
    scrape_interval_seconds
        The scrape interval, when known (datasets record it).
    methodology
        Notes carried into the report (a dataset's methodology).
    figures
        Whether to draw the figures.
    progress
        Called with a short line as each analysis starts (from the thread
        that runs it, one call at a time).
    budget_s
        Seconds the whole run may take; :class:`ReportTimeout` when exceeded.
    resolution
        How queueing, the stage boundaries and the sampled shares read each
        deployment: ``auto`` (every app scrape while that fits
        :data:`~inference_obs.reading.resolution.ROWS`, else tiles),
        ``scrape``, or a tile width in seconds (see
        :mod:`~inference_obs.reading.resolution`).
    workers
        Threads the report runs its analyses, deployments, figures and their
        independent questions in; 1 runs everything in order in the calling
        thread. Default: :data:`WORKERS` for a server, 1 for a source whose
        engine answers in this process (:class:`~inference_obs.source.base.EngineInfo`
        kind ``dataset``), where threads would only take turns at the
        interpreter. Results are assembled in a fixed order, so the report
        is the same for any number. How many requests reach a server at
        once is the source's to bound.

    Notes
    -----
    Over a slow link a report's time is its round trips, one after another
    when each question waits for the one before. The analyses of every
    deployment, the figures and the comparison checks need nothing of each
    other but the tile width (and the queue figure, the queueing result),
    so all start at once; inside each, questions that do not depend on each
    other's answers are asked together, and a question already in flight is
    waited for, not asked again (:mod:`~inference_obs.source.remembering`).
    """
    started = time.monotonic()
    say = progress or (lambda _: None)
    saying = threading.Lock()
    windows = windows_by_name(deployments, window)
    prices = dict(gpu_hour_prices or {})

    def step(what: str) -> None:
        if budget_s is not None and time.monotonic() - started > budget_s:
            raise ReportTimeout(f"the report's time budget of {budget_s:g} s ran out before {what}")
        with saying:
            say(what)

    # Analyses read some series in common, and the comparison checks run them
    # again: asked once each, a live report makes about half the requests.
    with RememberingSource(source) as asked:
        # The engine is asked first: its kind chooses the default number of threads.
        local = asked.info().kind == "dataset"
        asked.workers = workers if workers is not None else 1 if local else WORKERS

        def start(what: str, run: Callable[[], T]) -> Pending[T]:
            def stepped() -> T:
                step(what)
                return run()

            return soon(asked, stepped)

        tiles = {
            d.name: start(
                f"{d.name}: resolution",
                partial(step_for, asked, d, windows[d.name], resolution),
            )
            for d in deployments
        }
        started_parts = [
            _start_deployment(start, asked, d, windows[d.name], tiles[d.name], prices, topologies)
            for d in deployments
        ]
        drawing = [
            _start_figures(start, asked, d, windows[d.name], part["queueing"])
            for d, part in zip(deployments, started_parts, strict=True)
            if figures
        ]
        checking = (
            start(
                "comparison checks",
                lambda: validity(
                    asked,
                    deployments,
                    windows,
                    gpu_hour_prices=prices or None,
                    topologies=topologies,
                    steps={n: s for n, t in tiles.items() if (s := t.result()) is not None},
                ),
            )
            if len(deployments) > 1
            else None
        )
        parts = [
            DeploymentReport(
                deployment=d,
                window=windows[d.name],
                step_seconds=tiles[d.name].result(),
                **{name: one.result() for name, one in part.items()},
            )
            for d, part in zip(deployments, started_parts, strict=True)
        ]
        drawn = {name: fig.result() for pending in drawing for name, fig in pending.items()}
        verdicts = checking.result() if checking is not None else None
        info = asked.info()
    scope = Scope(
        source=source_name,
        engine=info.kind,
        rules=info.rules.value,
        windows=windows,
        scrape_interval_seconds=scrape_interval_seconds,
    )
    return Report(
        title=title,
        scope=scope,
        deployments=tuple(parts),
        validity=verdicts,
        figures=drawn,
        methodology=tuple(methodology),
    )


Start = Callable[[str, Callable[[], T]], Pending[T]]


def _start_deployment(
    start: Start[Any],
    source: Source,
    d: Deployment,
    w: Window,
    tile: Pending[float | None],
    prices: Mapping[str, float],
    topologies: Mapping[str, str] | None,
) -> dict[str, Pending[Any]]:
    """Every analysis of one deployment, started; keyed by its DeploymentReport field."""
    price = prices.get(d.name)
    topology = (topologies or {}).get(d.name)
    started = {
        "latency": start(f"{d.name}: latency", partial(latency, source, d, w)),
        "shapes": start(f"{d.name}: shapes", partial(shapes, source, d, w)),
        "throughput": start(
            f"{d.name}: throughput", lambda: throughput(source, d, w, step=tile.result())
        ),
        "cache": start(f"{d.name}: cache", partial(cache, source, d, w)),
        "gpu": start(f"{d.name}: GPU", partial(gpu, source, d, w)),
        "queueing": start(
            f"{d.name}: queueing", lambda: queueing(source, d, w, step=tile.result())
        ),
        "bottleneck": start(f"{d.name}: bottleneck", partial(bottleneck, source, d, w)),
        "configuration": start(
            f"{d.name}: configuration", partial(configuration, source, d, w, topology)
        ),
        "boundaries": start(
            f"{d.name}: stage boundaries", lambda: boundaries(source, d, w, step=tile.result())
        ),
    }
    if price is not None:
        started["cost"] = start(
            f"{d.name}: cost", partial(cost, source, d, w, gpu_hour_price=price)
        )
    return started


def _start_figures(
    start: Start[Figure],
    source: Source,
    d: Deployment,
    w: Window,
    queue: Pending[QueueingResult],
) -> dict[str, Pending[Figure]]:
    """One deployment's figures, started; keyed by their names in the report."""
    return {
        f"{d.name}-rolling-quantiles": start(
            f"{d.name}: figures (rolling quantiles)",
            lambda: rolling_quantiles_figure(rolling_quantiles(source, d, w)),
        ),
        f"{d.name}-queue-vs-gpu": start(
            f"{d.name}: figures (queue vs GPU)",
            lambda: queue_vs_gpu_figure(source, d, w, queue.result()),
        ),
        f"{d.name}-gpu-heatmap": start(
            f"{d.name}: figures (GPU heat map)", partial(gpu_heatmap_figure, source, d, w)
        ),
        f"{d.name}-dram-vs-tensor": start(
            f"{d.name}: figures (DRAM vs tensor)", partial(dram_vs_tensor_figure, source, d, w)
        ),
    }
