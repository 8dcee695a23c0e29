"""The report's conclusions first (Summary) and, before the appendix, what not to conclude."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from inference_obs.report.document import Block, Heading, Items, Note, Notes, Paragraph

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["SUMMARY", "WHAT_NOT_TO_CONCLUDE", "not_to_conclude", "summary", "summary_notes"]

SUMMARY = "Summary"
WHAT_NOT_TO_CONCLUDE = "What not to conclude"


def summary_notes(report: Report) -> Notes:
    """The conclusions as ranked notes, each linked to its section and keys."""
    return Notes(
        tuple(Note(c.text, c.caveat, c.section, c.keys) for c in report.conclusions.entries)
    )


def summary(report: Report) -> Iterator[Block]:
    yield Heading(2, SUMMARY)
    notes = summary_notes(report)
    if not notes.items:
        yield Paragraph("No finding stands out: the sections below hold every number.")
        return
    yield replace(
        notes,
        lead="The findings that matter, most important first; each says what not to conclude "
        "from it and links the section and the measurement keys behind it.",
    )


def not_to_conclude(report: Report) -> Iterator[Block]:
    found = report.cautions.entries
    if not found:
        return
    yield Heading(2, WHAT_NOT_TO_CONCLUDE)
    yield Items(tuple(c.text for c in found))
