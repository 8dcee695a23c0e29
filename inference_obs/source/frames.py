"""API JSON -> numpy columns and pandas frames, without one Python object per point.

The HTTP API returns each point as ``[unix_seconds, "value"]`` with values as
strings (``"1.5"``, ``"NaN"``, ``"+Inf"``). After ``json.loads`` the points of
all series are flattened into one list with :func:`itertools.chain` and
converted column-wise by numpy (``astype(float64)`` parses the strings in C,
including ``NaN`` and ``±Inf``); Python runs one step per *series*, never per
point.

Timestamps are rounded to whole milliseconds, as Prometheus stores them.

:func:`parse_matrix_body` skips ``json.loads`` for the points altogether: it
walks the raw body bytes of a compactly encoded matrix answer (as Prometheus
writes it), JSON-decodes only each series' ``metric`` object and the envelope,
and hands the ``values`` arrays of all series to pandas' C number parser in one
call. Anything it does not recognise sends it back to the ``json.loads`` path.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from functools import cache
from itertools import chain
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from inference_obs.errors import Annotation, MalformedAnswer
from inference_obs.samples import NAME, Floats, Ints, Labels, Matrix, SampleSet, Vector

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MATRIX_BODY_PREFIX",
    "MalformedAnswer",
    "parse_matrix",
    "parse_matrix_body",
    "parse_raw",
    "parse_scalar",
    "parse_vector",
    "raw_samples",
    "to_frame",
    "to_wide_frame",
]

_Unit = Literal["s", "ms", "us", "ns"]
# Prometheus keeps int64 milliseconds: larger times cannot come from a real server.
_MAX_ABS_SECONDS = 9.2e15


def _milliseconds(seconds: Floats) -> Ints:
    """Unix seconds -> int64 ms; a NaN, infinite or out-of-range time is refused.

    A cast alone would turn NaN or 1e300 into INT64_MIN and shift a sample to
    the year -292 million without a word.
    """
    bad = ~(np.abs(seconds) <= _MAX_ABS_SECONDS)  # NaN compares False
    if bad.any():
        raise MalformedAnswer(f"timestamp {seconds[bad][0]!r} is not a time a server can hold")
    return np.rint(seconds * 1000.0).astype(np.int64)


def _columns(points: Sequence[Any], count: int) -> tuple[Ints, Floats]:
    """``count`` ``[t, "v"]`` pairs (a list of lists) -> (t_ms int64, values float64)."""
    # Each point must be a pair: flattened, a third item would be read as the
    # next point's time and shift every point after it (C loops, not Python's).
    if count and (
        set(map(type, points)) != {list}
        or (np.fromiter(map(len, points), dtype=np.int64, count=count) != 2).any()
    ):
        raise MalformedAnswer("a point is not a [time, value] pair")
    flat = np.fromiter(chain.from_iterable(points), dtype=object, count=2 * count)
    seconds = flat[0::2].astype(np.float64)
    values = flat[1::2].astype(np.float64)
    return _milliseconds(seconds), values


def parse_vector(result: list[Any], annotations: tuple[Annotation, ...] = ()) -> Vector:
    """An instant query's ``vector`` result -> :class:`Vector` (``__name__`` kept).

    Examples
    --------
    >>> v = parse_vector([{"metric": {"__name__": "up"}, "value": [1.0, "1"]}])
    >>> v.as_dict()
    {Labels({'__name__': 'up'}): 1.0}
    """
    labels = tuple(Labels(one["metric"]) for one in result)
    _, values = _columns([one["value"] for one in result], len(result))
    return Vector(labels, values, annotations)


def parse_scalar(result: list[Any]) -> float:
    """A ``scalar`` result ``[t, "v"]`` -> float.

    >>> parse_scalar([1.0, "+Inf"])
    inf
    """
    return float(result[1])


def parse_matrix(
    result: list[Any], promql: str = "", annotations: tuple[Annotation, ...] = ()
) -> Matrix:
    """A ``matrix`` result -> :class:`Matrix` (columnar; series in the API's order).

    Examples
    --------
    >>> m = parse_matrix([{"metric": {"job": "a"}, "values": [[1, "1"], [2, "NaN"]]}])
    >>> m.t_ms.tolist(), m.values.tolist()
    ([1000, 2000], [1.0, nan])
    """
    sizes = np.fromiter((len(one["values"]) for one in result), dtype=np.int64, count=len(result))
    offsets = np.zeros(len(result) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    t_ms, values = _columns(list(chain.from_iterable(one["values"] for one in result)), total)
    labels = tuple(Labels(one["metric"]) for one in result)
    return Matrix(labels, offsets, t_ms, values, promql, annotations)


#: How a compact Prometheus matrix answer starts: the fast path reads only these.
MATRIX_BODY_PREFIX = b'{"status":"success","data":{"resultType":"matrix","result":['
_METRIC = b'{"metric":'
_VALUES = b',"values":['
# Values sections -> one number per line: drop brackets and quotes, commas become newlines.
_TO_LINES = bytes.maketrans(b",", b"\n")
_DROP = b'[]"'


def parse_matrix_body(
    body: bytes, promql: str = "", annotations: tuple[Annotation, ...] = ()
) -> tuple[Matrix, dict[str, Any]]:
    """A range query's raw response body -> (:class:`Matrix`, envelope).

    The envelope is the decoded body with ``data.result`` replaced by ``[]``
    (``status``, ``warnings``, ``infos`` and whatever else the server sent).
    The result equals ``parse_matrix(json.loads(body)["data"]["result"], ...)``;
    bodies in Prometheus' compact encoding are read without building a Python
    object per point, any other body goes through ``json.loads``.

    Raises :class:`~inference_obs.errors.MalformedAnswer` when the body is JSON
    but not a successful ``matrix`` answer, or a point cannot be data, and
    :class:`json.JSONDecodeError` (a ValueError) when it is not JSON (a
    truncated body, which a client may ask again).

    Examples
    --------
    >>> body = b'{"status":"success","data":{"resultType":"matrix","result":['
    >>> body += b'{"metric":{"job":"a"},"values":[[1,"1"],[2.5,"NaN"]]}]}}'
    >>> m, envelope = parse_matrix_body(body)
    >>> m.t_ms.tolist(), m.values.tolist(), envelope["data"]["result"]
    ([1000, 2500], [1.0, nan], [])
    """
    fast = _fast_matrix(body, promql, annotations)
    if fast is not None:
        return fast
    envelope = json.loads(body)
    data = _matrix_data(envelope)
    matrix = parse_matrix(data["result"], promql, annotations)
    data["result"] = []
    return matrix, envelope


def _matrix_data(envelope: Any) -> dict[str, Any]:
    """``envelope["data"]`` of a successful matrix answer, else MalformedAnswer."""
    if not isinstance(envelope, dict):
        raise MalformedAnswer(f"a JSON {type(envelope).__name__}, not a Prometheus API answer")
    if envelope.get("status") != "success":
        raise MalformedAnswer(
            f"not a successful Prometheus query response (status "
            f"{str(envelope.get('status'))[:40]!r}): only a 'success' answer holds a matrix"
        )
    data = envelope.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise MalformedAnswer("query response without a data.result list")
    if data.get("resultType") != "matrix":
        raise MalformedAnswer(
            f"result type {data.get('resultType')!r} is not matrix: "
            "parse_matrix_body reads the answers of range queries and range selectors"
        )
    return data


def _fast_matrix(
    body: bytes, promql: str, annotations: tuple[Annotation, ...]
) -> tuple[Matrix, dict[str, Any]] | None:
    """The byte-level path, or None where the body is not in the expected compact form.

    Inside a JSON string every ``"`` is escaped, so ``{"metric":`` and
    ``,"values":[`` (a structural character followed by an unescaped quote)
    only occur as structure. A ``values`` array holds ``[t,"v"]`` pairs of
    numbers and no ``{``, so it ends before ``]]},{"metric":`` (or ``]]}]`` for
    the last series). Every assumption is checked.
    """
    if not body.startswith(MATRIX_BODY_PREFIX):
        return None
    pos = len(MATRIX_BODY_PREFIX)
    metrics: list[Any] = []
    flats: list[bytes] = []
    sizes: list[int] = []
    if body.startswith(b"]", pos):
        end = pos
    else:
        while True:
            if not body.startswith(_METRIC, pos):
                return None
            start = pos + len(_METRIC)
            lo = body.find(_VALUES, start)
            if lo < 0:
                return None
            try:
                metric = json.loads(body[start:lo])
            except ValueError:
                return None
            if not isinstance(metric, dict):
                return None
            lo += len(_VALUES)
            if body.startswith(b"]}", lo):  # "values":[]
                hi, size = lo, 0
            else:
                # A long needle: bytes.find skips through the section instead of testing each byte.
                hi = body.find(b']]},{"metric":', lo)
                if hi < 0:
                    hi = body.find(b"]]}]", lo)
                    if hi < 0:
                        return None
                hi += 1  # keep the last pair's "]"
                section = body[lo:hi]
                lines = section.translate(_TO_LINES, _DROP)
                breaks = lines.count(b"\n")
                size = (breaks + 1) // 2
                # n pairs: n-1 separators and n inner commas; one "[", one "]", two quotes each.
                if (
                    breaks % 2 == 0
                    or len(section) - len(lines) != 4 * size
                    or not section.startswith(b"[")
                    or not section.endswith(b'"]')
                ):
                    return None
                flats.append(lines)
            if not body.startswith(b"]}", hi):
                return None
            metrics.append(metric)
            sizes.append(size)
            pos = hi + 2
            if body.startswith(b",", pos):
                pos += 1
            elif body.startswith(b"]", pos):
                end = pos
                break
            else:
                return None
    try:
        envelope = json.loads(body[: len(MATRIX_BODY_PREFIX)] + body[end:])
        data = _matrix_data(envelope)
    except (ValueError, TypeError):
        return None
    points = _points(flats, sum(sizes))
    if points is None:
        return None
    t_ms, values = points
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(np.asarray(sizes, dtype=np.int64), out=offsets[1:])
    labels = tuple(Labels(one) for one in metrics)
    data["result"] = []
    return Matrix(labels, offsets, t_ms, values, promql, annotations), envelope


def _points(flats: list[bytes], total: int) -> tuple[Ints, Floats] | None:
    """The ``total`` time/value pairs of the sections' lines (one number a line), parsed by
    pandas' C reader; None where they are not exactly that many numbers."""
    if not total:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    import pandas as pd  # here, not at the top: `import inference_obs` stays free of pandas

    # pandas >= 3 parses floats correctly rounded by default (and deprecates the option).
    floats: dict[str, Any] = (
        {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
    )
    try:
        numbers = pd.read_csv(
            io.BytesIO(b"\n".join(flats)),
            header=None,
            names=["n"],
            dtype=np.float64,
            engine="c",
            keep_default_na=False,
            na_values=["NaN"],
            skip_blank_lines=False,
            **floats,
        )["n"].to_numpy(dtype=np.float64)
    except (ValueError, pd.errors.ParserError):
        return None
    if numbers.shape != (2 * total,):
        return None
    return _milliseconds(numbers[0::2]), np.ascontiguousarray(numbers[1::2])


def parse_raw(result: list[Any], start_ms: int | None = None) -> SampleSet:
    """A range selector's ``matrix`` result -> :class:`SampleSet` of raw samples.

    ``__name__`` becomes the series name and leaves the labels; samples before
    ``start_ms`` (unix ms) are dropped when it is given.
    """
    return raw_samples(parse_matrix(result), start_ms)


def raw_samples(matrix: Matrix, start_ms: int | None = None) -> SampleSet:
    """A range selector's :class:`Matrix` as a :class:`SampleSet` (see :func:`parse_raw`)."""
    t_ms, values, offsets = matrix.t_ms, matrix.values, matrix.offsets
    if start_ms is not None:
        keep = t_ms >= start_ms
        counts = np.add.reduceat(keep.astype(np.int64), offsets[:-1]) if t_ms.size else None
        sizes = np.diff(offsets)
        if counts is not None:
            # reduceat returns the element at an empty segment's start: zero those.
            counts = np.where(sizes > 0, counts, 0)
            offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        t_ms, values = t_ms[keep], values[keep]
    names = tuple(one.get(NAME, "") for one in matrix.labels)
    labels = tuple(Labels((k, v) for k, v in one.items() if k != NAME) for one in matrix.labels)
    for array in (offsets, t_ms, values):
        array.flags.writeable = False
    return SampleSet(names, labels, offsets, t_ms, values)


def to_frame(matrix: Matrix) -> pd.DataFrame:
    """A :class:`Matrix` as a long pandas frame: one row per point.

    A ``timestamp`` column (UTC, timezone-aware), a ``value`` column
    (float64) and one categorical column per label name (missing labels are
    NaN). :func:`to_wide_frame` gives one column per series instead.

    Examples
    --------
    >>> m = parse_matrix([{"metric": {"job": "a"}, "values": [[1, "1"], [2, "2"]]}])
    >>> to_frame(m).columns.tolist()
    ['timestamp', 'value', 'job']
    """
    import pandas as pd  # here, not at the top: `import inference_obs` stays free of pandas

    sizes = np.diff(matrix.offsets)
    data: dict[str, Any] = {"timestamp": _utc_times(matrix.t_ms), "value": matrix.values}
    plain = [dict(one.items()) for one in matrix.labels]  # dict lookups, not Mapping.get
    for name in sorted({k for one in plain for k in one}):
        per_series = [one.get(name) for one in plain]
        categories = sorted({v for v in per_series if v is not None})
        lookup = {v: i for i, v in enumerate(categories)}
        # Codes in the width pandas itself would choose (no conversion of a
        # point-sized array afterwards), repeated over each series' points.
        codes = np.array(
            [lookup.get(v, -1) if v is not None else -1 for v in per_series],
            dtype=_codes_dtype(len(categories)),
        )
        # The codes lie in -1 .. len(categories) - 1 by construction: no need to check them.
        data[name] = pd.Categorical.from_codes(
            np.repeat(codes, sizes), categories=pd.Index(categories), validate=False
        )
    # Every column is built here for this frame alone: pandas need not copy them again.
    return pd.DataFrame(data, copy=False)


def to_wide_frame(matrix: Matrix) -> pd.DataFrame:
    """A :class:`Matrix` as a wide pandas frame: one column per series.

    Indexed by ``timestamp`` (UTC, timezone-aware); each column is a series,
    named by its labels as ``{k='v', ...}``, NaN where it has no point.
    :func:`to_frame` gives one row per point instead.

    Examples
    --------
    >>> m = parse_matrix([{"metric": {"job": "a"}, "values": [[1, "1"], [2, "2"]]}])
    >>> to_wide_frame(m).columns.tolist(), to_wide_frame(m).shape
    (["{job='a'}"], (2, 1))
    """
    import pandas as pd  # here, not at the top: `import inference_obs` stays free of pandas

    timestamps = pd.to_datetime(matrix.t_ms, unit="ms", utc=True)
    names = [_series_name(one) for one in matrix.labels]
    columns = {
        name: pd.Series(matrix.values[lo:hi], index=timestamps[lo:hi], dtype=np.float64)
        for name, lo, hi in zip(names, matrix.offsets[:-1], matrix.offsets[1:], strict=True)
    }
    frame = pd.DataFrame(columns) if columns else pd.DataFrame(index=timestamps[:0])
    frame.index.name = "timestamp"
    return frame


def _utc_times(t_ms: Ints) -> pd.DatetimeIndex:
    """Unix ms -> timezone-aware UTC times, in the unit ``pd.to_datetime(unit="ms")`` gives.

    Integers in the unit, read as UTC epoch times (one multiplication, no
    per-element conversion and no localisation: a fifth of
    ``pd.to_datetime``'s cost); times the unit cannot hold go to
    ``pd.to_datetime``, which refuses them.
    """
    import pandas as pd  # here, not at the top: `import inference_obs` stays free of pandas

    unit = _time_unit()
    per_ms = {"s": 0, "ms": 1, "us": 1_000, "ns": 1_000_000}.get(unit, 0)
    limit = np.iinfo(np.int64).max // per_ms if per_ms else 0
    if not t_ms.size or (per_ms and -limit <= int(t_ms.min()) and int(t_ms.max()) <= limit):
        return pd.DatetimeIndex(t_ms * per_ms, dtype=pd.DatetimeTZDtype(unit, "UTC"))
    return pd.to_datetime(t_ms, unit="ms", utc=True)


@cache
def _time_unit() -> _Unit:
    """The unit this pandas gives unix milliseconds (``ns`` before pandas 3, ``us`` after)."""
    import pandas as pd  # here, not at the top: `import inference_obs` stays free of pandas

    return pd.to_datetime(np.zeros(1, dtype=np.int64), unit="ms", utc=True).unit


def _codes_dtype(categories: int) -> type[np.signedinteger[Any]]:
    """The narrowest signed integer holding codes ``-1 .. categories - 1``, as pandas picks it."""
    for dtype in (np.int8, np.int16, np.int32):
        if categories < np.iinfo(dtype).max:
            return dtype
    return np.int64


def _series_name(labels: Labels) -> str:
    return "{" + ", ".join(f"{k}={v!r}" for k, v in labels.items()) + "}"
