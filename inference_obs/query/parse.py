"""``parse``: PromQL text into the expression tree, the inverse of ``to_promql``.

A small recursive-descent parser written for this tree rather than a binding
of Prometheus's own parser (``promql-parser``, the Rust parser's Python
binding), for three reasons:

- the result must be this library's nodes, so that what a dashboard asks can
  be checked by the same rules that build the library's own queries. Walking
  another parser's syntax tree and rebuilding ours from it is as much code as
  the grammar itself;
- the package stays pure Python: a runtime dependency on a compiled wheel for
  reading text would be the only one;
- errors name a line and a column, and say which node refused the text and
  with which operands (:class:`~inference_obs.errors.ParseError`), so a caller
  can report *what was meant*, not only that it failed.

The grammar is Prometheus 3's PromQL (promql/parser/generated_parser.y) less
the experimental parts: native-histogram literals, duration arithmetic,
quoted UTF-8 metric and label names, and ``limitk``/``limit_ratio``.
Everything a node of the tree refuses (``rate`` over an instant vector, an
aggregation that drops ``le`` under ``histogram_quantile``, a negative offset)
is a :class:`ParseError` too. The test suite parses every text both here and
with ``promql-parser`` and compares the two.

Examples
--------
>>> from inference_obs.query import to_promql
>>> to_promql(parse('histogram_quantile(0.9, sum(rate(x_bucket{a="b"}[5m])) by (le))'))
'histogram_quantile(0.9, sum by (le) (rate(x_bucket{a="b"}[5m])))'
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, NoReturn, TypeVar

from inference_obs.errors import ParseError, QueryError
from inference_obs.query.expr import (
    AGGREGATIONS,
    ARITHMETIC,
    COMPARISON,
    Aggregate,
    At,
    Binary,
    Call,
    Expr,
    HistogramQuantile,
    Matcher,
    Matching,
    MatchOp,
    Number,
    Range,
    Selector,
    String,
    Subquery,
)
from inference_obs.query.names import check_duration, parse_duration
from inference_obs.query.walk import children

__all__ = ["MAX_DEPTH", "parse"]

_T = TypeVar("_T")

#: Most levels an expression may nest: parentheses, calls and aggregations
#: inside each other, and operands of a chain of binary operators (``a or b or
#: c`` is two levels). Deeper text is a ParseError naming the limit. Functions
#: that walk the tree (rendering, comparing, the lint checks) recurse once per
#: level, so a deeper tree would exhaust Python's stack (about 1,000 frames);
#: 100 levels is far beyond any query written by hand (the deepest public
#: dashboard query we read nests 9), and Prometheus's own parser has a
#: comparable bound in its stack.
MAX_DEPTH: Final = 100

# Binary operator precedence, lowest first (promql/parser/lex.go); ^ is right-associative.
_PRECEDENCE = {
    "or": 1,
    "and": 2,
    "unless": 2,
    **dict.fromkeys(COMPARISON, 3),
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
    "%": 5,
    "atan2": 5,
    "^": 6,
}
_KEYWORD_OPERATORS = frozenset({"and", "or", "unless", "atan2"})
_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool"}
)

# One pattern per token kind, tried in this order at each position.
_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\n]+|\#[^\n]*)
  | (?P<duration>(?:\d+(?:ms|s|m|h|d|w|y))+)(?![\w.])
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?!\w)
  | (?P<ident>(?:[a-zA-Z_]|:(?=[a-zA-Z_]))[a-zA-Z0-9_:]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)
  | (?P<op>=~|!~|==|!=|<=|>=|[-+*/%^<>=(){}\[\],:@])
    """,
    re.VERBOSE,
)
_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
}
_UNICODE_ESCAPE = re.compile(
    r"\\(?:x([0-9a-fA-F]{2})|([0-7]{3})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))", re.S
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: Literal["duration", "number", "ident", "string", "op", "end"]
    text: str
    at: int


def parse(text: str) -> Expr:
    """Parse PromQL ``text`` into an expression.

    Parameters
    ----------
    text
        One PromQL expression; ``#`` comments and any whitespace are allowed.

    Returns
    -------
    Expr
        The expression; ``to_promql`` of it is canonical text that means the same.

    Raises
    ------
    ParseError
        When the text is not PromQL, or a node refuses what it says. The
        message names the line and column.
    """
    if not isinstance(text, str):
        raise QueryError(f"parse: expected PromQL text, got {type(text).__name__}")
    parser = _Parser(text, _tokens(text))
    expr = parser.expression(0)
    parser.expect_end()
    return expr


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    pos = 0
    end = len(text)
    while pos < end:
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ParseError(f"unexpected character {text[pos]!r}", text=text, offset=pos)
        kind = match.lastgroup
        if kind != "space":
            out.append(_Token(kind, match.group(), pos))  # type: ignore[arg-type]
        pos = match.end()
    out.append(_Token("end", "", end))
    return out


def _unquote(token: _Token, text: str) -> str:
    """Go's strconv.Unquote, which PromQL uses for string literals."""
    body = token.text[1:-1]
    if token.text[0] == "`":
        return body

    def one(match: re.Match[str]) -> str:
        hex2, octal, u4, u8, other = match.groups()
        if other is not None:
            if other not in _ESCAPES:
                raise ParseError(
                    f"unknown escape sequence \\{other} in string", text=text, offset=token.at
                )
            return _ESCAPES[other]
        code = int(hex2, 16) if hex2 else int(octal, 8) if octal else int(u4 or u8, 16)
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise ParseError("invalid Unicode escape in string", text=text, offset=token.at)
        return chr(code)

    return _UNICODE_ESCAPE.sub(one, body)


def _number(token: _Token) -> float:
    lowered = token.text.lower()
    if lowered.startswith("0x"):
        return float(int(lowered, 16))
    return float(token.text)


class _Parser:
    """Recursive descent over the token list, one method per grammar rule."""

    def __init__(self, text: str, tokens: list[_Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.i = 0
        # Calls of expression() under way, and each built node's depth (kept
        # with the node, so that its id is not reused while it is looked up).
        self.nesting = 0
        self.depths: dict[int, tuple[Expr, int]] = {}

    # -- tokens ----------------------------------------------------------------

    @property
    def peek(self) -> _Token:
        return self.tokens[self.i]

    def next(self) -> _Token:
        token = self.tokens[self.i]
        if token.kind != "end":
            self.i += 1
        return token

    def at(self, text: str, offset: int = 0) -> bool:
        token = self.tokens[min(self.i + offset, len(self.tokens) - 1)]
        if token.kind == "ident":  # keywords are case-insensitive (lex.go); names are not
            return token.text.lower() == text
        return token.kind == "op" and token.text == text

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str, what: str = "") -> _Token:
        if not self.at(text):
            self.fail(f"expected {text!r}{what}")
        return self.next()

    def expect_end(self) -> None:
        if self.peek.kind != "end":
            self.fail("expected the end of the expression")

    def fail(self, message: str, token: _Token | None = None) -> NoReturn:
        token = token or self.peek
        found = "the end" if token.kind == "end" else repr(token.text)
        raise ParseError(f"{message}, found {found}", text=self.text, offset=token.at)

    def build(self, start: _Token, node: Callable[..., _T], *args: object, **kw: object) -> _T:
        """``node(*args, **kw)``, with a refusal turned into a ParseError at ``start``."""
        try:
            built = node(*args, **kw)
        except ParseError:
            raise
        except QueryError as exc:
            given = [*args, *kw.values()]
            flat = [x for a in given for x in (a if isinstance(a, tuple) else (a,))]
            operands = tuple(a for a in flat if isinstance(a, Expr))
            refused = node if isinstance(node, type) else None
            raise ParseError(
                str(exc), text=self.text, offset=start.at, refused=refused, operands=operands
            ) from exc
        if isinstance(built, Expr):
            below = (self.depths.get(id(c), (c, 1))[1] for c in children(built))
            depth = 1 + max(below, default=0)
            if depth > MAX_DEPTH:
                self.too_deep(start)
            self.depths[id(built)] = (built, depth)
        return built

    def too_deep(self, token: _Token) -> NoReturn:
        raise ParseError(
            f"the expression nests more than {MAX_DEPTH} levels deep (parentheses, calls, "
            "aggregations or operands of chained operators), more than is read",
            text=self.text,
            offset=token.at,
        )

    # -- expressions -----------------------------------------------------------

    def binary_operator(self) -> str | None:
        token = self.peek
        if token.kind == "op" and token.text in _PRECEDENCE:
            return token.text
        if token.kind == "ident" and token.text.lower() in _KEYWORD_OPERATORS:
            return token.text.lower()
        return None

    def expression(self, floor: int) -> Expr:
        """Operators of precedence above ``floor``, by precedence climbing."""
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            self.too_deep(self.peek)
        try:
            return self.climb(floor)
        finally:
            self.nesting -= 1

    def climb(self, floor: int) -> Expr:
        lhs = self.unary()
        while (op := self.binary_operator()) is not None and _PRECEDENCE[op] > floor:
            start = self.next()
            bool_ = self.accept("bool")
            matching = self.matching()
            # ^ is right-associative: its right side may hold another ^.
            rhs = self.expression(_PRECEDENCE[op] - (op == "^"))
            lhs = self.build(start, Binary, op, lhs, rhs, bool_=bool_, matching=matching)
        return lhs

    def unary(self) -> Expr:
        if self.peek.kind == "op" and self.peek.text in ("-", "+"):
            start = self.next()
            # Unary minus binds more loosely than ^ (-2^2 is -4), tighter than * and /.
            operand = self.expression(_PRECEDENCE["*"])
            if start.text == "+":
                return operand
            if isinstance(operand, Number):
                return Number(-operand.value)
            return self.build(start, Binary, "*", Number(-1.0), operand)
        return self.postfix(self.primary())

    def matching(self) -> Matching | None:
        kind = self.peek.text.lower()
        if self.peek.kind != "ident" or kind not in ("on", "ignoring"):
            return None
        start = self.next()
        labels = self.label_list()
        group: Literal["left", "right"] | None = None
        include: tuple[str, ...] = ()
        if self.peek.kind == "ident" and self.peek.text.lower() in ("group_left", "group_right"):
            group = "left" if self.next().text.lower() == "group_left" else "right"
            if self.at("("):
                include = self.label_list()
        return self.build(start, Matching, kind, labels, group, include)

    def label_list(self) -> tuple[str, ...]:
        self.expect("(")
        labels: list[str] = []
        while not self.at(")"):
            token = self.next()
            if token.kind == "string":
                labels.append(_unquote(token, self.text))
            elif token.kind == "ident" and ":" not in token.text:
                labels.append(token.text)
            else:
                self.fail("expected a label name", token)
            if not self.accept(","):
                break
        self.expect(")", " after the label list")
        return tuple(labels)

    def postfix(self, expr: Expr) -> Expr:
        """``[range]``, ``[range:step]``, ``offset`` and ``@`` after an expression."""
        while True:
            if self.at("["):
                expr = self.bracket(expr)
            elif self.at("offset") or self.at("@"):
                expr = self.modifiers(expr)
            else:
                return expr

    def duration(self) -> float:
        token = self.next()
        if token.kind not in ("duration", "number"):
            self.fail("expected a duration such as 5m", token)
        try:
            if token.kind == "number":  # Prometheus 3 reads a plain number as seconds
                return check_duration(_number(token), where="duration")
            return parse_duration(token.text)
        except QueryError as exc:
            raise ParseError(str(exc), text=self.text, offset=token.at) from exc

    def bracket(self, expr: Expr) -> Expr:
        start = self.expect("[")
        seconds = self.duration()
        if self.accept(":"):
            step = None if self.at("]") else self.duration()
            self.expect("]", " after the subquery step")
            return self.build(start, Subquery, expr, seconds, step)
        self.expect("]", " after the range")
        if not isinstance(expr, Selector):
            self.fail(
                "a range needs a selector; use a subquery [range:step] for an expression", start
            )
        if expr.offset is not None or expr.at is not None:
            self.fail("offset and @ go after the range, not before it", start)
        return self.build(start, Range, expr, seconds)

    def modifiers(self, expr: Expr) -> Expr:
        offset: float | None = None
        at: At | None = None
        start = self.peek
        while True:
            if self.accept("offset"):
                negative = self.accept("-")
                seconds = self.duration()
                offset = -seconds if negative else seconds
            elif self.accept("@"):
                at = self.at_time()
            else:
                break
        return self.build(start, _with_modifiers, expr, offset, at)

    def at_time(self) -> At:
        token = self.next()
        if token.kind == "ident" and token.text.lower() in ("start", "end"):
            self.expect("(")
            self.expect(")")
            return "start" if token.text.lower() == "start" else "end"
        negative = token.kind == "op" and token.text == "-"
        if negative:
            token = self.next()
        if token.kind != "number":
            self.fail("expected a unix time, start() or end() after @", token)
        value = _number(token)
        return -value if negative else value

    def primary(self) -> Expr:
        token = self.peek
        if token.kind == "number":
            self.next()
            return Number(_number(token))
        if token.kind == "string":
            self.next()
            return self.build(token, String, _unquote(token, self.text))
        if token.kind == "duration":  # Prometheus 3: a duration is also a number of seconds
            self.next()
            return Number(parse_duration(token.text))
        if self.at("("):
            self.next()
            inner = self.expression(0)
            self.expect(")", " to close the parenthesis")
            return inner
        if self.at("{"):
            return self.selector(None, token)
        if token.kind != "ident":
            self.fail("expected an expression")
        return self.identifier()

    def identifier(self) -> Expr:
        token = self.next()
        name = token.text
        lowered = name.lower()
        if lowered in ("inf", "nan"):
            return Number(math.inf if lowered == "inf" else math.nan)
        if lowered in AGGREGATIONS and (self.at("(") or self.at("by") or self.at("without")):
            return self.aggregation(token)
        if self.at("("):
            return self.call(token)
        if lowered in _KEYWORDS or lowered in _KEYWORD_OPERATORS:
            self.fail("expected an expression", token)
        return self.selector(name, token)

    def selector(self, name: str | None, start: _Token) -> Expr:
        matchers: list[Matcher] = []
        if self.accept("{"):
            while not self.at("}"):
                matchers.append(self.matcher())
                if not self.accept(","):
                    break
            self.expect("}", " to close the label matchers")
        # {__name__="x"} is x: one spelling of a metric name, for whoever reads the tree.
        named = [m for m in matchers if m.label == "__name__"]
        if name is None and len(named) == 1 and named[0].op is MatchOp.EQ:
            name = named[0].value
            matchers.remove(named[0])
        return self.build(start, Selector, name, tuple(matchers))

    def matcher(self) -> Matcher:
        label = self.next()
        if label.kind == "string":
            label_name = _unquote(label, self.text)
        elif label.kind == "ident":
            label_name = label.text
        else:
            self.fail("expected a label name", label)
        op = self.next()
        if op.kind != "op" or op.text not in ("=", "!=", "=~", "!~"):
            self.fail("expected one of = != =~ !~ after the label name", op)
        value = self.next()
        if value.kind != "string":
            self.fail("expected a quoted label value", value)
        return self.build(label, Matcher, label_name, MatchOp(op.text), _unquote(value, self.text))

    def aggregation(self, token: _Token) -> Expr:
        by, without = self.grouping()
        self.expect("(", f" after {token.text}")
        param: Expr | None = None
        inner = self.expression(0)
        if self.accept(","):
            param, inner = inner, self.expression(0)
        self.expect(")", f" to close {token.text}(...)")
        if by is None and without is None:
            by, without = self.grouping()
        op = token.text.lower()
        return self.build(token, Aggregate, op, inner, by=by, without=without, param=param)

    def grouping(self) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
        if self.accept("by"):
            return self.label_list(), None
        if self.accept("without"):
            return None, self.label_list()
        return None, None

    def call(self, token: _Token) -> Expr:
        self.expect("(")
        args: list[Expr] = []
        while not self.at(")"):
            args.append(self.expression(0))
            if not self.accept(","):
                break
        self.expect(")", f" to close {token.text}(...)")
        if token.text == "histogram_quantile":
            if len(args) != 2:
                self.fail(f"histogram_quantile() takes 2 arguments, got {len(args)}", token)
            return self.build(token, HistogramQuantile, args[0], args[1])
        return self.build(token, Call, token.text, tuple(args))


def _with_modifiers(expr: Expr, offset: float | None, at: At | None) -> Expr:
    """``expr`` with ``offset``/``@`` set on the node that carries them."""
    match expr:
        case Selector(metric=metric, matchers=matchers, offset=old_offset, at=old_at):
            return Selector(metric, matchers, _once(old_offset, offset), _once(old_at, at))
        case Range(selector=selector, seconds=seconds):
            inner = _with_modifiers(selector, offset, at)
            assert isinstance(inner, Selector)
            return Range(inner, seconds)
        case Subquery(expr=inner, seconds=seconds, step=step, offset=old_offset, at=old_at):
            return Subquery(inner, seconds, step, _once(old_offset, offset), _once(old_at, at))
    raise QueryError("offset and @ apply only to a selector, a range or a subquery")


def _once(old: _T | None, new: _T | None) -> _T | None:
    if old is not None and new is not None:
        raise QueryError("offset or @ given twice")
    return new if new is not None else old


# ARITHMETIC is imported so that the operator table stays in step with the tree.
assert set(ARITHMETIC) <= set(_PRECEDENCE)
