"""The comparison verdicts between deployments, and the baseline when one was given."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs.analyses.validity.findings import Finding, Severity
from inference_obs.analyses.validity.matched_load import MatchedConcurrency
from inference_obs.analyses.validity.verdicts import ComparisonVerdict, PairValidity
from inference_obs.reading.measurement import same_bucket
from inference_obs.reading.wording import bounded, duration, duration_cell, number
from inference_obs.report.baseline_section import baseline_blocks
from inference_obs.report.document import Block, Heading, Paragraph, Table

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = [
    "LEGEND",
    "baseline",
    "compared_unit",
    "compared_value",
    "empty_comparisons",
    "standing",
    "verdicts",
]

#: How to read the compared values: the units of times, the buckets, ``≤`` and same_bucket.
LEGEND = (
    "Times in ms under a second, s above. Brackets: the bucket that holds the true "
    "quantile; ≤: a quantile in the lowest bucket, known only as at most its upper bound. "
    "Notes: same_bucket means both quantiles lie in one bucket, indistinguishable at this "
    "bucket resolution."
)


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


#: Units that say what is counted where the unit alone would not: useful output tokens, not
#: every output token (the stage boundaries' rate), and money in the price's own unit.
_UNITS = {
    "tokens_per_gpu_hour": "useful tokens/GPU-hour",
    "cost_per_token": "price units/million useful tokens",
}


#: What the comparisons of ``_UNITS`` count, said under the table that shows them.
_DEFINED = {
    "tokens_per_gpu_hour": "tokens_per_gpu_hour counts useful output tokens (defined under "
    "Cost), not every output token as the stage boundaries' output tokens per GPU-hour do.",
    "cost_per_token": "cost_per_token is in units of the GPU-hour price you gave (no currency "
    "is recorded).",
}


def compared_unit(v: ComparisonVerdict) -> str:
    """The unit column of a comparison: times carry ms or s in each cell; useful tokens and
    money say so (``_UNITS``)."""
    if v.unit == "seconds":
        return "ms or s (in cell)"
    currency = _currency(v)
    if currency is not None:  # --currency named it: the money's unit says which
        return f"{currency}/million useful tokens"
    return _UNITS.get(v.comparison, v.unit or "")


def _currency(v: ComparisonVerdict) -> str | None:
    """The currency of a cost comparison, where ``--currency`` named one (its unit's head)."""
    if v.comparison != "cost_per_token" or not v.unit or v.unit.startswith("currency"):
        return None
    return v.unit.split("/")[0]


def empty_comparisons(pair: PairValidity) -> set[str]:
    """The comparisons with no number on either side: named in a sentence, not a row."""
    return {
        v.comparison for v in pair.verdicts.values() if all(x is None for x in v.values.values())
    }


def verdicts(report: Report) -> Iterator[Block]:
    if report.validity is None:
        return
    yield Heading(2, "Comparison verdicts")
    shown = {c for p in report.validity.pairs for c in p.verdicts if c not in empty_comparisons(p)}
    defined = {**_DEFINED}
    named = {
        c
        for p in report.validity.pairs
        for v in p.verdicts.values()
        if (c := _currency(v)) is not None
    }
    if named:
        defined["cost_per_token"] = f"cost_per_token is in {', '.join(sorted(named))} (--currency)."
    yield Paragraph(" ".join((LEGEND, *(text for c, text in defined.items() if c in shown))))
    for pair in report.validity.pairs:
        if len(report.validity.pairs) > 1:
            yield Heading(3, f"{pair.a} vs {pair.b}")
        empty = empty_comparisons(pair)
        yield from _verdicts(pair, empty)
        yield from _findings(pair, empty)
        yield from _matched(pair)


def _verdicts(pair: PairValidity, empty: set[str]) -> Iterator[Block]:
    """One row per comparison with a number on some side; the ``empty`` ones (no number on
    either side) named in a sentence."""
    yield Table(
        ("comparison", "verdict", pair.a, pair.b, "unit", "findings", "notes"),
        tuple(
            (
                v.comparison,
                v.verdict.value,
                compared_value(v, pair.a),
                compared_value(v, pair.b),
                compared_unit(v),
                ", ".join(v.findings),
                ", ".join(v.notes),
            )
            for v in pair.verdicts.values()
            if v.comparison not in empty
        ),
    )
    if empty:
        names = ", ".join(c for c in pair.verdicts if c in empty)
        yield Paragraph(f"Not compared, no data on either side: {names}.")


def _findings(pair: PairValidity, empty: set[str]) -> Iterator[Block]:
    """The findings with evidence or a weight on some comparison, one row each; a note
    with neither (a standing caveat, in every verdict's notes) is named here and said in
    full under "What not to conclude"; a finding about ``empty`` comparisons only (no
    number on either side, named above) is not repeated."""
    rows = []
    for f in pair.findings:
        if standing(f) or (f.affects and set(f.affects) <= empty):
            continue
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
    if notes := [f.code for f in pair.findings if standing(f)]:
        yield Paragraph(f"Standing notes, in full under What not to conclude: {', '.join(notes)}.")


def standing(f: Finding) -> bool:
    """A note that holds whatever the data (no evidence, weighs on nothing)."""
    return not f.evidence and f.severity is Severity.INFO


def _matched(pair: PairValidity) -> Iterator[Block]:
    """Latency at matched concurrency: the families sharing one reason in one sentence."""
    by_reason: dict[str, list[str]] = {}
    for m in pair.matched:
        if m.band is None:
            by_reason.setdefault(m.reason, []).append(m.family)
    for reason, families in by_reason.items():
        yield Paragraph(f"{' and '.join(families)} at matched concurrency: {reason}.")
    for m in pair.matched:
        if m.band is None:
            continue
        yield Paragraph(f"{m.family} at matched concurrency: {m.reason}.")
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
