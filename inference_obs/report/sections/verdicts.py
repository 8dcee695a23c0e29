"""The comparison verdicts between deployments, and the baseline when one was given."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs.analyses.validity.findings import Severity
from inference_obs.analyses.validity.matched_load import MatchedConcurrency
from inference_obs.analyses.validity.verdicts import ComparisonVerdict
from inference_obs.reading.measurement import same_bucket
from inference_obs.report.baseline_section import baseline_blocks
from inference_obs.report.document import (
    Block,
    Heading,
    Paragraph,
    Table,
    bounded,
    duration,
    duration_cell,
    number,
)

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["baseline", "compared_value", "verdicts"]


def compared_value(v: ComparisonVerdict, deployment: str) -> str:
    """One side's value of a comparison as a cell: with its bucket where it has one, ``≤
    upper`` in the lowest bucket, times in ms or s (the unit in the cell)."""
    value = v.values.get(deployment)
    if value is None:
        return number(value)
    bounds, lowest = v.bounds.get(deployment), deployment in v.lowest_bucket
    if v.unit == "seconds":
        return duration(value, bounds, lowest=lowest)
    return bounded(value, bounds, lowest=lowest)


def verdicts(report: Report) -> Iterator[Block]:
    if report.validity is None:
        return
    yield Heading(2, "Comparison verdicts")
    yield Paragraph(
        "Times in ms under a second, s above. Brackets: the bucket that holds the true "
        "quantile; ≤: a quantile in the lowest bucket, known only as at most its upper bound. "
        "Notes: same_bucket means both quantiles lie in one bucket, indistinguishable at this "
        "bucket resolution."
    )
    for pair in report.validity.pairs:
        yield Heading(3, f"{pair.a} vs {pair.b}")
        yield Table(
            ("comparison", "verdict", pair.a, pair.b, "unit", "findings", "notes"),
            tuple(
                (
                    v.comparison,
                    v.verdict.value,
                    compared_value(v, pair.a),
                    compared_value(v, pair.b),
                    "ms or s (in cell)" if v.unit == "seconds" else v.unit or "",
                    ", ".join(v.findings),
                    ", ".join(v.notes),
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
                    ", ".join(affected) or f"(notes only: {', '.join(f.affects)})",
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
                        (
                            name,
                            str(m.intervals[name]),
                            duration_cell(q["p50"]),
                            duration_cell(q["p95"]),
                        )
                        for name, q in m.quantiles.items()
                    ),
                )
                yield from _same_buckets(m)


def _same_buckets(m: MatchedConcurrency) -> Iterator[Block]:
    """Say where both sides' matched quantiles lie in one bucket (indistinguishable)."""
    sides = list(m.quantiles.values())
    for label in ("p50", "p95"):
        bucket = same_bucket(*(q.get(label) for q in sides)) if len(sides) == 2 else None
        if bucket is not None:
            yield Paragraph(
                f"{label.upper()}: both lie in the bucket from {duration(bucket.lower)} to "
                f"{duration(bucket.upper)} (same_bucket): indistinguishable at this bucket "
                "resolution."
            )


def baseline(report: Report) -> Iterator[Block]:
    if report.baseline is not None:
        yield from baseline_blocks(report.baseline)
