"""API JSON -> numpy columns and pandas frames, without one Python object per point.

The HTTP API returns each point as ``[unix_seconds, "value"]`` with values as
strings (``"1.5"``, ``"NaN"``, ``"+Inf"``). After ``json.loads`` the points of
all series are flattened into one list with :func:`itertools.chain` and
converted column-wise by numpy (``astype(float64)`` parses the strings in C,
including ``NaN`` and ``±Inf``); Python runs one step per *series*, never per
point.

Timestamps are rounded to whole milliseconds, as Prometheus stores them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from inference_obs.engine.vector import NAME, Vector
from inference_obs.errors import Annotation
from inference_obs.samples import Labels, SampleSet
from inference_obs.source.base import Matrix

__all__ = ["parse_matrix", "parse_raw", "parse_scalar", "parse_vector", "to_frame"]

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


def _columns(points: Sequence[Any], count: int) -> tuple[Ints, Floats]:
    """``count`` ``[t, "v"]`` pairs (an iterable of lists) -> (t_ms int64, values float64)."""
    flat = np.fromiter(chain.from_iterable(points), dtype=object, count=2 * count)
    seconds = flat[0::2].astype(np.float64)
    values = flat[1::2].astype(np.float64)
    t_ms = np.rint(seconds * 1000.0).astype(np.int64)
    return t_ms, values


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


def parse_raw(result: list[Any], start_ms: int | None = None) -> SampleSet:
    """A range selector's ``matrix`` result -> :class:`SampleSet` of raw samples.

    ``__name__`` becomes the series name and leaves the labels; samples before
    ``start_ms`` (unix ms) are dropped when it is given.
    """
    matrix = parse_matrix(result)
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


def to_frame(matrix: Matrix, *, wide: bool = False) -> pd.DataFrame:
    """A :class:`Matrix` as a pandas frame.

    Long (default): one row per point with a ``timestamp`` column (UTC,
    timezone-aware), a ``value`` column (float64) and one categorical column
    per label name (missing labels are NaN). Wide: indexed by ``timestamp``,
    one column per series, named by its labels as ``{k="v", ...}``.

    Examples
    --------
    >>> m = parse_matrix([{"metric": {"job": "a"}, "values": [[1, "1"], [2, "2"]]}])
    >>> to_frame(m).columns.tolist()
    ['timestamp', 'value', 'job']
    >>> to_frame(m, wide=True).shape
    (2, 1)
    """
    timestamps = pd.to_datetime(matrix.t_ms, unit="ms", utc=True)
    sizes = np.diff(matrix.offsets)
    if wide:
        names = [_series_name(one) for one in matrix.labels]
        columns = {
            name: pd.Series(
                matrix.values[lo:hi],
                index=timestamps[lo:hi],
                dtype=np.float64,
            )
            for name, lo, hi in zip(names, matrix.offsets[:-1], matrix.offsets[1:], strict=True)
        }
        frame = pd.DataFrame(columns) if columns else pd.DataFrame(index=timestamps[:0])
        frame.index.name = "timestamp"
        return frame
    data: dict[str, Any] = {"timestamp": timestamps, "value": matrix.values}
    series_index = np.repeat(np.arange(len(matrix.labels)), sizes)
    for name in sorted({k for one in matrix.labels for k in one}):
        per_series = [one.get(name) for one in matrix.labels]
        categories = sorted({v for v in per_series if v is not None})
        lookup = {v: i for i, v in enumerate(categories)}
        codes = np.array(
            [lookup.get(v, -1) if v is not None else -1 for v in per_series], dtype=np.int64
        )
        data[name] = pd.Categorical.from_codes(codes[series_index], categories=pd.Index(categories))
    return pd.DataFrame(data)


def _series_name(labels: Labels) -> str:
    return "{" + ", ".join(f"{k}={v!r}" for k, v in labels.items()) + "}"
