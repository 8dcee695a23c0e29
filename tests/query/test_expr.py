"""Invalid expressions fail when they are built, with a message naming the problem."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from inference_obs.errors import QueryError
from inference_obs.query import (
    Aggregate,
    Binary,
    Call,
    Matcher,
    MatchOp,
    Number,
    Range,
    Selector,
    String,
    Subquery,
    ValueType,
    clamp,
    histogram_quantile,
    ignoring,
    increase,
    keeps_label,
    label_replace,
    on,
    parse_duration,
    rate,
)

X = Selector("x")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: rate(X), "expected range vector, got instant vector"),  # type: ignore[arg-type]
        (lambda: Call("rate", (X,)), "select a range"),
        (lambda: Call("nope", (X,)), "function 'nope': not supported"),
        (lambda: Call("clamp", (X, Number(1))), "takes 3 argument(s), got 2"),
        (lambda: Call("clamp", (X, String("a"), Number(1))), "argument 2: expected scalar"),
        (lambda: histogram_quantile(0.9, increase(X.over(60)).sum()), "drops the 'le' label"),
        (
            lambda: histogram_quantile(0.9, increase(X.over(60)).sum(by=("pod",))),
            "drops the 'le' label",
        ),
        (
            lambda: histogram_quantile(0.9, increase(X.over(60)).sum(without=("le",))),
            "drops the 'le' label",
        ),
        (
            lambda: histogram_quantile(0.9, Binary("/", X, X, matching=on("pod"))),
            "drops the 'le' label",
        ),
        (lambda: Matcher.equal("bad-label", "v"), "'bad-label' is not a valid label name"),
        (lambda: Matcher.equal("1st", "v"), "not a valid label name"),
        (lambda: Matcher.equal("a", "\ud800"), "lone surrogate"),
        (lambda: Matcher.regex("a", "(unclosed"), "not a valid regex"),
        (lambda: Matcher.regex("a", "(?=ahead)"), "lookaround"),
        (lambda: Matcher.regex("a", r"(a)\1"), "backreference"),
        (lambda: Matcher("a", "=", "v"), "operator must be a MatchOp"),  # type: ignore[arg-type]
        (lambda: Matcher.one_of("a", []), "at least one value"),
        (lambda: Selector("bad-metric"), "not a valid metric name"),
        (lambda: Selector(None), "needs a metric name or a matcher"),
        (lambda: Selector(None, (Matcher.regex("a", ".*"),)), "does not match the empty string"),
        (lambda: Selector("x", (Matcher.equal("__name__", "y"),)), "metric name given twice"),
        (lambda: Selector("x", offset=-60), "duration must be positive"),
        (lambda: Selector("x", at=float("nan")), "'@' must be unix seconds"),
        (lambda: Selector("x", at=1.0001), "whole number of milliseconds"),
        (lambda: X.over(-300), "duration must be positive"),
        (lambda: X.over(0), "duration must be positive"),
        (lambda: X.over(0.0001), "whole number of milliseconds"),
        (lambda: Range(rate(X.over(60)), 60), "only a selector can take a range"),  # type: ignore[arg-type]
        (lambda: Subquery(X.over(60), 600), "expected instant vector, got range vector"),
        (lambda: Aggregate("median", X), "unknown"),
        (lambda: Aggregate("sum", X.over(60)), "expected instant vector, got range vector"),
        (lambda: Aggregate("sum", X, by=("a",), without=("b",)), "not both"),
        (lambda: Aggregate("sum", X, by=("bad-label",)), "not a valid label name"),
        (lambda: Aggregate("quantile", X), "needs a scalar parameter"),
        (lambda: Aggregate("sum", X, param=Number(1)), "takes no parameter"),
        (lambda: Binary("**", X, X), "unknown operator"),
        (lambda: Binary("+", X.over(60), X), "left operand must be a scalar or instant vector"),
        (lambda: Binary("and", X, Number(1)), "set operators need instant vectors"),
        (lambda: Binary("+", X, X, bool_=True), "'bool' applies to comparison"),
        (lambda: Binary(">", Number(1), Number(2)), "comparing two scalars needs 'bool'"),
        (lambda: Binary("+", X, Number(1), matching=on("a")), "only between two instant vectors"),
        (lambda: Binary("or", X, X, matching=on("a").group_left()), "cannot be used with set"),
        (lambda: X + "y", "neither an expression nor a number"),  # type: ignore[operator]
        (lambda: label_replace(X, "bad-dst", "$1", "src", ".*"), "destination"),
        (lambda: label_replace(X, "dst", "$1", "src", "(?!x)"), "lookaround"),
        (lambda: parse_duration("5 minutes"), "not a PromQL duration"),
        (lambda: parse_duration("1.5m"), "not a PromQL duration"),
        (lambda: ignoring("a").group_left("bad-label"), "not a valid label name"),
    ],
)
def test_invalid_expressions_raise_query_error(build: Callable[[], object], message: str) -> None:
    with pytest.raises(QueryError, match=None) as info:
        build()
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)  # callers may catch the builtin


@pytest.mark.parametrize("pattern", [r"\\1", r"[(?=]", r"[]a(?!]", r"a(?:b)", r"\(?=x\)"])
def test_re2_compatible_patterns_are_accepted(pattern: str) -> None:
    assert Matcher.regex("a", pattern).value == pattern


def test_out_of_range_quantile_is_valid_promql() -> None:
    # Prometheus answers -Inf / +Inf; the statistical builders refuse it instead.
    assert histogram_quantile(1.5, X).type is ValueType.VECTOR


def test_types() -> None:
    assert X.type is ValueType.VECTOR
    assert X.over(60).type is ValueType.MATRIX
    assert rate(X.over(60)).type is ValueType.VECTOR
    assert Number(1).type is ValueType.SCALAR
    assert (Number(1) + Number(2)).type is ValueType.SCALAR
    assert (X + 1).type is ValueType.VECTOR
    assert clamp(X, 0, 1).type is ValueType.VECTOR


def test_keeps_label() -> None:
    buckets = increase(X.over(60))
    assert keeps_label(buckets.sum(by=("le",)), "le")
    assert keeps_label(buckets.sum(without=("pod",)), "le")
    assert not keeps_label(buckets.sum(without=("le",)), "le")
    assert keeps_label(buckets.topk(3), "le")
    assert keeps_label(buckets.sum(by=("le",)) * 2, "le")
    assert keeps_label(Binary("/", X, X, matching=on("pod").group_left("le")), "le")
    assert keeps_label(Binary("/", X, X, matching=ignoring("pod")), "le")
    assert not keeps_label(Binary("/", X, X, matching=ignoring("le")), "le")
    assert keeps_label(label_replace(X.sum(), "le", "1", "a", ".*"), "le")
    assert not keeps_label(Call("vector", (Number(1),)), "le")


def test_nodes_are_immutable_and_comparable() -> None:
    a = Selector("x", (Matcher("a", MatchOp.EQ, "1"),))
    b = Selector("x", (Matcher.equal("a", "1"),))
    assert a == b
    assert hash(a) == hash(b)
    with pytest.raises(AttributeError):
        a.metric = "y"  # type: ignore[misc]
