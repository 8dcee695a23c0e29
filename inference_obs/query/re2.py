"""RE2 patterns (Prometheus's regular expressions) read as Python ``re`` patterns.

Prometheus compiles matcher and ``label_replace`` regexes with Go's
``regexp`` (RE2 syntax, Perl flags). Python's ``re`` is the stand-in that
checks and evaluates them here, and the two differ in syntax. RE2 syntax
``re`` lacks is translated to what means the same:

- ``\\Q...\\E`` (literal text) is escaped;
- ``\\z`` (end of text) is ``\\Z``;
- ``\\pL``, ``\\p{Greek}``, ``\\PL``, ``\\p{^L}`` (Unicode classes) are
  written out as ranges of code points, from :mod:`unicodedata` for general
  categories; a script (``\\p{Greek}``) is read as any letter, since Python
  knows no scripts (its name is not checked against Go's tables);
- ``[[:alpha:]]`` and ``[[:^digit:]]`` (POSIX classes, ASCII) are ranges;
- ``\\x{263a}`` is the code point;
- ``(?i)`` anywhere (Go applies it to the rest of the group) becomes a scoped
  ``(?i:...)``, and the ungreedy flag ``U`` is dropped: it changes which
  text a group captures, never whether a label value matches.

Constructs ``re`` accepts but RE2 refuses are refused: lookaround,
backreferences (``\\1``, ``(?P=name)``), atomic groups, conditionals,
comments and possessive quantifiers.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from inference_obs.errors import QueryError

__all__ = ["python_pattern"]

_MAX_CODE_POINT = 0x10FFFF
Ranges = list[tuple[int, int]]

# Go's POSIX classes (regexp/syntax perl_groups.go), all ASCII.
_POSIX: dict[str, Ranges] = {
    "alnum": [(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)],
    "alpha": [(0x41, 0x5A), (0x61, 0x7A)],
    "ascii": [(0x00, 0x7F)],
    "blank": [(0x09, 0x09), (0x20, 0x20)],
    "cntrl": [(0x00, 0x1F), (0x7F, 0x7F)],
    "digit": [(0x30, 0x39)],
    "graph": [(0x21, 0x7E)],
    "lower": [(0x61, 0x7A)],
    "print": [(0x20, 0x7E)],
    "punct": [(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)],
    "space": [(0x09, 0x0D), (0x20, 0x20)],
    "upper": [(0x41, 0x5A)],
    "word": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    "xdigit": [(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)],
}
_REFUSED = (
    ("(?=", "lookaround"),
    ("(?!", "lookaround"),
    ("(?<=", "lookaround"),
    ("(?<!", "lookaround"),
    ("(?P=", "a backreference"),
    ("(?>", "an atomic group"),
    ("(?(", "a conditional"),
    ("(?#", "a comment group"),
)
# Go reads "[:" up to the first ":]" as a POSIX class name (parseNamedClass).
_POSIX_CLASS = re.compile(r"\[:(\^?)(.*?):\]", re.S)
_FLAGS = re.compile(r"\(\?([imsU]*(?:-[imsU]*)?)([:)])")
_ESCAPED_CHARS = {"a": 7, "f": 12, "t": 9, "n": 10, "r": 13, "v": 11}


@lru_cache(maxsize=4096)
def python_pattern(pattern: str) -> str:
    """The Python ``re`` pattern that means what the RE2 ``pattern`` means.

    Raises
    ------
    QueryError
        When ``pattern`` uses a construct RE2 does not support (the message
        names it). Other syntax errors are left to ``re.compile``.

    Examples
    --------
    >>> python_pattern(r"\\Qa.b\\E|x\\z")
    'a\\\\.b|x\\\\Z'
    >>> python_pattern("a(?i)b|c")
    'a(?i:b)|(?i:c)'
    """
    out: list[str] = []
    scopes: list[list[str]] = [[]]  # per open group: the flag scopes opened inside it
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            text, i = _escape(pattern, i)
            out.append(text)
        elif ch == "[":
            text, i = _bracket(pattern, i)
            out.append(text)
        elif ch == "(":
            for start, what in _REFUSED:
                if pattern.startswith(start, i):
                    raise QueryError(f"uses {what}, which RE2 does not support")
            flags = _FLAGS.match(pattern, i)
            if flags is not None and flags.group(1):
                scoped = "(?" + _python_flags(flags.group(1)) + ":"
                i = flags.end()
                if flags.group(2) == ")":  # (?i): to the end of the enclosing group
                    scopes[-1].append(scoped)
                else:
                    scopes.append([])
                out.append(scoped)
                continue
            if pattern.startswith("(?<", i):  # Go 1.22's (?<name>...) is Python's (?P<name>...)
                out.append("(?P<")
                i += 3
            else:
                out.append("(")
                i += 1
            scopes.append([])
        elif ch in ")|":
            opened = scopes[-1]
            out.append(")" * len(opened))
            if ch == ")":
                if len(scopes) > 1:
                    scopes.pop()
                else:
                    opened.clear()  # unbalanced: re.compile says so
            out.append(ch)
            if ch == "|":
                out.append("".join(opened))  # the flags hold in every later alternative
            i += 1
        elif ch in "*+?" and pattern[i + 1 : i + 2] == "+" and i > 0:
            raise QueryError("uses a possessive quantifier, which RE2 does not support")
        else:
            out.append(ch)
            i += 1
    out.append(")" * len(scopes[-1]) if len(scopes) == 1 else "")
    return "".join(out)


def _python_flags(flags: str) -> str:
    on, _, off = flags.partition("-")
    on, off = on.replace("U", ""), off.replace("U", "")
    return on + (f"-{off}" if off else "")


def _escape(pattern: str, i: int) -> tuple[str, int]:
    """An escape outside a class: its Python text and the index after it."""
    nxt = pattern[i + 1 : i + 2]
    if nxt == "Q":
        end = pattern.find("\\E", i + 2)
        literal = pattern[i + 2 : end if end >= 0 else len(pattern)]
        return re.escape(literal), (len(pattern) if end < 0 else end + 2)
    if nxt == "z":
        return "\\Z", i + 2
    if nxt == "Z":
        raise QueryError("uses \\Z, which RE2 does not support (\\z is the end of the text)")
    if nxt in ("p", "P"):
        ranges, end = _unicode_class(pattern, i)
        return "[" + _ranges_text(ranges) + "]", end
    if nxt in "123456789" and nxt:
        raise QueryError("uses a backreference, which RE2 does not support")
    if nxt == "x" and pattern[i + 2 : i + 3] == "{":
        code, end = _hex_brace(pattern, i)
        return _char(code), end
    return pattern[i : i + 2], i + 2


def _hex_brace(pattern: str, i: int) -> tuple[int, int]:
    close = pattern.find("}", i + 3)
    digits = pattern[i + 3 : close] if close >= 0 else ""
    if not digits or not all(c in "0123456789abcdefABCDEF" for c in digits):
        raise QueryError("has an invalid \\x{...} escape")
    code = int(digits, 16)
    if code > _MAX_CODE_POINT:
        raise QueryError("has a \\x{...} escape past U+10FFFF")
    return code, close + 1


def _unicode_class(pattern: str, i: int) -> tuple[Ranges, int]:
    """``\\pL``, ``\\p{Name}``, ``\\PL``, ``\\p{^Name}`` at ``i``: its ranges and the end."""
    negated = pattern[i + 1] == "P"
    if pattern[i + 2 : i + 3] == "{":
        close = pattern.find("}", i + 3)
        if close < 0:
            raise QueryError("has an unclosed \\p{...} class")
        name, end = pattern[i + 3 : close], close + 1
    else:
        name, end = pattern[i + 2 : i + 3], i + 3
    if name.startswith("^"):
        negated, name = not negated, name[1:]
    ranges = _named_ranges(name)
    return (_complement(ranges) if negated else ranges), end


def _named_ranges(name: str) -> Ranges:
    if name == "Any":
        return [(0, _MAX_CODE_POINT)]
    categories = _categories()
    if name in categories:
        return categories[name]
    if re.fullmatch(r"[A-Z][A-Za-z_]*", name) and len(name) > 2:
        return categories["L"]  # a script: any letter (Python knows no scripts)
    raise QueryError(f"has an unknown Unicode class {name!r}")


@lru_cache(maxsize=1)
def _categories() -> dict[str, Ranges]:
    """Code point ranges of each Unicode general category (``Lu``) and major class (``L``)."""
    found: dict[str, Ranges] = {}
    for code in range(_MAX_CODE_POINT + 1):
        name = unicodedata.category(chr(code))
        ranges = found.setdefault(name, [])
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    for major in {name[0] for name in found}:
        found[major] = _merged([r for name, rs in found.items() if name[0] == major for r in rs])
    return found


def _merged(ranges: Ranges) -> Ranges:
    out: Ranges = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _complement(ranges: Ranges) -> Ranges:
    out: Ranges = []
    start = 0
    for lo, hi in _merged(ranges):
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= _MAX_CODE_POINT:
        out.append((start, _MAX_CODE_POINT))
    return out


def _char(code: int) -> str:
    """One code point as Python pattern text, valid inside and outside a class."""
    if code < 0x80 and chr(code).isalnum():
        return chr(code)
    return f"\\x{code:02x}" if code < 0x100 else f"\\U{code:08x}"


def _ranges_text(ranges: Ranges) -> str:
    return "".join(_char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}" for lo, hi in ranges)


def _bracket(pattern: str, i: int) -> tuple[str, int]:
    """A bracket class at ``i``: its Python text and the index after it."""
    j = i + 1
    negated = pattern[j : j + 1] == "^"
    j += negated
    items: list[str] = []
    first = True
    while j < len(pattern) and (pattern[j] != "]" or first):
        first = False
        posix = _POSIX_CLASS.match(pattern, j)
        if posix is not None:
            if posix.group(2) not in _POSIX:
                raise QueryError(f"has an unknown POSIX class [:{posix.group(2)}:]")
            ranges = _POSIX[posix.group(2)]
            items.append(_ranges_text(_complement(ranges) if posix.group(1) else ranges))
            j = posix.end()
            continue
        lo, text, j = _class_atom(pattern, j)
        if lo is not None and pattern[j : j + 1] == "-" and pattern[j + 1 : j + 2] not in ("]", ""):
            hi, _, end = _class_atom(pattern, j + 1)
            if hi is None:
                raise QueryError("has a character class range that ends in a class")
            items.append(f"{_char(lo)}-{_char(hi)}")
            j = end
        else:
            items.append(text)
    if j >= len(pattern):
        raise QueryError("has a character class missing its closing ]")
    return "[" + ("^" if negated else "") + "".join(items) + "]", j + 1


def _class_atom(pattern: str, j: int) -> tuple[int | None, str, int]:
    """One member of a class at ``j``: its code point (None for a set), text and end."""
    ch = pattern[j]
    if ch != "\\":
        return ord(ch), _char(ord(ch)), j + 1
    nxt = pattern[j + 1 : j + 2]
    if nxt in ("p", "P"):
        ranges, end = _unicode_class(pattern, j)
        return None, _ranges_text(ranges), end
    if nxt == "x" and pattern[j + 2 : j + 3] == "{":
        code, end = _hex_brace(pattern, j)
        return code, _char(code), end
    if nxt == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", pattern[j + 2 : j + 4]):
        return int(pattern[j + 2 : j + 4], 16), pattern[j : j + 4], j + 4
    if nxt in _ESCAPED_CHARS:
        return _ESCAPED_CHARS[nxt], pattern[j : j + 2], j + 2
    if nxt and not nxt.isalnum():
        return ord(nxt), _char(ord(nxt)), j + 2
    return None, pattern[j : j + 2], j + 2  # \d, \s, \w and their negations (re checks others)
