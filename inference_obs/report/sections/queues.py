"""Queues against GPU activity, per deployment."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.report.document import (
    Block,
    FigureRef,
    Heading,
    Paragraph,
    Table,
    cell,
    number,
    when,
)

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["queues"]


def queues(report: Report) -> Iterator[Block]:
    yield Heading(2, "Queues and GPU activity")
    for d in report.deployments:
        q = d.of(analyses.queueing)
        yield Heading(3, d.deployment.name)
        if d.step_seconds is not None:
            yield Paragraph(f"Rows are {d.step_seconds:g} s tiles: samples counts tiles.")
        peak = (
            f"Peak waiting {cell(q.peak_waiting)} at "
            f"{when(q.peak_time) if q.peak_time else '—'} on {q.peak_replica or '—'}."
        )
        yield Paragraph(peak)
        if q.intervals:
            yield Table(
                (
                    "class",
                    "replica",
                    "start",
                    "end",
                    "samples",
                    "max waiting",
                    "max running",
                    "mean GPU util %",
                ),
                tuple(
                    (
                        i.classification.value,
                        i.replica,
                        when(i.start),
                        when(i.end),
                        str(i.samples),
                        number(i.max_waiting),
                        number(i.max_running),
                        number(i.mean_gpu_util),
                    )
                    for i in q.intervals
                ),
            )
        else:
            yield Paragraph("No interval with a queue or with work running on idle GPUs.")
        yield FigureRef(
            f"{d.deployment.name}-queue-vs-gpu",
            f"{d.deployment.name}: waiting and running against GPU utilisation.",
        )
    yield Paragraph(
        "capacity: a queue while GPUs are busy; starved: a queue while GPUs idle (host, "
        "transfer or scheduling); inconsistent: running > 0 while GPU utilisation is 0 "
        "(investigate; scrapes may be misaligned)."
    )
