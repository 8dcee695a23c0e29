"""The report as a list of blocks, so Markdown and HTML render the same content.

A block is a heading, a paragraph, a list, a table, a figure reference or
a code listing; :mod:`~.sections` builds them from a report and the
renderers only lay them out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from inference_obs.reading.measurement import Measurement, Status

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
    "when",
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


def number(value: float | None, digits: int = 4) -> str:
    """A value as people read it in a table: ``digits`` significant digits, never an exponent.

    Values of 1,000 and more are whole numbers with thousands separators (a
    count or a rate that large gains nothing from decimals); smaller ones keep
    ``digits`` significant digits in fixed notation. None and NaN read as an
    em dash.

    Examples
    --------
    >>> number(68590.4), number(193987.2), number(5814.54), number(0.0079480), number(1.5e-05)
    ('68,590', '193,987', '5,815', '0.007948', '0.00001500')
    >>> number(None), number(float("nan")), number(0.0), number(-2.5), number(float("inf"))
    ('—', '—', '0', '-2.5', '∞')
    """
    if value is None or math.isnan(value):
        return "—"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if value == 0:
        return "0"
    if abs(value) >= 1000 or abs(round(value)) >= 1000:
        return f"{round(value):,}"
    text = f"{value:.{digits}g}"
    if "e" in text:
        decimals = digits - 1 - math.floor(math.log10(abs(value)))
        text = f"{value:.{decimals}f}"
    return text


def when(moment: datetime) -> str:
    """A timestamp to the second, in its own time zone (``2026-10-19 17:55:26+08:00``).

    Scrape times carry milliseconds nobody reads; the second is rounded, not cut.

    Examples
    --------
    >>> from datetime import timezone
    >>> when(datetime(2026, 10, 19, 9, 55, 25, 666000, tzinfo=timezone(timedelta(hours=8))))
    '2026-10-19 09:55:26+08:00'
    """
    rounded = (moment + timedelta(microseconds=500_000)).replace(microsecond=0)
    return rounded.isoformat(sep=" ")


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
