"""The base of every analysis result: Measurement fields, a frame and a Jupyter table."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Annotated, TypeAlias

from pydantic import BaseModel, PlainSerializer

from inference_obs.reading.measurement import FrozenModel, Measurement
from inference_obs.samples import Floats

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AnalysisResult", "FloatColumn", "format_number", "measurements_frame"]

#: A float64 array field of a result (times, sampled values): written to JSON as a list
#: (NaN as null), so every result serialises, not only its Measurements.
FloatColumn: TypeAlias = Annotated[
    Floats, PlainSerializer(lambda a: a.tolist(), return_type=list[float], when_used="json")
]


class AnalysisResult(FrozenModel):
    """Base of analysis results: frozen, and every field a Measurement (or a map of them)."""

    def measurements(self) -> tuple[Measurement, ...]:
        """Every Measurement of the result, in field order (tuples and maps flattened)."""
        return tuple(_walk(self))

    def to_frame(self) -> pd.DataFrame:
        """One row per measurement: see :func:`measurements_frame`."""
        return measurements_frame(self.measurements())

    def _repr_html_(self) -> str:
        cells = []
        for m in self.measurements():
            value = "—" if m.value is None else f"{m.value:.6g}"
            if m.bounds is not None:
                value += f" [{m.bounds.lower:.6g}, {m.bounds.upper:.6g}]"
            row = (m.statistic, value, m.unit, m.status.value)
            cells.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
        head = "<tr><th>statistic</th><th>value</th><th>unit</th><th>status</th></tr>"
        return f"<table>{head}{''.join(cells)}</table>"


def format_number(value: float | None, digits: int = 4) -> str:
    """A value to ``digits`` significant digits for tables; an em dash for none or NaN.

    Examples
    --------
    >>> format_number(0.0123456), format_number(None), format_number(float("nan"))
    ('0.01235', '—', '—')
    """
    if value is None or math.isnan(value):
        return "—"
    return f"{value:.{digits}g}"


def measurements_frame(measurements: Iterable[Measurement]) -> pd.DataFrame:
    """One row per measurement: key, statistic, value, unit, status, bounds, query.

    Returns
    -------
    pandas.DataFrame
        Columns ``key``, ``deployment``, ``analysis``, ``statistic``,
        ``value``, ``unit``, ``status``, ``lower``, ``upper`` (the bounds,
        NaN where none) and ``promql`` (the queries, ``;``-joined).
    """
    rows = [
        {
            "key": m.key,
            "deployment": m.deployment,
            "analysis": m.analysis,
            "statistic": m.statistic,
            "value": math.nan if m.value is None else m.value,
            "unit": m.unit,
            "status": m.status.value,
            "lower": m.bounds.lower if m.bounds else math.nan,
            "upper": m.bounds.upper if m.bounds else math.nan,
            "promql": "; ".join(m.provenance.promql),
        }
        for m in measurements
    ]
    import pandas as pd  # here, not at the top: `import inference_obs` stays free of pandas

    return pd.DataFrame(rows)


def _walk(value: object) -> Iterator[Measurement]:
    if isinstance(value, Measurement):
        yield value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _walk(getattr(value, name))
    elif isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _walk(item)
