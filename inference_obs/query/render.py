"""``to_promql``: the only place PromQL text is made.

The output is canonical single-line PromQL that Prometheus 2.42+ and
VictoriaMetrics accept. Label values are quoted so that any Unicode string
selects exactly itself; parentheses are added only where precedence needs them.
"""

from __future__ import annotations

import math
from functools import singledispatch

from inference_obs.errors import QueryError
from inference_obs.query.expr import (
    Aggregate,
    At,
    Binary,
    Call,
    Expr,
    HistogramQuantile,
    Matcher,
    Matching,
    Number,
    Range,
    Selector,
    String,
    Subquery,
)
from inference_obs.query.names import check_text

__all__ = ["format_duration", "quote", "to_promql"]

# Binary operator precedence, lowest first (Prometheus promql/parser/lex.go).
_PRECEDENCE = {
    "or": 1,
    "and": 2,
    "unless": 2,
    "==": 3,
    "!=": 3,
    "<=": 3,
    "<": 3,
    ">=": 3,
    ">": 3,
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
    "%": 5,
    "atan2": 5,
    "^": 6,
}
_ATOM = 10
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Go's utf8.RuneError. Prometheus 2.42's lexer (promql/parser/lex.go,
# lexString) refuses every decoded RuneError as "invalid UTF-8 rune", so a raw
# U+FFFD fails the query although it is valid UTF-8; its escape is accepted.
_RUNE_ERROR = "\ufffd"
_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1))


def quote(value: str) -> str:
    """Quote ``value`` as a PromQL double-quoted string literal.

    Backslash, double quote and the common control characters get their short
    escapes; every other non-printable code point, and U+FFFD (which Prometheus
    2.42's lexer refuses raw), is written as ``\\u`` with four hex digits or
    ``\\U`` with eight, which PromQL's (Go's) unquoting turns back into exactly
    that code point. Printable text, non-ASCII included, is written as is.

    Raises
    ------
    QueryError
        If ``value`` holds a lone surrogate: it has no UTF-8 form, and both
        servers refuse its escape.

    Examples
    --------
    >>> print(quote('a"b\\\\c'))
    "a\\"b\\\\c"
    """
    check_text(value, where="string literal")
    out = ['"']
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable() and ch != _RUNE_ERROR:
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def format_duration(seconds: float) -> str:
    """Write whole-millisecond ``seconds`` as a PromQL duration, e.g. ``1h30m``.

    Examples
    --------
    >>> format_duration(5400)
    '1h30m'
    >>> format_duration(0.25)
    '250ms'
    """
    ms = round(seconds * 1000)
    parts = []
    for unit, size in _UNITS:
        count, ms = divmod(ms, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _at(at: At) -> str:
    if at in ("start", "end"):
        return f"{at}()"
    assert isinstance(at, float | int)
    return _number(round(float(at), 3))


def _modifiers(offset: float | None, at: At | None) -> str:
    text = ""
    if offset is not None:
        text += f" offset {format_duration(offset)}"
    if at is not None:
        text += f" @ {_at(at)}"
    return text


def _matcher(m: Matcher) -> str:
    return f"{m.label}{m.op.value}{quote(m.value)}"


def _grouping(labels: tuple[str, ...]) -> str:
    return "(" + ", ".join(labels) + ")"


@singledispatch
def _render(expr: Expr) -> str:
    raise QueryError(
        f"cannot render {type(expr).__name__} as PromQL: to_promql takes an expression built "
        "with inference_obs.query (parse() reads PromQL text into one)"
    )


def to_promql(expr: Expr) -> str:
    """Render an expression as PromQL text.

    Raises
    ------
    QueryError
        When ``expr`` is not an expression of :mod:`inference_obs.query`.

    Examples
    --------
    >>> from inference_obs.query import Selector, Matcher, rate
    >>> to_promql(rate(Selector("x", (Matcher.equal("pod", "a"),)).over(300)))
    'rate(x{pod="a"}[5m])'
    """
    return _render(expr)


@_render.register
def _(expr: Selector) -> str:
    body = ",".join(_matcher(m) for m in expr.matchers)
    name = expr.metric or ""
    text = f"{name}{{{body}}}" if body or not name else name
    return text + _modifiers(expr.offset, expr.at)


@_render.register
def _(expr: Range) -> str:
    sel = expr.selector
    bare = Selector(sel.metric, sel.matchers)
    return f"{_render(bare)}[{format_duration(expr.seconds)}]" + _modifiers(sel.offset, sel.at)


@_render.register
def _(expr: Subquery) -> str:
    step = format_duration(expr.step) if expr.step is not None else ""
    inner = _render(expr.expr)
    if isinstance(expr.expr, Binary):
        inner = f"({inner})"
    return f"{inner}[{format_duration(expr.seconds)}:{step}]" + _modifiers(expr.offset, expr.at)


@_render.register
def _(expr: Number) -> str:
    return _number(expr.value)


@_render.register
def _(expr: String) -> str:
    return quote(expr.value)


@_render.register
def _(expr: Call) -> str:
    return f"{expr.name}(" + ", ".join(_render(a) for a in expr.args) + ")"


@_render.register
def _(expr: HistogramQuantile) -> str:
    return f"histogram_quantile({_render(expr.q)}, {_render(expr.buckets)})"


@_render.register
def _(expr: Aggregate) -> str:
    grouping = ""
    if expr.by is not None:
        grouping = f" by {_grouping(expr.by)}"
    elif expr.without is not None:
        grouping = f" without {_grouping(expr.without)}"
    args = _render(expr.expr)
    if expr.param is not None:
        args = f"{_render(expr.param)}, {args}"
    return f"{expr.op}{grouping} ({args})" if grouping else f"{expr.op}({args})"


def _precedence(expr: Expr) -> int:
    if isinstance(expr, Binary):
        return _PRECEDENCE[expr.op]
    if isinstance(expr, Number) and (expr.value < 0 or math.copysign(1, expr.value) < 0):
        return 0  # a leading minus is unary: parenthesise negative literals
    return _ATOM


def _matching(m: Matching) -> str:
    text = f" {m.kind}{_grouping(m.labels)}"
    if m.group is not None:
        text += f" group_{m.group}"
        if m.include:
            text += _grouping(m.include)
    return text


@_render.register
def _(expr: Binary) -> str:
    mine = _PRECEDENCE[expr.op]
    right_assoc = expr.op == "^"
    lhs, rhs = _render(expr.lhs), _render(expr.rhs)
    lp, rp = _precedence(expr.lhs), _precedence(expr.rhs)
    if lp < mine or (lp == mine and right_assoc):
        lhs = f"({lhs})"
    if rp < mine or (rp == mine and not right_assoc):
        rhs = f"({rhs})"
    op = expr.op
    if expr.bool_:
        op += " bool"
    if expr.matching is not None:
        op += _matching(expr.matching)
    return f"{lhs} {op} {rhs}"
