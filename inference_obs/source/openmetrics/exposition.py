"""One scrape's ``/metrics`` answer read as Prometheus reads it: the text format exporters write.

vLLM and SGLang (``prometheus_client``) and dcgm-exporter (``client_golang``)
answer a scrape in the Prometheus text format 0.0.4, which is looser than the
OpenMetrics text a dataset keeps (:mod:`~inference_obs.source.openmetrics.reader`):

* no ``# EOF``; empty lines and ``#`` comments other than ``# HELP``/``# TYPE``
  are ignored; ``# HELP`` and ``# TYPE`` may come anywhere (the dcgm-exporter
  README's sample puts every one before the first sample);
* spaces may surround label pairs (``{gpu="0", UUID="..."}``), and a trailing
  comma closes a label set;
* a label with an empty value (``pod_uid=""``) is dropped, as Prometheus drops it;
* the types are ``counter``, ``gauge``, ``histogram``, ``summary`` and
  ``untyped`` (read as OpenMetrics' ``unknown``);
* a sample's timestamp is optional and, in this format, whole milliseconds.

Prometheus 2.42's parser (``model/textparse/promparse.go``) is followed where
the format leaves room: label values unescape ``\\\\``, ``\\"`` and ``\\n`` and
keep any other backslash pair as written; values are Go ``ParseFloat`` text
(decimals, exponents, ``NaN`` and ``Inf`` in any case, with a sign). An answer
in OpenMetrics (``application/openmetrics-text``) is read with its own rules
for what differs: timestamps in seconds, a final ``# EOF``, exemplars (dropped).

Every problem is a :class:`~inference_obs.errors.DatasetError` reading
``SOURCE:LINE: problem``. What an answer may hold is bounded
(:mod:`~inference_obs.source.limits`): a line of more than
:data:`~inference_obs.source.limits.MAX_LINE_CHARS` characters, or a sample of
more than :data:`~inference_obs.source.limits.MAX_LABELS_PER_SAMPLE` labels, is
such a problem, and a deadline given is checked every
:data:`~inference_obs.source.limits.PARSE_CLOCK_LINES` lines.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from enum import StrEnum

from inference_obs.errors import DatasetError, TimeBudgetExceeded
from inference_obs.samples import Labels
from inference_obs.source.limits import MAX_LABELS_PER_SAMPLE, MAX_LINE_CHARS, PARSE_CLOCK_LINES

__all__ = ["Exposition", "ExpositionFormat", "Sample", "parse_exposition"]


class ExpositionFormat(StrEnum):
    """The text format an answer is in, as its ``Content-Type`` says."""

    #: ``text/plain; version=0.0.4``: timestamps in milliseconds.
    TEXT = "text"
    #: ``application/openmetrics-text``: timestamps in seconds, a final ``# EOF``.
    OPENMETRICS = "openmetrics"

    @classmethod
    def of(cls, content_type: str | None) -> ExpositionFormat:
        """The format a ``Content-Type`` header names (the text format when it names none)."""
        kind = (content_type or "").partition(";")[0].strip().lower()
        return cls.OPENMETRICS if kind == "application/openmetrics-text" else cls.TEXT


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample of a scrape; ``t_ms`` is the exposed timestamp, or None (most exporters)."""

    name: str
    labels: Labels
    value: float
    t_ms: int | None


@dataclass(frozen=True, slots=True)
class Exposition:
    """A scrape's samples in text order, each series once, and its declared types.

    Attributes
    ----------
    samples
        The samples; a series repeated in the text is kept at its first line
        (Prometheus keeps the first and counts the rest as errors).
    types
        Metric family -> type (``counter``, ``gauge``, ``histogram``,
        ``summary``, ``unknown``, ...), from the ``# TYPE`` lines.
    repeated
        How many lines repeated a series already read.
    """

    samples: tuple[Sample, ...]
    types: dict[str, str] = field(default_factory=dict)
    repeated: int = 0


_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SERIES = re.compile(rf"({_NAME})")
_BLANKS = re.compile(r"[ \t]*")
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"[ \t]*')
# Go strconv.ParseFloat's decimal forms and its case-insensitive NaN, Inf and Infinity.
_FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)"
    r"|[nN][aA][nN]"
)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_TYPES = {
    "counter": "counter",
    "gauge": "gauge",
    "histogram": "histogram",
    "summary": "summary",
    "untyped": "unknown",
    # OpenMetrics' further types, which an openmetrics-text answer may declare.
    "unknown": "unknown",
    "info": "info",
    "stateset": "stateset",
    "gaugehistogram": "gaugehistogram",
}
# promparse: \" and \\ and \n are unescaped; any other pair stays as written.
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n"}
_ESCAPE = re.compile(r"\\(.)")
# Timestamps beyond this many seconds lose milliseconds in float64 (as Series says).
_MAX_ABS_MS = 10**14


class _LineProblem(Exception):
    """What is wrong with one line; :func:`parse_exposition` names the source and line."""


def parse_exposition(
    data: bytes,
    *,
    source: str,
    form: ExpositionFormat = ExpositionFormat.TEXT,
    deadline: float | None = None,
) -> Exposition:
    """The samples of one scrape's answer, every line checked.

    Parameters
    ----------
    data
        The answer's body (UTF-8).
    source
        How to name the answer in errors (a redacted URL, a file name).
    form
        The format the answer's ``Content-Type`` names.
    deadline
        A :func:`time.monotonic` time by which reading must end, or None.

    Returns
    -------
    Exposition
        The samples in text order, each series once.

    Raises
    ------
    DatasetError
        ``source:LINE: problem`` for the first line that does not parse, is
        longer than ``MAX_LINE_CHARS`` or has more than ``MAX_LABELS_PER_SAMPLE``
        labels.
    TimeBudgetExceeded
        When ``deadline`` passed before the last line was read.

    Examples
    --------
    >>> text = b'# TYPE up untyped\\nup{job="a", pod=""} 1\\nup{job="b",} 0 1700000000000\\n'
    >>> scrape = parse_exposition(text, source="x")
    >>> [(s.name, dict(s.labels), s.value, s.t_ms) for s in scrape.samples]
    [('up', {'job': 'a'}, 1.0, None), ('up', {'job': 'b'}, 0.0, 1700000000000)]
    >>> scrape.types
    {'up': 'unknown'}
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DatasetError(f"{source}:{line}: the line is not valid UTF-8") from None
    samples: list[Sample] = []
    types: dict[str, str] = {}
    seen: set[tuple[str, Labels]] = set()
    repeated = 0
    ended_at = 0
    for number, raw in enumerate(text.split("\n"), 1):
        if deadline is not None and number % PARSE_CLOCK_LINES == 0 and time.monotonic() > deadline:
            raise TimeBudgetExceeded(f"{source}:{number}: the deadline passed while reading")
        text_line = raw.removesuffix("\r")
        if len(text_line) > MAX_LINE_CHARS:
            raise DatasetError(
                f"{source}:{number}: a line of {len(text_line):,} characters, more than the "
                f"{MAX_LINE_CHARS:,} an exporter writes"
            )
        if not text_line.strip():
            continue
        if ended_at:
            raise DatasetError(f"{source}:{number}: text after '# EOF' (line {ended_at})")
        try:
            if text_line.startswith("#"):
                if text_line.rstrip() == "# EOF" and form is ExpositionFormat.OPENMETRICS:
                    ended_at = number
                else:
                    _meta(text_line, types)
                continue
            sample = _sample(text_line, form)
        except _LineProblem as exc:
            raise DatasetError(f"{source}:{number}: {exc}") from None
        key = (sample.name, sample.labels)
        if key in seen:
            repeated += 1
            continue
        seen.add(key)
        samples.append(sample)
    return Exposition(tuple(samples), types, repeated)


def _meta(line: str, types: dict[str, str]) -> None:
    """Note a ``# TYPE`` line; every other comment (``# HELP`` included) is ignored."""
    words = line[1:].split(None, 3)
    if len(words) < 2 or words[0] != "TYPE":
        return
    if len(words) != 3:
        raise _LineProblem(f"{line[:80]!r}: expected '# TYPE name type'")
    _, family, kind = words
    if not re.fullmatch(_NAME, family):
        raise _LineProblem(f"# TYPE names an invalid metric name {family!r}")
    if kind not in _TYPES:
        raise _LineProblem(f"unknown metric type {kind!r} for {family}")
    types[family] = _TYPES[kind]


def _sample(line: str, form: ExpositionFormat) -> Sample:
    """One sample line: ``name[{labels}] value [timestamp]``."""
    match = _SERIES.match(line)
    if match is None:
        raise _LineProblem(f"invalid metric name at the start of {line[:60]!r}")
    name, pos = match.group(1), match.end()
    labels: dict[str, str] = {}
    brace = _blanks(line, pos)
    if line.startswith("{", brace):
        pos = _labels(line, brace + 1, name, labels)
    rest = line[pos:]
    if form is ExpositionFormat.OPENMETRICS:
        rest = rest.partition(" # ")[0]  # an exemplar follows " # "
    fields = rest.split()
    if not rest[:1].isspace() or not 1 <= len(fields) <= 2:
        raise _LineProblem(f"series {name}: expected ' value [timestamp]', got {rest[:60]!r}")
    if not _FLOAT.fullmatch(fields[0]):
        raise _LineProblem(f"series {name}: bad value {fields[0][:40]!r}")
    value = float(fields[0])
    if math.isinf(value) and "inf" not in fields[0].lower():
        raise _LineProblem(f"series {name}: value {fields[0][:40]!r} is out of range")
    t_ms = _timestamp(fields[1], name, form) if len(fields) == 2 else None
    return Sample(name, Labels(labels), value, t_ms)


def _labels(line: str, pos: int, name: str, labels: dict[str, str]) -> int:
    """Read ``l="v", ...}`` from ``pos`` into ``labels``; the offset after the brace."""
    names: set[str] = set()
    while True:
        close = _blanks(line, pos)
        if line.startswith("}", close):
            return close + 1
        pair = _LABEL.match(line, pos)
        if pair is None:
            raise _LineProblem(f'series {name}: expected label="value" at {line[pos : pos + 40]!r}')
        label, raw = pair.groups()
        if label in names:
            raise _LineProblem(f"series {name}: label {label} appears twice")
        if len(names) == MAX_LABELS_PER_SAMPLE:
            raise _LineProblem(
                f"series {name}: more than {MAX_LABELS_PER_SAMPLE} labels, more than an "
                "exporter writes"
            )
        if label == "__name__":
            raise _LineProblem(f"series {name}: __name__ is not allowed as a label")
        names.add(label)
        value = _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(0)), raw)
        if value:  # Prometheus drops a label with an empty value
            labels[label] = value
        pos = pair.end()
        if line.startswith(",", pos):
            pos += 1
        elif not line.startswith("}", pos):
            raise _LineProblem(f"series {name}: expected ',' or '}}' at {line[pos : pos + 40]!r}")


def _blanks(line: str, pos: int) -> int:
    """The offset of the first character at or after ``pos`` that is no space or tab."""
    # A match, not a slice of the rest: slicing made a line of n labels O(n^2).
    match = _BLANKS.match(line, pos)
    return pos if match is None else match.end()


def _timestamp(text: str, name: str, form: ExpositionFormat) -> int:
    if form is ExpositionFormat.TEXT:
        if not _INTEGER.fullmatch(text):
            raise _LineProblem(f"series {name}: bad timestamp {text[:40]!r}; expected whole ms")
        millis = int(text)
    else:
        if not _FLOAT.fullmatch(text) or not math.isfinite(float(text)):
            raise _LineProblem(f"series {name}: bad timestamp {text[:40]!r}; expected seconds")
        millis = round(float(text) * 1000)
    if abs(millis) > _MAX_ABS_MS:
        raise _LineProblem(f"series {name}: timestamp {text[:40]!r} is out of range")
    return millis
