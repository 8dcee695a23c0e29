"""The report's "Against the baseline" section: regressions first, then every headline number."""

from __future__ import annotations

from collections.abc import Iterator

from inference_obs.reading.measurement import Bounds
from inference_obs.reading.wording import bounded, duration
from inference_obs.report.baseline import Baseline, Side
from inference_obs.report.document import Block, Heading, Items, Paragraph, Table

__all__ = ["baseline_blocks"]


def _side(s: Side | None, unit: str) -> str:
    """A value with the interval that holds it, as the other tables show them: ``≤ upper`` in
    the lowest bucket, times in ms or s with the unit in the cell."""
    if s is None:
        return "absent"
    if s.value is None:
        return s.status.replace("_", " ")
    bounds = None
    if s.lower is not None and s.upper is not None:
        bounds = Bounds(lower=s.lower, upper=s.upper)
    if unit == "seconds":
        text = duration(s.value, bounds, lowest=s.lowest_bucket)
    else:
        text = bounded(s.value, bounds, lowest=s.lowest_bucket)
    return text + (" (partial)" if s.status == "partial" else "")


def _unit(unit: str) -> str:
    """The unit column: times say theirs in the cell (ms or s), as in the verdicts table."""
    return "ms or s (in cell)" if unit == "seconds" else unit


def baseline_blocks(b: Baseline) -> Iterator[Block]:
    """The section's blocks."""
    yield Heading(2, "Against the baseline")
    windows = sorted({f"{w['start']} to {w['end']}" for w in b.previous_windows.values()})
    yield Paragraph(
        f"Every headline number against {b.source} ({b.previous_title}; {'; '.join(windows)}). "
        "A quantile changed only when the buckets holding it then and now do not overlap; an "
        "exact number when it moved by more than its tolerance. A regression is caveated when "
        "then and now are not comparable (findings below): the change happened, but may not "
        "be the service's doing. Brackets: the bucket holding a quantile; ≤: a quantile in "
        "the lowest bucket, known only as at most its upper bound."
    )
    if b.unmatched:
        yield Items(b.unmatched)
    if b.regressions:
        yield Table(
            ("deployment", "number", "then", "now", "unit", "verdict", "findings", "why"),
            tuple(
                (
                    r.deployment,
                    r.statistic,
                    _side(r.previous, r.unit),
                    _side(r.current, r.unit),
                    _unit(r.unit),
                    r.verdict,
                    ", ".join(r.findings) or "—",
                    r.reason,
                )
                for r in b.regressions
            ),
        )
    else:
        yield Paragraph("No regression: no headline number got worse beyond its bounds.")
    if b.findings:
        yield Items(tuple(f"{f.deployment}: {f.code}: {f.message}" for f in b.findings))
    for name in dict.fromkeys(c.deployment for c in b.compared):
        yield Heading(3, name)
        yield Table(
            ("number", "then", "now", "unit", "change", "why"),
            tuple(
                (
                    c.statistic,
                    _side(c.previous, c.unit),
                    _side(c.current, c.unit),
                    _unit(c.unit),
                    c.change,
                    c.reason,
                )
                for c in b.compared
                if c.deployment == name
            ),
        )
