"""The report's one table: every part in reading order, and the registered analyses each shows.

Each :class:`Part` is a section function (report -> blocks) with the
registered analyses whose results it shows and, for each, the figures drawn
from that result (:mod:`~inference_obs.report.figure_plan`). Everything else
that names the analyses is derived from it and the registry's order
(:data:`~inference_obs.analyses.registry.ANALYSES`):

- :data:`TABLE`, the same table keyed by analysis (each analysis is shown by
  one part);
- :data:`SHOWN`, the names of the analyses a section of their own shows;
- the report's section order (:data:`ORDER`);
- the analyses shown generically (:data:`GENERICALLY`, in registry order):
  a table of their Measurements under their title, where :func:`other_analyses`
  stands in the order.

A registered analysis needs a decision here: a part that shows it, or a place
in :data:`GENERICALLY`. One without (a new analysis whose author forgot the
report) is still shown generically, so no number is lost, but the report's
tests fail until it has one. The parts that show no analysis (scope, the
Summary, the time line, verdicts, baseline, cautions, appendix) render the
judging analyses' results, which the report model holds
(:class:`~inference_obs.report.model.Report`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from inference_obs import analyses
from inference_obs.analyses import registry
from inference_obs.analyses.replicas import replicas as per_replica
from inference_obs.analyses.unit import Analysis
from inference_obs.reading.wording import number
from inference_obs.report.document import Block, Heading, Paragraph, Table
from inference_obs.report.figure_plan import (
    DRAM_VS_TENSOR,
    GPU_HEATMAP,
    QUEUE_VS_GPU,
    ROLLING_ITL,
    ROLLING_QUANTILES,
)
from inference_obs.report.sections.appendix import appendix
from inference_obs.report.sections.collection import collection
from inference_obs.report.sections.conclusions import not_to_conclude, summary
from inference_obs.report.sections.cost import costs
from inference_obs.report.sections.gpus import caches, gpus, stage_boundaries
from inference_obs.report.sections.memory import memory_and_errors
from inference_obs.report.sections.queues import queues
from inference_obs.report.sections.replicas import replicas
from inference_obs.report.sections.scope import configurations, definitions, deployments, scope
from inference_obs.report.sections.slos import slos
from inference_obs.report.sections.throughput import throughput
from inference_obs.report.sections.timeline import what_happened
from inference_obs.report.sections.verdicts import baseline, verdicts
from inference_obs.report.sections.workload import latency, request_shapes

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = [
    "GENERICALLY",
    "ORDER",
    "PARTS",
    "SHOWN",
    "TABLE",
    "Part",
    "figures",
    "generic",
    "other_analyses",
    "undecided",
]

#: A section: the blocks it renders from a report.
Section = Callable[["Report"], Iterable[Block]]
AnyAnalysis = Analysis[Any, Any]


@dataclass(frozen=True)
class Part:
    """One part of the report.

    Attributes
    ----------
    blocks
        The section function that renders it.
    shows
        The registered analyses whose results it shows, each with the names of
        the figures drawn from that result (:data:`~.figure_plan.FIGURES`), in
        the order the section cites them.
    """

    blocks: Section
    shows: Mapping[AnyAnalysis, tuple[str, ...]] = field(default_factory=dict)


#: The analyses the report shows as a table of their Measurements under their title, with
#: no section of their own (none today: every registered analysis has a section).
GENERICALLY: frozenset[AnyAnalysis] = frozenset()


def generic() -> tuple[AnyAnalysis, ...]:
    """The registered analyses no part shows, in registry order: those in
    :data:`GENERICALLY` and any without a decision (:func:`undecided`)."""
    # The registry is read when asked, not bound at import, so the table is always checked
    # against the registry as it stands.
    return tuple(one for one in registry.ANALYSES if one not in TABLE)


def undecided() -> tuple[AnyAnalysis, ...]:
    """The registered analyses that neither a part shows nor :data:`GENERICALLY` names."""
    return tuple(one for one in generic() if one not in GENERICALLY)


def other_analyses(report: Report) -> Iterator[Block]:
    """A table of Measurements per registered analysis without a section of its own."""
    for one in generic():
        rows = tuple(
            (d.deployment.name, m.statistic, number(m.value), m.unit, m.status.value)
            for d in report.deployments
            if one.name in d.results
            for m in d.results[one.name].measurements()
        )
        yield Heading(2, one.title)
        yield Paragraph(one.summary)
        yield Table(("deployment", "statistic", "value", "unit", "status"), rows)


#: Every part of the report, in reading order: scope, the Summary and what happened when,
#: which deployments are compared, whether their collection is whole, their configuration
#: and how each statistic is defined; then request shapes, throughput, latency, SLOs, the
#: replicas as a distribution with their outliers, queues against GPU activity, memory and
#: errors, caches, GPU activity and bottleneck, stage boundaries, cost; the analyses shown
#: generically; the comparison verdicts, the baseline, what not to conclude, and the
#: appendix of every query behind every number.
PARTS: tuple[Part, ...] = (
    Part(scope),
    Part(summary),
    Part(what_happened),
    Part(deployments),
    Part(collection, {analyses.collection: ()}),
    Part(configurations, {analyses.configuration: ()}),
    Part(definitions),
    Part(request_shapes, {analyses.shapes: ()}),
    Part(throughput, {analyses.throughput: ()}),
    Part(
        latency,
        {
            analyses.latency: (),
            analyses.rolling_quantiles: (ROLLING_QUANTILES,),
            analyses.rolling_itl: (ROLLING_ITL,),
        },
    ),
    Part(slos, {analyses.slo: ()}),
    Part(replicas, {per_replica: ()}),
    Part(queues, {analyses.queueing: (QUEUE_VS_GPU,)}),
    Part(memory_and_errors, {analyses.memory: (), analyses.errors: ()}),
    Part(caches, {analyses.cache: ()}),
    Part(
        gpus,
        {
            analyses.gpu: (),
            analyses.bottleneck: (),
            analyses.activity: (GPU_HEATMAP, DRAM_VS_TENSOR),
        },
    ),
    Part(stage_boundaries, {analyses.boundaries: ()}),
    Part(costs, {analyses.cost: ()}),
    Part(other_analyses),
    Part(verdicts),
    Part(baseline),
    Part(not_to_conclude),
    Part(appendix),
)


#: The part that shows each analysis with a section of its own (each is in one part's
#: ``shows``; the report's tests check that none is in two).
TABLE: Mapping[AnyAnalysis, Part] = MappingProxyType(
    {one: part for part in PARTS for one in part.shows}
)
#: The names of the analyses a section of their own shows.
SHOWN: frozenset[str] = frozenset(one.name for one in TABLE)
#: The report's sections, in order.
ORDER: tuple[Section, ...] = tuple(part.blocks for part in PARTS)


def figures() -> tuple[str, ...]:
    """Every figure the table's analyses are drawn as, in the report's order."""
    return tuple(f for part in PARTS for drawn in part.shows.values() for f in drawn)
