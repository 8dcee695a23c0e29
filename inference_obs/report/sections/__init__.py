"""The sections of an observation report, in the order its method reads them.

Scope first (what was read, and that nothing was sent or changed), then
the summary of what the report concludes and what happened when, then which deployments are
compared, whether their collection is whole, and how each statistic is
defined, then request shapes before throughput, latency, the replicas as a
distribution with their outliers, queues against
GPU activity, caches, memory and errors, GPU activity and bottleneck,
stage boundaries, cost, the comparison verdicts, what not to conclude,
and an appendix listing every query behind every number, grouped by
analysis.
Each module holds the sections of one part of the method; :func:`sections`
puts them in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inference_obs.report.document import Block
from inference_obs.report.sections.appendix import appendix, other_analyses
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

__all__ = ["sections"]


def sections(report: Report) -> tuple[Block, ...]:
    """Every block of the report, in order."""
    parts = (
        scope,
        summary,
        what_happened,
        deployments,
        collection,
        configurations,
        definitions,
        request_shapes,
        throughput,
        latency,
        slos,
        replicas,
        queues,
        memory_and_errors,
        caches,
        gpus,
        stage_boundaries,
        costs,
        other_analyses,
        verdicts,
        baseline,
        not_to_conclude,
        appendix,
    )
    return tuple(block for part in parts for block in part(report))
