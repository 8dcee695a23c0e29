"""Aggregation: per-series means, means of means, averaged pools, rates of gauges, ratio scopes.

The builders' rules (:mod:`inference_obs.metrics.builders`): request means
are ``sum(increase(_sum)) / sum(increase(_count))``; gauges are averaged
sample by sample; gauges that are already rates are never ``rate()``-d.
"""

from __future__ import annotations

from collections.abc import Iterator

from inference_obs.lint.check_counters import mean_parts
from inference_obs.lint.context import Context, Problem, transform
from inference_obs.metrics import builders, dcgm, sglang, vllm
from inference_obs.metrics.family import Family, MetricType
from inference_obs.metrics.vllm_router import ROUTER_LABEL
from inference_obs.query import (
    Aggregate,
    Binary,
    Call,
    Expr,
    Matcher,
    Number,
    Range,
    Selector,
    Subquery,
    walk,
)

__all__ = ["check_aggregation"]

_RATES = frozenset({"rate", "increase", "irate"})
_ENGINES = frozenset({"vllm", "sglang", "vllm-router"})
# Labels that say where a series comes from (which deployment, replica, GPU):
# matchers on them set a ratio's scope. Other labels of a family split it
# (finished_reason, source, le) and may differ between a share's two sides.
_SCOPE_LABELS = frozenset(
    {
        *vllm.STANDARD_LABELS,
        *sglang.SCHEDULER_LABELS,
        *sglang.TOKENIZER_LABELS,
        *dcgm.GPU_LABELS,
        *dcgm.MIG_LABELS,
        ROUTER_LABEL,
        "model",
    }
)
# Engine-computed ratios and the counters to divide instead.
_COUNTER_RATIOS: dict[str, tuple[Family, Family]] = {
    "sglang:cache_hit_rate": (sglang.CACHED_TOKENS, sglang.PROMPT_TOKENS),
    "vllm:gpu_prefix_cache_hit_rate": (vllm.PREFIX_CACHE_HITS, vllm.PREFIX_CACHE_QUERIES),
}


def check_aggregation(ctx: Context) -> Iterator[Problem]:
    """OBS301, OBS302, OBS303, OBS304, OBS305 and OBS306."""
    for node in walk(ctx.expr):
        if isinstance(node, Binary) and node.op == "/":
            yield from _per_series_mean(ctx, node)
            yield from _scopes(ctx, node)
        elif isinstance(node, Aggregate | Call):
            yield from _mean_of_means(ctx, node)
            if isinstance(node, Aggregate):
                yield from _pool_average(ctx, node)
            else:
                yield from _rate_of_gauge(ctx, node)


def _unaggregated_mean(ctx: Context, node: Expr) -> tuple[Selector, Selector] | None:
    """The parts of a per-series mean ``rate(x_sum) / rate(x_count)``, or None."""
    if not isinstance(node, Binary):
        return None
    parts = mean_parts(ctx, node)
    if parts is None:
        return None
    if any(isinstance(n, Aggregate) for n in (*walk(node.lhs), *walk(node.rhs))):
        return None
    return parts


def _mean_fix(ctx: Context, total: Selector, by: tuple[str, ...]) -> Expr | None:
    known = ctx.of(total)
    range_ = ctx.parent(total)
    window = range_.seconds if isinstance(range_, Range) else ctx.window()
    if known.family is not None and not known.router:
        return builders.histogram_mean(known.family, total.matchers, window, by)
    return None


def _per_series_mean(ctx: Context, node: Binary) -> Iterator[Problem]:
    parts = _unaggregated_mean(ctx, node)
    if parts is None:
        return
    if any(isinstance(a, Aggregate) or _is_over_time(a) for a in ctx.ancestors(node)):
        return  # OBS302 says it
    total, _ = parts
    fix = _mean_fix(ctx, total, ())
    yield Problem(
        "OBS301",
        f"mean of {ctx.of(total).base} per series, never summed across replicas",
        fix=ctx.fix(node, fix) if fix is not None else None,
    )


def _is_over_time(node: Expr) -> bool:
    return isinstance(node, Call) and node.name.endswith("_over_time")


def _mean_of_means(ctx: Context, node: Aggregate | Call) -> Iterator[Problem]:
    if isinstance(node, Aggregate):
        if node.op not in ("avg", "sum", "quantile", "max", "min"):
            return
        if node.op in ("max", "min"):
            return  # the slowest replica's mean is a reading of its own
        inner: Expr = node.expr
        by = node.by or ()
    elif node.name in ("avg_over_time", "sum_over_time") and isinstance(node.args[-1], Subquery):
        inner = node.args[-1].expr
        by = ()
    else:
        return
    parts = _unaggregated_mean(ctx, inner)
    if parts is None:
        return
    total, _ = parts
    what = f"{node.op}()" if isinstance(node, Aggregate) else f"{node.name}()"
    fix = (
        _mean_fix(ctx, total, by) if isinstance(node, Aggregate) and node.without is None else None
    )
    yield Problem(
        "OBS302",
        f"{what} of per-series means of {ctx.of(total).base}: not the mean of the requests",
        fix=ctx.fix(node, fix) if fix is not None else None,
    )


def _ratio_family(ctx: Context, selector: Selector) -> tuple[str, str, object] | None:
    """``(name, unit, family-or-retired)`` for an engine's ratio gauge, else None."""
    known = ctx.of(selector)
    source = known.family or known.retired
    if source is None or known.part is not None:
        return None
    if source.type is not MetricType.GAUGE or source.unit != "ratio":
        return None
    if source.exporter not in _ENGINES:
        return None
    return known.name or "", source.unit, source


def _pool_average(ctx: Context, node: Aggregate) -> Iterator[Problem]:
    if node.op != "avg":
        return
    ratios = [(s, r) for s in ctx.selectors(node.expr) if (r := _ratio_family(ctx, s))]
    if not ratios:
        return
    selector, (name, _unit, source) = ratios[0]
    pool = "usage" in name
    traps = getattr(source, "traps", ())
    detail = " ".join(t for t in traps if "verag" in t or "ratio" in t.lower())[:400]
    fix: Expr | None = None
    if pool:
        fix = ctx.fix(node, Aggregate("max", node.expr, by=node.by, without=node.without))
    elif name in _COUNTER_RATIOS and node.without is None:
        hits, queries = _COUNTER_RATIOS[name]
        window = ctx.window()
        matchers = tuple(m for m in selector.matchers if m.label in _SCOPE_LABELS)
        by = node.by or ()
        fix = ctx.fix(
            node,
            builders.per_second(hits, matchers, window, by)
            / builders.per_second(queries, matchers, window, by),
        )
    kind = "pool usage fractions" if pool else "ratios the engine precomputed"
    yield Problem(
        "OBS303",
        f"avg() of {name}: {kind} averaged without their weights",
        detail=detail,
        fix=fix,
    )


def _rate_of_gauge(ctx: Context, call: Call) -> Iterator[Problem]:
    if call.name not in _RATES or not call.args:
        return
    window = call.args[-1]
    if isinstance(window, Range):
        selector = window.selector
    else:
        return
    known = ctx.of(selector)
    source = known.family or known.retired
    if source is None or known.kind not in (MetricType.GAUGE, MetricType.INFO):
        return
    already = bool(getattr(source, "already_rate", False))
    code = "OBS305" if already else "OBS304"
    what = "already a per-second rate" if already else "a gauge"
    detail = " ".join(getattr(source, "traps", ())[:2])
    # The samples' mean over the same window, in place of the rate: a sum of it across
    # series keeps its meaning (requests in flight, bytes per second of a host's GPUs).
    fix = ctx.fix(call, Call("avg_over_time", (window,)))
    yield Problem(
        code,
        f"{call.name}() of {selector.metric}, which is {what}",
        detail=detail,
        fix=fix,
    )


def _scope(ctx: Context, selector: Selector) -> frozenset[Matcher]:
    """The selector's matchers that set where its series come from."""
    known = ctx.of(selector)
    source = known.family
    own = set(source.labels) - _SCOPE_LABELS if source is not None else set()
    return frozenset(m for m in selector.matchers if m.label not in own and m.label != "le")


def _scopes(ctx: Context, node: Binary) -> Iterator[Problem]:
    left, right = ctx.selectors(node.lhs), ctx.selectors(node.rhs)
    if not left or not right or isinstance(node.lhs, Number) or isinstance(node.rhs, Number):
        return
    known = [ctx.of(s) for s in (*left, *right)]
    if not any(k.family is not None or k.retired is not None for k in known[: len(left)]):
        return
    if not any(k.family is not None or k.retired is not None for k in known[len(left) :]):
        return
    left_scopes = {_scope(ctx, s) for s in left}
    right_scopes = {_scope(ctx, s) for s in right}
    if len(left_scopes) != 1 or len(right_scopes) != 1:
        return
    (numerator,), (denominator,) = left_scopes, right_scopes
    if numerator == denominator:
        return
    same_base = {ctx.of(s).base for s in left} == {ctx.of(s).base for s in right}
    if same_base and numerator >= denominator:
        return  # a share: the numerator is a part of the denominator
    only_left = sorted(f"{m.label}{m.op.value}{m.value!r}" for m in numerator - denominator)
    only_right = sorted(f"{m.label}{m.op.value}{m.value!r}" for m in denominator - numerator)
    labels = [m.label for m in numerator | denominator]
    fix: Expr | None = None
    if len(labels) == len(set(labels)):
        union = numerator | denominator

        def widen(n: Expr) -> Expr | None:
            if isinstance(n, Selector):
                extra = tuple(m for m in union if m not in n.matchers)
                return n.where(*sorted(extra, key=lambda m: m.label)) if extra else n
            return None

        fix = ctx.fix(node, transform(node, widen))
    yield Problem(
        "OBS306",
        "numerator and denominator select different series: "
        + "; ".join(
            part
            for part in (
                f"only the numerator has {', '.join(only_left)}" if only_left else "",
                f"only the denominator has {', '.join(only_right)}" if only_right else "",
            )
            if part
        ),
        fix=fix,
    )
