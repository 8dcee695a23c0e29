"""Walking an expression: its direct operands, every node below it, its selectors."""

from __future__ import annotations

from collections.abc import Iterator

from inference_obs.query.expr import (
    Aggregate,
    Binary,
    Call,
    Expr,
    HistogramQuantile,
    Range,
    Selector,
    Subquery,
)

__all__ = ["children", "selectors", "walk"]


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct operands of ``expr``, left to right (an aggregation's parameter first)."""
    match expr:
        case Binary(lhs=lhs, rhs=rhs):
            return (lhs, rhs)
        case Call(args=args):
            return args
        case Aggregate(expr=inner, param=param):
            return (inner,) if param is None else (param, inner)
        case HistogramQuantile(q=q, buckets=buckets):
            return (q, buckets)
        case Range(selector=selector):
            return (selector,)
        case Subquery(expr=inner):
            return (inner,)
    return ()


def walk(expr: Expr) -> Iterator[Expr]:
    """``expr`` and every node below it, parents before their operands.

    Examples
    --------
    >>> from inference_obs.query import Selector, rate
    >>> [type(e).__name__ for e in walk(rate(Selector("x").over(60)).sum())]
    ['Aggregate', 'Call', 'Range', 'Selector']
    """
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def selectors(expr: Expr) -> list[Selector]:
    """Every selector in ``expr``, in the order they are written."""
    return [node for node in walk(expr) if isinstance(node, Selector)]
