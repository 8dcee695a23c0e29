"""Validation of PromQL identifiers, durations and regular expressions.

Prometheus 2.x is the strictest engine we target, so its rules apply:
label names match ``[a-zA-Z_][a-zA-Z0-9_]*``, metric names may also contain
``:``, durations are whole milliseconds, and regular expressions are RE2
(fully anchored by the server).
"""

from __future__ import annotations

import math
import re

from inference_obs.errors import QueryError

__all__ = [
    "LABEL_NAME",
    "METRIC_NAME",
    "check_duration",
    "check_label_name",
    "check_metric_name",
    "check_regex",
    "check_text",
    "parse_duration",
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
    """Return ``pattern`` if it looks like valid RE2, else raise QueryError.

    Python's ``re`` is used as the syntax check, with the RE2 exclusions
    (lookaround, backreferences) tested separately.
    """
    check_text(pattern, where=where)
    unsupported = _not_re2(pattern)
    if unsupported:
        raise QueryError(
            f"{where}: {pattern!r} uses {unsupported}, which RE2 "
            "(Prometheus's regex engine) does not support"
        )
    try:
        re.compile(pattern)
    except re.error as exc:
        raise QueryError(f"{where}: {pattern!r} is not a valid regex: {exc}") from exc
    return pattern


def _not_re2(pattern: str) -> str | None:
    """Name a construct Python's re accepts but RE2 (Go regexp) rejects, if any.

    Lookaround and backreferences; escapes and character classes are skipped
    so that an escaped ``\\1`` or a literal ``[(?=]`` is not mistaken for one.
    """
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            if not in_class and pattern[i + 1 : i + 2] in set("123456789"):
                return "a backreference"
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            # A ']' right after '[' or '[^' is a literal member, not the end.
            i += 2 if pattern[i + 1 : i + 2] == "]" else 1
            if pattern[i : i + 1] == "^":
                i += 2 if pattern[i + 1 : i + 2] == "]" else 1
            continue
        elif pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), i):
            return "lookaround"
        i += 1
    return None


def regex_escape(literal: str) -> str:
    """Escape ``literal`` so that, as an RE2 pattern, it matches exactly itself.

    Mirrors Go's ``regexp.QuoteMeta``: only RE2 metacharacters are escaped, so
    the result stays readable. Prometheus anchors the whole pattern itself.
    """
    return "".join("\\" + ch if ch in _REGEX_META else ch for ch in literal)


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
