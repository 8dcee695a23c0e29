"""Label matchers: ``label="value"``, ``label=~"pattern"`` and the literal forms.

:class:`Matcher` checks its label name and value when it is built; the
constructors :meth:`Matcher.equal`, :meth:`Matcher.one_of` and
:meth:`Matcher.prefix` escape literal values so each selects exactly itself
on Prometheus and VictoriaMetrics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from inference_obs.errors import QueryError
from inference_obs.query.names import (
    check_label_name,
    check_regex,
    check_text,
    regex_alternation,
    regex_escape,
)
from inference_obs.query.re2 import python_pattern

__all__ = ["MatchOp", "Matcher"]


class MatchOp(StrEnum):
    """A label matcher's operator."""

    EQ = "="
    NE = "!="
    RE = "=~"
    NRE = "!~"


@dataclass(frozen=True, slots=True)
class Matcher:
    """A label matcher such as ``pod=~"pro-.*"``.

    Prefer the constructors :meth:`equal`, :meth:`one_of` and :meth:`prefix`
    where a literal value is meant: they escape it so it selects exactly itself.
    """

    label: str
    op: MatchOp
    value: str

    def __post_init__(self) -> None:
        where = f"matcher on {self.label!r}"
        check_label_name(self.label, where=where)
        if not isinstance(self.op, MatchOp):
            raise QueryError(f"{where}: operator must be a MatchOp, got {self.op!r}")
        check_text(self.value, where=where)
        if self.op in (MatchOp.RE, MatchOp.NRE):
            check_regex(self.value, where=where)

    @classmethod
    def equal(cls, label: str, value: str) -> Matcher:
        """``label="value"``: exactly this value."""
        return cls(label, MatchOp.EQ, value)

    @classmethod
    def not_equal(cls, label: str, value: str) -> Matcher:
        """``label!="value"``."""
        return cls(label, MatchOp.NE, value)

    @classmethod
    def regex(cls, label: str, pattern: str) -> Matcher:
        """``label=~"pattern"``: an RE2 pattern, anchored at both ends by the server."""
        return cls(label, MatchOp.RE, pattern)

    @classmethod
    def not_regex(cls, label: str, pattern: str) -> Matcher:
        """``label!~"pattern"``."""
        return cls(label, MatchOp.NRE, pattern)

    @classmethod
    def one_of(cls, label: str, values: tuple[str, ...] | list[str]) -> Matcher:
        """Any of the literal ``values``, escaped so each selects exactly itself.

        The pattern is :func:`~inference_obs.query.names.regex_alternation`'s,
        which selects exactly ``values`` on Prometheus 2.42 and VictoriaMetrics 1.79.
        """
        if not values:
            raise QueryError(f"matcher on {label!r}: one_of needs at least one value")
        for value in values:
            check_text(value, where=f"matcher on {label!r}")
        if len(values) == 1:
            return cls.equal(label, values[0])
        return cls(label, MatchOp.RE, regex_alternation(values))

    @classmethod
    def prefix(cls, label: str, prefix: str) -> Matcher:
        """Values starting with the literal ``prefix`` (newlines included after it)."""
        check_text(prefix, where=f"matcher on {label!r}")
        # (?s:...) lets '.' match a newline; Prometheus 2.x's '.' does not by default.
        # A trailing U+0000-U+0002 needs no guard as in one_of: VictoriaMetrics
        # takes a pattern's leading literal out as it is, before any rewriting.
        return cls(label, MatchOp.RE, regex_escape(prefix) + "(?s:.*)")

    def matches(self, value: str) -> bool:
        """Whether ``value`` satisfies this matcher (Python re, the RE2 pattern translated)."""
        if self.op is MatchOp.EQ:
            return value == self.value
        if self.op is MatchOp.NE:
            return value != self.value
        hit = re.fullmatch(python_pattern(self.value), value) is not None
        return hit if self.op is MatchOp.RE else not hit
