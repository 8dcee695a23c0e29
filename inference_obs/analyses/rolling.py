"""Rolling quantiles: a histogram's quantiles over a sliding window, as time series.

At every ``every`` seconds across the window, the q-quantile of the
observations recorded in the preceding ``length`` seconds is estimated from
the buckets of every replica added together::

    histogram_quantile(q, sum by (le) (rate(h_bucket{m}[length])))

A rolling P95 answers "how bad was the worst five minutes", not "what was the
hour's P95": a short burst can lift it far above the whole-window P95, and the
mean of its samples is not a request-weighted mean. Each series carries the
PromQL that produced it.

Each point also carries the bucket that must hold the true quantile, its
``lower`` and ``upper`` edges (:func:`~inference_obs.engine.histograms.quantile_bounds`
on the same merged bucket rates, ``sum by (le) (rate(h_bucket{m}[length]))``):
the interpolated value inside it is an estimate, the bucket is not. A spike
whose requests all sit in the 40-80 s bucket reads as "somewhere in 40-80 s",
not as the interpolated 78 s. :meth:`QuantileSeries.points` gives them one
:class:`RollingPoint` at a time.

Two analyses run it: :data:`rolling_quantiles` (by default of time to first
token) and :data:`rolling_itl` (by default of inter-token latency); each
one's ``family`` setting chooses another histogram.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from inference_obs.analyses.unit import Analysis, Settings
from inference_obs.deployment import Deployment
from inference_obs.engine.histograms import parse_le, quantile_bounds
from inference_obs.errors import Annotation, ConfigurationError, QueryError
from inference_obs.metrics import family as catalogue_family, vllm
from inference_obs.metrics.family import Family, MetricType
from inference_obs.query import Expr, histogram_quantile, parse, rate, to_promql
from inference_obs.query.walk import selectors
from inference_obs.reading.context import Reading
from inference_obs.reading.measurement import Bounds, is_lowest_bucket
from inference_obs.reading.result import AnalysisResult, FloatColumn, format_number
from inference_obs.samples import Floats, Matrix, Window

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CAVEATS",
    "QuantileSeries",
    "RollingItlSettings",
    "RollingPoint",
    "RollingQuantiles",
    "RollingSettings",
    "rolling_itl",
    "rolling_quantiles",
]

CAVEATS: tuple[str, ...] = (
    "A rolling P95 is the P95 of the requests in each trailing interval, not the whole-window "
    "P95: a short burst lifts it far above the window's P95, and it is never comparable to it.",
    "The mean of a rolling quantile's samples (what a plot's eye averages) is neither a quantile "
    "nor a request-weighted mean: intervals with few requests weigh as much as busy ones.",
    "Quantiles are interpolated inside the bucket holding them; only the bucket is certain "
    "(each point's lower and upper bounds). Replicas' buckets are merged before the quantile "
    "is taken.",
    "An interval with no observation has no value (a gap), not zero.",
)


@dataclass(frozen=True, slots=True)
class RollingPoint:
    """One evaluation of a rolling quantile: when, the interpolated value, and its bucket.

    Attributes
    ----------
    t
        Evaluation time, unix seconds (the end of the trailing interval).
    value
        The interpolated quantile, in the family's unit: an estimate.
    lower, upper
        Edges of the bucket that must hold the true quantile, in the family's
        unit (``lower <= value <= upper``); ``upper`` is ``inf`` for the
        ``+Inf`` bucket, NaN where the buckets gave none.
    """

    t: float
    value: float
    lower: float
    upper: float

    @property
    def bounds(self) -> Bounds:
        """``lower`` and ``upper`` as the :class:`~inference_obs.reading.measurement.Bounds`
        the report shows beside a quantile."""
        return Bounds(lower=self.lower, upper=self.upper)

    @property
    def lowest_bucket(self) -> bool:
        """Whether the bucket is the histogram's lowest: only "at most ``upper``" is known."""
        return is_lowest_bucket(self.bounds)


class QuantileSeries(BaseModel):
    """One quantile's rolling estimate over the window, each point with its bucket.

    Attributes
    ----------
    quantile
        The quantile, 0-1.
    t
        Evaluation times, unix seconds (ascending); only steps with a value.
    values
        The estimate at each time, in the family's unit; finite where present.
    lower, upper
        At each time, the edges of the bucket that must hold the true
        quantile, in the family's unit (see :class:`RollingPoint`).
    promql
        The query that produced the values (the bounds come from
        :attr:`RollingQuantiles.buckets_promql`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    quantile: float
    t: FloatColumn
    values: FloatColumn
    lower: FloatColumn
    upper: FloatColumn
    promql: str

    def points(self) -> tuple[RollingPoint, ...]:
        """Each evaluation as a :class:`RollingPoint` (time, value, lower, upper), in time
        order."""
        return tuple(
            RollingPoint(float(t), float(v), float(lo), float(hi))
            for t, v, lo, hi in zip(self.t, self.values, self.lower, self.upper, strict=True)
        )


class RollingQuantiles(AnalysisResult):
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
        One :class:`QuantileSeries` per requested quantile, in request order,
        each with the PromQL behind it.
    buckets_promql
        The merged bucket rates every point's bounds are taken from.
    caveats
        What the series cannot be used for.
    annotations
        Non-fatal conditions reported by the source (each once).
    read_as
        The family's name as the deployment's data holds it (an SGLang family
        read for an SGLang deployment, an older name); empty when none was read.
    """

    deployment: str
    family: str
    unit: str
    window: Window
    every: float
    length: float
    series: tuple[QuantileSeries, ...]
    buckets_promql: str
    caveats: tuple[str, ...] = CAVEATS
    annotations: tuple[Annotation, ...] = ()
    read_as: str = ""

    @property
    def held(self) -> str:
        """The histogram's name as the data holds it (see ``read_as``), else the catalogue's."""
        return self.read_as or self.family

    @property
    def promql(self) -> tuple[str, ...]:
        """The queries used, one per quantile."""
        return tuple(s.promql for s in self.series)

    def get(self, quantile: float) -> QuantileSeries:
        """The series of ``quantile``.

        Raises
        ------
        ConfigurationError
            If ``quantile`` was not computed.
        """
        for s in self.series:
            if math.isclose(s.quantile, quantile):
                return s
        have = ", ".join(f"{s.quantile:g}" for s in self.series)
        raise ConfigurationError(f"quantile {quantile:g} was not computed (have {have})")

    def to_frame(self) -> pd.DataFrame:
        """A long frame, one row per quantile and time.

        Returns
        -------
        pandas.DataFrame
            Columns ``time`` (timezone-aware, in the window's timezone),
            ``quantile`` (0-1), ``value``, and the bucket holding the true
            quantile, ``lower`` and ``upper`` (the family's unit).
        """
        import pandas as pd  # here, not at the top: `import inference_obs` stays free of pandas

        zone = self.window.start.tzinfo
        frames = [
            pd.DataFrame(
                {
                    "time": pd.to_datetime(s.t, unit="s", utc=True).tz_convert(zone),
                    "quantile": np.full(s.t.size, s.quantile),
                    "value": s.values,
                    "lower": s.lower,
                    "upper": s.upper,
                }
            )
            for s in self.series
        ]
        if not frames:
            return pd.DataFrame({c: [] for c in ("time", "quantile", "value", "lower", "upper")})
        return pd.concat(frames, ignore_index=True)

    def _repr_html_(self) -> str:
        cells = []
        for s in self.series:
            low = float(s.values.min()) if s.values.size else None
            row = (
                f"{s.quantile:g}",
                str(s.t.size),
                format_number(low),
                _highest(s),
                s.promql,
            )
            cells.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
        names = ("quantile", "points", f"min ({self.unit})", f"max ({self.unit})", "promql")
        head = "".join(f"<th>{html.escape(h)}</th>" for h in names)
        return f"<table><tr>{head}</tr>{''.join(cells)}</table>"


def _highest(s: QuantileSeries) -> str:
    """The highest point as the report shows a quantile: its value and bucket, ``≤ upper``
    in the lowest bucket; an em dash without points."""
    if not s.t.size:
        return format_number(None)
    top = s.points()[int(np.argmax(s.values))]
    if top.lowest_bucket:
        return f"≤ {top.upper:.4g}"
    return f"{format_number(top.value)} [{top.lower:.4g}, {top.upper:.4g}]"


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
    return histogram_quantile(q, buckets_expr(family, deployment, length))


def buckets_expr(family: Family, deployment: Deployment, length: float) -> Expr:
    """``sum by (le) (rate(h_bucket{m}[length]))``: the merged bucket rates a rolling
    quantile interpolates in, one series per bucket bound (observations per second)."""
    return rate(family.select(deployment.matchers, "bucket").over(length)).sum(by=("le",))


def step_bounds(q: float, buckets: Matrix, t: Floats) -> tuple[Floats, Floats]:
    """The bucket holding the true ``q``-quantile at each time of ``t``, from merged bucket rates.

    Parameters
    ----------
    q
        The quantile, 0-1.
    buckets
        The answer to :func:`buckets_expr` as a range query: one series per
        ``le``, points at the evaluation times.
    t
        The times wanted, unix seconds (those of the quantile's series).

    Returns
    -------
    tuple of numpy.ndarray
        Lower and upper edges at each time, in the family's unit
        (:func:`~inference_obs.engine.histograms.quantile_bounds`, each
        evaluation time one group); NaN at a time the buckets have no point.
    """
    lower = np.full(t.size, np.nan)
    upper = np.full(t.size, np.nan)
    if not len(buckets):
        return lower, upper
    les = parse_le([labels.get("le", "") for labels in buckets.labels])
    steps, groups = np.unique(buckets.t_ms, return_inverse=True)
    low, high = quantile_bounds(
        q, np.repeat(les, np.diff(buckets.offsets)), buckets.values, groups, steps.size
    )
    # Both queries are evaluated on one grid (start + k * every): times match to the ms.
    wanted = np.rint(t * 1000.0).astype(np.int64)
    at = np.clip(np.searchsorted(steps, wanted), 0, steps.size - 1)
    found = steps[at] == wanted
    lower[found], upper[found] = low[at[found]], high[at[found]]
    return lower, upper


Quantile = Annotated[float, Field(ge=0, le=1)]


class RollingSettings(Settings):
    """Which histogram, which quantiles, and the sliding interval they are taken over."""

    family: str = Field(
        vllm.TIME_TO_FIRST_TOKEN.name,
        description="The histogram family, by an exposed name of the catalogue (an earlier "
        "version's name reads that version's series); a Family is taken by its name. Its "
        "unit is the series' unit (time to first token: seconds).",
    )
    quantiles: tuple[Quantile, ...] = Field(
        (0.5, 0.95, 0.99),
        min_length=1,
        description="Quantiles (0-1) to estimate, one series each, in this order; as text, "
        "separated by commas.",
    )
    every: float = Field(
        60.0,
        gt=0,
        allow_inf_nan=False,
        description="Seconds between evaluations (the range query's step).",
    )
    length: float = Field(
        300.0,
        gt=0,
        allow_inf_nan=False,
        description="Trailing interval each evaluation covers, seconds: the rate() range.",
    )

    @field_validator("family", mode="before")
    @classmethod
    def _histogram(cls, value: object) -> object:
        name = value.name if isinstance(value, Family) else value
        if not isinstance(name, str):
            return name  # the str check names what was given
        try:
            found = catalogue_family(name)
        except QueryError as exc:
            raise PydanticCustomError("family", "{message}", {"message": str(exc)}) from None
        if found.type is not MetricType.HISTOGRAM or name not in found.names:
            raise PydanticCustomError(
                "family", "{name} is not the name of a histogram family", {"name": name}
            )
        return name

    @field_validator("quantiles", mode="before")
    @classmethod
    def _listed(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(","))
        return value


class RollingItlSettings(RollingSettings):
    """The rolling quantiles of inter-token latency (:data:`rolling_itl`): the same settings,
    another default histogram."""

    family: str = Field(
        vllm.INTER_TOKEN_LATENCY.name,
        description="The histogram family, by an exposed name of the catalogue (see "
        "rolling_quantiles.family). Inter-token latency is the gap between a request's "
        "output events, seconds; with speculative decoding one event carries several tokens.",
    )


def _family(name: str) -> Family:
    """The catalogue's histogram ``name``, spelt as given (an earlier version's name stays)."""
    found = catalogue_family(name)
    return found if found.name == name else replace(found, name=name, aliases=())


def _rolling_quantiles(r: Reading, settings: RollingSettings) -> RollingQuantiles:
    """Merged-bucket quantiles of a histogram over a trailing interval, at regular steps.

    One range query per quantile, from the window's start to its end,
    ``settings.every`` seconds apart, each over the trailing
    ``settings.length`` seconds; the buckets of every replica are added
    before estimating. Each series holds times (unix seconds) and values in
    the family's unit, with its PromQL; steps with no observation are
    absent, never zero.
    """
    family = _family(settings.family)
    every, length = settings.every, settings.length
    notes: dict[Annotation, None] = {}
    exprs = [rolling_expr(family, q, r.deployment, length) for q in settings.quantiles]
    merged = buckets_expr(family, r.deployment, length)
    *matrices, buckets = r.together([partial(r.range, expr, every) for expr in [*exprs, merged]])
    for matrix in [*matrices, buckets]:
        notes.update(dict.fromkeys(matrix.annotations))
    series = _series(settings.quantiles, exprs, matrices, buckets)
    return RollingQuantiles(
        deployment=r.deployment.name,
        family=family.name,
        unit=family.unit,
        window=r.window,
        every=float(every),
        length=float(length),
        series=series,
        buckets_promql=to_promql(merged),
        annotations=tuple(notes),
        read_as=_read_as(r, merged),
    )


def _read_as(r: Reading, merged: Expr) -> str:
    """The histogram ``merged`` reads, as the deployment's data names it (``Reading.as_read``)."""
    try:
        read = parse(r.as_read(to_promql(merged)))
    except QueryError:
        return ""
    names = [s.metric for s in selectors(read) if s.metric]
    return names[0].removesuffix("_bucket") if names else ""


def _series(
    quantiles: Sequence[float], exprs: Sequence[Expr], matrices: Sequence[Matrix], buckets: Matrix
) -> tuple[QuantileSeries, ...]:
    """Each quantile's points (time order, finite values only) with their buckets' edges."""
    out = []
    for q, expr, matrix in zip(quantiles, exprs, matrices, strict=True):
        t = np.zeros(0, np.float64)
        values = np.zeros(0, np.float64)
        if len(matrix):
            # sum by (le) leaves one series (no labels) per step.
            t = matrix.t_ms.astype(np.float64) / 1000.0
            values = matrix.values.astype(np.float64)
            keep = np.isfinite(values)
            order = np.argsort(t[keep], kind="stable")
            t, values = t[keep][order], values[keep][order]
        lower, upper = step_bounds(float(q), buckets, t)
        out.append(
            QuantileSeries(
                quantile=float(q),
                t=t,
                values=values,
                lower=lower,
                upper=upper,
                promql=to_promql(expr),
            )
        )
    return tuple(out)


rolling_quantiles = Analysis(
    name="rolling_quantiles",
    title="Rolling quantiles",
    entry=_rolling_quantiles,
    result=RollingQuantiles,
    settings=RollingSettings,
    summary="A histogram's merged-bucket quantiles over a sliding interval, as time series.",
)

rolling_itl = Analysis(
    name="rolling_itl",
    title="Rolling quantiles of inter-token latency",
    entry=_rolling_quantiles,
    result=RollingQuantiles,
    settings=RollingItlSettings,
    summary="Inter-token latency's merged-bucket quantiles over a sliding interval, as time "
    "series.",
)
