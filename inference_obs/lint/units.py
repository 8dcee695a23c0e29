"""Units: the catalogue's unit of an expression's values, and Grafana's unit ids.

A unit here is a dimension and a scale: the number of base units (seconds,
a 0-1 fraction, bytes, bytes per second, hertz, watts, joules) one value
stands for. ``DCGM_FI_DEV_FB_USED`` is data at 2^20 (MiB);
``vllm:kv_cache_usage_perc * 100`` is a fraction at 0.01 (percent).

:func:`unit_of` follows an expression down to its selectors: arithmetic with
a number rescales, ``rate()`` divides by seconds, a histogram's ``_sum`` over
its ``_count`` is the unit of one observation, ``histogram_quantile`` has the
unit of its buckets' observations. Where the rules do not say, it answers
None and nothing is checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from inference_obs.lint.resolve import Series
from inference_obs.query import (
    Aggregate,
    Binary,
    Call,
    Expr,
    HistogramQuantile,
    Number,
    Range,
    Selector,
    Subquery,
    selectors,
)

__all__ = ["GRAFANA_UNITS", "Unit", "grafana_unit", "grafana_unit_for", "unit_of"]


@dataclass(frozen=True, slots=True)
class Unit:
    """A dimension and how many base units one value is."""

    dimension: str
    scale: float

    def times(self, factor: float) -> Unit:
        """The unit of values multiplied by ``factor`` (each then stands for less)."""
        return Unit(self.dimension, self.scale / factor)


#: Grafana unit ids with a dimension this checker compares (others are not checked).
GRAFANA_UNITS: dict[str, Unit] = {
    # Time.
    "ns": Unit("time", 1e-9),
    "µs": Unit("time", 1e-6),
    "us": Unit("time", 1e-6),
    "ms": Unit("time", 1e-3),
    "s": Unit("time", 1.0),
    "m": Unit("time", 60.0),
    "h": Unit("time", 3600.0),
    "d": Unit("time", 86400.0),
    "dtdurations": Unit("time", 1.0),
    "dtdurationms": Unit("time", 1e-3),
    "dthms": Unit("time", 1.0),
    "dtdhms": Unit("time", 1.0),
    "clocks": Unit("time", 1.0),
    "clockms": Unit("time", 1e-3),
    # Fractions.
    "percentunit": Unit("fraction", 1.0),
    "percent": Unit("fraction", 0.01),
    # Data (Grafana: "bytes" and the k/m/g/t names are binary, dec* decimal).
    "bits": Unit("data", 0.125),
    "bytes": Unit("data", 1.0),
    "decbytes": Unit("data", 1.0),
    "kbytes": Unit("data", 1024.0),
    "deckbytes": Unit("data", 1e3),
    "mbytes": Unit("data", 1024.0**2),
    "decmbytes": Unit("data", 1e6),
    "gbytes": Unit("data", 1024.0**3),
    "decgbytes": Unit("data", 1e9),
    "tbytes": Unit("data", 1024.0**4),
    "dectbytes": Unit("data", 1e12),
    # Data rates.
    "bps": Unit("data/s", 0.125),
    "Bps": Unit("data/s", 1.0),
    "binBps": Unit("data/s", 1.0),
    "KBs": Unit("data/s", 1e3),
    "KiBs": Unit("data/s", 1024.0),
    "MBs": Unit("data/s", 1e6),
    "MiBs": Unit("data/s", 1024.0**2),
    "GBs": Unit("data/s", 1e9),
    "GiBs": Unit("data/s", 1024.0**3),
    # Frequency, power, energy.
    "hertz": Unit("frequency", 1.0),
    "watt": Unit("power", 1.0),
    "kwatt": Unit("power", 1e3),
    "mwatt": Unit("power", 1e-3),
    "joule": Unit("energy", 1.0),
    "watth": Unit("energy", 3600.0),
    "kwatth": Unit("energy", 3.6e6),
}

# The catalogue's unit words (Family.unit).
_CATALOGUE_UNITS: dict[str, Unit] = {
    "seconds": Unit("time", 1.0),
    "milliseconds": Unit("time", 1e-3),
    "nanoseconds": Unit("time", 1e-9),
    "ratio": Unit("fraction", 1.0),
    "percent": Unit("fraction", 0.01),
    "bytes": Unit("data", 1.0),
    "MiB": Unit("data", 1024.0**2),
    "bytes_per_second": Unit("data/s", 1.0),
    "MiB_per_second": Unit("data/s", 1024.0**2),
    "gigabytes_per_second": Unit("data/s", 1e9),
    "MHz": Unit("frequency", 1e6),
    "watts": Unit("power", 1.0),
    "millijoules": Unit("energy", 1e-3),
}
# What rate() makes of a dimension (per second).
_PER_SECOND = {"data": "data/s", "energy": "power"}
# Functions whose result is in the unit of their argument.
_SAME_UNIT_CALLS = frozenset(
    {
        # Absolute value, rounding and clamping.
        "abs",
        "ceil",
        "floor",
        "round",
        "clamp",
        "clamp_min",
        "clamp_max",
        # Labels and order.
        "label_replace",
        "label_join",
        "sort",
        "sort_desc",
        "sort_by_label",
        "sort_by_label_desc",
        # Summaries of a window's samples.
        "avg_over_time",
        "min_over_time",
        "max_over_time",
        "last_over_time",
        "first_over_time",
        "quantile_over_time",
        "mad_over_time",
        "stddev_over_time",
        # Changes and forecasts, in the unit of the samples.
        "increase",
        "delta",
        "idelta",
        "predict_linear",
        "holt_winters",
        "double_exponential_smoothing",
    }
)
_SAME_UNIT_AGGREGATIONS = frozenset(
    {"sum", "avg", "min", "max", "quantile", "topk", "bottomk", "stddev"}
)


def grafana_unit(unit_id: str | None) -> Unit | None:
    """The unit of a Grafana unit id, None for ids not compared (``short``, ``none``)."""
    return GRAFANA_UNITS.get(unit_id) if unit_id else None


def grafana_unit_for(unit: Unit) -> str | None:
    """A Grafana unit id that shows values of ``unit`` as they are."""
    for unit_id, candidate in GRAFANA_UNITS.items():
        if candidate.dimension == unit.dimension and _close(candidate.scale, unit.scale):
            return unit_id
    return None


def catalogue_unit(word: str | None) -> Unit | None:
    """The unit of a catalogue unit word (``seconds``, ``MiB``), None if not compared."""
    return _CATALOGUE_UNITS.get(word) if word else None


def unit_of(expr: Expr, series: dict[int, Series]) -> Unit | None:
    """The unit of ``expr``'s values, or None when the rules above do not decide it.

    ``series`` maps ``id(selector)`` to what the catalogue knows of it.
    """
    match expr:
        case Selector():
            known = series.get(id(expr))
            return catalogue_unit(known.unit) if known is not None else None
        case Range(selector=selector):
            return unit_of(selector, series)
        case Subquery(expr=inner):
            return unit_of(inner, series)
        case HistogramQuantile(buckets=buckets):
            return _bucket_unit(buckets, series)
        case Aggregate(op=op, expr=inner):
            return unit_of(inner, series) if op in _SAME_UNIT_AGGREGATIONS else None
        case Call(name=name, args=args):
            return _call_unit(name, args, series)
        case Binary():
            return _binary_unit(expr, series)
    return None


def _call_unit(name: str, args: tuple[Expr, ...], series: dict[int, Series]) -> Unit | None:
    vectors = [a for a in args if not isinstance(a, Number)]
    if not vectors:
        return None
    inner = unit_of(vectors[-1] if name == "histogram_fraction" else vectors[0], series)
    if inner is None:
        return None
    if name in ("rate", "irate", "deriv"):
        per_second = _PER_SECOND.get(inner.dimension)
        return Unit(per_second, inner.scale) if per_second else None
    return inner if name in _SAME_UNIT_CALLS else None


def _binary_unit(expr: Binary, series: dict[int, Series]) -> Unit | None:
    lhs, rhs, op = expr.lhs, expr.rhs, expr.op
    if op in ("*", "/") and isinstance(rhs, Number) and rhs.value not in (0.0,):
        inner = unit_of(lhs, series)
        if inner is None:
            return None
        return inner.times(rhs.value if op == "*" else 1 / rhs.value)
    if op == "*" and isinstance(lhs, Number):
        inner = unit_of(rhs, series)
        return inner.times(lhs.value) if inner is not None else None
    if op == "/":
        mean = _mean_unit(lhs, rhs, series)
        if mean is not None:
            return mean
        left, right = unit_of(lhs, series), unit_of(rhs, series)
        if left is not None and right is not None and left.dimension == right.dimension:
            return Unit("fraction", left.scale / right.scale)
        return None
    if op in ("+", "-"):
        left, right = unit_of(lhs, series), unit_of(rhs, series)
        if left is not None and left == right:
            return left
        if isinstance(rhs, Number):
            return left
        if isinstance(lhs, Number):
            return right
        return None
    if op in ("and", "unless", ">", "<", ">=", "<=", "==", "!=", "or"):
        return unit_of(lhs, series) if not isinstance(lhs, Number) else unit_of(rhs, series)
    return None


def _mean_unit(lhs: Expr, rhs: Expr, series: dict[int, Series]) -> Unit | None:
    """``x_sum / x_count`` (in any aggregation or window): the unit of one observation."""
    sums = [s for s in selectors(lhs) if series.get(id(s), Series(None)).part == "sum"]
    counts = [s for s in selectors(rhs) if series.get(id(s), Series(None)).part == "count"]
    if len(sums) == 1 and len(counts) == 1:
        left, right = series[id(sums[0])], series[id(counts[0])]
        if left.base == right.base and left.family is not None:
            return catalogue_unit(left.family.unit)
    return None


def _bucket_unit(buckets: Expr, series: dict[int, Series]) -> Unit | None:
    for selector in selectors(buckets):
        known = series.get(id(selector))
        if known is not None and known.part == "bucket" and known.family is not None:
            return catalogue_unit(known.family.unit)
    return None


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))
