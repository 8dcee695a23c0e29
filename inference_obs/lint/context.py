"""What every check reads about one parsed expression, and what it returns.

A :class:`Context` holds the parsed expression, the query it came from, what
the catalogue knows of each selector, each node's parent, and how to write a
corrected expression back in the file's own terms (Grafana variables
restored). A check returns :class:`Problem` values; the runner turns them into
findings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from inference_obs.errors import ConfigurationError
from inference_obs.lint.inputs import Query
from inference_obs.lint.resolve import Series, resolve
from inference_obs.metrics.retired import version_key
from inference_obs.query import (
    Aggregate,
    Binary,
    Call,
    Expr,
    HistogramQuantile,
    Range,
    Selector,
    Subquery,
    children,
    to_promql,
    walk,
)

__all__ = ["Context", "Options", "Problem", "replace_node", "transform"]


@dataclass(frozen=True, slots=True)
class Options:
    """Settings of a lint run.

    Attributes
    ----------
    vllm_version
        The vLLM version the dashboards read (``"0.12.0"``); None: the newest the
        catalogue knows, so every removed name is reported as removed.
    sglang_version
        The same for SGLang.

    A version that is not numbers separated by dots raises
    :class:`~inference_obs.errors.ConfigurationError` naming the setting.
    """

    vllm_version: str | None = None
    sglang_version: str | None = None

    def __post_init__(self) -> None:
        for name in ("vllm_version", "sglang_version"):
            text = getattr(self, name)
            try:
                if text is not None:
                    version_key(text)
            except ConfigurationError as exc:
                option = "--" + name.replace("_", "-")
                raise ConfigurationError(f"{name} ({option}): {exc}") from None


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem a check found in an expression.

    Attributes
    ----------
    code
        The code's id (``OBS101``).
    message
        One line naming what is wrong here.
    detail
        Sentences specific to this expression, added to the code's explanation.
    fix
        The corrected expression, when one exists.
    """

    code: str
    message: str
    detail: str = ""
    fix: Expr | None = None


@dataclass
class Context:
    """One parsed expression and what the checks need to know about it."""

    query: Query
    expr: Expr
    options: Options
    #: Renders an expression in the file's own terms (Grafana variables restored).
    render_text: Callable[[str], str]
    #: Window (seconds) for a corrected expression that needs one and has none.
    default_window: float
    recorded: frozenset[str] = frozenset()
    recorded_quantiles: frozenset[str] = frozenset()
    parents: dict[int, Expr] = field(default_factory=dict)
    series: dict[int, Series] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for node in walk(self.expr):
            for child in children(node):
                self.parents[id(child)] = node
            if isinstance(node, Selector):
                self.series[id(node)] = resolve(node, self.recorded)

    def parent(self, node: Expr) -> Expr | None:
        """The node ``node`` is an operand of, None at the top."""
        return self.parents.get(id(node))

    def ancestors(self, node: Expr) -> Iterator[Expr]:
        """Parents of ``node``, nearest first."""
        current = self.parent(node)
        while current is not None:
            yield current
            current = self.parent(current)

    def of(self, selector: Selector) -> Series:
        """What the catalogue knows of a selector of this expression."""
        return self.series.get(id(selector)) or resolve(selector, self.recorded)

    def selectors(self, expr: Expr | None = None) -> list[Selector]:
        """Selectors under ``expr`` (the whole expression by default), in text order."""
        return [n for n in walk(expr or self.expr) if isinstance(n, Selector)]

    def render(self, expr: Expr) -> str:
        """PromQL text of ``expr`` as the file would write it."""
        return self.render_text(to_promql(expr))

    def window(self) -> float:
        """The window of the expression's first range or subquery, else the default."""
        for node in walk(self.expr):
            if isinstance(node, Range | Subquery):
                return node.seconds
        return self.default_window

    def enclosing_grouping(self, node: Expr) -> tuple[str, ...]:
        """The ``by`` labels of the nearest aggregation above ``node`` (empty if none)."""
        for above in self.ancestors(node):
            if isinstance(above, Aggregate):
                return above.by or ()
        return ()

    def windowed(self, call: Expr) -> tuple[Selector, float] | None:
        """The selector and window of ``f(selector[w])``, None for other shapes."""
        if isinstance(call, Call) and call.args and isinstance(call.args[-1], Range):
            window = call.args[-1]
            return window.selector, window.seconds
        return None

    def fix(self, old: Expr, new: Expr) -> Expr:
        """The whole expression with ``old`` replaced by ``new``."""
        return replace_node(self.expr, old, new)


def transform(expr: Expr, change: Callable[[Expr], Expr | None]) -> Expr:
    """``expr`` rebuilt with every node for which ``change`` returns a node replaced by it.

    ``change`` sees parents before their operands; a replaced node's operands
    are not visited.
    """
    replaced = change(expr)
    if replaced is not None:
        return replaced
    names = _OPERAND_FIELDS.get(type(expr), ())
    updates: dict[str, object] = {}
    for name in names:
        value = getattr(expr, name)
        if isinstance(value, Expr):
            new = transform(value, change)
            if new is not value:
                updates[name] = new
        elif isinstance(value, tuple) and value and isinstance(value[0], Expr):
            items = tuple(transform(v, change) for v in value)
            if any(a is not b for a, b in zip(items, value, strict=True)):
                updates[name] = items
    return dataclasses.replace(expr, **updates) if updates else expr  # type: ignore[type-var]


def replace_node(expr: Expr, old: Expr, new: Expr) -> Expr:
    """``expr`` with the node ``old`` (by identity) replaced by ``new``."""
    return transform(expr, lambda node: new if node is old else None)


# The fields of each node that hold its operands (what transform rebuilds).
_OPERAND_FIELDS: dict[type, tuple[str, ...]] = {
    Binary: ("lhs", "rhs"),
    Call: ("args",),
    Aggregate: ("param", "expr"),
    HistogramQuantile: ("q", "buckets"),
    Range: ("selector",),
    Subquery: ("expr",),
}
