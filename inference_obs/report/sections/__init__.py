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
Each module holds the sections of one part of the method; :mod:`.table` lists
them in order with the registered analyses each shows, and :func:`sections`
renders them in that order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inference_obs.report.document import Block
from inference_obs.report.sections.table import ORDER

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["sections"]


def sections(report: Report) -> tuple[Block, ...]:
    """Every block of the report, in the order of :data:`~.table.PARTS`."""
    return tuple(block for part in ORDER for block in part(report))
