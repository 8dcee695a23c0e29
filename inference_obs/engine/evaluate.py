"""The interpreter: an expression of :mod:`inference_obs.query` evaluated over a SampleSet.

:func:`evaluate` gives the answer a Prometheus server would give to an
instant query at time ``at``, under the chosen :class:`~inference_obs.engine.rules.Rules`:

- instant selectors take each series' newest sample within the lookback
  (5 minutes by default; closed at both ends on Prometheus 2, left-open on
  3.x), and a series whose newest sample is a staleness marker is absent;
- range functions see the samples of ``[at - offset - range, at - offset]``
  (left-open on 3.x), staleness markers excluded;
- functions drop ``__name__``; aggregations and binary operators follow
  Prometheus's grouping and vector-matching rules;
- ``timestamp(selector)`` gives the time (unix seconds) of each series'
  sample the selector took, not the evaluation time (Prometheus 2 and 3
  alike); ``timestamp`` of any other expression gives the evaluation time.

A node the engine has no rule for raises
:class:`~inference_obs.errors.NotSupportedOffline` naming it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from functools import partial, singledispatchmethod
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from inference_obs.engine.aggregation import (
    IdentityCache,
    aggregate,
    aggregate_steps,
    group_keys,
    without_name,
)
from inference_obs.engine.binary import binary
from inference_obs.engine.functions import RANGE_FUNCTIONS
from inference_obs.engine.histograms import histogram_quantile, parse_le
from inference_obs.engine.memo import Memo
from inference_obs.engine.rules import Rules
from inference_obs.engine.selection import select, take
from inference_obs.engine.windows import TimeIndex, Windows, drop_stale
from inference_obs.errors import NotSupportedOffline
from inference_obs.query import (
    Aggregate,
    Binary,
    Call,
    Expr,
    HistogramQuantile,
    Matcher,
    Number,
    Range,
    Selector,
    String,
    Subquery,
    children,
    to_promql,
)
from inference_obs.samples import NAME, Floats, Ints, Labels, SampleSet, Vector, is_stale

__all__ = ["DEFAULT_LOOKBACK_SECONDS", "Evaluator", "evaluate"]

#: Prometheus's default ``--query.lookback-delta``.
DEFAULT_LOOKBACK_SECONDS = 300.0

Value = Vector | float
T = TypeVar("T")
_LE = frozenset({"le"})
#: Evaluation times, unix ms: ``range(start, end + 1, step)``, one time for an instant query.
Times = range
#: A selector's series and the time index over them.
Subset = tuple[SampleSet, TimeIndex]


def evaluate(
    expr: Expr,
    samples: SampleSet,
    at: float,
    *,
    rules: Rules = Rules.PROMETHEUS_2,
    lookback: float = DEFAULT_LOOKBACK_SECONDS,
) -> Value:
    """Evaluate ``expr`` as an instant query at ``at`` (unix seconds).

    Returns a :class:`~inference_obs.samples.Vector` for vector
    expressions and a float for scalar ones. For several expressions over the
    same samples, build one :class:`Evaluator` and reuse it.
    """
    return Evaluator(samples, rules=rules, lookback=lookback).evaluate(expr, at)


#: Elements (one per series per step) of the values an evaluator keeps for later
#: queries: about 64 MB at most of float values and label references.
MEMO_ELEMENTS = 4_000_000
#: Rows (series times window edges) one pass of the vectorised window search takes:
#: bounds its temporaries to a few tens of MB however many steps a query has.
_WINDOW_ROWS = 1 << 18


class Evaluator:
    """Evaluates expressions over one SampleSet; indexes are built once and reused.

    An expression is evaluated node by node over all its evaluation times at
    once (one time for an instant query), and what each node gave at those
    times is kept (:class:`~inference_obs.engine.memo.Memo`): a part that
    several queries share, or one query holds twice, is evaluated once.
    """

    def __init__(
        self,
        samples: SampleSet,
        *,
        rules: Rules = Rules.PROMETHEUS_2,
        lookback: float = DEFAULT_LOOKBACK_SECONDS,
    ) -> None:
        self.samples = samples
        self.rules = rules
        self.lookback_ms = round(lookback * 1000)
        # Per (metric, matchers, ranged): the series chosen and their time index.
        self._subsets: dict[tuple[str | None, tuple[Matcher, ...], bool], Subset] = {}
        # Per instant-selector subset: every series' labels with __name__ added.
        self._named_labels: dict[tuple[str | None, tuple[Matcher, ...]], tuple[Labels, ...]] = {}
        # Each metric's series, found when first asked for.
        self._by_name: dict[str, Sequence[int]] = {}
        self._memo = Memo(MEMO_ELEMENTS)

    def forget(self) -> None:
        """Drop every kept value (what nodes evaluated to, and range windows).

        What stays is what does not depend on a query's times or functions,
        as a TSDB keeps its index: each selector's series (selected once by
        their matchers), their samples without staleness markers, the time
        index over them with its per-sample facts, and the label groupings
        derived from label sets alone.
        """
        self._memo.clear()

    @property
    def kept_hits(self) -> int:
        """How many parts of queries were answered by values an earlier query kept.

        0 after any number of queries each preceded by :meth:`forget`.
        """
        return self._memo.kept_hits

    def evaluate(self, expr: Expr, at: float) -> Value:
        """The value of ``expr`` at ``at`` (unix seconds)."""
        now_ms = round(at * 1000)
        return self._run(expr, range(now_ms, now_ms + 1))[0]

    def evaluate_range(self, expr: Expr, start_ms: int, end_ms: int, step_ms: int) -> list[Value]:
        """The values of ``expr`` at ``start_ms``, ``start_ms + step_ms``, ... up to ``end_ms``.

        Times are unix milliseconds, ``step_ms`` > 0; one value per time, as
        :meth:`evaluate` gives it at that time.
        """
        return self._run(expr, range(start_ms, end_ms + 1, step_ms))

    def _run(self, expr: Expr, times: Times) -> list[Value]:
        # Number(-0.0) == Number(0.0): an expression holding a negative zero
        # would share values with its positive twin, so it keeps none.
        memo = None if _has_negative_zero(expr) else self._memo
        self._memo.next_round()
        return self._values(expr, times, memo)

    def _values(self, expr: Expr, times: Times, memo: Memo | None) -> list[Value]:
        """``expr`` at every time of ``times``, kept in ``memo`` (unless None or a literal)."""
        # A singledispatchmethod builds a bound wrapper at every access (Python
        # 3.11), which cost more than a small query's arithmetic: dispatch on
        # the registry of _node directly.
        node = _NODE(type(expr))
        if memo is None or isinstance(expr, Number):
            return node(self, expr, times, memo)  # type: ignore[no-any-return]
        return memo.get_or_make(
            _Key(expr, times), lambda: _shared(node(self, expr, times, memo)), _elements
        )

    # -- selection -----------------------------------------------------------

    def _subset(self, selector: Selector, *, ranged: bool) -> tuple[SampleSet, TimeIndex]:
        # Keyed by what selects (not offset or @): those share one subset.
        key = (selector.metric, selector.matchers, ranged)
        found = self._subsets.get(key)
        if found is None:
            subset = take(self.samples, select(self.samples, selector, self._by_name))
            if ranged:
                subset = drop_stale(subset)
            found = self._subsets[key] = (subset, TimeIndex(subset))
        return found

    def _named(self, selector: Selector, subset: SampleSet) -> tuple[Labels, ...]:
        """The selected series' label sets with ``__name__``, built once per selector."""
        key = (selector.metric, selector.matchers)
        found = self._named_labels.get(key)
        if found is None:
            found = self._named_labels[key] = tuple(
                Labels({NAME: name, **labels})
                for name, labels in zip(subset.names, subset.labels, strict=True)
            )
        return found

    def _end(self, offset: float | None, at: object, now_ms: int) -> int:
        base = now_ms if at in (None, "start", "end") else round(float(at) * 1000)  # type: ignore[arg-type]
        return base - round((offset or 0.0) * 1000)

    def _windows_at(
        self, index: TimeIndex, selector: Selector, width_ms: int, times: Times
    ) -> list[Windows]:
        """Windows of ``width_ms`` ending at each time (``offset`` and ``@`` applied).

        One vectorised search per block of times (:data:`_WINDOW_ROWS`).
        """
        ends = [self._end(selector.offset, selector.at, now) for now in times]
        block = max(1, _WINDOW_ROWS // max(2 * len(index.samples), 1))
        found: list[Windows] = []
        for k in range(0, len(ends), block):
            part = ends[k : k + block]
            starts = [end - width_ms for end in part]
            found += index.windows(starts, part, left_open=self.rules.left_open)
        return found

    def _windows(self, expr: Range, times: Times, memo: Memo | None) -> list[Windows]:
        """The range selector's window at every time."""
        _, index = self._subset(expr.selector, ranged=True)
        width_ms = round(expr.seconds * 1000)
        if memo is None:
            return self._windows_at(index, expr.selector, width_ms, times)
        # Kept apart from the node's values: sum_over_time and count_over_time of
        # one selector share their windows.
        return memo.get_or_make(
            _Key(expr, times, "windows"),
            lambda: self._windows_at(index, expr.selector, width_ms, times),
            lambda w: sum(one.lo.size for one in w),
        )

    # -- nodes ---------------------------------------------------------------

    @singledispatchmethod
    def _node(self, expr: Expr, times: Times, memo: Memo | None) -> list[Value]:
        raise NotSupportedOffline(
            f"{type(expr).__name__} is not evaluated offline", promql=to_promql(expr)
        )

    @_node.register
    def _(self, expr: Number, times: Times, memo: Memo | None) -> list[Value]:
        return [float(expr.value)] * len(times)

    @_node.register
    def _(self, expr: Selector, times: Times, memo: Memo | None) -> list[Value]:
        subset, index = self._subset(expr, ranged=False)
        named = self._named(expr, subset)
        out: list[Value] = []
        for window in self._windows_at(index, expr, self.lookback_ms, times):
            newest = window.hi - 1
            present = window.hi > window.lo
            present[present] &= ~is_stale(subset.values[newest[present]])
            keep = np.flatnonzero(present)
            out.append(Vector(_pick(named, keep), subset.values[newest[keep]].astype(np.float64)))
        return out

    @_node.register
    def _(self, expr: Call, times: Times, memo: Memo | None) -> list[Value]:
        if expr.name in RANGE_FUNCTIONS:
            return self._range_call(expr, times, memo)
        if expr.name == "timestamp":
            return self._timestamp(expr.args[0], times, memo)
        args: list[Sequence[Value | str]] = [
            [a.value] * len(times) if isinstance(a, String) else self._values(a, times, memo)
            for a in expr.args
        ]
        return [_instant_call(expr, list(step)) for step in _steps(args, len(times))]

    def _timestamp(self, arg: Expr, times: Times, memo: Memo | None) -> list[Value]:
        """``timestamp(arg)`` at every time: sample times for a selector, else the time."""
        if not isinstance(arg, Selector):
            # Prometheus funcTimestamp: the evaluation time of each element.
            inner = [_vector(one, arg) for one in self._values(arg, times, memo)]
            return [
                Vector(
                    tuple(without_name(one) for one in vector.labels),
                    np.full(len(vector), now / 1000.0),
                    vector.annotations,
                )
                for vector, now in zip(inner, times, strict=True)
            ]
        # Prometheus (engine.go, a Call of timestamp on a VectorSelector) keeps the
        # timestamp of the sample each series gave, the one the selector itself takes.
        subset, index = self._subset(arg, ranged=False)
        out: list[Value] = []
        for window in self._windows_at(index, arg, self.lookback_ms, times):
            newest = window.hi - 1
            present = window.hi > window.lo
            present[present] &= ~is_stale(subset.values[newest[present]])
            keep = np.flatnonzero(present)
            out.append(Vector(_pick(subset.labels, keep), subset.t_ms[newest[keep]] / 1000.0))
        return out

    def _range_call(self, expr: Call, times: Times, memo: Memo | None) -> list[Value]:
        window_arg = expr.args[-1]
        if isinstance(window_arg, Subquery):
            raise NotSupportedOffline(
                "subqueries are not evaluated offline", promql=to_promql(expr)
            )
        assert isinstance(window_arg, Range)
        selector = window_arg.selector
        subset, _ = self._subset(selector, ranged=True)
        function = RANGE_FUNCTIONS[expr.name]
        extras = [self._values(a, times, memo) for a in expr.args[:-1]]
        # last_over_time is the one range function that keeps the metric name
        # (Prometheus 2.x and 3.x). The others drop it: the subset's own label
        # sets (which never hold it) are the result's, shared rather than rebuilt.
        named = expr.name == "last_over_time"
        labels = self._named(selector, subset) if named else subset.labels
        out: list[Value] = []
        windows = self._windows(window_arg, times, memo)
        for k, step in enumerate(_steps(extras, len(times))):
            extra = [_scalar(v, a) for v, a in zip(step, expr.args, strict=False)]
            result = function(
                *extra, subset, windows[k], range_s=window_arg.seconds, rules=self.rules
            )
            keep = np.flatnonzero(result.present)
            values = result.values[keep].astype(np.float64)
            out.append(Vector(_pick(labels, keep), values, result.annotations))
        return out

    @_node.register
    def _(self, expr: Aggregate, times: Times, memo: Memo | None) -> list[Value]:
        inner = self._values(expr.expr, times, memo)
        if expr.param is None:
            vectors = [_vector(one, expr.expr) for one in inner]
            return [*aggregate_steps(expr.op, vectors, expr.by, expr.without)]
        params: list[Value | None] = (
            [None] * len(times) if expr.param is None else [*self._values(expr.param, times, memo)]
        )
        out: list[Value] = []
        for vector, param in zip(inner, params, strict=True):
            assert isinstance(vector, Vector)
            scalar = None if param is None else _scalar(param, expr.param)
            out.append(aggregate(expr.op, vector, expr.by, expr.without, scalar))
        return out

    @_node.register
    def _(self, expr: Binary, times: Times, memo: Memo | None) -> list[Value]:
        lhs, rhs = self._values(expr.lhs, times, memo), self._values(expr.rhs, times, memo)
        return [
            binary(expr.op, a, b, bool_=expr.bool_, matching=expr.matching)
            for a, b in zip(lhs, rhs, strict=True)
        ]

    @_node.register
    def _(self, expr: HistogramQuantile, times: Times, memo: Memo | None) -> list[Value]:
        qs, all_buckets = self._values(expr.q, times, memo), self._values(expr.buckets, times, memo)
        return [
            self._quantile(_scalar(q, expr.q), buckets)
            for q, buckets in zip(qs, all_buckets, strict=True)
        ]

    def _quantile(self, q: float, buckets: Value) -> Vector:
        assert isinstance(buckets, Vector)
        upper, valid, groups, group_labels = _buckets(buckets.labels)
        result = histogram_quantile(
            q, upper, buckets.values[valid], groups, len(group_labels), rules=self.rules
        )
        keep = np.flatnonzero(result.present)
        return Vector(
            _pick(group_labels, keep),
            result.values[keep].astype(np.float64),
            buckets.annotations + result.annotations,
        )


_NODE = Evaluator.__dict__["_node"].dispatcher.dispatch


def _has_negative_zero(expr: Expr) -> bool:
    """Whether ``expr`` holds a literal -0.0 anywhere.

    Written per node type (``walk``'s generic matching cost a small query
    more than its memo lookups).
    """
    if type(expr) is Number:
        return expr.value == 0 and math.copysign(1.0, expr.value) < 0
    if type(expr) is Selector or type(expr) is Range or type(expr) is String:
        return False
    if type(expr) is Binary:
        return _has_negative_zero(expr.lhs) or _has_negative_zero(expr.rhs)
    if type(expr) is Aggregate:
        if expr.param is not None and _has_negative_zero(expr.param):
            return True
        return _has_negative_zero(expr.expr)
    return any(_has_negative_zero(child) for child in children(expr))


class _Key:
    """A memo key: a node (and a tag) at some times, hashed once rather than at every lookup.

    Hashing an expression hashes its whole subtree; a memo lookup that
    misses hashes its key three times (find, replace, store).
    """

    __slots__ = ("_hash", "expr", "tag", "times")

    def __init__(self, expr: Expr, times: Times, tag: str = "") -> None:
        self.expr, self.times, self.tag = expr, times, tag
        self._hash = hash((expr, times, tag))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Key)
            and self._hash == other._hash
            and self.tag == other.tag
            and self.times == other.times
            and self.expr == other.expr
        )


def _scalar(value: Value, expr: Expr | None) -> float:
    if isinstance(value, Vector):
        raise NotSupportedOffline("expected a scalar argument", promql=to_promql(expr or Number(0)))
    return value


def _vector(value: Value, expr: Expr) -> Vector:
    if not isinstance(value, Vector):
        raise NotSupportedOffline("expected an instant vector", promql=to_promql(expr))
    return value


def _steps(columns: Sequence[Sequence[T]], n: int) -> Iterator[tuple[T, ...]]:
    """Each time's values of ``columns`` (per operand, per time); ``n`` empty tuples if none."""
    return zip(*columns, strict=True) if columns else iter([()] * n)


def _elements(values: list[Value]) -> int:
    """What ``values`` weigh in a :class:`~inference_obs.engine.memo.Memo`: one per element."""
    return sum(len(v) if isinstance(v, Vector) else 1 for v in values)


def _shared(values: list[Value]) -> list[Value]:
    """``values`` made read-only: a kept value is handed to every later query that asks."""
    for value in values:
        if isinstance(value, Vector):
            value.values.flags.writeable = False
    return values


def _pick(labels: tuple[Labels, ...], keep: npt.NDArray[np.intp]) -> tuple[Labels, ...]:
    """``labels`` at ``keep``; the tuple itself when all are kept (so caches keyed on it hit)."""
    if keep.size == len(labels):
        return labels
    return tuple(labels[i] for i in keep.tolist())


#: Bucket layouts of recently seen label tuples (parsed ``le``, rows kept, groups).
_BUCKET_LAYOUTS = IdentityCache(64)

BucketLayout = tuple[Floats, npt.NDArray[np.intp], Ints, tuple[Labels, ...]]


def _buckets(labels: tuple[Labels, ...]) -> BucketLayout:
    """Each bucket's bound, the rows with a valid one, their group, and each group's labels.

    Groups are the label sets without ``le``; the result's labels also lose
    ``__name__``. Remembered per label tuple: a histogram over the same series
    is laid out once.
    """
    found = _BUCKET_LAYOUTS.get(labels, "buckets")
    if found is not None:
        return found  # type: ignore[return-value]
    upper = parse_le([one.get("le", "") for one in labels])
    valid = np.flatnonzero(~np.isnan(upper))
    groups, group_labels = group_keys(
        [labels[i] for i in valid.tolist()],
        partial(Labels.drop, names=_LE),
    )
    bounds = upper[valid]
    for array in (bounds, valid, groups):
        array.flags.writeable = False
    layout: BucketLayout = (
        bounds,
        valid,
        groups,
        tuple(without_name(one) for one in group_labels),
    )
    _BUCKET_LAYOUTS.put(labels, "buckets", layout)
    return layout


def _instant_call(expr: Call, args: list[Value | str]) -> Value:
    name = expr.name
    if name == "vector":
        return Vector((Labels(),), np.array([float(args[0])]))  # type: ignore[arg-type]
    if not args:  # time(), pi(), hour() without an argument
        raise NotSupportedOffline(
            f"function {name}() is not evaluated offline", promql=to_promql(expr)
        )
    vector = args[0]
    if not isinstance(vector, Vector):
        raise NotSupportedOffline(f"{name}() needs an instant vector", promql=to_promql(expr))
    if name == "scalar":
        return float(vector.values[0]) if len(vector) == 1 else float("nan")
    if name == "absent":
        if len(vector):
            return Vector((), np.zeros(0))
        # Like Prometheus, the absent series carries the selector's equality labels.
        selector = expr.args[0]
        equal = {}
        if isinstance(selector, Selector):
            equal = {
                m.label: m.value for m in selector.matchers if m.op.value == "=" and m.label != NAME
            }
        return Vector((Labels(equal),), np.ones(1))
    labels = tuple(without_name(one) for one in vector.labels)
    with np.errstate(invalid="ignore"):
        if name == "clamp":
            low, high = float(args[1]), float(args[2])  # type: ignore[arg-type]
            if low > high:
                return Vector((), np.zeros(0), vector.annotations)
            return Vector(labels, np.clip(vector.values, low, high), vector.annotations)
        if name == "clamp_min":
            return Vector(
                labels,
                np.maximum(vector.values, float(args[1])),  # type: ignore[arg-type]
                vector.annotations,
            )
        if name == "clamp_max":
            return Vector(
                labels,
                np.minimum(vector.values, float(args[1])),  # type: ignore[arg-type]
                vector.annotations,
            )
    if name == "label_replace":
        return _label_replace(vector, *(str(a) for a in args[1:]))
    raise NotSupportedOffline(f"function {name}() is not evaluated offline", promql=to_promql(expr))


def _label_replace(vector: Vector, dst: str, replacement: str, src: str, regex: str) -> Vector:
    pattern = re.compile(regex, re.DOTALL)
    # Go's Regexp.Expand writes $1 or ${1} (and ${name}); Python's expand writes \g<1>.
    template = re.sub(r"\$\{?(\w+)\}?", r"\\g<\1>", replacement)
    labels = []
    for one in vector.labels:
        match = pattern.fullmatch(one.get(src, ""))
        if match is None:
            labels.append(one)
            continue
        updated = {k: v for k, v in one.items() if k != dst}
        value = match.expand(template)
        if value:
            updated[dst] = value
        labels.append(Labels(updated))
    return Vector(tuple(labels), vector.values, vector.annotations)
