"""Grafana variables in PromQL: replaced by placeholders that keep the text parseable.

Grafana interpolates ``$var``, ``${var}``, ``${var:format}`` and the legacy
``[[var]]`` before a query reaches Prometheus, and adds its own
(``$__rate_interval``, ``$__interval``, ``$__range``, ...). Before parsing,
each occurrence is replaced by something of the type its place needs:

- inside a string (a label value or regex) it is left as written: ``"$model"``
  is a valid value and ``=~"$model"`` a valid regex, and the checks compare
  matchers by their text;
- in a range, a subquery or after ``offset``, by a duration no dashboard
  writes: 1000 days plus a few milliseconds, distinct per variable;
- in a grouping list (``by``, ``without``, ``on``, ``ignoring``, ``group_*``)
  or touching a name, by an identifier ``__grafana_<var>``;
- anywhere else (``histogram_quantile($q, ...)``, ``> $threshold``), by a
  number in [0, 1] no dashboard writes.

:meth:`Substitution.restore` maps a rendered expression back, so a corrected
expression reads ``[$__rate_interval]`` as the dashboard did.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from inference_obs.query import format_duration, parse_duration

__all__ = ["Substitution", "references", "substitute"]

# ${var}, ${var:format}, ${var.field}, $var, [[var]], [[var:format]].
_VARIABLE = re.compile(r"\$\{(\w+)(?:[:.][^}]*)?\}|\$(\w+)|\[\[(\w+)(?:[:.][^\]]*)?\]\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(\s*[\w\s,]*$")
_OFFSET = re.compile(r"\boffset\s*-?\s*$")
# A duration of 1000 days and k ms renders as "1000d{k}ms": no dashboard writes it.
_SENTINEL_DAYS_S = 1000 * 86400.0
# Numbers 0.4242000k: inside [0, 1] (a quantile), and not a value anyone writes.
_SENTINEL_NUMBER = 0.4242


@dataclass(frozen=True, slots=True)
class Substitution:
    """PromQL text with its Grafana variables replaced, and the way back."""

    text: str
    variables: frozenset[str]
    #: Placeholder text -> the variable it stands for (``$name``).
    back: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def restore(self, promql: str) -> str:
        """``promql`` (rendered from the parsed text) with the variables written back."""
        # Longest first: "__grafana_a" must not be restored inside "__grafana_ab".
        for placeholder in sorted(self.back, key=len, reverse=True):
            promql = promql.replace(placeholder, self.back[placeholder])
        return promql

    def duration(self, name: str) -> float:
        """Seconds of the placeholder window that restores as ``$name`` (made if new)."""
        for placeholder, variable in self.back.items():
            if variable == f"${name}" and placeholder.startswith("1000d"):
                return parse_duration(placeholder)
        taken = sum(1 for p in self.back if p.startswith("1000d"))
        seconds = _SENTINEL_DAYS_S + (taken + 1) / 1000
        self.back[format_duration(seconds)] = f"${name}"
        return seconds


def references(text: str) -> set[str]:
    """Names of the variables ``text`` refers to, in any of Grafana's spellings."""
    return {next(g for g in m.groups() if g) for m in _VARIABLE.finditer(text)}


def substitute(text: str) -> Substitution:
    """Replace each Grafana variable in ``text`` by a placeholder of the right type.

    Examples
    --------
    >>> s = substitute('rate(x{pod=~"$pod"}[$__rate_interval])')
    >>> s.text
    'rate(x{pod=~"$pod"}[1000d1ms])'
    >>> s.restore("rate(x[1000d1ms])")
    'rate(x[$__rate_interval])'
    >>> sorted(s.variables)
    ['__rate_interval', 'pod']
    """
    matches = list(_VARIABLE.finditer(text))
    if not matches:
        return Substitution(text, frozenset())
    strings = _string_spans(text)
    out: list[str] = []
    back: dict[str, str] = {}
    durations: dict[str, str] = {}
    numbers: dict[str, str] = {}
    names: set[str] = set()
    pos = 0
    for match in matches:
        name = next(g for g in match.groups() if g)
        names.add(name)
        out.append(text[pos : match.start()])
        pos = match.end()
        if _inside(strings, match.start()):
            out.append(match.group())
            continue
        before = text[: match.start()]
        after = text[match.end() : match.end() + 1]
        if _in_brackets(before, strings) or _OFFSET.search(before):
            if name not in durations:
                k = len(durations) + 1
                durations[name] = format_duration(_SENTINEL_DAYS_S + k / 1000)
                back[durations[name]] = f"${name}"
            out.append(durations[name])
        elif (
            _GROUPING.search(before)
            or (before[-1:].isalnum() or before[-1:] in "_:")
            or (after.isalnum() or after in ("_", ":"))
        ):
            placeholder = f"__grafana_{name}"
            back[placeholder] = f"${name}"
            out.append(placeholder)
        else:
            if name not in numbers:
                value = _SENTINEL_NUMBER + (len(numbers) + 1) * 1e-8
                numbers[name] = repr(round(value, 8))
                back[numbers[name]] = f"${name}"
            out.append(numbers[name])
    out.append(text[pos:])
    return Substitution("".join(out), frozenset(names), back)


def _string_spans(text: str) -> list[tuple[int, int]]:
    """Start and end of every string literal (double, single or back quotes)."""
    spans = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "#":  # a comment runs to the end of the line
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if ch in "\"'`":
            start = i
            i += 1
            while i < n and text[i] != ch:
                i += 2 if text[i] == "\\" and ch != "`" else 1
            spans.append((start, i))
        i += 1
    return spans


def _inside(spans: list[tuple[int, int]], pos: int) -> bool:
    return any(start < pos < end for start, end in spans)


def _in_brackets(before: str, strings: list[tuple[int, int]]) -> bool:
    """Whether the text before a position has an unclosed ``[`` outside strings."""
    depth = 0
    for i, ch in enumerate(before):
        if ch in "[]" and not _inside(strings, i):
            depth += 1 if ch == "[" else -1
    return depth > 0
