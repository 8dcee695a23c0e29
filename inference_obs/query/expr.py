"""An immutable, typed expression tree for the PromQL this library needs.

Nodes are named as PromQL names them. Each checks its input when it is built
and raises :class:`~inference_obs.errors.QueryError` naming the problem, so an
invalid query never reaches a server. Text is made in one place only:
:func:`inference_obs.query.render.to_promql`.

Durations, offsets and ``@`` times are float seconds (whole milliseconds).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Literal

from inference_obs.errors import QueryError
from inference_obs.query.matcher import Matcher, MatchOp
from inference_obs.query.names import (
    check_duration,
    check_label_name,
    check_metric_name,
    check_regex,
    check_text,
)
from inference_obs.query.signatures import FUNCTIONS, Signature, ValueType

__all__ = [
    "AGGREGATIONS",
    "Aggregate",
    "At",
    "Binary",
    "Call",
    "Expr",
    "HistogramQuantile",
    "MatchOp",
    "Matcher",
    "Matching",
    "Number",
    "Range",
    "Selector",
    "String",
    "Subquery",
    "ignoring",
    "on",
]


#: ``@`` may name a time (unix seconds) or the start/end of a range query.
At = float | Literal["start", "end"]


class Expr(ABC):
    """Base of every node: arithmetic operators build :class:`Binary` nodes."""

    __slots__ = ()

    @property
    @abstractmethod
    def type(self) -> ValueType:
        """The PromQL type this expression evaluates to."""

    def __add__(self, other: Expr | float) -> Binary:
        return Binary("+", self, _lift(other))

    def __sub__(self, other: Expr | float) -> Binary:
        return Binary("-", self, _lift(other))

    def __mul__(self, other: Expr | float) -> Binary:
        return Binary("*", self, _lift(other))

    def __truediv__(self, other: Expr | float) -> Binary:
        return Binary("/", self, _lift(other))

    def __radd__(self, other: float) -> Binary:
        return Binary("+", _lift(other), self)

    def __rsub__(self, other: float) -> Binary:
        return Binary("-", _lift(other), self)

    def __rmul__(self, other: float) -> Binary:
        return Binary("*", _lift(other), self)

    def __rtruediv__(self, other: float) -> Binary:
        return Binary("/", _lift(other), self)

    # Aggregations are methods because their PromQL names shadow Python builtins.
    def sum(
        self, *, by: tuple[str, ...] | None = None, without: tuple[str, ...] | None = None
    ) -> Aggregate:
        """``sum`` over series, keeping the ``by`` labels (or all but ``without``)."""
        return Aggregate("sum", self, by=by, without=without)

    def avg(
        self, *, by: tuple[str, ...] | None = None, without: tuple[str, ...] | None = None
    ) -> Aggregate:
        """``avg`` over series: an unweighted mean of the series' values."""
        return Aggregate("avg", self, by=by, without=without)

    def min(
        self, *, by: tuple[str, ...] | None = None, without: tuple[str, ...] | None = None
    ) -> Aggregate:
        """``min`` over series."""
        return Aggregate("min", self, by=by, without=without)

    def max(
        self, *, by: tuple[str, ...] | None = None, without: tuple[str, ...] | None = None
    ) -> Aggregate:
        """``max`` over series."""
        return Aggregate("max", self, by=by, without=without)

    def count(
        self, *, by: tuple[str, ...] | None = None, without: tuple[str, ...] | None = None
    ) -> Aggregate:
        """``count`` of series."""
        return Aggregate("count", self, by=by, without=without)

    def quantile(
        self, q: float, *, by: tuple[str, ...] | None = None, without: tuple[str, ...] | None = None
    ) -> Aggregate:
        """``quantile`` of the series' values (not a histogram quantile)."""
        return Aggregate("quantile", self, by=by, without=without, param=Number(q))

    def topk(
        self, k: int, *, by: tuple[str, ...] | None = None, without: tuple[str, ...] | None = None
    ) -> Aggregate:
        """``topk``: the ``k`` largest series."""
        return Aggregate("topk", self, by=by, without=without, param=Number(k))


def _lift(value: Expr | float) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise QueryError(f"operand {value!r} is neither an expression nor a number")
    return Number(float(value))


def _check_at(at: At | None, where: str) -> None:
    if at is None or at in ("start", "end"):
        return
    if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
        raise QueryError(f"{where}: '@' must be unix seconds, 'start' or 'end', got {at!r}")
    if abs(at * 1000 - round(at * 1000)) > 1e-3:
        raise QueryError(f"{where}: '@' time {at!r} is not a whole number of milliseconds")


def _check_offset(offset: float | None, where: str) -> None:
    if offset is not None:
        # Negative offsets need a feature flag on Prometheus 2.x; refuse them.
        check_duration(offset, where=f"{where} offset")


def _check_type(expr: object, expected: ValueType, where: str) -> None:
    if not isinstance(expr, Expr):
        raise QueryError(f"{where}: expected an expression, got {expr!r}")
    if expr.type is not expected:
        raise QueryError(f"{where}: expected {expected.value}, got {expr.type.value}")


@dataclass(frozen=True, slots=True)
class Selector(Expr):
    """An instant-vector selector: ``metric{matchers} offset o @ t``."""

    metric: str | None
    matchers: tuple[Matcher, ...] = ()
    offset: float | None = None
    at: At | None = None

    def __post_init__(self) -> None:
        where = f"selector {self.metric or ''}{{...}}"
        if self.metric is not None:
            check_metric_name(self.metric, where=where)
        if not isinstance(self.matchers, tuple) or not all(
            isinstance(m, Matcher) for m in self.matchers
        ):
            raise QueryError(f"{where}: matchers must be a tuple of Matcher")
        if self.metric is not None and any(m.label == "__name__" for m in self.matchers):
            raise QueryError(f"{where}: metric name given twice (as name and __name__ matcher)")
        if self.metric is None and all(m.matches("") for m in self.matchers):
            raise QueryError(
                f"{where}: a selector needs a metric name or a matcher that does not "
                "match the empty string"
            )
        _check_offset(self.offset, where)
        _check_at(self.at, where)

    @property
    def type(self) -> ValueType:
        return ValueType.VECTOR

    def where(self, *matchers: Matcher) -> Selector:
        """This selector with ``matchers`` added."""
        return Selector(self.metric, self.matchers + matchers, self.offset, self.at)

    def over(self, seconds: float) -> Range:
        """The range vector of this selector over the last ``seconds``."""
        return Range(self, seconds)


@dataclass(frozen=True, slots=True)
class Range(Expr):
    """A range-vector selector: ``selector[range]`` (range in seconds)."""

    selector: Selector
    seconds: float

    def __post_init__(self) -> None:
        if not isinstance(self.selector, Selector):
            raise QueryError(
                f"range [{self.seconds!r}s]: only a selector can take a range; "
                "use Subquery for an expression"
            )
        check_duration(self.seconds, where=f"range of {self.selector.metric or 'selector'}")

    @property
    def type(self) -> ValueType:
        return ValueType.MATRIX


@dataclass(frozen=True, slots=True)
class Subquery(Expr):
    """A subquery ``expr[range:step]``; ``step`` None uses the server's default."""

    expr: Expr
    seconds: float
    step: float | None = None
    offset: float | None = None
    at: At | None = None

    def __post_init__(self) -> None:
        _check_type(self.expr, ValueType.VECTOR, "subquery")
        check_duration(self.seconds, where="subquery range")
        if self.step is not None:
            check_duration(self.step, where="subquery step")
        _check_offset(self.offset, "subquery")
        _check_at(self.at, "subquery")

    @property
    def type(self) -> ValueType:
        return ValueType.MATRIX


@dataclass(frozen=True, slots=True)
class Number(Expr):
    """A float literal."""

    value: float

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise QueryError(f"number literal: expected a number, got {self.value!r}")

    @property
    def type(self) -> ValueType:
        return ValueType.SCALAR


@dataclass(frozen=True, slots=True)
class String(Expr):
    """A string literal (function arguments such as label_replace's)."""

    value: str

    def __post_init__(self) -> None:
        check_text(self.value, where="string literal")

    @property
    def type(self) -> ValueType:
        return ValueType.STRING


@dataclass(frozen=True, slots=True)
class Call(Expr):
    """A function call, holding its :class:`~inference_obs.query.signatures.Signature`.

    The signature is found by name in
    :data:`~inference_obs.query.signatures.FUNCTIONS` when the call is built,
    and the arguments are checked against it.
    """

    name: str
    args: tuple[Expr, ...]
    signature: Signature = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "signature", _checked_signature(self.name, self.args))

    @property
    def type(self) -> ValueType:
        return self.signature.returns


def _checked_signature(name: str, args: tuple[Expr, ...]) -> Signature:
    """The signature of ``name``; raise QueryError unless ``name(*args)`` is a well-typed call."""
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
                + (" (select a range, e.g. metric[5m])" if wanted is ValueType.MATRIX else "")
            )
    if name == "label_replace":
        _, dst, _, src, regex = args
        assert isinstance(dst, String)
        assert isinstance(src, String)
        assert isinstance(regex, String)
        check_label_name(dst.value, where="label_replace() destination")
        check_label_name(src.value, where="label_replace() source")
        check_regex(regex.value, where="label_replace() regex")
    return signature


#: Aggregation operators, and the type of their parameter (None: no parameter).
AGGREGATIONS: dict[str, ValueType | None] = {
    "sum": None,
    "avg": None,
    "min": None,
    "max": None,
    "count": None,
    "group": None,
    "stddev": None,
    "stdvar": None,
    "quantile": ValueType.SCALAR,
    "topk": ValueType.SCALAR,
    "bottomk": ValueType.SCALAR,
    "count_values": ValueType.STRING,
}


@dataclass(frozen=True, slots=True)
class Aggregate(Expr):
    """An aggregation ``op by (labels) (param, expr)``.

    With neither ``by`` nor ``without`` every label is dropped.
    """

    op: str
    expr: Expr
    by: tuple[str, ...] | None = None
    without: tuple[str, ...] | None = None
    param: Expr | None = None

    def __post_init__(self) -> None:
        where = f"aggregation {self.op!r}"
        if self.op not in AGGREGATIONS:
            raise QueryError(f"{where}: unknown; expected one of {sorted(AGGREGATIONS)}")
        _check_type(self.expr, ValueType.VECTOR, where)
        if self.by is not None and self.without is not None:
            raise QueryError(f"{where}: give 'by' or 'without', not both")
        for labels in (self.by, self.without):
            if labels is not None:
                if not isinstance(labels, tuple):
                    raise QueryError(f"{where}: grouping labels must be a tuple, got {labels!r}")
                for label in labels:
                    check_label_name(label, where=f"{where} grouping")
        wanted = AGGREGATIONS[self.op]
        if wanted is None and self.param is not None:
            raise QueryError(f"{where}: takes no parameter")
        if wanted is not None:
            if self.param is None:
                raise QueryError(f"{where}: needs a {wanted.value} parameter")
            _check_type(self.param, wanted, f"{where} parameter")

    @property
    def type(self) -> ValueType:
        return ValueType.VECTOR


@dataclass(frozen=True, slots=True)
class Matching:
    """Vector matching for a binary operation: ``on``/``ignoring`` and grouping.

    Build it with :func:`on` or :func:`ignoring`, then ``.group_left(...)``.
    """

    kind: Literal["on", "ignoring"]
    labels: tuple[str, ...] = ()
    group: Literal["left", "right"] | None = None
    include: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("on", "ignoring"):
            raise QueryError(f"vector matching: kind must be 'on' or 'ignoring', not {self.kind!r}")
        if self.group not in (None, "left", "right"):
            raise QueryError(
                f"vector matching: group must be 'left' or 'right', not {self.group!r}"
            )
        for label in self.labels + self.include:
            check_label_name(label, where=f"vector matching {self.kind}(...)")
        if self.include and self.group is None:
            raise QueryError("vector matching: included labels need group_left or group_right")

    def group_left(self, *include: str) -> Matching:
        """Many-to-one matching; ``include`` copies labels from the right side."""
        return Matching(self.kind, self.labels, "left", include)

    def group_right(self, *include: str) -> Matching:
        """One-to-many matching; ``include`` copies labels from the left side."""
        return Matching(self.kind, self.labels, "right", include)


def on(*labels: str) -> Matching:
    """Match series on exactly these labels."""
    return Matching("on", labels)


def ignoring(*labels: str) -> Matching:
    """Match series on all labels except these."""
    return Matching("ignoring", labels)


ARITHMETIC = ("+", "-", "*", "/", "%", "^", "atan2")
COMPARISON = ("==", "!=", ">", "<", ">=", "<=")
SET = ("and", "or", "unless")


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    """A binary operation ``lhs op [bool] [matching] rhs``."""

    op: str
    lhs: Expr
    rhs: Expr
    bool_: bool = False
    matching: Matching | None = None

    def __post_init__(self) -> None:
        where = f"binary {self.op!r}"
        if self.op not in ARITHMETIC + COMPARISON + SET:
            raise QueryError(f"{where}: unknown operator")
        for side, operand in (("left", self.lhs), ("right", self.rhs)):
            if not isinstance(operand, Expr) or operand.type not in (
                ValueType.SCALAR,
                ValueType.VECTOR,
            ):
                kind = operand.type.value if isinstance(operand, Expr) else repr(operand)
                raise QueryError(
                    f"{where}: {side} operand must be a scalar or instant vector, got {kind}"
                )
        both_vectors = self.lhs.type is self.rhs.type is ValueType.VECTOR
        if self.op in SET and not both_vectors:
            raise QueryError(f"{where}: set operators need instant vectors on both sides")
        if self.bool_ and self.op not in COMPARISON:
            raise QueryError(f"{where}: 'bool' applies to comparison operators only")
        if (
            self.op in COMPARISON
            and not self.bool_
            and self.lhs.type is self.rhs.type is ValueType.SCALAR
        ):
            raise QueryError(f"{where}: comparing two scalars needs 'bool'")
        if self.matching is not None:
            if not both_vectors:
                raise QueryError(f"{where}: on/ignoring apply only between two instant vectors")
            if self.op in SET and self.matching.group is not None:
                raise QueryError(
                    f"{where}: group_left/group_right cannot be used with set operators"
                )

    @property
    def type(self) -> ValueType:
        if ValueType.VECTOR in (self.lhs.type, self.rhs.type):
            return ValueType.VECTOR
        return ValueType.SCALAR


@dataclass(frozen=True, slots=True)
class HistogramQuantile(Expr):
    """``histogram_quantile(q, buckets)`` over classic ``le`` buckets.

    The buckets expression must keep the ``le`` label: an aggregation in it
    must group ``by`` a list containing ``le``, or exclude it from ``without``.
    """

    q: Expr
    buckets: Expr

    def __post_init__(self) -> None:
        _check_type(self.q, ValueType.SCALAR, "histogram_quantile quantile")
        _check_type(self.buckets, ValueType.VECTOR, "histogram_quantile buckets")
        if not keeps_label(self.buckets, "le"):
            raise QueryError(
                "histogram_quantile: the bucket expression drops the 'le' label; "
                "aggregate with 'by (..., le)' so buckets are merged, not lost"
            )

    @property
    def type(self) -> ValueType:
        return ValueType.VECTOR


def keeps_label(expr: Expr, label: str) -> bool:
    """Whether ``label`` can survive evaluation of ``expr`` (conservative: True if unsure)."""
    match expr:
        case Selector() | Range():
            return True
        case Subquery(expr=inner):
            return keeps_label(inner, label)
        case Aggregate(op=op, expr=inner, by=by, without=without):
            if op in ("topk", "bottomk"):
                return keeps_label(inner, label)
            if by is not None:
                return label in by
            if without is not None:
                return label not in without and keeps_label(inner, label)
            return False
        case HistogramQuantile() | Number() | String():
            return False
        case Binary(lhs=lhs, rhs=rhs, matching=matching, op=op):
            if lhs.type is ValueType.SCALAR:
                return keeps_label(rhs, label)
            if rhs.type is ValueType.SCALAR:
                return keeps_label(lhs, label)
            if op == "or":
                return keeps_label(lhs, label) or keeps_label(rhs, label)
            if matching is None:
                return keeps_label(lhs, label)
            if matching.group == "left":
                return keeps_label(lhs, label) or label in matching.include
            if matching.group == "right":
                return keeps_label(rhs, label) or label in matching.include
            if matching.kind == "on":
                return label in matching.labels
            return label not in matching.labels and keeps_label(lhs, label)
        case Call(args=args, signature=signature):
            if signature.writes_label is not None:
                written = args[signature.writes_label]
                if isinstance(written, String) and written.value == label:
                    return True
            source = signature.labels_from
            return source is not None and bool(args) and keeps_label(args[source], label)
    return True
