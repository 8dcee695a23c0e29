"""Raw samples written as OpenMetrics text that Prometheus backfills exactly, and its grammar.

The text is meant for ``promtool tsdb create-blocks-from openmetrics``
(Prometheus 2.42), whose reader has two traps this writer avoids:

* it turns a timestamp into milliseconds with ``int64(seconds * 1000)``, which
  truncates: ``1.001`` becomes 1000 ms. Timestamps that are not whole seconds
  are therefore written half a millisecond later (``1.0015`` for 1001 ms), so
  the truncation lands on the intended millisecond;
* lines of one metric family must be contiguous and samples of a series in
  time order, so series are grouped by family and each is written in one run.

The line grammar the reader (:mod:`inference_obs.source.openmetrics_read`)
checks lives here too, beside the escaping it undoes: :func:`parse_series`
for a series' name and labels, :class:`Families` for metadata lines and
family contiguity. Both raise :class:`LineProblem`, to which the reader adds
the file and line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import TextIO

from inference_obs.errors import DatasetError
from inference_obs.query.names import METRIC_NAME
from inference_obs.samples import Labels, Series, describe

__all__ = ["Families", "LineProblem", "parse_series", "unescape", "write_openmetrics"]

# OpenMetrics 1.0 metric types, and the sample-name suffixes a family of each type owns.
_TYPE_SUFFIXES: dict[str, tuple[str, ...]] = {
    "counter": ("_total", "_created"),
    "gauge": (),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("_count", "_sum", "_created"),
    "info": ("_info",),
    "stateset": (),
    "unknown": (),
}
_TYPES = frozenset(_TYPE_SUFFIXES)
# The half-millisecond trick needs seconds * 1000 to keep well under 0.5 ms of
# float64 error; 1e11 s (about year 5138) keeps it under 2e-5 ms.
_MAX_ABS_SECONDS = 1e11
# OpenMetrics label values escape exactly backslash, double quote and newline.
_LABEL_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}
_ESCAPE = re.compile(r"\\(.?)")  # .? so a lone trailing backslash is an error too
_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"([,}])')
_META = re.compile(r"# (TYPE|HELP|UNIT) ([a-zA-Z_:][a-zA-Z0-9_:]*)(?: (.*))?")


def write_openmetrics(
    series: Iterable[Series],
    out: TextIO,
    *,
    types: Mapping[str, str] | None = None,
) -> None:
    """Write series as OpenMetrics text, ending with ``# EOF``.

    Parameters
    ----------
    series
        The series to write; each (name, labels) at most once.
    out
        Text stream to write to.
    types
        Optional metric family name -> OpenMetrics type (``counter``,
        ``gauge``, ``histogram``, ...). A family ``f`` holds the series named
        ``f`` and, when ``f`` is a key here, those named ``f`` plus a suffix
        its type owns (``_total`` and ``_created`` for a counter; ``_bucket``,
        ``_count``, ``_sum``, ``_created`` for a histogram; ...), as the reader
        groups them. A ``# TYPE`` line is written only for families listed here.

    Raises
    ------
    DatasetError
        On a repeated series, a timestamp outside +-1e11 s, two timestamps
        of one series within the same millisecond, or an unknown type.

    Notes
    -----
    Lines of one family are contiguous, series keep their first-seen order,
    and samples are in time order. Timestamps are rounded to whole
    milliseconds; whole seconds are written as integers, others half a
    millisecond late so that promtool's truncation recovers the millisecond.
    Values are Python's shortest round-tripping ``repr``, or ``NaN``,
    ``+Inf``, ``-Inf``.

    Examples
    --------
    >>> import io
    >>> buf = io.StringIO()
    >>> write_openmetrics([Series("x", {"a": 'q"'}, [1.0, 1.001], [0.5, 1.0])], buf)
    >>> print(buf.getvalue(), end="")
    x{a="q\\""} 0.5 1
    x{a="q\\""} 1.0 1.0015
    # EOF
    """
    types = dict(types or {})
    for family, kind in types.items():
        if not METRIC_NAME.fullmatch(family):
            raise DatasetError(f"types: {family!r} is not a valid metric family name")
        if kind not in _TYPES:
            raise DatasetError(
                f"types: {family} has unknown type {kind!r}; expected one of {sorted(_TYPES)}"
            )
    # Everything is checked before the first line is written, so an error
    # never leaves a truncated file behind.
    families: dict[str, list[tuple[Series, list[int]]]] = {}
    seen: set[tuple[str, Labels]] = set()
    for one in series:
        key = (one.name, one.labels)
        if key in seen:
            raise DatasetError(f"series {describe(one.name, one.labels)} is given twice")
        seen.add(key)
        families.setdefault(_family(one.name, types), []).append((one, one.t_ms.tolist()))
    for family, members in families.items():
        if family in types:
            out.write(f"# TYPE {family} {types[family]}\n")
        for one, millis in members:
            prefix = f"{one.name}{_format_labels(one.labels)} "
            values = [_format_value(v) for v in one.values.tolist()]
            stamps = [_format_millis(m) for m in millis]
            out.write("".join(f"{prefix}{v} {t}\n" for v, t in zip(values, stamps, strict=True)))
    out.write("# EOF\n")


def _family(name: str, types: Mapping[str, str]) -> str:
    if name in types:
        return name
    for family, kind in types.items():
        if name.startswith(family) and name[len(family) :] in _TYPE_SUFFIXES[kind]:
            return family
    return name


def _format_labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    pairs = (f'{k}="{v.translate(_LABEL_ESCAPES)}"' for k, v in labels.items())
    return "{" + ",".join(pairs) + "}"


def _format_millis(millis: int) -> str:
    sign = "-" if millis < 0 else ""
    whole, frac = divmod(abs(millis), 1000)
    if frac == 0:
        return f"{sign}{whole}"
    # int64(s * 1000) truncates toward zero; the extra half millisecond (away
    # from zero) makes it land on the intended millisecond for either sign.
    return f"{sign}{whole}.{frac:03d}5"


def _format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


class LineProblem(ValueError):
    """What is wrong with one line of OpenMetrics text; the reader adds file and line."""


def parse_series(text: str) -> tuple[str, Labels]:
    """Metric name and labels of ``name`` or ``name{l="v",...}``, strictly.

    Raises
    ------
    LineProblem
        On an invalid name, a malformed label set, an escape other than
        ``\\\\``, ``\\"``, ``\\n``, a repeated or ``__name__`` label. A label
        with an empty value is dropped, as Prometheus drops it.
    """
    name_match = METRIC_NAME.match(text)
    if name_match is None:
        raise LineProblem(f"invalid metric name at the start of {text[:60]!r}")
    name, pos = name_match.group(), name_match.end()
    if pos == len(text):
        return name, Labels()
    if text[pos] != "{":
        raise LineProblem(f"after the metric name {name} expected '{{' or a space")
    pos += 1
    if text[pos:] == "}":
        return name, Labels()
    pairs: dict[str, str] = {}
    seen: set[str] = set()
    while True:
        pair = _PAIR.match(text, pos)
        if pair is None:
            trailing = " (trailing comma)" if text[pos:] == "}" else ""
            raise LineProblem(
                f'series {name}: expected label="value" at {text[pos : pos + 40]!r}{trailing}'
            )
        label, raw, end = pair.groups()
        value = unescape(raw, f"the value of label {label} of series {name}")
        if label == "__name__":
            raise LineProblem(f"series {name}: __name__ is not allowed as a label")
        if label in seen:
            raise LineProblem(f"series {name}: label {label} appears twice")
        seen.add(label)
        # Prometheus drops a label whose value is empty (dcgm-exporter writes
        # pod_uid="" and, before 3.x, container="",namespace="",pod=""), so the
        # series is the one without it; the writer never writes one.
        if value:
            pairs[label] = value
        pos = pair.end()
        if end == "}":
            if pos != len(text):
                raise LineProblem(f"series {name}: text after the closing brace")
            return name, Labels(pairs)


def unescape(raw: str, where: str) -> str:
    """Undo OpenMetrics escaping; any escape but the three is a :class:`LineProblem`."""
    if "\\" not in raw:
        return raw

    def one(escape: re.Match[str]) -> str:
        char = escape.group(1)
        if char not in _UNESCAPE:
            raise LineProblem(
                f'bad escape \\{char} in {where}; OpenMetrics escapes only \\\\, \\" and \\n'
            )
        return _UNESCAPE[char]

    return _ESCAPE.sub(one, raw)


class Families:
    """Metric families line by line: metadata rules and OpenMetrics' contiguity rule.

    Feed it every metadata line (:meth:`meta`) and every sample's metric name
    (:meth:`sample`) in file order. A sample belongs to the family of the
    metadata before it when its name is the family name or that name plus a
    suffix of the family's type (``_total``, ``_bucket``, ...); otherwise it is
    a family of its own name. OpenMetrics 1.0 says families must not
    interleave; promtool 2.42 does not check, so this does.
    """

    def __init__(self) -> None:
        self.current: str | None = None
        self.kind = "unknown"  # the current family's type, from its # TYPE line
        self.meta_seen: set[str] = set()  # metadata kinds seen for the current family
        self.has_samples = False
        self.closed: set[str] = set()
        self.name_family: dict[str, str] = {}

    def meta(self, text: str) -> None:
        """Check one ``# ...`` line (not the final ``# EOF``)."""
        if text == "# EOF":
            raise LineProblem("text after '# EOF', which must be the last line")
        match = _META.fullmatch(text)
        if match is None:
            raise LineProblem(
                f"{text[:60]!r}: OpenMetrics allows only # TYPE, # HELP, # UNIT and # EOF"
            )
        what, family, rest = match.groups()
        self._enter(family)
        if self.has_samples or what in self.meta_seen:
            raise LineProblem(
                f"# {what} for {family} {'after its samples' if self.has_samples else 'twice'}"
            )
        self.meta_seen.add(what)
        if what == "TYPE":
            # "untyped" is the Prometheus text format's spelling of OpenMetrics' "unknown".
            kind = "unknown" if rest == "untyped" else rest
            if kind not in _TYPE_SUFFIXES:
                raise LineProblem(f"unknown metric type {rest!r} for {family}")
            self.kind = kind
        elif what == "UNIT" and rest and not family.endswith(f"_{rest}"):
            # promtool 2.42 refuses it too: "unit not a suffix of metric".
            raise LineProblem(f"unit {rest!r} is not a suffix of {family}")
        elif what == "HELP" and rest:
            unescape(rest, f"the HELP text of {family}")

    def sample(self, name: str) -> None:
        """Note a sample (or a run of them) of metric ``name``."""
        family, current = name, self.current
        if current is not None and (
            name == current or name in (current + s for s in _TYPE_SUFFIXES[self.kind])
        ):
            family = current
        family = self.name_family.setdefault(name, family)
        self._enter(family)
        self.has_samples = True

    def _enter(self, family: str) -> None:
        if family == self.current:
            return
        if family in self.closed:
            raise LineProblem(
                f"lines of metric family {family} resume after other families; OpenMetrics "
                "requires each family's lines to be contiguous"
            )
        if self.current is not None:
            self.closed.add(self.current)
        self.current, self.kind, self.meta_seen, self.has_samples = family, "unknown", set(), False
