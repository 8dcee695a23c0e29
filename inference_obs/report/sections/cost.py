"""Cost per useful token, where a GPU-hour price was given, and what a useful token is."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.analyses.cost import CostResult
from inference_obs.analyses.facts import priced_cost
from inference_obs.reading.wording import cell, duration
from inference_obs.report.document import Block, Heading, Paragraph, Table

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["PRICE_UNIT", "costs", "money_unit", "useful_tokens"]

#: The unit of every cost when no currency was named: money is in whatever unit the price was.
PRICE_UNIT = "per unit of the price you gave"


def money_unit(c: CostResult) -> str:
    """What the money numbers are in: the currency named (``--currency``), else the price's unit.

    Examples
    --------
    >>> from inference_obs.analyses.cost import CostResult
    >>> money_unit(CostResult.model_construct(currency="EUR"))
    'in EUR (--currency)'
    >>> money_unit(CostResult.model_construct(currency=None))
    'per unit of the price you gave (no currency named: --currency)'
    """
    if c.currency:
        return f"in {c.currency} (--currency)"
    return f"{PRICE_UNIT} (no currency named: --currency)"


def useful_tokens(c: CostResult) -> str:
    """What counts as a useful output token, from the SLA settings the cost analysis used.

    Examples
    --------
    >>> from inference_obs.analyses.cost import CostResult
    >>> print(useful_tokens(CostResult.model_construct(sla_ttft_s=2.0, sla_e2e_s=None)))
    the output tokens of requests that finished on stop or length and met TTFT ≤ 2 s \
(cost.sla_ttft_s; estimated from the latency histograms)
    """
    limits = [
        f"{name} ≤ {duration(limit)}"
        for name, limit in (("TTFT", c.sla_ttft_s), ("E2E", c.sla_e2e_s))
        if limit is not None
    ]
    settings = [
        f"cost.{field}"
        for field, limit in (("sla_ttft_s", c.sla_ttft_s), ("sla_e2e_s", c.sla_e2e_s))
        if limit is not None
    ]
    finished = "the output tokens of requests that finished on stop or length"
    if not limits:
        return (
            f"{finished}; no latency SLA was set (cost.sla_ttft_s, cost.sla_e2e_s), so none "
            "is left out for being slow"
        )
    return (
        f"{finished} and met {' and '.join(limits)} ({', '.join(settings)}; estimated from "
        "the latency histograms)"
    )


def _defined(report: Report) -> str:
    """Useful output tokens defined once, or per deployment where their settings differ."""
    runs = [(d.deployment.name, useful_tokens(d.of(analyses.cost))) for d in report.deployments]
    if len({text for _, text in runs}) == 1:
        return f"Useful output tokens: {runs[0][1]}."
    return "Useful output tokens: " + "; ".join(f"{name}: {text}" for name, text in runs) + "."


def costs(report: Report) -> Iterator[Block]:
    yield Heading(2, "Cost")
    useful = _defined(report) if report.deployments else ""
    priced = [(d, c) for d in report.deployments if (c := priced_cost(d)) is not None]
    if not priced:
        yield Paragraph(
            "No GPU-hour price was given: pass --gpu-hour-price NAME=PRICE for cost "
            f"per useful token. {useful}".rstrip()
        )
        return
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
    units = sorted({money_unit(c) for _, c in priced})
    yield Paragraph(
        f"Costs are {'; '.join(units)}. {useful} Total cost over "
        "total useful tokens, never a mean of ratios; aborted and errored requests are not "
        "useful."
    )
