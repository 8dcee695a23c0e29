"""Raw samples written as OpenMetrics text that Prometheus backfills exactly.

The text is meant for ``promtool tsdb create-blocks-from openmetrics``
(Prometheus 2.42), whose reader has two traps this writer avoids:

* it turns a timestamp into milliseconds with ``int64(seconds * 1000)``, which
  truncates: ``1.001`` becomes 1000 ms. Timestamps that are not whole seconds
  are therefore written half a millisecond later (``1.0015`` for 1001 ms), so
  the truncation lands on the intended millisecond;
* lines of one metric family must be contiguous and samples of a series in
  time order, so series are grouped by family and each is written in one run.

The reader (:mod:`~inference_obs.source.openmetrics.reader`) reads it back;
the grammar and escaping they share are in
:mod:`~inference_obs.source.openmetrics.grammar`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TextIO

from inference_obs.errors import DatasetError
from inference_obs.query.names import METRIC_NAME
from inference_obs.samples import Labels, Series, describe
from inference_obs.source.openmetrics.grammar import TYPE_SUFFIXES, escape

__all__ = ["write_openmetrics"]

_TYPES = frozenset(TYPE_SUFFIXES)
# The half-millisecond trick needs seconds * 1000 to keep well under 0.5 ms of
# float64 error; 1e11 s (about year 5138) keeps it under 2e-5 ms.
_MAX_ABS_SECONDS = 1e11


def write_openmetrics(
    series: Iterable[Series],
    out: TextIO,
    *,
    types: Mapping[str, str] | None = None,
) -> None:
    """Write series as OpenMetrics text, ending with ``# EOF``.

    Parameters
    ----------
    series
        The series to write; each (name, labels) at most once.
    out
        Text stream to write to.
    types
        Optional metric family name -> OpenMetrics type (``counter``,
        ``gauge``, ``histogram``, ...). A family ``f`` holds the series named
        ``f`` and, when ``f`` is a key here, those named ``f`` plus a suffix
        its type owns (``_total`` and ``_created`` for a counter; ``_bucket``,
        ``_count``, ``_sum``, ``_created`` for a histogram; ...), as the reader
        groups them. A ``# TYPE`` line is written only for families listed here.

    Raises
    ------
    DatasetError
        On a repeated series, a timestamp outside +-1e11 s, two timestamps
        of one series within the same millisecond, or an unknown type.

    Notes
    -----
    Lines of one family are contiguous, series keep their first-seen order,
    and samples are in time order. Timestamps are rounded to whole
    milliseconds; whole seconds are written as integers, others half a
    millisecond late so that promtool's truncation recovers the millisecond.
    Values are Python's shortest round-tripping ``repr``, or ``NaN``,
    ``+Inf``, ``-Inf``.

    Examples
    --------
    >>> import io
    >>> buf = io.StringIO()
    >>> write_openmetrics([Series("x", {"a": 'q"'}, [1.0, 1.001], [0.5, 1.0])], buf)
    >>> print(buf.getvalue(), end="")
    x{a="q\\""} 0.5 1
    x{a="q\\""} 1.0 1.0015
    # EOF
    """
    types = dict(types or {})
    for family, kind in types.items():
        if not METRIC_NAME.fullmatch(family):
            raise DatasetError(f"types: {family!r} is not a valid metric family name")
        if kind not in _TYPES:
            raise DatasetError(
                f"types: {family} has unknown type {kind!r}; expected one of {sorted(_TYPES)}"
            )
    # Everything is checked before the first line is written, so an error
    # never leaves a truncated file behind.
    families: dict[str, list[tuple[Series, list[int]]]] = {}
    seen: set[tuple[str, Labels]] = set()
    for one in series:
        key = (one.name, one.labels)
        if key in seen:
            raise DatasetError(f"series {describe(one.name, one.labels)} is given twice")
        seen.add(key)
        families.setdefault(_family(one.name, types), []).append((one, one.t_ms.tolist()))
    for family, members in families.items():
        if family in types:
            out.write(f"# TYPE {family} {types[family]}\n")
        for one, millis in members:
            prefix = f"{one.name}{_format_labels(one.labels)} "
            values = [_format_value(v) for v in one.values.tolist()]
            stamps = [_format_millis(m) for m in millis]
            out.write("".join(f"{prefix}{v} {t}\n" for v, t in zip(values, stamps, strict=True)))
    out.write("# EOF\n")


def _family(name: str, types: Mapping[str, str]) -> str:
    if name in types:
        return name
    for family, kind in types.items():
        if name.startswith(family) and name[len(family) :] in TYPE_SUFFIXES[kind]:
            return family
    return name


def _format_labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    pairs = (f'{k}="{escape(v)}"' for k, v in labels.items())
    return "{" + ",".join(pairs) + "}"


def _format_millis(millis: int) -> str:
    sign = "-" if millis < 0 else ""
    whole, frac = divmod(abs(millis), 1000)
    if frac == 0:
        return f"{sign}{whole}"
    # int64(s * 1000) truncates toward zero; the extra half millisecond (away
    # from zero) makes it land on the intended millisecond for either sign.
    return f"{sign}{whole}.{frac:03d}5"


def _format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)
