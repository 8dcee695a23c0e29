"""Quantiles: per-series quantiles, le dropped, quantiles averaged, quantiles of non-buckets.

The rule the builders follow (:func:`~inference_obs.metrics.builders.histogram_quantile_merged`):
a quantile across replicas comes from their buckets added by ``le``, never
from their quantiles.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from inference_obs.errors import ParseError
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

__all__ = ["check_quantiles", "is_quantile", "le_kept", "quantile_name"]

# Recording-rule names of quantiles: ..._p99..., ...:99quantile, ..._quantile...
_QUANTILE_NAME = re.compile(r"(?:^|[:_])(?:p\d{2,3}|\d{2,3}quantile|quantile)(?:[:_]|$)")
_AVERAGING = frozenset({"avg", "sum", "quantile", "stddev"})
_OVER_TIME = frozenset({"avg_over_time", "sum_over_time", "quantile_over_time"})
_PASS_THROUGH = frozenset({"label_replace", "label_join", "clamp", "clamp_min", "clamp_max"})
_PASS_THROUGH |= {"round", "abs", "sort", "sort_desc"}


def quantile_name(name: str) -> bool:
    """Whether a recorded name reads as a quantile (``job:latency_seconds:p99``)."""
    return bool(_QUANTILE_NAME.search(name.lower()))


def is_quantile(expr: Expr, ctx: Context) -> bool:
    """Whether ``expr``'s values are quantiles (of one histogram each)."""
    match expr:
        case HistogramQuantile():
            return True
        case Binary(op=op, lhs=lhs, rhs=rhs) if op in ("*", "/", "+", "-"):
            if isinstance(rhs, Number):
                return is_quantile(lhs, ctx)
            if isinstance(lhs, Number):
                return is_quantile(rhs, ctx)
            return False
        case Aggregate(op=op, expr=inner) if op in ("max", "min", "topk", "bottomk"):
            return is_quantile(inner, ctx)
        case Call(name=name, args=args) if name in _PASS_THROUGH and args:
            return is_quantile(args[0], ctx)
        case Selector(metric=name) if name is not None:
            return name in ctx.recorded_quantiles or (name.count(":") >= 2 and quantile_name(name))
    return False


def check_quantiles(ctx: Context) -> Iterator[Problem]:
    """OBS101, OBS103 and OBS104 over every node of the expression."""
    for node in walk(ctx.expr):
        if isinstance(node, HistogramQuantile):
            yield from _per_series(ctx, node)
            yield from _not_buckets(ctx, node)
        yield from _averaged(ctx, node)


def _bucket_selectors(ctx: Context, buckets: Expr) -> list[Selector]:
    """Selectors under ``buckets`` that are raw bucket series (not a recording rule's)."""
    out = []
    for selector in ctx.selectors(buckets):
        known = ctx.of(selector)
        if known.recorded or (known.name or "").count(":") >= 2:
            continue
        if known.part == "bucket" or (
            known.family is None and (known.name or "").endswith("_bucket")
        ):
            out.append(selector)
    return out


def _per_series(ctx: Context, node: HistogramQuantile) -> Iterator[Problem]:
    if any(isinstance(n, Aggregate) for n in walk(node.buckets)):
        return
    raw = _bucket_selectors(ctx, node.buckets)
    if not raw:
        return
    names = ", ".join(sorted({s.metric or "" for s in raw}))
    yield Problem(
        "OBS101",
        f"histogram_quantile over {names} not summed by (le): one quantile per series",
        fix=ctx.fix(node, _merged(ctx, node, ())),
    )


def _merged(ctx: Context, node: HistogramQuantile, by: tuple[str, ...]) -> Expr:
    """``node`` with its buckets summed by ``le`` and ``by``: the builders' quantile when it can."""
    shape = ctx.windowed(node.buckets)
    if shape is not None and isinstance(node.q, Number) and 0 <= node.q.value <= 1:
        selector, window = shape
        known = ctx.of(selector)
        if known.family is not None and known.part == "bucket" and not known.router:
            return builders.histogram_quantile_merged(
                known.family, node.q.value, selector.matchers, window, by
            )
    inner = node.buckets
    if isinstance(inner, Aggregate) and inner.op == "sum" and inner.param is None:
        inner = inner.expr
    return HistogramQuantile(node.q, Aggregate("sum", inner, by=("le", *by)))


def _not_buckets(ctx: Context, node: HistogramQuantile) -> Iterator[Problem]:
    wrong = []
    for selector in ctx.selectors(node.buckets):
        known = ctx.of(selector)
        if known.family is None and known.retired is None:
            continue
        is_histogram = (known.family or known.retired).type is MetricType.HISTOGRAM  # type: ignore[union-attr]
        if not is_histogram or known.part != "bucket":
            wrong.append(selector.metric or "")
    if wrong:
        yield Problem(
            "OBS104",
            f"histogram_quantile over {', '.join(sorted(set(wrong)))}: not _bucket series",
        )


def _averaged(ctx: Context, node: Expr) -> Iterator[Problem]:
    match node:
        case Aggregate(op=op, expr=inner, by=by, without=None, param=None) if (
            op in _AVERAGING and is_quantile(inner, ctx)
        ):
            yield Problem(
                "OBS103",
                f"{op}() of quantiles: not a quantile of anything",
                fix=_unaveraged(ctx, node, inner, by or (), None),
            )
        case Aggregate(op=op, expr=inner) if op in _AVERAGING and is_quantile(inner, ctx):
            yield Problem("OBS103", f"{op}() of quantiles: not a quantile of anything")
        case Call(name=name, args=args) if name in _OVER_TIME and _over_quantile(ctx, args[-1]):
            period = args[-1]
            assert isinstance(period, Subquery | Range)
            inner = period.expr if isinstance(period, Subquery) else period.selector
            yield Problem(
                "OBS103",
                f"{name}() of a quantile series: not the quantile of the period",
                fix=_unaveraged(ctx, node, inner, None, period.seconds),
            )
        case Binary(op=op, lhs=lhs, rhs=rhs) if (
            op in ("+", "-") and is_quantile(lhs, ctx) and is_quantile(rhs, ctx)
        ):
            yield Problem("OBS103", f"quantiles combined with {op}: not a quantile of the total")


def _over_quantile(ctx: Context, arg: Expr) -> bool:
    if isinstance(arg, Subquery):
        return is_quantile(arg.expr, ctx)
    return isinstance(arg, Range) and is_quantile(arg.selector, ctx)


def _unaveraged(
    ctx: Context, node: Expr, inner: Expr, by: tuple[str, ...] | None, period: float | None
) -> Expr | None:
    """The quantile from merged buckets that ``node`` meant, when ``inner`` shows how."""
    # Only a bare quantile is rewritten; scaled ones and maxima of them are the user's to fix.
    quantile = inner if isinstance(inner, HistogramQuantile) else None
    if quantile is None:
        return None
    if by is None:  # over time: the same grouping, buckets over the whole period
        grouping = quantile.buckets.by if isinstance(quantile.buckets, Aggregate) else None
        labels = tuple(label for label in (grouping or ("le",)) if label != "le")
        merged = _merged(ctx, quantile, labels)
        fixed = transform(merged, lambda n: _over_period(n, period or 0.0))
    else:
        fixed = _merged(ctx, quantile, by)
    return ctx.fix(node, fixed)


def _over_period(node: Expr, seconds: float) -> Expr | None:
    """``rate``/``increase`` of buckets over ``seconds`` instead of their own window."""
    if (
        isinstance(node, Call)
        and node.name in ("rate", "increase")
        and isinstance(node.args[0], Range)
    ):
        return Call("increase", (Range(node.args[0].selector, seconds),))
    return None


def le_kept(error: ParseError) -> HistogramQuantile | None:
    """The quantile the parser refused for dropping ``le``, with ``le`` kept (OBS102's fix)."""
    q, buckets = (*error.operands, None, None)[:2]
    if not isinstance(q, Expr) or not isinstance(buckets, Aggregate):
        return None
    if buckets.without is not None:
        kept = tuple(label for label in buckets.without if label != "le")
        fixed = Aggregate(buckets.op, buckets.expr, without=kept, param=buckets.param)
    else:
        by = ("le", *(buckets.by or ()))
        fixed = Aggregate(buckets.op, buckets.expr, by=by, param=buckets.param)
    return HistogramQuantile(q, fixed)
