"""The rules every JSON or YAML file read keeps: bounded nesting, unique keys, finite numbers.

The limit is checked at its edge: :data:`MAX_DEPTH` levels parse, one more is
refused, in both languages and for both kinds of container; far past it (where
the parsers themselves would fail with ``RecursionError``) the same error comes.
"""

from __future__ import annotations

import pytest

from inference_obs.documents import MAX_DEPTH, json_document, yaml_document, yaml_nodes
from inference_obs.errors import DocumentError


def nested_json(depth: int, opener: str = "[") -> str:
    closer = {"[": "]", "{": "}"}[opener]
    inner = '{"a": 1}' if opener == "{" else "1"
    if opener == "{":  # each level an object holding the next under "k"
        return '{"k": ' * (depth - 1) + inner + closer * (depth - 1)
    return opener * depth + inner + closer * depth


@pytest.mark.parametrize("opener", ["[", "{"])
def test_json_at_the_limit_parses_and_one_level_more_is_refused(opener: str) -> None:
    assert json_document(nested_json(MAX_DEPTH, opener), "f.json") is not None
    with pytest.raises(DocumentError, match=rf"^f\.json: nested deeper than {MAX_DEPTH} "):
        json_document(nested_json(MAX_DEPTH + 1, opener), "f.json")


@pytest.mark.parametrize("depth", [2_000, 200_000])
def test_json_far_past_the_interpreters_recursion_limit_is_the_same_error(depth: int) -> None:
    with pytest.raises(DocumentError, match="nested deeper than"):
        json_document("[" * depth + "]" * depth, "f.json")


@pytest.mark.parametrize(
    "text",
    [
        "[" * MAX_DEPTH + "]" * MAX_DEPTH,  # flow sequences
        # block mappings, each key holding the next, the last a scalar
        "".join(f"{'  ' * i}k{i}:\n" for i in range(MAX_DEPTH)) + "  " * MAX_DEPTH + "v\n",
    ],
)
def test_yaml_at_the_limit_parses(text: str) -> None:
    assert yaml_document(text, "f.yaml") is not None
    assert yaml_nodes(text, "f.yaml")


@pytest.mark.parametrize(
    "text",
    [
        "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
        "".join(f"{'  ' * i}k{i}:\n" for i in range(MAX_DEPTH + 1)) + "  " * 66 + "v\n",
        "x: " + "[" * 100_000 + "]" * 100_000,  # past the composer's RecursionError
    ],
)
def test_yaml_past_the_limit_is_refused_naming_the_line(text: str) -> None:
    for read in (yaml_document, yaml_nodes):
        with pytest.raises(DocumentError, match=r"^f\.yaml:\d+: nested deeper than 64"):
            read(text, "f.yaml")


def test_a_repeated_yaml_key_is_refused_naming_both_lines() -> None:
    text = "deployments:\n  - name: PRO\n    replicas: [a]\n    name: H20\n"
    with pytest.raises(DocumentError, match=r"f\.yaml:4: key 'name' appears twice .*lines 2 and 4"):
        yaml_document(text, "f.yaml")


def test_yaml_keys_equal_as_values_are_repeats_but_a_merge_key_override_is_not() -> None:
    with pytest.raises(DocumentError, match="key 1 appears twice"):
        yaml_document("1: a\n0x1: b\n", "f.yaml")  # both the integer 1
    merged = yaml_document("base: &b {x: 1, y: 2}\nmine:\n  <<: *b\n  x: 3\n", "f.yaml")
    assert merged["mine"] == {"x": 3, "y": 2}  # YAML's merge: the explicit key wins


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"a": 1, "a": 2}', "key 'a' appears twice in one object"),
        ('{"a": NaN}', "NaN is not JSON; numbers must be finite"),
        ('{"a": -Infinity}', "-Infinity is not JSON"),
        ('{"a": 1e999}', "1e999 is too large for a number"),  # Python's json reads inf
    ],
)
def test_json_that_python_would_read_silently_is_refused(text: str, problem: str) -> None:
    with pytest.raises(DocumentError, match=rf"^f\.json: {problem}"):
        json_document(text, "f.json")


def test_a_rule_file_key_written_twice_is_refused_naming_both_lines() -> None:
    # Prometheus's rule loader refuses this file ("mapping key already defined"); a
    # reader that kept the last `expr` would lint a query Prometheus never runs.
    text = (
        "groups:\n"
        "  - name: g\n"
        "    rules:\n"
        "      - alert: A\n"
        "        expr: up == 0\n"
        "        expr: up == 1\n"
    )
    with pytest.raises(DocumentError, match=r"f\.yaml:6: key 'expr' appears twice .*lines 5 and 6"):
        yaml_nodes(text, "f.yaml")


def test_composed_keys_allow_merges_and_survive_recursive_aliases() -> None:
    assert yaml_nodes("base: &b {x: 1}\nmine:\n  <<: *b\n  x: 3\n", "f.yaml")
    assert yaml_nodes("a: &a [1, *a]\n", "f.yaml")  # a node that holds itself: visited once
