"""Grafana variables become placeholders of the right type, and fixes get them back."""

from __future__ import annotations

import pytest

from inference_obs.lint.placeholders import references, substitute
from inference_obs.query import parse, to_promql


@pytest.mark.parametrize(
    ("text", "variables"),
    [
        ('rate(x{pod=~"$pod"}[$__rate_interval])', {"pod", "__rate_interval"}),
        ('rate(x{pod=~"${pod}"}[${__interval}])', {"pod", "__interval"}),
        ('x{pod=~"${pod:regex}", ns="[[ns]]"}', {"pod", "ns"}),
        ("rate(x[[[interval]]])", {"interval"}),
        ("sum(increase(x[$__range])) / $__range_s", {"__range", "__range_s"}),
        ("histogram_quantile($q, sum by (le, $group) (rate(x_bucket[5m])))", {"q", "group"}),
        ("topk($n, x) > $threshold", {"n", "threshold"}),
        ("${prefix}_requests_total offset $shift", {"prefix", "shift"}),
        ("max_over_time(rate(x[$__rate_interval])[$__range:$__interval])", None),
        ('x{a="$1"} # $__interval in a comment', None),
    ],
)
def test_substituted_text_parses_and_restores(text: str, variables: set[str] | None) -> None:
    substitution = substitute(text)
    expr = parse(substitution.text)
    if variables is not None:
        assert substitution.variables == variables
    restored = substitution.restore(to_promql(expr))
    assert "1000d" not in restored
    assert "__grafana_" not in restored
    assert "0.4242" not in restored
    assert to_promql(parse(substitute(restored).text)) == to_promql(expr)


def test_strings_keep_their_variables_as_written() -> None:
    substitution = substitute('x{a=~"$a|$b", c="${c:csv}"}[$w]')
    assert substitution.text.startswith('x{a=~"$a|$b", c="${c:csv}"}[')


def test_a_window_placeholder_is_made_on_demand() -> None:
    substitution = substitute("sum(x)")
    seconds = substitution.duration("__rate_interval")
    assert substitution.duration("__rate_interval") == seconds
    assert (
        substitution.restore(to_promql(parse("rate(x[1000d1ms])"))) == "rate(x[$__rate_interval])"
    )


def test_references() -> None:
    assert references('a{b="$x"} + ${y:raw} - [[z]] + $__interval') == {"x", "y", "z", "__interval"}
