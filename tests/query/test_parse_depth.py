"""parse() refuses text nested past MAX_DEPTH with one ParseError, and reads text up to it."""

from __future__ import annotations

import pytest

from inference_obs.errors import ParseError
from inference_obs.query import MAX_DEPTH, parse, to_promql


@pytest.mark.parametrize(
    "text",
    [
        "(" * 500 + "x" + ")" * 500,
        " or ".join(f"x{i}" for i in range(1000)),
        "2 ^ " * 500 + "2",
        "-" * 500 + "x",
        "sum(" * 500 + "x" + ")" * 500,
        "rate(x[5m])" + " + 1" * 300,
    ],
    ids=["parentheses", "or-chain", "power-chain", "unary-minus", "aggregations", "plus-chain"],
)
def test_deep_text_is_one_parse_error_naming_the_limit(text: str) -> None:
    with pytest.raises(ParseError) as info:  # on main: RecursionError, or later in rendering
        to_promql(parse(text))
    assert f"nests more than {MAX_DEPTH} levels deep" in str(info.value)
    assert str(info.value).startswith("line 1, column ")


@pytest.mark.parametrize(
    "text",
    [
        "(" * (MAX_DEPTH - 1) + "x" + ")" * (MAX_DEPTH - 1),
        " or ".join(f"x{i}" for i in range(MAX_DEPTH)),
        "abs(" * (MAX_DEPTH - 1) + "x" + ")" * (MAX_DEPTH - 1),
    ],
)
def test_text_nested_to_the_limit_parses_renders_and_compares(text: str) -> None:
    expr = parse(text)
    assert parse(to_promql(expr)) == expr
    assert hash(expr) == hash(parse(text))
