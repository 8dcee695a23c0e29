"""Which figures a deployment has: one rule for the sections that cite them and the drawing.

A figure with nothing to draw is neither drawn nor cited: :func:`nothing_to_draw`
says why in one sentence, which the section prints in its place, and
:func:`~inference_obs.report.figures.deployment_figures` draws exactly the
figures it returns None for. No matplotlib here: the Markdown needs none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from inference_obs.analyses.activity import ActivityResult, activity
from inference_obs.analyses.latency import HistogramSummary, latency
from inference_obs.analyses.queueing import queueing
from inference_obs.analyses.rolling import RollingQuantiles, rolling_itl, rolling_quantiles
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.timeline.events import Event, EventKind
from inference_obs.analyses.timeline.incidents import deployment_events
from inference_obs.analyses.unit import Analysis
from inference_obs.errors import ConfigurationError
from inference_obs.metrics import dcgm, family as catalogue_family, vllm
from inference_obs.report.document import FigureRef, Paragraph
from inference_obs.samples import Floats

__all__ = [
    "DRAM_VS_TENSOR",
    "FIGURES",
    "GPU_HEATMAP",
    "QUEUE_VS_GPU",
    "ROLLING",
    "ROLLING_ITL",
    "ROLLING_QUANTILES",
    "cite",
    "cite_each",
    "figure_name",
    "latency_summary",
    "nothing_to_draw",
    "profiling_pairs",
    "queue_stalls",
    "rolling_caption",
]

ROLLING_QUANTILES = "rolling-quantiles"
ROLLING_ITL = "rolling-itl"
QUEUE_VS_GPU = "queue-vs-gpu"
GPU_HEATMAP = "gpu-heatmap"
DRAM_VS_TENSOR = "dram-vs-tensor"
#: The rolling-quantile figures, by the analysis whose result each draws.
ROLLING: dict[str, Analysis[Any, RollingQuantiles]] = {
    ROLLING_QUANTILES: rolling_quantiles,
    ROLLING_ITL: rolling_itl,
}
#: Every figure a deployment can have, by the end of its name, in the report's order.
FIGURES: tuple[str, ...] = (*ROLLING, QUEUE_VS_GPU, GPU_HEATMAP, DRAM_VS_TENSOR)


def figure_name(run: DeploymentResults, figure: str) -> str:
    """The name a figure is drawn, written and cited by: ``<deployment>-<figure>``.

    The name is a file's under ``figures/``, so the deployment's name is
    percent-encoded where it could not be one: ``/`` (``H20/x`` becomes
    ``H20%2Fx``), ``%`` itself (so two names never meet), and a leading ``.``
    (a hidden file).
    """
    name = run.deployment.name.replace("%", "%25").replace("/", "%2F")
    if name.startswith("."):
        name = "%2E" + name[1:]
    return f"{name}-{figure}"


def profiling_pairs(seen: ActivityResult) -> tuple[Floats, Floats]:
    """DRAM-active and tensor-active readings of the same GPU at the same time (ratios 0-1),
    every GPU's pairs concatenated; empty arrays where no GPU has both."""
    dram = {s.name: s for s in seen.dram_active.series}
    tensor = {s.name: s for s in seen.tensor_active.series}
    xs: list[Floats] = [np.zeros(0)]
    ys: list[Floats] = [np.zeros(0)]
    for name in sorted(dram.keys() & tensor.keys()):
        _, i, j = np.intersect1d(dram[name].t, tensor[name].t, return_indices=True)
        xs.append(dram[name].values[i])
        ys.append(tensor[name].values[j])
    return np.concatenate(xs), np.concatenate(ys)


def latency_summary(run: DeploymentResults, family: str) -> HistogramSummary | None:
    """The latency analysis's whole-window summary of the histogram ``family`` (by any of its
    exposed names), or None where latency does not summarise it."""
    return run.of(latency).summary_of(catalogue_family(family).name)


def queue_stalls(run: DeploymentResults) -> tuple[Event, ...]:
    """The stalls the time line names for the run's deployment, which the queue figure marks
    over their replicas' rows (as What happened and the Summary read them)."""
    return tuple(e for e in deployment_events(run) if e.kind is EventKind.STALL)


def _span(seconds: float) -> str:
    """``seconds`` in words: seconds below two minutes, else minutes."""
    return f"{seconds:.3g} s" if seconds < 120 else f"{seconds / 60:.3g} min"


def _no_rolling(run: DeploymentResults, figure: str) -> str | None:
    result = run.of(ROLLING[figure])
    if any(s.t.size for s in result.series):
        return None
    summary = latency_summary(run, result.family)
    if result.window.seconds < result.length:
        return (
            f"No rolling quantiles of {result.held}: the window ({_span(result.window.seconds)}) "
            f"is shorter than the rolling window ({_span(result.length)})."
        )
    if summary is not None and summary.mean.ok:
        return (
            f"No rolling quantiles of {result.held}: its _bucket series are missing in the "
            "window while its _sum and _count are there (buckets dropped, e.g. by relabelling), "
            "so no quantile can be estimated."
        )
    return f"No rolling quantiles of {result.held}: it has no series in the window."


def nothing_to_draw(run: DeploymentResults, figure: str) -> str | None:
    """Why ``figure`` (one of :data:`FIGURES`) of ``run`` is not drawn, in one sentence;
    None when it is drawn.

    Raises
    ------
    ConfigurationError
        When ``figure`` is not one of :data:`FIGURES`.
    """
    if figure not in FIGURES:
        raise ConfigurationError(f"no figure {figure!r}; the figures: {', '.join(FIGURES)}")
    if figure in ROLLING:
        return _no_rolling(run, figure)
    if figure == QUEUE_VS_GPU:
        if any(rows.t.size for rows in run.of(queueing).rows):
            return None
        return f"No queue figure: no {vllm.NUM_REQUESTS_WAITING.name} series in the window."
    seen = run.of(activity)
    if figure == GPU_HEATMAP:
        if seen.gpu_util.series:
            return None
        return f"No GPU heat map: no {dcgm.GPU_UTIL.name} series for the GPUs in the window."
    dram, _ = profiling_pairs(seen)
    if dram.size:
        return None
    missing = [
        panel_family
        for panel_family, panel in (
            (dcgm.PROF_DRAM_ACTIVE.name, seen.dram_active),
            (dcgm.PROF_PIPE_TENSOR_ACTIVE.name, seen.tensor_active),
        )
        if not panel.series
    ]
    if missing:
        return (
            f"No DRAM-vs-tensor figure: no {' or '.join(missing)} series (DCGM profiling "
            "counters not exported), so memory- and compute-bound work cannot be told apart."
        )
    return "No DRAM-vs-tensor figure: the two profiling counters have no reading in common."


def cite(run: DeploymentResults, figure: str, caption: str) -> FigureRef | Paragraph:
    """What a section shows for ``figure`` of ``run``: the figure with ``caption`` where it is
    drawn, else the sentence saying why there is none (prefixed with the deployment)."""
    why = nothing_to_draw(run, figure)
    if why is None:
        return FigureRef(figure_name(run, figure), caption)
    return Paragraph(f"{run.deployment.name}: {why}")


def cite_each(
    runs: Sequence[DeploymentResults], figure: str, caption: Callable[[DeploymentResults], str]
) -> Iterator[FigureRef | Paragraph]:
    """:func:`cite` for each of ``runs``, the deployments without the figure for one reason
    named in one sentence (after the figures drawn), not one sentence each."""
    missing: dict[str, list[str]] = {}
    for run in runs:
        why = nothing_to_draw(run, figure)
        if why is None:
            yield FigureRef(figure_name(run, figure), caption(run))
        else:
            missing.setdefault(why, []).append(run.deployment.name)
    for why, names in missing.items():
        yield Paragraph(f"{', '.join(names)}: {why}")


def rolling_caption(run: DeploymentResults, figure: str) -> str:
    """The caption of a rolling-quantile figure (one of :data:`ROLLING`), from its result."""
    result = run.of(ROLLING[figure])
    levels = "/".join(f"P{s.quantile * 100:g}" for s in result.series)
    return (
        f"{run.deployment.name}: rolling {levels} of {result.held} over "
        f"{result.length / 60:g}-minute windows, every {result.every:g} s; shaded: the bucket "
        "that must hold each (the line interpolates inside it); dashed: the whole-window "
        "quantiles."
    )
