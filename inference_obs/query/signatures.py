"""PromQL's value types, and the signature of every function it knows.

Data only, below the expression nodes: a :class:`~inference_obs.query.expr.Call`
finds its :class:`Signature` here by name when it is built, checks its
arguments against it and keeps it, so ``rate`` over an instant vector, or
``clamp`` with a string, fails before any query is sent;
:func:`~inference_obs.query.expr.keeps_label` reads from it which argument's
labels a call's result carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["FUNCTIONS", "Signature", "ValueType"]


class ValueType(StrEnum):
    """The PromQL type an expression evaluates to."""

    SCALAR = "scalar"
    VECTOR = "instant vector"
    MATRIX = "range vector"
    STRING = "string"


@dataclass(frozen=True, slots=True)
class Signature:
    """A function's argument types, result type, and where its result's labels come from."""

    args: tuple[ValueType, ...]
    returns: ValueType
    #: The argument whose labels the result keeps (``-1``: the last one), None
    #: if the result has none. Date functions may be called without an
    #: argument (then ``vector(time())``, no labels).
    labels_from: int | None = 0
    #: The argument naming a label the function writes (label_replace's
    #: destination), None if it writes none.
    writes_label: int | None = None
    #: How many trailing ``args`` may be left out (``round(v)``, ``hour()``).
    optional: int = 0
    #: The type of any further arguments (label_join's source labels), None if none.
    variadic: ValueType | None = None


S, V, M, T = ValueType.SCALAR, ValueType.VECTOR, ValueType.MATRIX, ValueType.STRING

_RANGE_TO_VECTOR = Signature((M,), V)
_MATH = Signature((V,), V)
_DATE = Signature((V,), V, optional=1)
_MATH_FUNCTIONS = (
    "abs",
    "ceil",
    "floor",
    "exp",
    "ln",
    "log2",
    "log10",
    "sqrt",
    "sgn",
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
    "sort",
    "sort_desc",
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
    "quantile_over_time": Signature((S, M), V, labels_from=1),
    "absent_over_time": Signature((M,), V, labels_from=None),
    # Instant-vector functions.
    "clamp": Signature((V, S, S), V),
    "clamp_min": Signature((V, S), V),
    "clamp_max": Signature((V, S), V),
    "label_replace": Signature((V, T, T, T, T), V, writes_label=1),
    "absent": Signature((V,), V, labels_from=None),
    "timestamp": Signature((V,), V),
    "scalar": Signature((V,), S, labels_from=None),
    "vector": Signature((S,), V, labels_from=None),
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
    "time": Signature((), S, labels_from=None),
    "pi": Signature((), S, labels_from=None),
    "histogram_fraction": Signature((S, S, V), V, labels_from=-1),
    "label_join": Signature((V, T, T), V, writes_label=1, variadic=T),
    "sort_by_label": Signature((V,), V, variadic=T),
    "sort_by_label_desc": Signature((V,), V, variadic=T),
    "info": Signature((V, V), V, optional=1),
}
