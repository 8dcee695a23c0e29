"""RE2 syntax Prometheus accepts is accepted, and matches as Go's regexp would."""

from __future__ import annotations

import json

import pytest

from inference_obs.errors import QueryError
from inference_obs.lint import lint_text
from inference_obs.query import Matcher, parse


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        # Each row as Go's regexp.MatchString("^(?:" + pattern + ")$", value) answers.
        (r"\Qvllm.svc\E", "vllm.svc", True),  # \Q...\E: the dot is a dot
        (r"\Qvllm.svc\E", "vllmXsvc", False),
        (r"\Qa|b", "a|b", True),  # \Q to the end when \E is missing
        (r"pod-\d+\z", "pod-12", True),  # \z: the end of the text
        (r"\pL+", "héllo", True),  # \pL: any letter, é included
        (r"\pL+", "h3llo", False),
        (r"\p{Lu}\p{Ll}+", "Ñandú", True),
        (r"\PL+", "123-", True),  # \PL: anything but a letter
        (r"\p{^L}", "a", False),
        (r"\p{Greek}+", "αβγ", True),
        (r"[[:alpha:]]+-[[:digit:]]", "gpu-0", True),
        (r"[[:^digit:]]", "7", False),
        (r"[\pN_]+", "1_٣", True),  # a Unicode class inside brackets: ٣ is Arabic-Indic three
        (r"\x{263a}", "☺", True),
        (r"h20(?i)-PRO|x", "h20-pro", True),  # flags to the end of the group, in every branch
        (r"h20(?i)-PRO|x", "X", True),
        (r"h20(?i)-PRO|x", "H20-pro", False),
        (r"(?U)a+b", "aaab", True),  # ungreedy: changes captures, not whether it matches
        (r"(?<model>llama|qwen)-\d+", "qwen-7", True),
        (r"[]a-]+", "]-a", True),
        (r"a[&&~~||]b", "a~b", True),  # Python's future set operators are literals in RE2
    ],
)
def test_re2_patterns_match_as_in_go(pattern: str, value: str, matches: bool) -> None:
    # On main \Q, \z, \p, [[:alpha:]], \x{...} and flags after the start were refused.
    assert Matcher.regex("pod", pattern).matches(value) is matches


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        (r"(?=a)a", "lookaround"),
        (r"(a)\1", "a backreference"),
        (r"(?P<x>a)(?P=x)", "a backreference"),
        (r"(?>a+)b", "an atomic group"),
        (r"a++", "a possessive quantifier"),
        (r"a\Z", r"\Z"),
        (r"[[:word2:]]", "unknown POSIX class"),
        (r"\x{110000}", "past U+10FFFF"),
    ],
)
def test_what_re2_refuses_is_refused(pattern: str, construct: str) -> None:
    # Python's re reads each of these; Go's regexp (RE2) refuses them.
    with pytest.raises(QueryError, match=None) as info:
        Matcher.regex("pod", pattern)
    assert construct in str(info.value)


def test_lint_reads_re2_patterns_in_dashboards() -> None:
    targets = [
        {"refId": ref, "expr": f'sum(rate(vllm:request_success_total{{pod=~"{pattern}"}}[5m]))'}
        for ref, pattern in (("A", r"\\Qvllm.0\\E"), ("B", r"vllm-\\d+\\z"), ("C", r"\\pL+"))
    ]
    dashboard = json.dumps({"panels": [{"title": "Requests", "targets": targets}]})
    assert [f.message for f in lint_text(dashboard, "dashboard")] == []  # OBS001 x3 on main


def test_a_label_replace_regex_in_re2_syntax_parses() -> None:
    parse(r'label_replace(up, "host", "$1", "instance", "(\\pL+):\\d+\\z")')
