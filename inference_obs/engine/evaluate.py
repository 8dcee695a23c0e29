"""The interpreter: an expression of :mod:`inference_obs.query` evaluated over a SampleSet.

:func:`evaluate` gives the answer a Prometheus server would give to an
instant query at time ``at``, under the chosen :class:`~inference_obs.engine.rules.Rules`:

- instant selectors take each series' newest sample within the lookback
  (5 minutes by default; closed at both ends on Prometheus 2, left-open on
  3.x), and a series whose newest sample is a staleness marker is absent;
- range functions see the samples of ``[at - offset - range, at - offset]``
  (left-open on 3.x), staleness markers excluded;
- functions drop ``__name__``; aggregations and binary operators follow
  Prometheus's grouping and vector-matching rules.

A node the engine has no rule for raises
:class:`~inference_obs.errors.NotSupportedOffline` naming it.
"""

from __future__ import annotations

import re
from functools import singledispatchmethod

import numpy as np
import numpy.typing as npt

from inference_obs.engine.aggregation import IdentityCache, aggregate, group_keys, without_name
from inference_obs.engine.binary import binary
from inference_obs.engine.functions import RANGE_FUNCTIONS
from inference_obs.engine.histograms import histogram_quantile, parse_le
from inference_obs.engine.rules import Rules
from inference_obs.engine.windows import TimeIndex, drop_stale
from inference_obs.errors import NotSupportedOffline
from inference_obs.query import (
    Aggregate,
    Binary,
    Call,
    Expr,
    HistogramQuantile,
    Number,
    Range,
    Selector,
    String,
    Subquery,
    to_promql,
)
from inference_obs.samples import NAME, Floats, Ints, Labels, SampleSet, Vector, is_stale

__all__ = ["DEFAULT_LOOKBACK_SECONDS", "Evaluator", "evaluate"]

#: Prometheus's default ``--query.lookback-delta``.
DEFAULT_LOOKBACK_SECONDS = 300.0

Value = Vector | float


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


class Evaluator:
    """Evaluates expressions over one SampleSet; indexes are built once and reused."""

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
        self._subsets: dict[tuple[Selector, bool], tuple[SampleSet, TimeIndex]] = {}
        # Per instant-selector subset: every series' labels with __name__ added.
        self._named_labels: dict[Selector, tuple[Labels, ...]] = {}

    def evaluate(self, expr: Expr, at: float) -> Value:
        """The value of ``expr`` at ``at`` (unix seconds)."""
        return self._eval(expr, round(at * 1000))

    # -- selection -----------------------------------------------------------

    def _subset(self, selector: Selector, *, ranged: bool) -> tuple[SampleSet, TimeIndex]:
        plain = Selector(selector.metric, selector.matchers)
        key = (plain, ranged)
        if key not in self._subsets:
            chosen = [
                i
                for i, (name, labels) in enumerate(
                    zip(self.samples.names, self.samples.labels, strict=True)
                )
                if (selector.metric is None or name == selector.metric)
                and all(
                    m.matches(name if m.label == NAME else labels.get(m.label, ""))
                    for m in selector.matchers
                )
            ]
            subset = _take(self.samples, chosen)
            if ranged:
                subset = drop_stale(subset)
            self._subsets[key] = (subset, TimeIndex(subset))
        return self._subsets[key]

    def _named(self, selector: Selector, subset: SampleSet) -> tuple[Labels, ...]:
        """The selected series' label sets with ``__name__``, built once per selector."""
        plain = Selector(selector.metric, selector.matchers)
        if plain not in self._named_labels:
            self._named_labels[plain] = tuple(
                Labels({NAME: name, **labels})
                for name, labels in zip(subset.names, subset.labels, strict=True)
            )
        return self._named_labels[plain]

    def _end(self, offset: float | None, at: object, now_ms: int) -> int:
        base = now_ms if at in (None, "start", "end") else round(float(at) * 1000)  # type: ignore[arg-type]
        return base - round((offset or 0.0) * 1000)

    # -- nodes ---------------------------------------------------------------

    def _eval(self, expr: Expr, now_ms: int) -> Value:
        # A singledispatchmethod builds a bound wrapper at every access (Python
        # 3.11), which cost more than a small query's arithmetic: dispatch on
        # the registry of _node directly.
        return _NODE(type(expr))(self, expr, now_ms)  # type: ignore[no-any-return]

    @singledispatchmethod
    def _node(self, expr: Expr, now_ms: int) -> Value:
        raise NotSupportedOffline(
            f"{type(expr).__name__} is not evaluated offline", promql=to_promql(expr)
        )

    @_node.register
    def _(self, expr: Number, now_ms: int) -> Value:
        return float(expr.value)

    @_node.register
    def _(self, expr: Selector, now_ms: int) -> Value:
        subset, index = self._subset(expr, ranged=False)
        end = self._end(expr.offset, expr.at, now_ms)
        window = index.window(end - self.lookback_ms, end, left_open=self.rules.left_open)
        newest = window.hi - 1
        present = window.hi > window.lo
        present[present] &= ~is_stale(subset.values[newest[present]])
        keep = np.flatnonzero(present)
        labels = _pick(self._named(expr, subset), keep)
        return Vector(labels, subset.values[newest[keep]].astype(np.float64))

    @_node.register
    def _(self, expr: Call, now_ms: int) -> Value:
        if expr.name in RANGE_FUNCTIONS:
            return self._range_call(expr, now_ms)
        args = [self._eval(a, now_ms) if not isinstance(a, String) else a.value for a in expr.args]
        return _instant_call(expr, args)

    def _range_call(self, expr: Call, now_ms: int) -> Vector:
        window_arg = expr.args[-1]
        if isinstance(window_arg, Subquery):
            raise NotSupportedOffline(
                "subqueries are not evaluated offline", promql=to_promql(expr)
            )
        assert isinstance(window_arg, Range)
        selector = window_arg.selector
        subset, index = self._subset(selector, ranged=True)
        end = self._end(selector.offset, selector.at, now_ms)
        windows = index.window(
            end - round(window_arg.seconds * 1000), end, left_open=self.rules.left_open
        )
        function = RANGE_FUNCTIONS[expr.name]
        extra = [self._scalar(a, now_ms) for a in expr.args[:-1]]
        result = function(*extra, subset, windows, range_s=window_arg.seconds, rules=self.rules)
        keep = np.flatnonzero(result.present)
        if expr.name == "last_over_time":
            # The one range function that keeps the metric name (Prometheus 2.x and 3.x).
            labels = _pick(self._named(selector, subset), keep)
        else:
            # The others drop it: the subset's own label sets (which never hold
            # it) are the result's, shared rather than rebuilt.
            labels = _pick(subset.labels, keep)
        return Vector(labels, result.values[keep].astype(np.float64), result.annotations)

    def _scalar(self, expr: Expr, now_ms: int) -> float:
        value = self._eval(expr, now_ms)
        if isinstance(value, Vector):
            raise NotSupportedOffline("expected a scalar argument", promql=to_promql(expr))
        return value

    @_node.register
    def _(self, expr: Aggregate, now_ms: int) -> Value:
        inner = self._eval(expr.expr, now_ms)
        assert isinstance(inner, Vector)
        param = self._scalar(expr.param, now_ms) if expr.param is not None else None
        return aggregate(expr.op, inner, expr.by, expr.without, param)

    @_node.register
    def _(self, expr: Binary, now_ms: int) -> Value:
        lhs, rhs = self._eval(expr.lhs, now_ms), self._eval(expr.rhs, now_ms)
        return binary(expr.op, lhs, rhs, bool_=expr.bool_, matching=expr.matching)

    @_node.register
    def _(self, expr: HistogramQuantile, now_ms: int) -> Value:
        q = self._scalar(expr.q, now_ms)
        buckets = self._eval(expr.buckets, now_ms)
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
        lambda one: Labels((k, v) for k, v in one.items() if k != "le"),
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


def _take(samples: SampleSet, chosen: list[int]) -> SampleSet:
    """The chosen series, without building one object per sample."""
    index = np.asarray(chosen, dtype=np.int64)
    starts, ends = samples.offsets[index], samples.offsets[index + 1]
    sizes = ends - starts
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    positions = np.repeat(starts - offsets[:-1], sizes) + np.arange(int(offsets[-1]))
    t_ms, values = samples.t_ms[positions], samples.values[positions]
    for array in (offsets, t_ms, values):
        array.flags.writeable = False
    return SampleSet(
        tuple(samples.names[i] for i in chosen),
        tuple(samples.labels[i] for i in chosen),
        offsets,
        t_ms,
        values,
    )


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
