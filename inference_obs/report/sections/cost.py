"""Cost per useful token, where a GPU-hour price was given."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs.report.document import Block, Heading, Paragraph, Table, cell
from inference_obs.report.facts import priced_cost

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["costs"]


def costs(report: Report) -> Iterator[Block]:
    yield Heading(2, "Cost")
    priced = [(d, c) for d in report.deployments if (c := priced_cost(d)) is not None]
    if not priced:
        yield Paragraph(
            "No GPU-hour price was given: pass --gpu-hour-price NAME=PRICE for cost "
            "per useful token."
        )
    rows = tuple(
        (
            d.deployment.name,
            cell(c.gpu_hours),
            cell(c.cost),
            cell(c.useful_output_tokens),
            cell(c.cost_per_million_useful_output_tokens),
            cell(c.useful_output_tokens_per_gpu_hour),
        )
        for d, c in priced
    )
    if rows:
        yield Table(
            (
                "deployment",
                "GPU-hours",
                "cost",
                "useful output tokens",
                "cost per million useful tokens",
                "useful tokens per GPU-hour",
            ),
            rows,
        )
        yield Paragraph(
            "Total cost over total useful tokens, never a mean of ratios; aborted "
            "and errored requests are not useful."
        )
