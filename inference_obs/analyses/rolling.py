"""Rolling quantiles: a histogram's quantiles over a sliding window, as time series.

At every ``every`` seconds across the window, the q-quantile of the
observations recorded in the preceding ``length`` seconds is estimated from
the buckets of every replica added together::

    histogram_quantile(q, sum by (le) (rate(h_bucket{m}[length])))

A rolling P95 answers "how bad was the worst five minutes", not "what was the
hour's P95": a short burst can lift it far above the whole-window P95, and the
mean of its samples is not a request-weighted mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from inference_obs.deployment import Deployment
from inference_obs.errors import Annotation, QueryError
from inference_obs.metrics import vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, histogram_quantile, rate, to_promql
from inference_obs.samples import Floats as FloatArray, Window
from inference_obs.source.base import Source
from inference_obs.source.remembering import together

__all__ = ["CAVEATS", "QuantileSeries", "RollingQuantiles", "rolling_quantiles"]

CAVEATS: tuple[str, ...] = (
    "A rolling P95 is the P95 of the requests in each trailing interval, not the whole-window "
    "P95: a short burst lifts it far above the window's P95, and it is never comparable to it.",
    "The mean of a rolling quantile's samples (what a plot's eye averages) is neither a quantile "
    "nor a request-weighted mean: intervals with few requests weigh as much as busy ones.",
    "Quantiles are interpolated inside the bucket holding them; only the bucket is certain. "
    "Replicas' buckets are merged before the quantile is taken.",
    "An interval with no observation has no value (a gap), not zero.",
)


class QuantileSeries(BaseModel):
    """One quantile's rolling estimate over the window.

    Attributes
    ----------
    quantile
        The quantile, 0-1.
    t
        Evaluation times, unix seconds (ascending); only steps with a value.
    values
        The estimate at each time, in the family's unit; finite where present.
    promql
        The query that produced the series.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    quantile: float
    t: FloatArray
    values: FloatArray
    promql: str


class RollingQuantiles(BaseModel):
    """Rolling merged-bucket quantiles of one histogram for one deployment.

    Attributes
    ----------
    deployment, family, unit
        Whose series, which histogram, and its unit (e.g. seconds).
    window
        The window evaluated; times are shown in its timezone.
    every, length
        Seconds between evaluations, and the trailing interval each covers.
    series
        One :class:`QuantileSeries` per requested quantile, in request order.
    caveats
        What the series cannot be used for.
    annotations
        Non-fatal conditions reported by the source (each once).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    deployment: str
    family: str
    unit: str
    window: Window
    every: float
    length: float
    series: tuple[QuantileSeries, ...]
    caveats: tuple[str, ...] = CAVEATS
    annotations: tuple[Annotation, ...] = ()

    @property
    def promql(self) -> tuple[str, ...]:
        """The queries used, one per quantile."""
        return tuple(s.promql for s in self.series)

    def get(self, quantile: float) -> QuantileSeries:
        """The series of ``quantile``.

        Raises
        ------
        QueryError
            If ``quantile`` was not computed.
        """
        for s in self.series:
            if math.isclose(s.quantile, quantile):
                return s
        have = ", ".join(f"{s.quantile:g}" for s in self.series)
        raise QueryError(f"quantile {quantile:g} was not computed (have {have})")

    def to_frame(self) -> pd.DataFrame:
        """A long frame, one row per quantile and time.

        Returns
        -------
        pandas.DataFrame
            Columns ``time`` (timezone-aware, in the window's timezone),
            ``quantile`` (0-1) and ``value`` (the family's unit).
        """
        zone = self.window.start.tzinfo
        frames = [
            pd.DataFrame(
                {
                    "time": pd.to_datetime(s.t, unit="s", utc=True).tz_convert(zone),
                    "quantile": np.full(s.t.size, s.quantile),
                    "value": s.values,
                }
            )
            for s in self.series
        ]
        if not frames:
            return pd.DataFrame({"time": [], "quantile": [], "value": []})
        return pd.concat(frames, ignore_index=True)


def rolling_expr(family: Family, q: float, deployment: Deployment, length: float) -> Expr:
    """``histogram_quantile(q, sum by (le) (rate(h_bucket{m}[length])))``.

    Parameters
    ----------
    family
        A histogram family.
    q
        The quantile, 0-1.
    deployment
        Whose series (every replica's buckets are summed).
    length
        The trailing interval, seconds.

    Returns
    -------
    Expr
        The expression (never text).

    Raises
    ------
    QueryError
        If ``q`` is not in [0, 1].
    """
    if isinstance(q, bool) or not isinstance(q, int | float) or not 0 <= q <= 1:
        raise QueryError(f"quantile {q!r} for {family.name}: must be a number in [0, 1]")
    buckets = rate(family.select(deployment.matchers, "bucket").over(length))
    return histogram_quantile(q, buckets.sum(by=("le",)))


def rolling_quantiles(
    source: Source,
    deployment: Deployment,
    window: Window,
    family: Family = vllm.TIME_TO_FIRST_TOKEN,
    quantiles: Sequence[float] = (0.5, 0.95, 0.99),
    every: float = 60.0,
    length: float = 300.0,
) -> RollingQuantiles:
    """Merged-bucket quantiles of ``family`` over a trailing interval, every ``every`` seconds.

    Parameters
    ----------
    source
        Where the series come from (one range query per quantile).
    deployment
        Whose series; the buckets of all replicas are added before estimating.
    window
        Evaluation times run from its start to its end, ``every`` apart.
    family
        A histogram family (default: time to first token, seconds).
    quantiles
        Quantiles to estimate, each in [0, 1].
    every
        Seconds between evaluations (the range query's step), > 0.
    length
        Trailing interval of each evaluation, seconds, > 0.

    Returns
    -------
    RollingQuantiles
        One time series per quantile (unix seconds, values in the family's
        unit); steps with no observation are absent, never zero.

    Raises
    ------
    QueryError
        If a quantile is outside [0, 1], or ``every`` or ``length`` is not positive.
    """
    for name, value in (("every", every), ("length", length)):
        if not math.isfinite(value) or value <= 0:
            raise QueryError(f"{name} {value!r} s must be a positive number of seconds")
    series: list[QuantileSeries] = []
    notes: dict[Annotation, None] = {}
    exprs = [rolling_expr(family, q, deployment, length) for q in quantiles]
    matrices = together(source, [partial(source.range, expr, window, every) for expr in exprs])
    for q, expr, matrix in zip(quantiles, exprs, matrices, strict=True):
        notes.update(dict.fromkeys(matrix.annotations))
        t = np.zeros(0, np.float64)
        values = np.zeros(0, np.float64)
        if len(matrix):
            # sum by (le) leaves one series (no labels) per step.
            t = matrix.t_ms.astype(np.float64) / 1000.0
            values = matrix.values.astype(np.float64)
            keep = np.isfinite(values)
            order = np.argsort(t[keep], kind="stable")
            t, values = t[keep][order], values[keep][order]
        series.append(QuantileSeries(quantile=float(q), t=t, values=values, promql=to_promql(expr)))
    return RollingQuantiles(
        deployment=deployment.name,
        family=family.name,
        unit=family.unit,
        window=window,
        every=float(every),
        length=float(length),
        series=tuple(series),
        annotations=tuple(notes),
    )
