"""What the checks read: one query with where it came from, and a dashboard's variables."""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field

__all__ = ["Document", "Lines", "Query", "Variable", "line_of"]


@dataclass(frozen=True, slots=True)
class Query:
    """One PromQL expression of a dashboard panel, a rule or a ``.promql`` file.

    Attributes
    ----------
    where
        Panel title (``Row / Title`` inside a row), rule name, or the file name.
    ref
        Grafana refId, ``record``/``alert``, or empty.
    text
        The expression as written.
    line
        1-based line of the expression in its file, when known.
    unit
        The Grafana unit id the values are shown with (``s``, ``percentunit``), or
        None when not a panel, not set, or not decidable for this query.
    words
        Lower-case title and legend (or rule name): how the number is presented.
    grafana
        Whether Grafana variables may appear in ``text``.
    """

    where: str
    ref: str
    text: str
    line: int | None = None
    unit: str | None = None
    words: str = ""
    grafana: bool = False


@dataclass(frozen=True, slots=True)
class Variable:
    """A dashboard template variable.

    Attributes
    ----------
    name
        Name without ``$``.
    kind
        Grafana's type: ``query``, ``custom``, ``textbox``, ``interval``, ...
    definition
        Its query or values, where other variables may be referred to.
    hidden
        Whether Grafana hides it (``hide: 2``): then it cannot be chosen.
    """

    name: str
    kind: str
    definition: str = ""
    hidden: bool = False


@dataclass(frozen=True, slots=True)
class Document:
    """One file's queries (and, for a dashboard, its variables and other references)."""

    path: str
    kind: str
    queries: tuple[Query, ...]
    variables: tuple[Variable, ...] = ()
    #: Text outside queries that may use variables: repeat options, datasources, links.
    other_references: frozenset[str] = field(default_factory=frozenset)
    #: Names recorded by the rules of this file, with their expressions.
    recorded: tuple[tuple[str, str], ...] = ()
    #: Panels whose queries are not in the file (library panels not inlined):
    #: ``(where, message, line)``, each reported, never skipped in silence.
    not_read: tuple[tuple[str, str, int | None], ...] = ()


def line_of(text: str, offset: int) -> int:
    """1-based line of ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1


# A JSON string literal, escapes included.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)


class Lines:
    """The line of each string value of a JSON file, in order of appearance.

    The file is read once: every string literal is decoded and indexed by its
    value, and line starts are kept for a binary search, so finding the line
    of each of ``n`` expressions costs ``O(n log n)`` beyond one pass over the
    text (searching the text for each would cost ``O(n^2)`` for ``n`` panels).
    A value that occurs several times gets its occurrences in turn.
    """

    def __init__(self, text: str) -> None:
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self._at: dict[str, list[int]] = {}
        for match in _JSON_STRING.finditer(text):
            literal = match.group()
            try:
                value = json.loads(literal) if "\\" in literal else literal[1:-1]
            except ValueError:
                continue  # not a JSON string (the text is not JSON there)
            self._at.setdefault(value, []).append(match.start())
        self._used: dict[str, int] = {}

    def line(self, value: str) -> int | None:
        """1-based line of the next occurrence of the string ``value``, or None."""
        found = self._at.get(value, ())
        taken = self._used.get(value, 0)
        if taken >= len(found):
            return None
        self._used[value] = taken + 1
        return bisect.bisect_right(self._starts, found[taken])
