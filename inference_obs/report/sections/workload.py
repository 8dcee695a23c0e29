"""The work served: request shapes before any throughput, then latency."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.analyses.latency import HistogramSummary
from inference_obs.reading.wording import cell, duration_cell, number
from inference_obs.report.document import Block, Heading, Items, Paragraph, Table
from inference_obs.report.figure_plan import ROLLING, cite_each, rolling_caption

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["latency", "request_shapes"]


def request_shapes(report: Report) -> Iterator[Block]:
    yield Heading(2, "Request shapes")
    yield Paragraph("Read these before any throughput: different shapes are different work.")
    rows = []
    for d in report.deployments:
        s = d.of(analyses.shapes)
        mix = ", ".join(
            f"{r} {number((m.value or 0) * 100, 3)}%" for r, m in s.finish_shares.items() if m.value
        )
        rows.append(
            (
                d.deployment.name,
                cell(s.prompt_tokens_mean),
                cell(s.output_tokens_mean),
                cell(s.max_tokens_mean),
                cell(s.max_tokens_share.get(20)),
                cell(s.max_tokens_share.get(50)),
                cell(s.finished),
                mix or "—",
            )
        )
    yield Table(
        (
            "deployment",
            "prompt tokens (mean)",
            "output tokens (mean)",
            "max_tokens (mean)",
            "share max_tokens ≤ 20",
            "share ≤ 50",
            "finished requests",
            "finish reasons",
        ),
        tuple(rows),
    )
    yield Paragraph("Finish reasons say how generation ended, not that a request succeeded.")


def _queue_shares(report: Report) -> str:
    """One sentence: each deployment's mean queue time as a share of its mean TTFT."""
    parts, missing = [], []
    for d in report.deployments:
        share = d.of(analyses.latency).queue_share_of_ttft
        if share.value is None:
            missing.append(f"{d.deployment.name} ({share.status.value.replace('_', ' ')})")
        else:
            parts.append(f"{number(share.value * 100, 3)}% of {d.deployment.name}'s mean TTFT")
    text = ""
    if parts:
        text = (
            f"Queue time was {', '.join(parts)}: a ratio of request-weighted means, not a "
            "per-request attribution."
        )
    if missing:
        text += f" No queue share of TTFT for {', '.join(missing)}."
    return text.strip()


def _counted_only(bounded: list[tuple[str, str, bool]]) -> str:
    """A sentence naming the quantiles whose brackets hold for the counted requests only
    ("every P99" where that is all of one quantile's); empty without any. ``bounded``: each
    bracketed quantile's label, whose it is, and whether it holds for the counted only."""
    names = []
    for label in HistogramSummary.labels():
        mine = [(who, only) for tag, who, only in bounded if tag == label]
        counted = [who for who, only in mine if only]
        if counted and len(counted) == len(mine):
            names.append(f"every {label.upper()}")
        elif counted:
            names.append(f"{label.upper()} of {', '.join(counted)}")
    if not names:
        return ""
    return (
        f"The brackets of {'; '.join(names)} hold for the requests counted between the first "
        "and last scrape only: those at the window's edges could move the quantile above. "
    )


def latency(report: Report) -> Iterator[Block]:
    yield Heading(2, "Latency")
    yield Paragraph(
        "Times in ms under a second, s above. Brackets: the bucket that holds the true "
        "quantile of the window's requests, wide enough for those at its edges that no scrape "
        "counted; ≤: a quantile in the lowest bucket, known only as at most its upper bound "
        "(how observations spread from 0 is not recorded). The values before the brackets are "
        "estimated from the buckets and the exact mean (docs/quantile-estimate.md)."
    )
    rows = []
    counted_only: list[tuple[str, str, bool]] = []
    labels = HistogramSummary.labels()
    runs = [(d.deployment.name, d.of(analyses.latency).metrics()) for d in report.deployments]
    # A metric no deployment has any number of (a family not exported) is one sentence.
    absent = [
        key
        for key in dict.fromkeys(key for _, metrics in runs for key in metrics)
        if all(m.value is None for _, metrics in runs for m in metrics[key].statistics().values())
    ]
    for name, metrics in runs:
        for key, summary in metrics.items():
            if key in absent:
                continue
            for label, m in summary.quantiles().items():
                if m.bounds is not None:
                    counted_only.append((label, f"{name} {key}", summary.counted_only(label)))
            rows.append(
                (
                    name,
                    key,
                    duration_cell(summary.mean),
                    *(duration_cell(m) for m in summary.quantiles().values()),
                )
            )
    yield Table(("deployment", "metric", "mean", *(label.upper() for label in labels)), tuple(rows))
    if not report.deployments:
        return
    lead = f"No data for {' or '.join(absent)} on any deployment (no series). " if absent else ""
    lead += _counted_only(counted_only)
    yield Items(report.deployments[0].of(analyses.latency).caveats, lead + _queue_shares(report))
    for figure in ROLLING:
        yield from cite_each(report.deployments, figure, partial(rolling_caption, figure=figure))
