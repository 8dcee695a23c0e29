"""A report at a glance, as Jupyter shows it: headline numbers first, the rest on demand.

:func:`summary_html` is what ``Report._repr_html_`` returns: one small table
of each deployment's headline numbers (requests finished, time to first
token and end-to-end latency at P95 and mean, output throughput, GPU
utilisation), the verdicts of the comparisons those numbers enter, the
report's conclusions (the Summary section's findings, ranked), then the
report's figures and sections, each named with the call that shows it
(:mod:`~inference_obs.report.notebook`): tens of kilobytes, never the
megabytes of the whole report with its figures embedded.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from inference_obs.analyses import gpu, latency, throughput
from inference_obs.analyses.validity.verdicts import PairValidity
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.wording import cell, duration_cell, when
from inference_obs.report.document import Block, Heading, Paragraph, Table
from inference_obs.report.html import html_body
from inference_obs.report.notebook import on_demand_html, section_call
from inference_obs.report.sections.conclusions import summary_notes
from inference_obs.report.sections.verdicts import compared_value

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["HEADLINE_COMPARISONS", "summary", "summary_html"]

#: The comparisons of the headline numbers, in the summary's order (all are in the report).
HEADLINE_COMPARISONS = (
    "request_throughput",
    "output_throughput",
    "ttft_p95",
    "ttft_mean",
    "e2e_p95",
    "e2e_mean",
    "gpu_utilization",
)
_HEADLINE_HEADER = (
    "deployment",
    "requests finished",
    "TTFT P95",
    "TTFT mean",
    "end-to-end P95",
    "end-to-end mean",
    "output tokens/s (all replicas)",
    "GPU util % (mean)",
)


def summary(report: Report) -> tuple[Block, ...]:
    """The summary's blocks: title, scope in a line, headline numbers, verdicts, conclusions."""
    s = report.scope
    windows = sorted({f"{when(w.start)} to {when(w.end)}" for w in s.windows.values()})
    blocks: list[Block] = [
        Heading(3, report.title),
        Paragraph(
            f"{s.source} ({s.engine}; {s.rules} rules), {'; '.join(windows)}. Times in ms "
            "under a second, s above. Brackets: the bucket that holds the true quantile; ≤: a "
            "quantile in the lowest bucket, known only as at most its upper bound."
        ),
        Table(
            _HEADLINE_HEADER,
            tuple(
                (
                    d.deployment.name,
                    _count(served.finished_requests),
                    duration_cell(timed.ttft.p95),
                    duration_cell(timed.ttft.mean),
                    duration_cell(timed.e2e.p95),
                    duration_cell(timed.e2e.mean),
                    cell(served.output_tokens_per_second),
                    cell(d.of(gpu).utilization_mean),
                )
                for d in report.deployments
                for served, timed in ((d.of(throughput), d.of(latency)),)
            ),
        ),
    ]
    for pair in report.validity.pairs if report.validity is not None else ():
        blocks.extend(_verdicts(pair))
    notes = summary_notes(report)
    if notes.items:
        blocks.append(notes)
    if report.baseline is not None:
        found = len(report.baseline.regressions)
        blocks.append(Paragraph(f"Against {report.baseline.source}: {found} regression(s) found."))
    return tuple(blocks)


def _count(m: Measurement) -> str:
    """A count in whole units (``11674``, not ``1.167e+04``); its status when it has no value."""
    digits = 4 if m.value is None else max(4, len(f"{abs(m.value):.0f}"))
    return cell(m, digits=digits)


def _verdicts(pair: PairValidity) -> tuple[Block, ...]:
    """The headline comparisons of one pair, and a count of every verdict it has."""
    shown = [pair.verdicts[k] for k in HEADLINE_COMPARISONS if k in pair.verdicts]
    counts = Counter(v.verdict.value for v in pair.verdicts.values())
    tally = ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))
    return (
        Table(
            ("comparison", "verdict", pair.a, pair.b),
            tuple(
                (
                    # Times carry their unit (ms or s) in each cell.
                    v.description.removesuffix(" (seconds)"),
                    v.verdict.value + (" (same bucket)" if "same_bucket" in v.notes else ""),
                    compared_value(v, pair.a),
                    compared_value(v, pair.b),
                )
                for v in shown
            ),
        ),
        Paragraph(
            f"{pair.a} vs {pair.b}: {len(pair.verdicts)} comparisons ({tally}); each with "
            "its findings in the comparison verdicts of the whole report."
        ),
    )


def summary_html(report: Report) -> str:
    """The summary as HTML, then the figures and sections by the calls that show them.

    No figure is drawn and no section rendered: the fragment stays tens of
    kilobytes whatever the fleet (:func:`~.notebook.on_demand_html`).
    """
    return html_body(summary(report), {}, section_call) + "\n" + on_demand_html(report)
