"""Quoting and escaping round-trip through an independent PromQL parser."""

from __future__ import annotations

import re
from typing import Any

import promql_parser
from hypothesis import example, given, settings, strategies as st

from inference_obs.query import Matcher, Selector, regex_escape, to_promql
from tests.properties.strategies import label_values


def _parsed_matchers(text: str) -> list[tuple[str, str]]:
    parsed: Any = promql_parser.parse(text)
    return [(m.name, m.value) for m in parsed.matchers.matchers]


@settings(max_examples=500)
@given(label_values)
def test_equality_matcher_value_survives_parsing(value: str) -> None:
    text = to_promql(Selector("m", (Matcher.equal("v", value),)))
    assert _parsed_matchers(text) == [("v", value)]
    # Prometheus 2.42's lexer refuses a raw U+FFFD, which promql_parser accepts.
    assert "\ufffd" not in text


@settings(max_examples=300)
@given(label_values)
def test_escaped_literal_matches_only_itself(value: str) -> None:
    # Python's re stands in for RE2 here; the real engines are checked in
    # tests/integration/test_label_roundtrip.py.
    pattern = re.compile(regex_escape(value), re.DOTALL)
    assert pattern.fullmatch(value)
    assert not pattern.fullmatch(value + "x")
    assert not pattern.fullmatch("x" + value)


@settings(max_examples=200)
@given(st.lists(label_values, min_size=2, max_size=5, unique=True), label_values)
# The forms that keep VictoriaMetrics 1.79 exact: (?m:$) and \b must not change the match.
@example(["\x02", "a", "x\x01", "x\x02"], "2")
@example(["C:\\x01", "C:\\x02"], "C:\\x001")
def test_one_of_selects_exactly_its_values(values: list[str], other: str) -> None:
    matcher = Matcher.one_of("v", values)
    text = to_promql(Selector("m", (matcher,)))
    assert _parsed_matchers(text) == [("v", matcher.value)]
    for value in values:
        assert matcher.matches(value)
    assert matcher.matches(other) == (other in values)


@settings(max_examples=200)
@given(label_values, label_values)
@example("C:\\x01", "C:\\x001")
@example("a\x02", "a\x02\x02")
def test_prefix_selects_exactly_its_extensions(prefix: str, other: str) -> None:
    matcher = Matcher.prefix("v", prefix)
    text = to_promql(Selector("m", (matcher,)))
    assert _parsed_matchers(text) == [("v", matcher.value)]
    assert matcher.matches(prefix)
    assert matcher.matches(prefix + other)
    assert matcher.matches(other) == other.startswith(prefix)
