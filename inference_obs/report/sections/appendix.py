"""The appendix: every number's queries, grouped by analysis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs.analyses.registry import ANALYSES
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.wording import number
from inference_obs.report.document import Block, Code, Folded, Heading, Items, Paragraph
from inference_obs.source.view import READ_AS_FOUND

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["appendix"]


def appendix(report: Report) -> Iterator[Block]:
    yield Heading(2, "Appendix: recheck these numbers")
    yield Paragraph(
        "Every number above, by key, with the queries behind it (evaluated at the window's "
        "end) and any local arithmetic, grouped by analysis. Paste them into Prometheus to "
        "recheck."
    )
    yield from _read_as_found(report)
    groups: dict[str, list[Measurement]] = {}
    for m in report.measurements():
        groups.setdefault(m.analysis, []).append(m)
    titles = {one.name: one.title for one in ANALYSES}
    for analysis, found in groups.items():
        lines = []
        for m in found:
            lines.append(f"# {m.key} = {number(m.value, 6)} {m.unit} ({m.status.value})")
            if m.provenance.computation:
                lines.append(f"#   computed: {m.provenance.computation}")
            if m.provenance.promql_value is not None:
                # What a server returns for the first query below: the number to recheck.
                lines.append(f"#   first query returns: {number(m.provenance.promql_value, 6)}")
            lines.extend(m.provenance.promql)
            lines.append("")
        title = titles.get(analysis, analysis.replace("_", " ").capitalize())
        yield Folded(f"{title} ({len(found)} numbers)", (Code("\n".join(lines), "promql"),))


def _read_as_found(report: Report) -> Iterator[Block]:
    """What the data held that the queries were adapted to (older names, the exporter's pod
    labels, shared GPUs), once per deployment and message."""
    found = dict.fromkeys(
        f"{m.deployment}: {a.message}"
        for m in report.measurements()
        for a in m.annotations
        if a.kind in READ_AS_FOUND
    )
    if found:
        yield Paragraph("The queries below read the series as the data holds them:")
        yield Items(tuple(found))
