"""Walking an expression: its direct operands, every node below it, its selectors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

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

__all__ = ["children", "selectors", "transform", "walk"]


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


def _rebuilt(expr: Expr, operands: tuple[Expr, ...]) -> Expr:
    """``expr`` with its direct operands replaced by ``operands``, in :func:`children`'s order."""
    match expr:
        case Binary():
            return replace(expr, lhs=operands[0], rhs=operands[1])
        case Call():
            return Call(expr.name, operands)
        case Aggregate(param=param):
            if param is None:
                return replace(expr, expr=operands[0])
            return replace(expr, param=operands[0], expr=operands[1])
        case HistogramQuantile():
            return HistogramQuantile(operands[0], operands[1])
        case Range():
            (selector,) = operands
            if not isinstance(selector, Selector):
                return expr  # a range holds a selector only: nothing else can replace it
            return replace(expr, selector=selector)
        case Subquery():
            return replace(expr, expr=operands[0])
    return expr


def transform(expr: Expr, change: Callable[[Expr], Expr]) -> Expr:
    """``expr`` rebuilt bottom-up, each node passed through ``change`` after its operands.

    ``change`` returns the node unchanged (the same object) where it has nothing
    to do; a tree ``change`` leaves alone is returned as it was (``is`` equal).

    Examples
    --------
    >>> from inference_obs.query import Selector, rate, to_promql
    >>> def renamed(node):
    ...     return Selector("y", node.matchers) if node == Selector("x") else node
    >>> to_promql(transform(rate(Selector("x").over(60)).sum(), renamed))
    'sum(rate(y[1m]))'
    """
    operands = children(expr)
    if operands:
        changed = tuple(transform(one, change) for one in operands)
        if any(new is not old for new, old in zip(changed, operands, strict=True)):
            expr = _rebuilt(expr, changed)
    return change(expr)
