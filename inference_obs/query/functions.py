"""PromQL functions: one constructor for each, named as PromQL names the function.

Each builds a :class:`~inference_obs.query.expr.Call`, which checks its
arguments against the function's signature in
:data:`~inference_obs.query.signatures.FUNCTIONS`.
"""

from __future__ import annotations

from collections.abc import Callable

from inference_obs.query.expr import Call, Expr, HistogramQuantile, Number, Range, String, Subquery

__all__ = [
    "absent",
    "absent_over_time",
    "avg_over_time",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "count_over_time",
    "delta",
    "histogram_quantile",
    "idelta",
    "increase",
    "irate",
    "label_replace",
    "last_over_time",
    "max_over_time",
    "min_over_time",
    "quantile_over_time",
    "rate",
    "resets",
    "scalar",
    "sum_over_time",
    "timestamp",
    "vector",
]


def _windowed(name: str) -> Callable[[Range | Subquery], Call]:
    def build(window: Range | Subquery) -> Call:
        return Call(name, (window,))

    build.__name__ = name
    build.__doc__ = (
        f"``{name}(window)``; see :data:`~inference_obs.query.signatures.FUNCTIONS` "
        "for the signature."
    )
    return build


rate = _windowed("rate")
increase = _windowed("increase")
delta = _windowed("delta")
irate = _windowed("irate")
idelta = _windowed("idelta")
resets = _windowed("resets")
changes = _windowed("changes")
sum_over_time = _windowed("sum_over_time")
count_over_time = _windowed("count_over_time")
avg_over_time = _windowed("avg_over_time")
min_over_time = _windowed("min_over_time")
max_over_time = _windowed("max_over_time")
last_over_time = _windowed("last_over_time")
absent_over_time = _windowed("absent_over_time")


def quantile_over_time(q: float, window: Range | Subquery) -> Call:
    """``quantile_over_time(q, window)``: the q-quantile of each series' samples."""
    return Call("quantile_over_time", (Number(q), window))


def clamp(vector: Expr, low: float, high: float) -> Call:
    """``clamp(v, low, high)``: each value limited to ``[low, high]``."""
    return Call("clamp", (vector, Number(low), Number(high)))


def clamp_min(vector: Expr, low: float) -> Call:
    """``clamp_min(v, low)``."""
    return Call("clamp_min", (vector, Number(low)))


def clamp_max(vector: Expr, high: float) -> Call:
    """``clamp_max(v, high)``."""
    return Call("clamp_max", (vector, Number(high)))


def label_replace(vector: Expr, dst: str, replacement: str, src: str, regex: str) -> Call:
    """``label_replace(v, dst, replacement, src, regex)``; regex is anchored RE2."""
    return Call(
        "label_replace", (vector, String(dst), String(replacement), String(src), String(regex))
    )


def absent(vector: Expr) -> Call:
    """``absent(v)``: a 1-valued series when ``v`` has no series, else nothing."""
    return Call("absent", (vector,))


def timestamp(vector: Expr) -> Call:
    """``timestamp(v)``: each sample's timestamp in unix seconds."""
    return Call("timestamp", (vector,))


def scalar(vector: Expr) -> Call:
    """``scalar(v)``: the value of a single-series vector, else NaN."""
    return Call("scalar", (vector,))


def vector(value: Expr | float) -> Call:
    """``vector(s)``: a scalar as a label-less single series."""
    return Call("vector", (value if isinstance(value, Expr) else Number(value),))


def histogram_quantile(q: float | Expr, buckets: Expr) -> HistogramQuantile:
    """``histogram_quantile(q, buckets)``: the q-quantile from cumulative ``le`` buckets.

    Merge replicas inside ``buckets`` (``sum by (le)``), never average quantiles.
    """
    return HistogramQuantile(q if isinstance(q, Expr) else Number(q), buckets)
