"""Validation of PromQL identifiers, durations and regular expressions.

Prometheus 2.x is the strictest engine we target, so its rules apply:
label names match ``[a-zA-Z_][a-zA-Z0-9_]*``, metric names may also contain
``:``, durations are whole milliseconds, and regular expressions are RE2
(fully anchored by the server).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from inference_obs.errors import QueryError
from inference_obs.query.re2 import python_pattern

__all__ = [
    "LABEL_NAME",
    "METRIC_NAME",
    "check_duration",
    "check_label_name",
    "check_metric_name",
    "check_regex",
    "check_text",
    "parse_duration",
    "regex_alternation",
    "regex_escape",
]

#: Prometheus 2.x label and metric names (3.x also allows quoted UTF-8 names).
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_DURATION_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
    "y": 31536000.0,
}
# Go's regexp.QuoteMeta escapes exactly these characters.
_REGEX_META = frozenset("\\.+*?()|[]{}^$")
# VictoriaMetrics 1.79 stores the bytes 0x00, 0x01 and 0x02 of a label value as
# two bytes each, 0x00 then '0', '1' or '2' (lib/storage/metric_name.go,
# marshalTagValue). To match that form it parses a regex, writes it back with
# Go's Regexp.String, and rewrites the text with a plain string replacer
# (lib/storage/tag_filters.go, tagCharsRegexpEscaper): each \x00, \x01 and \x02
# becomes \x000, \x001, \x002, which is right only where the byte stands alone
# in a literal. regex_escape and regex_alternation keep it there.
_VM_REWRITTEN = ("x00", "x01", "x02")
_VM_ENCODED = frozenset("\x00\x01\x02")


def check_label_name(name: str, *, where: str) -> str:
    """Return ``name`` if it is a valid Prometheus label name, else raise QueryError."""
    if not isinstance(name, str) or not LABEL_NAME.fullmatch(name):
        raise QueryError(
            f"{where}: {name!r} is not a valid label name; label names match [a-zA-Z_][a-zA-Z0-9_]*"
        )
    return name


def check_metric_name(name: str, *, where: str) -> str:
    """Return ``name`` if it is a valid Prometheus metric name, else raise QueryError."""
    if not isinstance(name, str) or not METRIC_NAME.fullmatch(name):
        raise QueryError(
            f"{where}: {name!r} is not a valid metric name; "
            "metric names match [a-zA-Z_:][a-zA-Z0-9_:]*"
        )
    return name


def check_text(value: str, *, where: str) -> str:
    """Return ``value`` if it can be sent to a server as UTF-8, else raise QueryError.

    Label values are arbitrary Unicode text, but lone surrogates (which Python
    strings can hold) have no UTF-8 encoding and no server can store them.
    """
    if not isinstance(value, str):
        raise QueryError(f"{where}: expected a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise QueryError(
            f"{where}: {value!r} contains a lone surrogate at index {exc.start}, "
            "which is not valid UTF-8; decode the bytes it came from correctly"
        ) from exc
    return value


def check_regex(pattern: str, *, where: str) -> str:
    """Return ``pattern`` if it is valid RE2, else raise QueryError.

    The pattern is read as Python's ``re`` would read the same RE2 pattern
    (:func:`~inference_obs.query.re2.python_pattern`: ``\\Q...\\E``, ``\\z``,
    ``\\pL``, POSIX classes, flags anywhere), which refuses what RE2 does not
    support (lookaround, backreferences), and then compiled as the syntax check.
    """
    check_text(pattern, where=where)
    try:
        translated = python_pattern(pattern)
    except QueryError as exc:
        raise QueryError(f"{where}: {pattern!r} {exc} (RE2 is Prometheus's regex engine)") from exc
    try:
        re.compile(translated)
    except re.error as exc:
        raise QueryError(f"{where}: {pattern!r} is not a valid regex: {exc}") from exc
    return pattern


def regex_escape(literal: str) -> str:
    r"""Escape ``literal`` so that, as an RE2 pattern, it matches exactly itself.

    Mirrors Go's ``regexp.QuoteMeta``: only RE2 metacharacters are escaped, so
    the result stays readable. Prometheus anchors the whole pattern itself.

    Notes
    -----
    A backslash followed by ``x00``, ``x01`` or ``x02`` also gets ``\b`` after
    it. VictoriaMetrics 1.79 writes that backslash back as ``\\``, and its text
    rewrite of regexes (``tagCharsRegexpEscaper``, which matches the bytes 0x00
    to 0x02 in its stored form) then reads ``\x0N`` in ``\\x0N`` as an escape of
    byte N and looks for another value. ``\b`` always holds between a
    backslash (not a word character) and ``x`` (one), so the pattern still
    matches exactly the literal.

    Examples
    --------
    >>> print(regex_escape("a.b"))
    a\.b
    >>> print(regex_escape(r"C:\x01"))
    C:\\\bx01
    """
    out = []
    for i, ch in enumerate(literal):
        out.append("\\" + ch if ch in _REGEX_META else ch)
        if ch == "\\" and literal.startswith(_VM_REWRITTEN, i + 1):
            out.append(r"\b")
    return "".join(out)


def regex_alternation(literals: Sequence[str]) -> str:
    r"""An RE2 pattern that, anchored, matches exactly the strings in ``literals``.

    Each literal is escaped with :func:`regex_escape`, and the results are
    joined with ``|``.

    Notes
    -----
    A literal ending in U+0000, U+0001 or U+0002 is followed by ``(?m:$)``.
    Go's regexp parser merges alternatives that are, or after factoring out a
    common prefix become, single characters into a character class (``\x02|a``
    into ``[\x02a]``, ``x\x01|x\x02`` into ``x[\x01-\x02]``). VictoriaMetrics
    1.79's text rewrite of regexes (``tagCharsRegexpEscaper``) then turns
    ``[\x02a]`` into ``[\x002a]``, which selects the value ``2`` and not
    ``\x02``, and the range into an invalid pattern. ``(?m:$)`` keeps such an
    alternative from being a single character, and at the end of an anchored
    pattern it always holds; VictoriaMetrics strips only the text anchors
    ``^`` and ``$`` from the ends of alternatives, not this end-of-line one.

    Examples
    --------
    >>> print(regex_alternation(["a.b", "c"]))
    a\.b|c
    >>> regex_alternation(["\x02", "a"])
    '\x02(?m:$)|a'
    """
    return "|".join(regex_escape(v) + ("(?m:$)" if v[-1:] in _VM_ENCODED else "") for v in literals)


def check_duration(seconds: float, *, where: str) -> float:
    """Return ``seconds`` if it is a positive, whole number of milliseconds.

    PromQL durations are integers of milliseconds; a fractional millisecond
    cannot be written and would be silently rounded by hand-written queries.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise QueryError(f"{where}: duration must be a number of seconds, got {seconds!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise QueryError(f"{where}: duration must be positive and finite, got {seconds!r} s")
    ms = seconds * 1000.0
    if abs(ms - round(ms)) > 1e-6:
        raise QueryError(f"{where}: duration {seconds!r} s is not a whole number of milliseconds")
    return float(seconds)


def parse_duration(text: str) -> float:
    """Parse a PromQL duration such as ``"5m"`` or ``"1h30m"`` into seconds.

    Examples
    --------
    >>> parse_duration("1h30m")
    5400.0
    >>> parse_duration("250ms")
    0.25
    """
    if not isinstance(text, str) or not text:
        raise QueryError(f"duration {text!r}: expected text such as '5m' or '1h30m'")
    pos = 0
    total = 0.0
    for part in _DURATION_PART.finditer(text):
        if part.start() != pos:
            break
        total += int(part.group(1)) * _UNIT_SECONDS[part.group(2)]
        pos = part.end()
    if pos != len(text):
        raise QueryError(
            f"duration {text!r}: not a PromQL duration; use units ms, s, m, h, d, w, y "
            "as in '5m' or '1h30m'"
        )
    return check_duration(total, where=f"duration {text!r}")
