"""Exact PromQL text for every node and modifier the renderer handles."""

from __future__ import annotations

import math

import pytest

from inference_obs.errors import QueryError
from inference_obs.query import (
    Aggregate,
    Binary,
    Matcher,
    Number,
    Selector,
    String,
    Subquery,
    absent,
    clamp,
    format_duration,
    histogram_quantile,
    ignoring,
    increase,
    label_replace,
    on,
    quantile_over_time,
    quote,
    rate,
    sum_over_time,
    to_promql,
    vector,
)

X = Selector("x")
Y = Selector("y")


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        (X, "x"),
        (Selector("x", (Matcher.equal("a", "1"), Matcher.not_equal("b", "2"))), 'x{a="1",b!="2"}'),
        (Selector(None, (Matcher.regex("__name__", "x|y"),)), '{__name__=~"x|y"}'),
        (Selector("x", (Matcher.not_regex("c", "d.*"),)), 'x{c!~"d.*"}'),
        (Selector("x", offset=300), "x offset 5m"),
        (Selector("x", at=1700000000), "x @ 1700000000"),
        (Selector("x", at=1700000000.5), "x @ 1700000000.5"),
        (Selector("x", at="start"), "x @ start()"),
        (Selector("x", offset=60, at="end"), "x offset 1m @ end()"),
        (X.over(3600), "x[1h]"),
        (X.over(5400), "x[1h30m]"),
        (X.over(90061.5), "x[1d1h1m1s500ms]"),
        (Selector("x", offset=86400).over(300), "x[5m] offset 1d"),
        (Subquery(rate(X.over(300)), 3600, 60), "rate(x[5m])[1h:1m]"),
        (Subquery(X, 3600), "x[1h:]"),
        (Subquery(X + Y, 600, 60, offset=60), "(x + y)[10m:1m] offset 1m"),
        (rate(X.over(300)), "rate(x[5m])"),
        (quantile_over_time(0.9, X.over(60)), "quantile_over_time(0.9, x[1m])"),
        (clamp(X, 0, 1), "clamp(x, 0, 1)"),
        (
            label_replace(X, "host", "$1", "Hostname", "(.+)"),
            'label_replace(x, "host", "$1", "Hostname", "(.+)")',
        ),
        (absent(X), "absent(x)"),
        (vector(1), "vector(1)"),
        (X.sum(), "sum(x)"),
        (X.sum(by=("le", "pod")), "sum by (le, pod) (x)"),
        (X.avg(without=("instance",)), "avg without (instance) (x)"),
        (X.count(by=()), "count by () (x)"),
        (X.quantile(0.5, by=("a",)), "quantile by (a) (0.5, x)"),
        (X.topk(3), "topk(3, x)"),
        (Aggregate("count_values", X, param=String("v")), 'count_values("v", x)'),
        (
            histogram_quantile(0.95, increase(X.over(3600)).sum(by=("le",))),
            "histogram_quantile(0.95, sum by (le) (increase(x[1h])))",
        ),
        (X / Y, "x / y"),
        (X + Y * 2, "x + y * 2"),
        ((X + Y) * 2, "(x + y) * 2"),
        (X - (Y - 1), "x - (y - 1)"),
        ((X - Y) - 1, "x - y - 1"),
        (Binary("^", X, Binary("^", Y, Number(2))), "x ^ y ^ 2"),
        (Binary("^", Binary("^", X, Y), Number(2)), "(x ^ y) ^ 2"),
        (X * -1, "x * (-1)"),
        (1 - X, "1 - x"),
        (Binary(">", X, Number(0.5), bool_=True), "x > bool 0.5"),
        (Binary("==", Number(1), Number(1), bool_=True), "1 == bool 1"),
        (Binary("and", X, Y, matching=on("pod")), "x and on(pod) y"),
        (Binary("or", Binary("and", X, Y), Y), "x and y or y"),
        (Binary("and", X, Binary("or", X, Y)), "x and (x or y)"),
        (
            Binary("/", X, Y, matching=ignoring("position").group_left()),
            "x / ignoring(position) group_left y",
        ),
        (
            Binary("*", X, Y, matching=on("pod").group_right("node", "gpu")),
            "x * on(pod) group_right(node, gpu) y",
        ),
        (
            Binary("/", sum_over_time(X.over(3600)).sum(), Aggregate("sum", X)),
            "sum(sum_over_time(x[1h])) / sum(x)",
        ),
        (Number(math.inf), "+Inf"),
        (Number(-math.inf), "-Inf"),
        (Number(math.nan), "NaN"),
        (Number(1e-6), "1e-06"),
        (Number(2.5), "2.5"),
    ],
)
def test_exact_text(expr: object, text: str) -> None:
    from inference_obs.query import Expr

    assert isinstance(expr, Expr)
    assert to_promql(expr) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", '"plain"'),
        ('say "hi"', r'"say \"hi\""'),
        ("back\\slash", r'"back\\slash"'),
        ("line\nbreak\r\ttab", r'"line\nbreak\r\ttab"'),
        ("}", '"}"'),
        ("é 中文 😀", '"é 中文 😀"'),
        ("\x00\x7f\x85", r'"\u0000\u007f\u0085"'),
        ("\u2028\u200b", r'"\u2028\u200b"'),
        ("\U000e0001", r'"\U000e0001"'),
        # Prometheus 2.42's lexer refuses a raw U+FFFD but unquotes its escape.
        ("bad \ufffd byte", r'"bad \ufffd byte"'),
        ("", '""'),
    ],
)
def test_quote(value: str, text: str) -> None:
    assert quote(value) == text


def test_quote_refuses_a_lone_surrogate() -> None:
    # Both servers refuse the escape "\ud800"; no string can carry it.
    with pytest.raises(QueryError, match="lone surrogate"):
        quote("a\ud800")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.001, "1ms"),
        (1, "1s"),
        (60, "1m"),
        (3600, "1h"),
        (86400, "1d"),
        (604800, "7d"),
        (3661.001, "1h1m1s1ms"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_literal_matchers_escape_regex_metacharacters() -> None:
    one_of = Matcher.one_of("pod", ["a.b", "c|d", "(e)"])
    assert to_promql(Selector("x", (one_of,))) == r'x{pod=~"a\\.b|c\\|d|\\(e\\)"}'
    prefix = Matcher.prefix("pod", "pro-model.")
    assert to_promql(Selector("x", (prefix,))) == r'x{pod=~"pro-model\\.(?s:.*)"}'
    assert Matcher.one_of("pod", ["only"]) == Matcher.equal("pod", "only")


@pytest.mark.parametrize(
    ("matcher", "text"),
    [
        # A trailing U+0000-U+0002 is kept out of a character class, which
        # VictoriaMetrics 1.79 misreads ("\x02|a" selects "2"), by (?m:$).
        (Matcher.one_of("pod", ["\x02", "a"]), r'x{pod=~"\u0002(?m:$)|a"}'),
        (
            Matcher.one_of("pod", ["x\x00", "x\x01", "x\x03"]),
            r'x{pod=~"x\u0000(?m:$)|x\u0001(?m:$)|x\u0003"}',
        ),
        (Matcher.one_of("pod", ["\x01a", "b"]), r'x{pod=~"\u0001a|b"}'),
        # A prefix's leading literal is taken out whole: no guard needed.
        (Matcher.prefix("pod", "a\x02"), r'x{pod=~"a\u0002(?s:.*)"}'),
        # \b parts a backslash from x0N, which VictoriaMetrics 1.79 rewrites.
        (Matcher.one_of("pod", ["C:\\x01", "a"]), r'x{pod=~"C:\\\\\\bx01|a"}'),
        (Matcher.prefix("pod", "C:\\x02"), r'x{pod=~"C:\\\\\\bx02(?s:.*)"}'),
        (Matcher.one_of("pod", ["C:\\x03", "a"]), r'x{pod=~"C:\\\\x03|a"}'),
        (Matcher.one_of("pod", ["\ufffd", "a"]), r'x{pod=~"\ufffd|a"}'),
    ],
)
def test_literal_matchers_avoid_server_misreadings(matcher: Matcher, text: str) -> None:
    assert to_promql(Selector("x", (matcher,))) == text


@pytest.mark.parametrize("thing", ['up{job="a"}', 3, None])
def test_only_expressions_render(thing: object) -> None:
    with pytest.raises(QueryError, match=f"cannot render {type(thing).__name__} as PromQL: "):
        to_promql(thing)  # type: ignore[arg-type]
