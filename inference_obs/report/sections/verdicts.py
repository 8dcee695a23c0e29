"""The comparison verdicts between deployments, and the baseline when one was given."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs.analyses.validity.findings import Severity
from inference_obs.report.baseline_section import baseline_blocks
from inference_obs.report.document import Block, Heading, Paragraph, Table, cell, number

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["baseline", "verdicts"]


def verdicts(report: Report) -> Iterator[Block]:
    if report.validity is None:
        return
    yield Heading(2, "Comparison verdicts")
    for pair in report.validity.pairs:
        yield Heading(3, f"{pair.a} vs {pair.b}")
        yield Table(
            ("comparison", "verdict", pair.a, pair.b, "unit", "findings"),
            tuple(
                (
                    v.comparison,
                    v.verdict.value,
                    number(v.values.get(pair.a)),
                    number(v.values.get(pair.b)),
                    v.unit or "",
                    ", ".join(v.findings),
                )
                for v in pair.verdicts.values()
            ),
        )
        rows = []
        for f in pair.findings:
            evidence = "; ".join(
                f"{e.statistic}: "
                + ", ".join(
                    f"{k} {number(v) if isinstance(v, float) else v}" for k, v in e.values.items()
                )
                for e in f.evidence
            )
            affected = [k for k, s in f.affects.items() if s is not Severity.INFO]
            rows.append(
                (
                    f.code,
                    f.severity.value,
                    f.message,
                    evidence or "—",
                    ", ".join(affected) or "(notes only)",
                    f.how_to_compare or "",
                )
            )
        yield Table(
            ("finding", "severity", "what", "evidence", "weighs on", "fair comparison"), tuple(rows)
        )
        for m in pair.matched:
            yield Paragraph(f"{m.family} at matched concurrency: {m.reason}.")
            if m.band is not None:
                yield Table(
                    ("deployment", "intervals", "P50", "P95"),
                    tuple(
                        (name, str(m.intervals[name]), cell(q["p50"]), cell(q["p95"]))
                        for name, q in m.quantiles.items()
                    ),
                )


def baseline(report: Report) -> Iterator[Block]:
    if report.baseline is not None:
        yield from baseline_blocks(report.baseline)
