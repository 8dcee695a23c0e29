"""The report as a list of blocks, so Markdown and HTML render the same content.

A block is a heading, a paragraph, a list, a table, a figure reference or
a code listing; :mod:`~.sections` builds them from a report and the
renderers only lay them out.
"""

from __future__ import annotations

from dataclasses import dataclass

from inference_obs.reading.measurement import Measurement, Status
from inference_obs.reading.result import format_number as number

__all__ = [
    "Block",
    "Code",
    "FigureRef",
    "Heading",
    "Items",
    "Paragraph",
    "Table",
    "cell",
    "number",
]


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True, slots=True)
class Paragraph:
    text: str


@dataclass(frozen=True, slots=True)
class Items:
    items: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class FigureRef:
    """A figure by name (``figures/<name>.png``) and its caption."""

    name: str
    caption: str


@dataclass(frozen=True, slots=True)
class Code:
    text: str
    language: str = ""


Block = Heading | Paragraph | Items | Table | FigureRef | Code


def cell(m: Measurement | None, scale: float = 1.0, digits: int = 4) -> str:
    """A Measurement as a table cell: value (with bounds), or its status when it has none.

    ``scale`` multiplies value and bounds (e.g. 1000 for milliseconds).
    """
    if m is None:
        return "—"
    if m.value is None:
        return m.status.value.replace("_", " ")
    text = number(m.value * scale, digits)
    if m.bounds is not None and m.bounds.lower != m.bounds.upper:
        lower, upper = number(m.bounds.lower * scale, 3), number(m.bounds.upper * scale, 3)
        text += f" [{lower}, {upper}]"
    if m.status is Status.PARTIAL:
        text += " (partial)"
    return text
