"""PromQL functions: their signatures, and one constructor for each.

The signature table :data:`FUNCTIONS` is what :class:`~inference_obs.query.expr.Call`
checks at build time, so ``rate`` over an instant vector, or ``clamp`` with a
string, fails before any query is sent. Constructors are named as PromQL names
the function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from inference_obs.errors import QueryError
from inference_obs.query.expr import (
    Call,
    Expr,
    HistogramQuantile,
    Number,
    Range,
    String,
    Subquery,
    ValueType,
    keeps_label,
)
from inference_obs.query.names import check_label_name, check_regex

__all__ = [
    "FUNCTIONS",
    "Signature",
    "absent",
    "absent_over_time",
    "avg_over_time",
    "changes",
    "check_call",
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

S, V, M, T = ValueType.SCALAR, ValueType.VECTOR, ValueType.MATRIX, ValueType.STRING


def _keep_first_vector(args: Sequence[Expr], label: str) -> bool:
    # Date functions may be called without an argument (then vector(time())).
    return bool(args) and keeps_label(args[0], label)


def _keep_none(args: Sequence[Expr], label: str) -> bool:
    return False


def _keep_label_replace(args: Sequence[Expr], label: str) -> bool:
    dst = args[1]
    return (isinstance(dst, String) and dst.value == label) or keeps_label(args[0], label)


def _keep_last_vector(args: Sequence[Expr], label: str) -> bool:
    return keeps_label(args[-1], label)


@dataclass(frozen=True, slots=True)
class Signature:
    """A function's argument types, result type, and what happens to labels."""

    args: tuple[ValueType, ...]
    returns: ValueType
    keeps_label: Callable[[Sequence[Expr], str], bool] = _keep_first_vector
    #: How many trailing ``args`` may be left out (``round(v)``, ``hour()``).
    optional: int = 0
    #: The type of any further arguments (label_join's source labels), None if none.
    variadic: ValueType | None = None


_RANGE_TO_VECTOR = Signature((M,), V)
_MATH = Signature((V,), V)
_DATE = Signature((V,), V, optional=1)
_MATH_FUNCTIONS = (
    # Arithmetic.
    "abs",
    "ceil",
    "floor",
    "exp",
    "ln",
    "log2",
    "log10",
    "sqrt",
    "sgn",
    # Angles and trigonometry.
    "deg",
    "rad",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    # Order.
    "sort",
    "sort_desc",
    # Native-histogram summaries.
    "histogram_count",
    "histogram_sum",
    "histogram_avg",
    "histogram_stddev",
    "histogram_stdvar",
)
_DATE_FUNCTIONS = (
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "hour",
    "minute",
    "month",
    "year",
)

FUNCTIONS: dict[str, Signature] = {
    # Counter and gauge change over a window (Prometheus extrapolation rules).
    "rate": _RANGE_TO_VECTOR,
    "increase": _RANGE_TO_VECTOR,
    "delta": _RANGE_TO_VECTOR,
    "irate": _RANGE_TO_VECTOR,
    "idelta": _RANGE_TO_VECTOR,
    "resets": _RANGE_TO_VECTOR,
    "changes": _RANGE_TO_VECTOR,
    # Sample-weighted reductions over a window.
    "sum_over_time": _RANGE_TO_VECTOR,
    "count_over_time": _RANGE_TO_VECTOR,
    "avg_over_time": _RANGE_TO_VECTOR,
    "min_over_time": _RANGE_TO_VECTOR,
    "max_over_time": _RANGE_TO_VECTOR,
    "last_over_time": _RANGE_TO_VECTOR,
    "quantile_over_time": Signature((S, M), V, lambda a, lbl: keeps_label(a[1], lbl)),
    "absent_over_time": Signature((M,), V, _keep_none),
    # Instant-vector functions.
    "clamp": Signature((V, S, S), V),
    "clamp_min": Signature((V, S), V),
    "clamp_max": Signature((V, S), V),
    "label_replace": Signature((V, T, T, T, T), V, _keep_label_replace),
    "absent": Signature((V,), V, _keep_none),
    "timestamp": Signature((V,), V),
    "scalar": Signature((V,), S, _keep_none),
    "vector": Signature((S,), V, _keep_none),
    # The rest of Prometheus 3's functions (promql/functions.go), so that any
    # dashboard or rule can be read into the tree; the local engine answers
    # NotSupportedOffline for those it does not evaluate.
    "deriv": _RANGE_TO_VECTOR,
    "predict_linear": Signature((M, S), V),
    "holt_winters": Signature((M, S, S), V),
    "double_exponential_smoothing": Signature((M, S, S), V),
    "stddev_over_time": _RANGE_TO_VECTOR,
    "stdvar_over_time": _RANGE_TO_VECTOR,
    "mad_over_time": _RANGE_TO_VECTOR,
    "present_over_time": _RANGE_TO_VECTOR,
    "first_over_time": _RANGE_TO_VECTOR,
    "ts_of_first_over_time": _RANGE_TO_VECTOR,
    "ts_of_last_over_time": _RANGE_TO_VECTOR,
    "ts_of_max_over_time": _RANGE_TO_VECTOR,
    "ts_of_min_over_time": _RANGE_TO_VECTOR,
    **dict.fromkeys(_MATH_FUNCTIONS, _MATH),
    **dict.fromkeys(_DATE_FUNCTIONS, _DATE),
    "round": Signature((V, S), V, optional=1),
    "time": Signature((), S, _keep_none),
    "pi": Signature((), S, _keep_none),
    "histogram_fraction": Signature((S, S, V), V, _keep_last_vector),
    "label_join": Signature((V, T, T), V, _keep_label_replace, variadic=T),
    "sort_by_label": Signature((V,), V, variadic=T),
    "sort_by_label_desc": Signature((V,), V, variadic=T),
    "info": Signature((V, V), V, optional=1),
}


def check_call(name: str, args: tuple[Expr, ...]) -> None:
    """Raise QueryError unless ``name(*args)`` is a well-typed call."""
    if name not in FUNCTIONS:
        raise QueryError(
            f"function {name!r}: not supported; query.FUNCTIONS lists the {len(FUNCTIONS)} known"
        )
    signature = FUNCTIONS[name]
    if not isinstance(args, tuple):
        raise QueryError(f"{name}(): arguments must be a tuple, got {args!r}")
    fewest = len(signature.args) - signature.optional
    most = len(signature.args) if signature.variadic is None else None
    if len(args) < fewest or (most is not None and len(args) > most):
        if most is None:
            wanted_count = f"at least {fewest}"
        elif fewest == most:
            wanted_count = str(most)
        else:
            wanted_count = f"{fewest} to {most}"
        raise QueryError(f"{name}(): takes {wanted_count} argument(s), got {len(args)}")
    wanted_types = signature.args
    if signature.variadic is not None and len(args) > len(wanted_types):
        wanted_types += (signature.variadic,) * (len(args) - len(wanted_types))
    # Optional arguments left out: zip stops at the last argument given.
    for position, (arg, wanted) in enumerate(zip(args, wanted_types, strict=False), 1):
        if not isinstance(arg, Expr):
            raise QueryError(f"{name}() argument {position}: expected an expression, got {arg!r}")
        if arg.type is not wanted:
            raise QueryError(
                f"{name}() argument {position}: expected {wanted.value}, got {arg.type.value}"
                + (" (select a range, e.g. metric[5m])" if wanted is M else "")
            )
    if name == "label_replace":
        _, dst, _, src, regex = args
        assert isinstance(dst, String)
        assert isinstance(src, String)
        assert isinstance(regex, String)
        check_label_name(dst.value, where="label_replace() destination")
        check_label_name(src.value, where="label_replace() source")
        check_regex(regex.value, where="label_replace() regex")


def _windowed(name: str) -> Callable[[Range | Subquery], Call]:
    def build(window: Range | Subquery) -> Call:
        return Call(name, (window,))

    build.__name__ = name
    build.__doc__ = f"``{name}(window)``; see :data:`FUNCTIONS` for the signature."
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
