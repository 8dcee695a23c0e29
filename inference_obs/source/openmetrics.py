"""Raw samples written as OpenMetrics text that Prometheus backfills exactly.

The text is meant for ``promtool tsdb create-blocks-from openmetrics``
(Prometheus 2.42), whose reader has two traps this writer avoids:

* it turns a timestamp into milliseconds with ``int64(seconds * 1000)``, which
  truncates: ``1.001`` becomes 1000 ms. Timestamps that are not whole seconds
  are therefore written half a millisecond later (``1.0015`` for 1001 ms), so
  the truncation lands on the intended millisecond;
* lines of one metric family must be contiguous and samples of a series in
  time order, so series are grouped by family and each is written in one run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TextIO

import numpy as np
import numpy.typing as npt

from inference_obs.errors import DatasetError
from inference_obs.query.names import LABEL_NAME, METRIC_NAME

__all__ = ["Labels", "RawSeries", "write_openmetrics"]

# OpenMetrics 1.0 metric types.
_TYPES = frozenset(
    {"counter", "gauge", "histogram", "gaugehistogram", "stateset", "info", "summary", "unknown"}
)
# Sample-name suffixes OpenMetrics appends to a family name (counter _total and
# _created, histogram _bucket/_count/_sum, gauge histogram _gcount/_gsum, info).
_FAMILY_SUFFIXES = ("_total", "_created", "_bucket", "_count", "_sum", "_gcount", "_gsum", "_info")
# The half-millisecond trick needs seconds * 1000 to keep well under 0.5 ms of
# float64 error; 1e11 s (about year 5138) keeps it under 2e-5 ms.
_MAX_ABS_SECONDS = 1e11
# OpenMetrics label values escape exactly backslash, double quote and newline.
_LABEL_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


class Labels(Mapping[str, str]):
    """An immutable, hashable label set whose items iterate in label-name order.

    Parameters
    ----------
    labels
        Label names mapped to values, or ``(name, value)`` pairs.

    Examples
    --------
    >>> labels = Labels({"pod": "b", "model": "a"})
    >>> list(labels.items())
    [('model', 'a'), ('pod', 'b')]
    >>> labels == {"model": "a", "pod": "b"}
    True
    """

    __slots__ = ("_index", "_items")

    def __init__(self, labels: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        index = dict(labels)
        self._items: tuple[tuple[str, str], ...] = tuple(sorted(index.items()))
        self._index: dict[str, str] = dict(self._items)

    def __getitem__(self, name: str) -> str:
        return self._index[name]

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __repr__(self) -> str:
        return f"Labels({dict(self._items)!r})"


@dataclass(frozen=True, slots=True, eq=False, init=False)
class RawSeries:
    """The raw samples of one series.

    Compared by identity: numpy arrays have no single truth value, so a
    field-wise ``==`` would be ambiguous. Compare ``name``, ``labels`` and the
    arrays (``numpy.array_equal``) instead.

    Parameters
    ----------
    name
        Metric name, matching ``[a-zA-Z_:][a-zA-Z0-9_:]*``.
    labels
        Label names (``[a-zA-Z_][a-zA-Z0-9_]*``, not ``__name__``) mapped to
        non-empty values, or ``(name, value)`` pairs; stored as
        :class:`Labels`. Prometheus treats an empty value as an absent label,
        so one would not round-trip.
    timestamps
        Sample times, unix seconds, finite and strictly increasing. Stored as
        a read-only float64 copy.
    values
        Sample values (``NaN`` and infinities allowed), one per timestamp.
        Stored as a read-only float64 copy.

    Raises
    ------
    DatasetError
        If a name is invalid or the arrays do not fit; the message names the series.

    Examples
    --------
    >>> s = RawSeries("up", {"job": "vllm"}, [0.0, 15.0], [1.0, 1.0])
    >>> s.labels["job"], s.timestamps.tolist()
    ('vllm', [0.0, 15.0])
    """

    name: str
    labels: Labels
    timestamps: npt.NDArray[np.float64]
    values: npt.NDArray[np.float64]

    # A hand-written __init__ so callers may pass lists and plain mappings
    # while the fields keep their precise, validated types.
    def __init__(
        self,
        name: str,
        labels: Mapping[str, str] | Iterable[tuple[str, str]],
        timestamps: npt.ArrayLike,
        values: npt.ArrayLike,
    ) -> None:
        if not isinstance(name, str) or not METRIC_NAME.fullmatch(name):
            raise DatasetError(
                f"series {name!r}: invalid metric name; metric names match [a-zA-Z_:][a-zA-Z0-9_:]*"
            )
        pairs = dict(labels)
        where = f"series {_describe(name, pairs)}"
        for label, value in pairs.items():
            if not isinstance(label, str) or not LABEL_NAME.fullmatch(label):
                raise DatasetError(
                    f"{where}: invalid label name {label!r}; "
                    "label names match [a-zA-Z_][a-zA-Z0-9_]*"
                )
            if label == "__name__":
                raise DatasetError(f"{where}: give the metric name as `name`, not a label")
            if not isinstance(value, str) or not value:
                raise DatasetError(
                    f"{where}: label {label} needs a non-empty string value "
                    "(Prometheus drops labels with empty values)"
                )
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise DatasetError(f"{where}: label {label} is not valid UTF-8 text") from exc
        times = _frozen_float_array(timestamps, where, "timestamps")
        samples = _frozen_float_array(values, where, "values")
        if times.shape != samples.shape:
            raise DatasetError(f"{where}: {times.size} timestamps but {samples.size} values")
        if not np.all(np.isfinite(times)):
            raise DatasetError(f"{where}: timestamps must be finite")
        steps = np.diff(times)
        if np.any(steps <= 0):
            first = int(np.flatnonzero(steps <= 0)[0])
            raise DatasetError(
                f"{where}: timestamps must be strictly increasing; "
                f"{times[first]!r} is followed by {times[first + 1]!r}"
            )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "labels", Labels(pairs))
        object.__setattr__(self, "timestamps", times)
        object.__setattr__(self, "values", samples)


def write_openmetrics(
    series: Iterable[RawSeries],
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
        ``f`` and, when ``f`` is a key here, those named ``f`` plus a standard
        suffix (``_total``, ``_bucket``, ``_count``, ``_sum``, ...). A
        ``# TYPE`` line is written only for families listed here.

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
    >>> write_openmetrics([RawSeries("x", {"a": 'q"'}, [1.0, 1.001], [0.5, 1.0])], buf)
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
    families: dict[str, list[tuple[RawSeries, list[int]]]] = {}
    seen: set[tuple[str, Labels]] = set()
    for one in series:
        key = (one.name, one.labels)
        if key in seen:
            raise DatasetError(f"series {_describe(one.name, one.labels)} is given twice")
        seen.add(key)
        families.setdefault(_family(one.name, types), []).append((one, _milliseconds(one)))
    for family, members in families.items():
        if family in types:
            out.write(f"# TYPE {family} {types[family]}\n")
        for one, millis in members:
            prefix = f"{one.name}{_format_labels(one.labels)} "
            values = [_format_value(v) for v in one.values.tolist()]
            stamps = [_format_millis(m) for m in millis]
            out.write("".join(f"{prefix}{v} {t}\n" for v, t in zip(values, stamps, strict=True)))
    out.write("# EOF\n")


def _frozen_float_array(data: object, where: str, what: str) -> npt.NDArray[np.float64]:
    try:
        array = np.array(data, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DatasetError(f"{where}: {what} are not float64 numbers ({exc})") from exc
    if array.ndim != 1:
        raise DatasetError(f"{where}: {what} must be one-dimensional, got shape {array.shape}")
    array.flags.writeable = False
    return array


def _family(name: str, types: Mapping[str, str]) -> str:
    if name in types:
        return name
    for suffix in _FAMILY_SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in types:
            return name[: -len(suffix)]
    return name


def _describe(name: str, labels: Mapping[str, str]) -> str:
    inner = ", ".join(f"{k}={v!r}" for k, v in labels.items())
    return f"{name}{{{inner}}}"


def _format_labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    pairs = (f'{k}="{v.translate(_LABEL_ESCAPES)}"' for k, v in labels.items())
    return "{" + ",".join(pairs) + "}"


def _milliseconds(series: RawSeries) -> list[int]:
    """The series' timestamps as whole milliseconds, checked to stay distinct."""
    seconds = series.timestamps
    if seconds.size and np.max(np.abs(seconds)) > _MAX_ABS_SECONDS:
        raise DatasetError(
            f"series {_describe(series.name, series.labels)}: timestamps beyond "
            f"+-{_MAX_ABS_SECONDS:g} s cannot be written with millisecond precision"
        )
    millis = np.rint(seconds * 1000.0).astype(np.int64)
    collide = np.flatnonzero(np.diff(millis) <= 0)
    if collide.size:
        i = int(collide[0])
        raise DatasetError(
            f"series {_describe(series.name, series.labels)}: timestamps "
            f"{seconds[i]!r} and {seconds[i + 1]!r} fall in the same millisecond"
        )
    result: list[int] = millis.tolist()
    return result


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
