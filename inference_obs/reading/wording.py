"""How a report's sentences and tables say a number: significant digits, units, buckets.

One function per way of saying a Measurement (a table cell, a duration in ms or s,
a share as a percent, a p-value, a timestamp, a quantity in a sentence), shared by
the analyses that word their findings and by the report's renderers, so a number
reads the same wherever it is shown.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from inference_obs.reading.measurement import (
    OUT_OF_RANGE,
    Bounds,
    Measurement,
    Status,
    in_lowest_bucket,
)

__all__ = [
    "SMALLEST_P",
    "bounded",
    "cell",
    "duration",
    "duration_cell",
    "number",
    "p_cell",
    "p_is",
    "quantity",
    "share_cell",
    "when",
]

#: Smallest p-value shown as a number: a smaller one reads "< 0.0001", as p-values are
#: reported, rather than "0" (the test never gives exactly 0) or a run of zeros.
SMALLEST_P = 1e-4
#: Units a sentence shortens.
_UNITS = {"seconds": "s"}


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


def bounded(
    value: float,
    bounds: Bounds | None = None,
    *,
    lowest: bool = False,
    scale: float = 1.0,
    unit: str = "",
    digits: int = 4,
) -> str:
    """A value with the interval that holds it: ``"0.3026 [0.25, 0.5]"``.

    ``lowest`` (a quantile in its histogram's lowest bucket) shows only what
    is known, ``"≤ upper"``, not the value interpolated from 0. ``scale``
    multiplies value and bounds; ``unit``, when given, follows the value.
    Exact values (bounds equal) show no interval.

    Examples
    --------
    >>> bounded(0.3026, Bounds(lower=0.25, upper=0.5))
    '0.3026 [0.25, 0.5]'
    >>> bounded(0.5012, Bounds(lower=0, upper=1), lowest=True)
    '≤ 1'
    """
    suffix = f" {unit}" if unit else ""
    if lowest and bounds is not None:
        return f"≤ {number(bounds.upper * scale, 3)}{suffix}"
    text = number(value * scale, digits) + suffix
    if bounds is not None and bounds.lower != bounds.upper:
        lower, upper = number(bounds.lower * scale, 3), number(bounds.upper * scale, 3)
        text += f" [{lower}, {upper}]"
    return text


def duration(
    seconds: float, bounds: Bounds | None = None, *, lowest: bool = False, digits: int = 4
) -> str:
    """A time in seconds as people read it: milliseconds under a second, seconds from one.

    The unit is in the text, after the value and before the bucket (in the
    same unit), so a column may mix both without misreading; no exponents
    (:func:`number`). The unit follows what is shown: the value, or the
    upper bound for a quantile in the lowest bucket (``lowest``).

    Examples
    --------
    >>> duration(0.007948, Bounds(lower=0.005, upper=0.01)), duration(2.709), duration(0.0004)
    ('7.948 ms [5, 10]', '2.709 s', '0.4 ms')
    >>> duration(22.44, Bounds(lower=20, upper=40)), duration(80, Bounds(lower=80, upper=math.inf))
    ('22.44 s [20, 40]', '80 s [80, ∞]')
    >>> at_most_1, at_most_quarter = Bounds(lower=0, upper=1), Bounds(lower=0, upper=0.25)
    >>> duration(0.5012, at_most_1, lowest=True), duration(0.15, at_most_quarter, lowest=True)
    ('≤ 1 s', '≤ 250 ms')
    """
    shown = bounds.upper if lowest and bounds is not None else seconds
    milli = math.isfinite(shown) and abs(shown) < 1
    scale, unit = (1000.0, "ms") if milli else (1.0, "s")
    return bounded(seconds, bounds, lowest=lowest, scale=scale, unit=unit, digits=digits)


def _without_value(m: Measurement) -> str:
    """The cell of a Measurement without a value: its status, or why a value was refused."""
    if any(a.kind == OUT_OF_RANGE for a in m.annotations):
        return "out of range"
    return m.status.value.replace("_", " ")


def cell(m: Measurement | None, scale: float = 1.0, digits: int = 4) -> str:
    """A Measurement as a table cell: value (with bounds), or its status when it has none.

    ``scale`` multiplies value and bounds (e.g. 1000 for milliseconds). A
    quantile in the lowest bucket reads ``≤ upper`` (:func:`bounded`).
    """
    if m is None:
        return "—"
    if m.value is None:
        return _without_value(m)
    text = bounded(m.value, m.bounds, lowest=in_lowest_bucket(m), scale=scale, digits=digits)
    return text + (" (partial)" if m.status is Status.PARTIAL else "")


def duration_cell(m: Measurement | None, digits: int = 4) -> str:
    """A Measurement in seconds as a table cell in ms or s (:func:`duration`), with its bucket;
    its status when it has no value."""
    if m is None:
        return "—"
    if m.value is None:
        return _without_value(m)
    text = duration(m.value, m.bounds, lowest=in_lowest_bucket(m), digits=digits)
    return text + (" (partial)" if m.status is Status.PARTIAL else "")


def p_cell(m: Measurement | None) -> str:
    """A p-value as a table cell: four significant digits, or ``< 0.0001`` below that.

    Examples
    --------
    >>> from inference_obs.reading.measurement import Measurement
    >>> p = Measurement.model_construct(value=5.845e-4, status=Status.OK, bounds=None)
    >>> tiny = Measurement.model_construct(value=0.0, status=Status.OK, bounds=None)
    >>> p_cell(p), p_cell(tiny), p_is(p), p_is(tiny)
    ('0.0005845', '< 0.0001', 'p = 0.0005845', 'p < 0.0001')
    """
    if m is None or m.value is None or m.value >= SMALLEST_P:
        return cell(m)
    return f"< {SMALLEST_P:g}" + (" (partial)" if m.status is Status.PARTIAL else "")


def p_is(m: Measurement | None) -> str:
    """A p-value in a sentence: ``p = 0.0005845``, ``p < 0.0001``, or ``p: no data``."""
    shown = p_cell(m)
    if shown.startswith("<"):
        return f"p {shown}"
    return f"p = {shown}" if m is not None and m.value is not None else f"p: {shown}"


def share_cell(m: Measurement | None, digits: int = 4) -> str:
    """A share (a ratio from 0 to 1) as a percent: ``53.33%``; its status when it has no value.

    Examples
    --------
    >>> from inference_obs.reading.measurement import Measurement
    >>> share = Measurement.model_construct(value=0.748, status=Status.OK, bounds=None)
    >>> nothing = Measurement.model_construct(value=None, status=Status.NO_DATA, bounds=None)
    >>> share_cell(share), share_cell(nothing)
    ('74.8%', 'no data')
    """
    if m is None or m.value is None:
        return cell(m)
    text = f"{number(m.value * 100, digits)}%"
    if m.bounds is not None and m.bounds.lower != m.bounds.upper:
        text += f" [{number(m.bounds.lower * 100, 3)}%, {number(m.bounds.upper * 100, 3)}%]"
    return text + (" (partial)" if m.status is Status.PARTIAL else "")


def quantity(m: Measurement) -> str:
    """A Measurement as a sentence shows it: value (bucket in brackets), short unit.

    Times read in ms under a second and s above, the unit after the value as in
    the tables (:func:`duration_cell`); percent
    reads ``%``; a Measurement without a value reads its status (``no data``).
    """
    if m.unit == "seconds":
        return duration_cell(m)
    text = cell(m)
    if m.value is None:
        return text
    return f"{text}%" if m.unit == "percent" else f"{text} {_UNITS.get(m.unit, m.unit)}"
