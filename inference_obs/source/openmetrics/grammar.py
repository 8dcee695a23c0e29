"""The OpenMetrics line grammar the reader checks and the escaping the writer does.

What both sides of :mod:`~inference_obs.source.openmetrics` share: the
metric types and the sample-name suffixes each type's family owns
(:data:`TYPE_SUFFIXES`), label-value escaping (:func:`escape`,
:func:`unescape`), :func:`parse_series` for a series' name and labels, and
:class:`Families` for metadata lines and family contiguity. The parsers raise
:class:`LineProblem`, to which the reader
(:mod:`~inference_obs.source.openmetrics.reader`) adds the file and line.
"""

from __future__ import annotations

import re

from inference_obs.query.names import METRIC_NAME
from inference_obs.samples import Labels

__all__ = ["TYPE_SUFFIXES", "Families", "LineProblem", "escape", "parse_series", "unescape"]

#: OpenMetrics 1.0 metric types, and the sample-name suffixes a family of each type owns.
TYPE_SUFFIXES: dict[str, tuple[str, ...]] = {
    "counter": ("_total", "_created"),
    "gauge": (),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("_count", "_sum", "_created"),
    "info": ("_info",),
    "stateset": (),
    "unknown": (),
}
# OpenMetrics label values escape exactly backslash, double quote and newline.
_LABEL_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}
_ESCAPE = re.compile(r"\\(.?)")  # .? so a lone trailing backslash is an error too
_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"([,}])')
_META = re.compile(r"# (TYPE|HELP|UNIT) ([a-zA-Z_:][a-zA-Z0-9_:]*)(?: (.*))?")


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


def escape(value: str) -> str:
    """A label value escaped for OpenMetrics text (backslash, double quote, newline)."""
    return value.translate(_LABEL_ESCAPES)


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
            if kind not in TYPE_SUFFIXES:
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
            name == current or name in (current + s for s in TYPE_SUFFIXES[self.kind])
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
