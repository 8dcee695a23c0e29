"""What happened: the time line's events, the most severe first, right after the Summary."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs.analyses.timeline import Event
from inference_obs.reading.wording import when
from inference_obs.report.document import Block, Heading, Paragraph, Table

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["ROWS", "WHAT_HAPPENED", "what_happened"]

WHAT_HAPPENED = "What happened"
#: Events the table shows, the most severe; the rest are in report.json, so the section
#: stays a few lines (an hour of bursts on a few replicas is dozens of events).
ROWS = 5


def _time(e: Event) -> str:
    """When it was first seen, and until when (the time of day where the date is the same)."""
    first, last = when(e.start), when(e.end)
    if first == last:
        return first
    same_day = first[:10] == last[:10] and first[19:] == last[19:]
    return f"{first} to {last[11:19] if same_day else last}"


def what_happened(report: Report) -> Iterator[Block]:
    yield Heading(2, WHAT_HAPPENED)
    events = report.timeline.events
    if not events:
        yield Paragraph(
            "The series show no stall, restart, scrape gap, stopped GPU, queue or latency "
            "spike in the window."
        )
        return
    yield Paragraph(
        "Events the series show, the most severe first: times are the scrapes that showed "
        "them (a gap: the samples either side); what overlaps on one replica is one event."
    )
    rows = tuple(
        (_time(e), e.deployment, e.replicas_named(), e.kind.words, e.text) for e in events[:ROWS]
    )
    yield Table(("time", "deployment", "replicas", "kind", "what"), rows)
    if len(events) > ROWS:
        yield Paragraph(f"And {len(events) - ROWS} more events in report.json (`timeline`).")
