"""Counters: lifetime totals, _sum without _count, _count shown as the observations' unit.

The builders' rule (:mod:`inference_obs.metrics.builders`): counters are
turned into per-series ``rate``/``increase`` first, then summed; a request
mean divides the ``_sum``'s change by the ``_count``'s.
"""

from __future__ import annotations

from collections.abc import Iterator

from inference_obs.lint.context import Context, Problem, transform
from inference_obs.metrics import builders
from inference_obs.metrics.family import MetricType
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
    walk,
)

__all__ = ["check_counters", "mean_parts"]

# Range functions that read a counter correctly.
_COUNTER_SAFE = frozenset(
    {
        # Its change.
        "rate",
        "increase",
        "irate",
        "resets",
        "changes",
        # Only its samples' presence.
        "count_over_time",
        "present_over_time",
        "absent_over_time",
        "timestamp",
        "ts_of_last_over_time",
    }
)
# Range functions for gauges that ignore counter resets.
# What each becomes for a counter, in the same unit (idelta has no such counterpart).
_GAUGE_CHANGE = {"delta": "increase", "deriv": "rate"}
_GAUGE_ONLY = frozenset({*_GAUGE_CHANGE, "idelta", "predict_linear", "holt_winters"})
_GAUGE_ONLY |= {"double_exponential_smoothing"}
# Functions that pass a vector through, labels rewritten or order changed.
_PASS_THROUGH = frozenset({"label_replace", "label_join", "sort", "sort_desc"})
_PASS_THROUGH |= {"sort_by_label", "sort_by_label_desc"}
_RATES = frozenset({"rate", "increase", "irate"})
# Words that present a number as a per-request or per-observation figure.
_PER_OBSERVATION_WORDS = (
    "mean",
    "avg",
    "average",
    "length",
    "max",
    "per request",
    "latency",
    "time",
    "size",
    "duration",
)
# Words that present a number in the unit of the observations.
_UNIT_WORDS = {"tokens": ("token", "tps", "tok/s"), "bytes": ("byte",)}


def check_counters(ctx: Context) -> Iterator[Problem]:
    """OBS201, OBS202, OBS203 and OBS204."""
    yield from _lifetime(ctx)
    for node in walk(ctx.expr):
        if isinstance(node, Call):
            yield from _sum_alone(ctx, node)
            yield from _count_as_unit(ctx, node)
    yield from _gauge_functions(ctx)


def _is_counter(ctx: Context, selector: Selector) -> bool:
    return ctx.of(selector).kind is MetricType.COUNTER


def _lifetime_use(ctx: Context, selector: Selector) -> bool:
    """Whether the counter ``selector`` enters arithmetic without a rate or increase.

    A counter shown as it is (the whole expression, perhaps relabelled) is its
    lifetime total on purpose, and is left alone.
    """
    node: Expr = selector
    for above in ctx.ancestors(selector):
        if isinstance(above, Call) and above.name in _PASS_THROUGH:
            node = above
            continue
        if isinstance(above, Range | Subquery):
            function = ctx.parent(above)
            if isinstance(function, Call) and function.name in _GAUGE_ONLY:
                return False  # OBS204 says it
            return not (isinstance(function, Call) and function.name in _COUNTER_SAFE)
        if isinstance(above, Call) and above.name in ("absent", "timestamp"):
            return False
        if isinstance(above, Aggregate) and above.op in ("count", "group", "count_values"):
            return False
        if _annihilated(above):
            return False
        # As a filter (the right side of and/unless) only which series exist matters.
        return not (
            isinstance(above, Binary) and above.op in ("and", "unless") and above.rhs is node
        )
    return False


def _annihilated(node: Expr) -> bool:
    """Whether ``node`` keeps its operand's labels but not its value.

    ``x * 0`` (the label-join idiom ``max by (k, l) (x * 0 + 1)``) and
    ``x > bool 0`` read a counter only for which series exist and their
    labels, so no lifetime number reaches the result (``x > bool 1000`` still
    reads its lifetime total).
    """
    if not isinstance(node, Binary):
        return False
    zero = any(isinstance(side, Number) and side.value == 0.0 for side in (node.lhs, node.rhs))
    # x * 0 is 0 whatever x; x > bool 0 says only whether x ever counted.
    return zero and (node.op == "*" or node.bool_)


def _lifetime(ctx: Context) -> Iterator[Problem]:
    found = [s for s in ctx.selectors() if _is_counter(ctx, s) and _lifetime_use(ctx, s)]
    if not found:
        return
    names = ", ".join(dict.fromkeys(s.metric or "" for s in found))
    window = ctx.window()
    mean = _lifetime_mean(ctx, found, window)
    if mean is not None:
        fix = mean
    else:
        raw = {id(s) for s in found}
        fix = transform(
            ctx.expr,
            lambda n: (
                Call("rate", (Range(n, window),))
                if isinstance(n, Selector) and id(n) in raw
                else None
            ),
        )
    yield Problem(
        "OBS201",
        f"counter {names} used without rate() or increase(): a lifetime number",
        fix=fix,
    )


def _lifetime_mean(ctx: Context, found: list[Selector], window: float) -> Expr | None:
    """``avg(x_sum) / avg(x_count)`` and the like: the request mean the builders make."""
    top = ctx.expr
    if not isinstance(top, Binary) or top.op != "/":
        return None
    parts = _lifetime_mean_parts(ctx, top)
    if parts is None:
        return None
    total, _count = parts
    known = ctx.of(total)
    if known.family is None or known.router:
        return None
    by = top.lhs.by or () if isinstance(top.lhs, Aggregate) else ()
    return builders.histogram_mean(known.family, total.matchers, window, by)


def mean_parts(ctx: Context, division: Binary) -> tuple[Selector, Selector] | None:
    """The ``_sum`` and ``_count`` selectors of ``sum-side / count-side``, if it is a mean.

    Only selectors under rate() or increase() count: ``rate(x_sum) / rate(x_count)``.
    """
    return _mean_parts(ctx, division, windowed=True)


def _lifetime_mean_parts(ctx: Context, division: Binary) -> tuple[Selector, Selector] | None:
    """As :func:`mean_parts`, of raw selectors (``x_sum / x_count``): a lifetime mean."""
    return _mean_parts(ctx, division, windowed=False)


def _mean_parts(
    ctx: Context, division: Binary, *, windowed: bool
) -> tuple[Selector, Selector] | None:
    if division.op != "/":
        return None
    sums = _parts(ctx, division.lhs, "sum", windowed=windowed)
    counts = _parts(ctx, division.rhs, "count", windowed=windowed)
    if len(sums) == 1 and len(counts) == 1 and ctx.of(sums[0]).base == ctx.of(counts[0]).base:
        return sums[0], counts[0]
    return None


def _parts(ctx: Context, expr: Expr, part: str, *, windowed: bool) -> list[Selector]:
    out = []
    for selector in ctx.selectors(expr):
        if _part(ctx, selector) != part:
            continue
        window = ctx.parent(selector)
        function = ctx.parent(window) if isinstance(window, Range) else None
        under_rate = isinstance(function, Call) and function.name in _RATES
        if under_rate == windowed:
            out.append(selector)
    return out


def _part(ctx: Context, selector: Selector) -> str | None:
    known = ctx.of(selector)
    if known.part is not None:
        return known.part
    name = known.name or ""
    if known.family is None and known.retired is None and name.count(":") < 2:
        for suffix in ("sum", "count"):
            if name.endswith(f"_{suffix}"):
                return suffix
    return None


def _sum_alone(ctx: Context, call: Call) -> Iterator[Problem]:
    shape = ctx.windowed(call)
    if call.name not in _RATES or shape is None:
        return
    selector, window = shape
    if _part(ctx, selector) != "sum":
        return
    if any(isinstance(above, HistogramQuantile) for above in ctx.ancestors(call)):
        return  # OBS104 says it
    known = ctx.of(selector)
    base = known.base if known.part else (selector.metric or "").removesuffix("_sum")
    if _ratio_of_sums(ctx, call, base) or _filter_only(ctx, call):
        return
    if any(
        _part(ctx, s) == "count"
        and (ctx.of(s).base if ctx.of(s).part else (s.metric or "").removesuffix("_count")) == base
        for s in ctx.selectors()
    ):
        return
    unit = known.family.unit if known.family is not None else None
    seconds = unit == "seconds" or (
        unit is None and (selector.metric or "").endswith("_seconds_sum")
    )
    if not seconds and not any(word in ctx.query.words for word in _PER_OBSERVATION_WORDS):
        return
    what = (
        "seconds accrued per second"
        if seconds
        else f"{unit or 'units'} per second over all observations"
    )
    by = ctx.enclosing_grouping(call)
    if known.family is not None and not known.router:
        mean = builders.histogram_mean(known.family, selector.matchers, window, by)
    else:
        count = Selector(f"{base}_count", selector.matchers)
        mean = _summed(Call(call.name, (Range(selector, window),)), by) / _summed(
            Call(call.name, (Range(count, window),)), by
        )
    target = _enclosing_sum(ctx, call)
    yield Problem(
        "OBS202",
        f"{call.name}({selector.metric}) without its _count: {what}, not a time per observation"
        if seconds
        else f"{call.name}({selector.metric}) without its _count: {what}",
        fix=ctx.fix(target, mean),
    )


def _ratio_of_sums(ctx: Context, call: Call, base: str | None) -> bool:
    """Whether ``call`` is divided by (or divides) the rate of another histogram's ``_sum``.

    ``rate(bytes_sum) / rate(time_seconds_sum)`` is bytes per second of transfer
    time: a ratio of two totals, each the right number for its side.
    """
    node: Expr = call
    for above in ctx.ancestors(call):
        if isinstance(above, Binary) and above.op == "/":
            other = above.rhs if above.lhs is node else above.lhs
            return any(
                _part(ctx, s) == "sum" and _base(ctx, s) != base
                for s in _parts(ctx, other, "sum", windowed=True)
            )
        node = above
    return False


def _filter_only(ctx: Context, node: Expr) -> bool:
    """Whether ``node`` is under the right side of ``and``/``unless``: only its series count."""
    for above in ctx.ancestors(node):
        if isinstance(above, Binary) and above.op in ("and", "unless") and above.rhs is node:
            return True
        node = above
    return False


def _base(ctx: Context, selector: Selector) -> str | None:
    known = ctx.of(selector)
    return known.base if known.part else (selector.metric or "").removesuffix("_sum")


def _summed(expr: Expr, by: tuple[str, ...]) -> Aggregate:
    return expr.sum(by=by) if by else expr.sum()


def _enclosing_sum(ctx: Context, node: Expr) -> Expr:
    """The aggregation directly around ``node`` (a fix replaces it whole), else ``node``."""
    parent = ctx.parent(node)
    if isinstance(parent, Aggregate) and parent.op in ("sum", "avg") and parent.param is None:
        return parent
    return node


def _count_as_unit(ctx: Context, call: Call) -> Iterator[Problem]:
    shape = ctx.windowed(call)
    if call.name not in _RATES or shape is None:
        return
    selector, window = shape
    known = ctx.of(selector)
    if known.part != "count" or known.family is None:
        return
    words = _UNIT_WORDS.get(known.family.unit, ())
    if not any(word in ctx.query.words for word in words):
        return
    if any(ctx.of(s).part == "sum" and ctx.of(s).base == known.base for s in ctx.selectors()):
        return  # the denominator of a mean
    per_second = Call(call.name, (Range(known.family.select(selector.matchers, "sum"), window),))
    target = _enclosing_sum(ctx, call)
    if target is not call:
        assert isinstance(target, Aggregate)
        replacement: Expr = Aggregate(target.op, per_second, by=target.by, without=target.without)
    else:
        replacement = per_second
    yield Problem(
        "OBS203",
        f"{call.name}({selector.metric}) counts observations, but is presented as "
        f"{known.family.unit}",
        detail=" ".join(known.family.traps[:1]),
        fix=ctx.fix(target, replacement),
    )


def _gauge_functions(ctx: Context) -> Iterator[Problem]:
    """OBS204 once per expression, its fix replacing every such call at once."""
    found: list[tuple[Call, Selector]] = []
    for node in walk(ctx.expr):
        shape = ctx.windowed(node)
        is_call = isinstance(node, Call) and node.name in _GAUGE_ONLY
        if is_call and shape is not None and _is_counter(ctx, shape[0]):
            assert isinstance(node, Call)
            found.append((node, shape[0]))
    if not found:
        return
    fix = None
    if all(call.name in _GAUGE_CHANGE for call, _ in found):
        calls = {id(call) for call, _ in found}
        fix = transform(
            ctx.expr,
            lambda n: (
                Call(_GAUGE_CHANGE[n.name], n.args)
                if isinstance(n, Call) and id(n) in calls
                else None
            ),
        )
    functions = ", ".join(dict.fromkeys(f"{call.name}()" for call, _ in found))
    counters = list(dict.fromkeys(selector.metric or "" for _, selector in found))
    what = "counters" if len(counters) > 1 else "counter"
    yield Problem(
        "OBS204",
        f"{functions} of the {what} {', '.join(counters)}: a restart reads as a large drop",
        fix=fix,
    )
