"""Meaning: numbers on different scales combined, a rate read as a share, labels an exporter
does not attach, series counted as pods, alerts on ratios that go to +Inf.

Each check reads what the catalogue says of the families (unit, exporter,
labels) and the shape of the expression; none needs the data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from inference_obs.lint.context import Context, Problem
from inference_obs.lint.units import Unit, unit_of
from inference_obs.metrics import vllm
from inference_obs.metrics.family import MetricType
from inference_obs.query import Aggregate, Binary, Call, Expr, Number, Selector, walk

__all__ = ["check_meaning"]

_RATIO, _PERCENT = Unit("fraction", 1.0), Unit("fraction", 0.01)
# Label names that mean the node; dcgm-exporter calls it Hostname.
_NODE_LABELS = frozenset({"node", "nodename", "node_name", "kubernetes_node", "host"})
_NODE_LABEL = "Hostname"
# Words that present a count as one of pods.
_POD_WORDS = ("pod", "replica")
# Words that present a number as a share of time.
_SHARE_WORDS = ("idle", "busy", "duty")
_RATE_FUNCTIONS = frozenset({"rate", "irate"})
_PASS_THROUGH = frozenset({"label_replace", "label_join"})


def check_meaning(ctx: Context) -> Iterator[Problem]:
    """OBS307 to OBS311."""
    yield from _mixed_scales(ctx)
    yield from _steps_as_share(ctx)
    yield from _absent_label(ctx)
    yield from _series_as_pods(ctx)
    yield from _unguarded_ratio_alert(ctx)


def _names(ctx: Context, expr: Expr) -> str:
    return ", ".join(dict.fromkeys(s.metric or "" for s in ctx.selectors(expr)))


def _mixed_scales(ctx: Context) -> Iterator[Problem]:
    for node in walk(ctx.expr):
        if not isinstance(node, Binary) or node.op not in ("or", "+", "-"):
            continue
        left, right = unit_of(node.lhs, ctx.series), unit_of(node.rhs, ctx.series)
        if {left, right} != {_RATIO, _PERCENT}:
            continue
        percent = node.lhs if left == _PERCENT else node.rhs
        ratio = node.rhs if percent is node.lhs else node.lhs
        yield Problem(
            "OBS307",
            f"{_names(ctx, ratio)} (0-1) and {_names(ctx, percent)} (0-100) combined by "
            f"'{node.op}': one side is 100 times the other's scale",
            fix=ctx.fix(percent, Binary("/", percent, Number(100.0))),
        )


def _steps_as_share(ctx: Context) -> Iterator[Problem]:
    for node in walk(ctx.expr):
        shape = ctx.windowed(node)
        if not isinstance(node, Call) or node.name not in _RATE_FUNCTIONS or shape is None:
            continue
        known = ctx.of(shape[0])
        if known.family is not vllm.ITERATION_TOKENS or known.part != "count":
            continue
        one_minus = any(
            isinstance(above, Binary)
            and above.op == "-"
            and isinstance(above.lhs, Number)
            and above.lhs.value == 1.0
            for above in ctx.ancestors(node)
        )
        if one_minus or any(word in ctx.query.words for word in _SHARE_WORDS):
            yield Problem(
                "OBS308",
                f"{node.name}({shape[0].metric}) is engine steps per second, not a share of time",
            )


def _absent_label(ctx: Context) -> Iterator[Problem]:
    for node in walk(ctx.expr):
        if not isinstance(node, Aggregate) or not node.by:
            continue
        families = [ctx.of(s).family for s in ctx.selectors(node.expr)]
        known = [f for f in families if f is not None]
        if not known or any(f.exporter != "dcgm" for f in known):
            continue
        missing = [
            label
            for label in node.by
            if label in _NODE_LABELS and all(label not in f.labels for f in known)
        ]
        if not missing:
            continue
        by = tuple(dict.fromkeys(_NODE_LABEL if label in missing else label for label in node.by))
        yield Problem(
            "OBS309",
            f"{node.op} by ({', '.join(node.by)}) over {_names(ctx, node.expr)}: "
            f"dcgm-exporter series carry no {', '.join(missing)} label "
            f"(the node is {_NODE_LABEL})",
            fix=ctx.fix(node, dataclasses.replace(node, by=by)),
        )


def _series_as_pods(ctx: Context) -> Iterator[Problem]:
    if not any(word in ctx.query.words for word in _POD_WORDS):
        return
    for node in walk(ctx.expr):
        if not isinstance(node, Aggregate) or node.op != "count" or node.without is not None:
            continue
        inner = node.expr
        while isinstance(inner, Call) and inner.name in _PASS_THROUGH and inner.args:
            inner = inner.args[0]
        if not isinstance(inner, Selector) or "pod" in (node.by or ()):
            continue
        family = ctx.of(inner).family
        if family is None or family.exporter not in ("vllm", "sglang"):
            continue
        by = node.by or ()
        pods = Aggregate("count", Aggregate("count", node.expr, by=(*by, "pod")), by=node.by)
        yield Problem(
            "OBS310",
            f"count() of {inner.metric} counts its series (engines x models), not pods",
            fix=ctx.fix(node, pods),
        )


def _unguarded_ratio_alert(ctx: Context) -> Iterator[Problem]:
    top = ctx.expr
    if ctx.query.ref != "alert" or not isinstance(top, Binary) or top.bool_:
        return
    if top.op not in (">", ">=") or not isinstance(top.rhs, Number):
        return
    ratio = top.lhs
    if not isinstance(ratio, Binary) or ratio.op != "/":
        return
    if _guarded(ratio.rhs):
        return
    numerator, denominator = ctx.selectors(ratio.lhs), ctx.selectors(ratio.rhs)
    if not numerator or not denominator:
        return
    same_names = {s.metric for s in numerator} == {s.metric for s in denominator}
    scopes_differ = same_names and {s.matchers for s in numerator} != {
        s.matchers for s in denominator
    }
    gauges = all(ctx.of(s).kind is MetricType.GAUGE for s in denominator)
    if not (scopes_differ or gauges):
        return  # errors / requests: the numerator is zero when the denominator is
    yield Problem(
        "OBS311",
        f"the denominator ({_names(ctx, ratio.rhs)}) can be zero while the numerator is not: "
        f"the ratio is +Inf and the alert fires on an idle pool",
        fix=Binary("and", top, Binary(">", ratio.rhs, Number(0.0))),
    )


def _guarded(denominator: Expr) -> bool:
    """Whether ``denominator`` cannot be zero: clamped, offset or filtered."""
    for node in walk(denominator):
        if isinstance(node, Call) and node.name in ("clamp_min", "clamp"):
            return True
        if isinstance(node, Binary) and (
            node.op in ("and", "unless", ">", ">=", "!=")
            or (node.op == "+" and (isinstance(node.lhs, Number) or isinstance(node.rhs, Number)))
        ):
            return True
    return False
