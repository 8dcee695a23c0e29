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


# Text shaped like a placeholder: a label name, a window or a number made by substitute().
_PLACEHOLDER = r"__grafana_\w{{0,{tail}}}|1000d[0-9a-z]{{0,{tail}}}|0\.4242\d{{0,{tail}}}"
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
        """``promql`` (rendered from the parsed text) with the variables written back.

        One pass: each text shaped like a placeholder is replaced by the
        longest placeholder it starts with ("__grafana_a" is not restored
        inside "__grafana_ab"), so the time grows with the text, not with the
        text times the number of variables.
        """
        if not self.back:
            return promql
        lengths = sorted({len(p) for p in self.back}, reverse=True)
        # Only as long as the longest placeholder, so no text is matched twice over.
        shape = re.compile(_PLACEHOLDER.format(tail=lengths[0]))
        out: list[str] = []
        pos = search = 0
        while (match := shape.search(promql, search)) is not None:
            start, shaped = match.start(), match.group()
            found = next((shaped[:n] for n in lengths if shaped[:n] in self.back), None)
            if found is None:
                search = start + 1
                continue
            out += [promql[pos:start], self.back[found]]
            pos = search = start + len(found)
        out.append(promql[pos:])
        return "".join(out)

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

    One pass over the text (:func:`_places`), so the time grows linearly with
    its length and its number of variables.

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
    out: list[str] = []
    back: dict[str, str] = {}
    durations: dict[str, str] = {}
    numbers: dict[str, str] = {}
    names: set[str] = set()
    pos = 0
    for match, place in zip(matches, _places(text, matches), strict=True):
        name = next(g for g in match.groups() if g)
        names.add(name)
        out.append(text[pos : match.start()])
        pos = match.end()
        if place == "as written":
            out.append(match.group())
        elif place == "duration":
            if name not in durations:
                k = len(durations) + 1
                durations[name] = format_duration(_SENTINEL_DAYS_S + k / 1000)
                back[durations[name]] = f"${name}"
            out.append(durations[name])
        elif place == "name":
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


def _places(text: str, matches: list[re.Match[str]]) -> list[str]:
    """Where each variable stands: ``as written``, ``duration``, ``name`` or ``number``.

    Inside a string or a comment it stays as written; inside ``[...]`` or after
    ``offset`` it is a duration; in a grouping list or touching a name, a
    label name; anywhere else a number. The text is scanned once, left to
    right, keeping the bracket depth and whether a grouping list is open.
    """
    places: list[str] = []
    depth = 0  # unclosed [ outside strings
    grouping = False  # since the last ( after by/without/on/...: words, spaces, commas only
    i, k, n = 0, 0, len(text)
    while k < len(matches):
        match = matches[k]
        if i >= match.start():  # a variable outside strings and comments
            places.append(_place(text, match, depth > 0, grouping))
            i, k = match.end(), k + 1
            continue
        ch = text[i]
        end = i + 1
        if ch == "#" or ch in "\"'`":
            end = _comment_end(text, i) if ch == "#" else _string_end(text, i) + 1
            while k < len(matches) and matches[k].start() < end:
                places.append("as written")
                k += 1
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "(":
            grouping = _word_before(text, i).lower() in _GROUPING_WORDS
        elif not (ch.isalnum() or ch in "_, \t\r\n"):
            grouping = False
        i = min(end, n)
    return places


def _place(text: str, match: re.Match[str], in_brackets: bool, grouping: bool) -> str:
    if in_brackets or _word_before(text, match.start(), skip="-").lower() == "offset":
        return "duration"
    before = text[match.start() - 1 : match.start()]
    after = text[match.end() : match.end() + 1]
    # At the very start ("" in "_:") it is read as a name, as it always was.
    if grouping or before.isalnum() or before in "_:" or after.isalnum() or after in ("_", ":"):
        return "name"
    return "number"


_GROUPING_WORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})


def _word_before(text: str, end: int, skip: str = "") -> str:
    """The identifier that ends just before ``end``, spaces (and ``skip`` once) between."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    if skip and text[i - 1 : i] == skip:
        i -= 1
        while i > 0 and text[i - 1].isspace():
            i -= 1
    stop = i
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
        i -= 1
    return text[i:stop]


def _comment_end(text: str, start: int) -> int:
    end = text.find("\n", start)
    return len(text) if end < 0 else end


def _string_end(text: str, start: int) -> int:
    """Index of the quote closing the string that opens at ``start`` (or the text's end)."""
    quote, i, n = text[start], start + 1, len(text)
    while i < n and text[i] != quote:
        i += 2 if text[i] == "\\" and quote != "`" else 1
    return i
