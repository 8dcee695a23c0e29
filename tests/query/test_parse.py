"""``parse`` reads what Prometheus reads, into the tree, and says where text is wrong.

Every accepted text is also parsed by ``promql-parser`` (the Rust parser
Prometheus-compatible tools use): both must read the same expression, which
is checked by comparing that parser's canonical printing of the original
text and of our ``to_promql`` of it.
"""

from __future__ import annotations

import math
import re

import promql_parser
import pytest

from inference_obs.errors import ParseError, QueryError
from inference_obs.metrics import STANDARD_QUERIES
from inference_obs.query import (
    Aggregate,
    Binary,
    Call,
    HistogramQuantile,
    Matcher,
    Number,
    Range,
    Selector,
    Subquery,
    children,
    parse,
    rate,
    selectors,
    to_promql,
    walk,
)

# Texts as dashboards and rule files write them: every node, modifier and
# spelling the grammar allows, plus vLLM/SGLang/DCGM names.
TEXTS = [
    "up",
    "vllm:num_requests_running",
    'vllm:kv_cache_usage_perc{model_name="m", engine!="1"}',
    'x{a=~"b|c", d!~"e.*",}',
    '{job="a"}',
    "rate(x[5m])",
    "rate(x[1h30m])",
    "increase(x_total[90s])",
    "rate(x[300])",
    "rate(x[5m] offset 1h)",
    "rate(x[5m] @ 1700000000)",
    "x @ start()",
    "x @ end() offset 10m",
    "x offset 5m @ 100",
    "max_over_time(rate(x[5m])[1h:1m])",
    "max_over_time(rate(x[5m])[1h:])",
    "avg_over_time((a + b)[30m:] offset 5m)",
    "sum(x)",
    "sum by (a, b) (x)",
    "sum(x) by (a)",
    "sum without (le) (x)",
    "sum by () (x)",
    "topk(5, x)",
    "topk by (a) (5, x)",
    "quantile(0.9, x)",
    'count_values("v", x)',
    "count(x) without (pod)",
    "histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m])))",
    "histogram_quantile(0.99, sum(rate(x_bucket[5m])) by (le, pod))",
    "histogram_quantile(0.5, rate(x_bucket[5m]))",
    "a + b * c",
    "(a + b) * c",
    "a - b - c",
    "a / b / c",
    "2 ^ 3 ^ 2",
    "-x",
    "-2 ^ 2",
    "a * -b",
    "+x",
    "a > 0",
    "a > bool 0",
    "1 < bool 2",
    "a == on(b) c",
    "a / ignoring(le) b",
    "a * on(pod) group_left(node) b",
    "a * on(pod) group_left b",
    "a + ignoring(x) group_right(y, z) b",
    "a and b",
    "a or b unless c",
    "a atan2 b",
    "a % 2",
    "round(x)",
    "round(x, 0.1)",
    "clamp_max(x, 1)",
    "clamp(x, 0, 1)",
    "abs(deriv(x[10m]))",
    "predict_linear(x[1h], 3600)",
    'label_replace(x, "dst", "$1", "src", "(.*)")',
    'label_join(x, "dst", ",", "a", "b")',
    "sort_desc(sum by (a) (x))",
    "time() - timestamp(x)",
    "hour()",
    "day_of_week(timestamp(x))",
    "vector(1)",
    "scalar(sum(x))",
    'absent(x{a="b"})',
    "absent_over_time(x[5m])",
    "quantile_over_time(0.95, x[10m])",
    "stddev_over_time(x[10m])",
    "present_over_time(x[10m])",
    "1e3",
    "5m",
    "1.5e-3 * x",
    "0x1f",
    "Inf",
    "NaN",
    "'single' ",
    "`raw`",
    'x{a="tab\\there", b="quote\\"d", c="\\u00e9"}',
    "x # a comment\n  + y",
    "sum(\n  rate(x[5m])\n)\n/\nsum(rate(y[5m]))",
    "sum(rate(vllm:e2e_request_latency_seconds_sum[5m]))"
    " / sum(rate(vllm:e2e_request_latency_seconds_count[5m]))",
    "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) * 100",
    "avg by (gpu, node) (DCGM_FI_DEV_GPU_UTIL or nvidia_gpu_duty_cycle)",
    "sum(max by (server) (vllm:healthy_pods_total))",
    "SUM(x) BY (a)",
    "Sum by(a)(x) / ON(a) GROUP_LEFT y",
    "x AND y OR z UNLESS w",
    "a > BOOL 1",
    "x OFFSET 5m",
]


def _canonical(text: str) -> str:
    return str(promql_parser.parse(text))


@pytest.mark.parametrize("text", TEXTS)
def test_reads_what_prometheus_reads(text: str) -> None:
    ours = to_promql(parse(text))
    assert _canonical(ours) == _canonical(text) or _same_modulo_spelling(text, ours)


def _same_modulo_spelling(original: str, ours: str) -> bool:
    """Spellings that differ on purpose: unary minus, hex and special numbers."""
    special = ("-", "0x", "Inf", "NaN", "+x")
    if not original.lstrip().startswith(special) and " -" not in original:
        return False
    return to_promql(parse(ours)) == ours


@pytest.mark.parametrize("query", STANDARD_QUERIES, ids=lambda q: q.key)
def test_round_trips_every_standard_query(query: object) -> None:
    from inference_obs.metrics import StandardQuery

    assert isinstance(query, StandardQuery)
    expr = query.expr([Matcher.regex("pod", "pro-.*")], 3600)
    assert parse(to_promql(expr)) == expr


def test_builds_the_tree_nodes() -> None:
    expr = parse('histogram_quantile(0.9, sum(rate(x_bucket{a="b"}[5m])) by (le))')
    assert expr == HistogramQuantile(
        Number(0.9),
        Aggregate(
            "sum",
            Call("rate", (Range(Selector("x_bucket", (Matcher.equal("a", "b"),)), 300.0),)),
            by=("le",),
        ),
    )
    assert parse('{__name__="up", job="a"}') == Selector("up", (Matcher.equal("job", "a"),))
    assert parse("-x") == Binary("*", Number(-1.0), Selector("x"))
    assert parse("-2") == Number(-2.0)
    assert parse("-2 ^ 2") == Binary("*", Number(-1.0), Binary("^", Number(2), Number(2)))
    assert math.isinf(parse("Inf").value)  # type: ignore[attr-defined]
    assert parse("rate(x[5m])[1h:]") == Subquery(rate(Selector("x").over(300)), 3600)
    assert parse("x offset 5m") == Selector("x", offset=300)
    assert parse("a * on(pod) group_left(node) b").matching.include == ("node",)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("sum(", 1, 5, "expected an expression, found the end"),
        ("x{a=1}", 1, 5, "expected a quoted label value, found '1'"),
        ("x[]", 1, 3, "expected a duration such as 5m"),
        ("rate(x[5m]", 1, 11, "expected ')' to close rate(...)"),
        ("a +", 1, 4, "expected an expression"),
        ("a b", 1, 3, "expected the end of the expression"),
        ('x{a="\\."}', 1, 5, "unknown escape sequence"),
        ("sum(x)\n  by (le", 2, 9, "expected ')' after the label list"),
        ("x ! y", 1, 3, "unexpected character '!'"),
        ("sum(x)[5m]", 1, 7, "a range needs a selector"),
        ("x offset 1h [5m]", 1, 13, "offset and @ go after the range"),
        ("histogram_quantile(0.9)", 1, 1, "takes 2 arguments, got 1"),
    ],
)
def test_syntax_errors_name_line_and_column(
    text: str, line: int, column: int, message: str
) -> None:
    with pytest.raises(ParseError, match=re.escape(message)) as caught:
        parse(text)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert caught.value.refused is None
    assert str(caught.value).startswith(f"line {line}, column {column}: ")
    with pytest.raises(ValueError):  # noqa: PT011 - promql-parser's own error types vary
        promql_parser.parse(text)


@pytest.mark.parametrize(
    ("text", "refused", "message"),
    [
        ("rate(x)", Call, "expected range vector"),
        ("nope(x)", Call, "not supported"),
        ("RATE(x[5m])", Call, "not supported"),
        ("histogram_quantile(0.9, sum(rate(x_bucket[5m])))", HistogramQuantile, "drops the 'le'"),
        ("sum(rate(x))", Call, "select a range"),
        ("1 > 2", Binary, "comparing two scalars needs 'bool'"),
        ('x{a=~"("}', Matcher, "not a valid regex"),
    ],
)
def test_refusals_name_the_node_and_keep_its_operands(
    text: str, refused: type, message: str
) -> None:
    with pytest.raises(ParseError, match=message) as caught:
        parse(text)
    assert caught.value.refused is refused
    assert isinstance(caught.value, QueryError)


def test_a_refused_quantile_keeps_what_was_meant() -> None:
    with pytest.raises(ParseError) as caught:
        parse("histogram_quantile(0.99, sum(rate(x_bucket[5m])))")
    q, buckets = caught.value.operands
    assert q == Number(0.99)
    assert isinstance(buckets, Aggregate)
    assert buckets.by is None


def test_walk_and_selectors() -> None:
    expr = parse("sum(rate(a[5m])) / on(x) group_left max(b offset 1m)")
    assert [s.metric for s in selectors(expr)] == ["a", "b"]
    assert next(iter(walk(expr))) is expr
    assert len(children(expr)) == 2
    assert children(Selector("x")) == ()
