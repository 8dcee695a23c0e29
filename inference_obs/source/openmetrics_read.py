"""A strict, vectorised reader of the OpenMetrics text a dataset keeps its samples in.

It reads what :func:`~inference_obs.source.openmetrics.write_openmetrics`
writes, and any other OpenMetrics 1.0 text within the rules below, into a
:class:`~inference_obs.samples.SampleSet`. Every problem is a
:class:`~inference_obs.errors.DatasetError` reading ``FILE:LINE: problem``;
the whole text is checked before anything is returned.

Accepted, line by line:

* ``name value timestamp`` or ``name{label="value",...} value timestamp``,
  fields separated by one space. Label values escape exactly ``\\\\``,
  ``\\"`` and ``\\n``; values are decimal floats, ``NaN``, ``+Inf`` or
  ``-Inf``; the timestamp (unix seconds, decimal) is required.
* ``# TYPE``, ``# HELP`` and ``# UNIT`` lines, at most one of each per family
  and before its samples; ``# EOF`` as the last line.

Also refused: a family whose lines are not contiguous and a series whose
samples do not strictly increase in time (promtool 2.42 accepts the first and
silently drops out-of-order samples, so the dataset would not mean what
Prometheus stores), exemplars, empty label values and timestamps that are not
whole milliseconds as promtool reads them (see :func:`read_openmetrics`).

Speed: one regular expression finds each *run* of consecutive lines sharing a
series (a back-reference repeats the series text, so the regex engine, not
Python, walks the lines); label sets are parsed once per run (the line grammar
is :mod:`inference_obs.source.openmetrics`'s); values and timestamps are cut
out of the byte buffer eight bytes at a time and converted by numpy. No
Python object is made per sample.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from inference_obs.errors import DatasetError
from inference_obs.query.names import METRIC_NAME as _METRIC_NAME
from inference_obs.samples import Labels, SampleSet, describe
from inference_obs.source.openmetrics import Families, LineProblem, parse_series

__all__ = ["read_openmetrics"]

_NAME = rb"[a-zA-Z_:][a-zA-Z0-9_:]*"
# Lenient about what lies between the braces (the strict parse runs once per
# run); the quoted-string branch keeps `}` and spaces inside values apart.
_LABEL_SET = rb'\{(?:[^"}\n]|"(?:[^"\\\n]|\\.)*")*\}'
_KEY_TEXT = re.compile((_NAME + rb"(?:" + _LABEL_SET + rb")?").decode())
# A metadata line, or a run of sample lines with identical series text. The
# possessive repeat keeps no backtracking state per line.
_CHUNK = re.compile(
    rb"(?P<meta>#[^\n]*)\n"
    rb"|(?P<key>" + _NAME + rb"(?:" + _LABEL_SET + rb")?) [^\n]*\n(?:(?P=key) [^\n]*\n)*+"
)
# The longest value repr() writes is 24 bytes ("-2.2250738585072014e-308");
# a bound keeps the fixed-width token arrays small whatever the input.
_MAX_TOKEN = 64
_VALUE_BYTES = np.zeros(256, dtype=np.bool_)
_VALUE_BYTES[list(b"0123456789+-.eE")] = True
_SPECIALS = {b"NaN": np.nan, b"+Inf": np.inf, b"-Inf": -np.inf}
# Same bound as Series: float64 seconds keep sub-millisecond precision within it.
_MAX_ABS_SECONDS = 1e11
# A whole-millisecond timestamp, read as promtool reads it (seconds * 1000 in
# float64), lies within float error of a whole number, or of the midpoint the
# writer uses; at 1e11 s that error is about 0.03 ms.
_MS_TOLERANCE = 0.1


def read_openmetrics(data: bytes, *, source: str) -> SampleSet:
    """Parse OpenMetrics text into a sample set, checking every line.

    Parameters
    ----------
    data
        The file's bytes (UTF-8).
    source
        How to name the file in error messages.

    Returns
    -------
    SampleSet
        Series in the order their first sample appears; all fields read-only.

    Raises
    ------
    DatasetError
        ``source:LINE: problem`` for the first problem found.

    Notes
    -----
    Timestamps become milliseconds exactly as promtool 2.42 computes them,
    ``int64(seconds * 1000)`` (truncation), so the samples read here are the
    samples Prometheus stores from the same file. A timestamp must denote a
    whole millisecond under that rule: either a whole number of milliseconds,
    or a millisecond's midpoint as the writer writes (``1.0015`` for 1001 ms).
    Text such as ``1.001``, which float64 makes 1000.9999999999999 ms and
    promtool stores as 1000 ms, is refused rather than read one millisecond off.

    Examples
    --------
    >>> s = read_openmetrics(b'up{job="a"} 1 1.0015\\nup{job="a"} NaN 2\\n# EOF\\n', source="x")
    >>> s.names, s.t_ms.tolist(), s.values.tolist()
    (('up',), [1001, 2000], [1.0, nan])
    """
    return _Reader(data, source).read()


class _Reader:
    def __init__(self, data: bytes, source: str) -> None:
        self.data = data
        self.source = source
        self.buf = np.frombuffer(data, dtype=np.uint8)
        self.newlines = np.flatnonzero(self.buf == ord("\n"))

    def fail(self, line: int, problem: str) -> DatasetError:
        return DatasetError(f"{self.source}:{line}: {problem}")

    def line_at(self, offset: int) -> int:
        """1-based number of the line holding byte ``offset``."""
        return int(np.searchsorted(self.newlines, offset)) + 1

    def line_text(self, offset: int) -> str:
        end = self.data.find(b"\n", offset)
        raw = self.data[offset : end if end >= 0 else len(self.data)]
        return raw.decode("utf-8", errors="replace")

    def read(self) -> SampleSet:
        body_end = self._body_end()
        families = Families()
        run_starts: list[int] = []
        run_series: list[int] = []
        run_key_bytes: list[int] = []
        parsed: dict[bytes, int] = {}
        index: dict[tuple[str, Labels], int] = {}
        names: list[str] = []
        labels: list[Labels] = []
        pos = 0
        while pos < body_end:
            match = _CHUNK.match(self.data, pos, body_end)
            try:
                if match is None:
                    raise LineProblem(_diagnose(self.line_text(pos)))
                meta, key = match.group("meta", "key")
                if meta is not None:
                    families.meta(meta.decode("utf-8"))
                else:
                    series = parsed.get(key)
                    if series is None:
                        name, pairs = parse_series(key.decode("utf-8"))
                        series = index.setdefault((name, pairs), len(names))
                        if series == len(names):
                            names.append(name)
                            labels.append(pairs)
                        parsed[key] = series
                    families.sample(names[series])
                    run_starts.append(pos)
                    run_series.append(series)
                    run_key_bytes.append(len(key))
            except UnicodeDecodeError:
                raise self.fail(self.line_at(pos), "the line is not valid UTF-8") from None
            except LineProblem as exc:
                raise self.fail(self.line_at(pos), str(exc)) from None
            pos = match.end()
        samples = _Samples(self, body_end, run_starts, run_key_bytes)
        return samples.sample_set(np.array(run_series, dtype=np.int64), names, labels)

    def _body_end(self) -> int:
        """Offset where the final ``# EOF`` line starts; refuse text without one."""
        data = self.data
        end = len(data) - 1 if data.endswith(b"\n") else len(data)
        start = data.rfind(b"\n", 0, end) + 1
        if data[start:end] == b"# EOF":
            return start
        found = data.find(b"\n# EOF\n")
        early = 0 if data.startswith(b"# EOF\n") else found + 1 if found >= 0 else -1
        if early >= 0:
            raise self.fail(self.line_at(early), "text after '# EOF', which must be the last line")
        last = self.line_at(len(data) - 1) if data else 1
        raise self.fail(last, "the text ends without a '# EOF' line (a truncated file?)")


def _diagnose(line: str) -> str:
    """Why a sample line did not parse (the fast path only says that it did not)."""
    if not line:
        return "empty line (OpenMetrics has none)"
    name = _METRIC_NAME.match(line)
    if name is None:
        return f"invalid metric name at the start of {line[:60]!r}"
    key = _KEY_TEXT.match(line)
    end = key.end() if key is not None else name.end()
    if end == name.end() and line[end : end + 1] == "{":
        try:  # an unterminated or malformed label set: the strict parser says how
            parse_series(line)
        except LineProblem as exc:
            return str(exc)
        return f"unterminated label set in {line[:80]!r}"
    if line[end : end + 1] != " ":
        return f"expected a space after the series, got {line[end : end + 20]!r}"
    return f"cannot parse {line[:80]!r}"


class _Samples:
    """Values and timestamps of every sample line, cut from the buffer by numpy."""

    def __init__(
        self, reader: _Reader, body_end: int, run_starts: list[int], run_key_bytes: list[int]
    ) -> None:
        self.reader = reader
        buf, newlines = reader.buf, reader.newlines
        ends = newlines[newlines < body_end]
        starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64)
        is_sample = buf[starts] != ord("#") if ends.size else np.zeros(0, np.bool_)
        self.line_numbers = np.flatnonzero(is_sample) + 1
        starts, ends = starts[is_sample], ends[is_sample]
        if starts.size == 0:
            self.run_of_line = np.zeros(0, np.int64)
            self.values, self.t_ms = np.zeros(0, np.float64), np.zeros(0, np.int64)
            return
        self.run_of_line = np.searchsorted(np.array(run_starts, np.int64), starts, "right") - 1
        value_starts = starts + np.array(run_key_bytes, np.int64)[self.run_of_line] + 1
        spaces = np.flatnonzero(buf[:body_end] == ord(" "))
        first_space = np.searchsorted(spaces, value_starts)
        fields = np.searchsorted(spaces, ends) - first_space + 1
        if np.any(fields != 2):
            i = int(np.flatnonzero(fields != 2)[0])
            tail = reader.data[value_starts[i] : ends[i]].decode("utf-8", "replace")
            problem = (
                "no timestamp; every sample in a dataset carries one"
                if fields[i] < 2
                else "exemplars are not supported"
                if " # " in tail
                else f"expected 'value timestamp' after the series, got {tail[:60]!r}"
            )
            raise self.fail(i, problem)
        split = spaces[np.minimum(first_space, spaces.size - 1)]
        self.values = self._floats(value_starts, split, "value", specials=True)
        seconds = self._floats(split + 1, ends, "timestamp", specials=False)
        self.t_ms = self._millis(seconds)

    def fail(self, i: int, problem: str) -> DatasetError:
        return self.reader.fail(int(self.line_numbers[i]), problem)

    def _floats(
        self,
        starts: npt.NDArray[np.int64],
        stops: npt.NDArray[np.int64],
        what: str,
        *,
        specials: bool,
    ) -> npt.NDArray[np.float64]:
        lengths = stops - starts
        if lengths.size == 0:
            return np.zeros(0, np.float64)
        too_long = (lengths == 0) | (lengths > _MAX_TOKEN)
        if np.any(too_long):
            i = int(np.flatnonzero(too_long)[0])
            raise self.fail(
                i, f"no {what}" if lengths[i] == 0 else f"{what} longer than {_MAX_TOKEN} bytes"
            )
        chars = _cut(self.reader.buf, starts, lengths)
        width = chars.shape[1]
        tokens = chars.view(f"S{width}").ravel()
        special = np.zeros(tokens.size, np.bool_)
        if specials:
            for text in _SPECIALS:
                special |= tokens == text
        padding = np.arange(width) >= lengths[:, None]
        bad = ~special & ~np.all(_VALUE_BYTES[chars] | padding, axis=1)
        numbers = np.zeros(tokens.size, np.float64)
        if not np.any(bad):
            try:
                numbers[~special] = tokens[~special].astype(np.float64)
            except ValueError:
                bad = ~special & _unparsable(tokens)
        if not np.any(bad):
            bad = ~special & ~np.isfinite(numbers)  # e.g. 1e999: ParseFloat's range error
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            kind = "a float, NaN, +Inf or -Inf" if specials else "decimal unix seconds"
            raise self.fail(
                i, f"bad {what} {tokens[i].decode('utf-8', 'replace')!r}; expected {kind}"
            )
        for text, number in _SPECIALS.items():
            numbers[tokens == text] = number
        return numbers

    def _millis(self, seconds: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        outside = np.abs(seconds) > _MAX_ABS_SECONDS
        if np.any(outside):
            raise self.fail(
                int(np.flatnonzero(outside)[0]), f"timestamp beyond +-{_MAX_ABS_SECONDS:g} s"
            )
        # promtool 2.42 (openmetricsparse.go): p.ts = int64(ts * 1000), truncating.
        scaled = seconds * 1000.0
        whole = np.trunc(scaled)
        rest = np.abs(scaled - whole)
        off = (rest > _MS_TOLERANCE) & (np.abs(rest - 0.5) > _MS_TOLERANCE)
        if np.any(off):
            i = int(np.flatnonzero(off)[0])
            raise self.fail(
                i,
                f"timestamp {float(seconds[i])!r} s is not a whole millisecond as promtool reads "
                f"it (it truncates {float(scaled[i])!r} ms to {int(whole[i])} ms); write whole "
                "milliseconds, a fraction as the millisecond's midpoint (1.0015 for 1001 ms)",
            )
        millis: npt.NDArray[np.int64] = whole.astype(np.int64)
        return millis

    def sample_set(
        self, run_series: npt.NDArray[np.int64], names: list[str], labels: list[Labels]
    ) -> SampleSet:
        series_of_line = run_series[self.run_of_line]
        if np.all(np.diff(run_series) > 0):  # each series in one run: already in order
            order = np.arange(series_of_line.size)
        else:  # series interleave (as OpenMetrics histograms do): gather each one's lines
            order = np.argsort(series_of_line, kind="stable")
        ordered = series_of_line[order]
        t_ms, values = self.t_ms[order], self.values[order]
        steps_back = (ordered[1:] == ordered[:-1]) & (np.diff(t_ms) <= 0)
        if np.any(steps_back):
            after = order[1:][steps_back]
            i = int(after.min())
            k = int(series_of_line[i])
            before = int(order[np.flatnonzero(order == i)[0] - 1])
            raise self.fail(
                i,
                f"series {describe(names[k], labels[k])}: timestamp {int(self.t_ms[i])} ms is "
                f"not after the previous sample's {int(self.t_ms[before])} ms "
                f"(line {int(self.line_numbers[before])}); a series' samples must strictly "
                "increase in time",
            )
        counts = np.bincount(series_of_line, minlength=len(names))
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        for array in (offsets, t_ms, values):
            array.flags.writeable = False
        return SampleSet(tuple(names), tuple(labels), offsets, t_ms, values)


def _cut(
    buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint8]:
    """Bytes ``buf[starts[i] : starts[i] + lengths[i]]`` as rows, zero-padded to a multiple of 8.

    Eight bytes at a time: a view of ``buf`` as overlapping unaligned 64-bit
    words (stride one byte) lets one fancy index fetch eight bytes per token.
    """
    chunks = -(-int(lengths.max()) // 8)
    words = np.zeros((starts.size, chunks), dtype=np.uint64)
    last = buf.size - 8  # the last offset a whole word can start at
    if last >= 0:
        windows = np.ndarray((last + 1,), dtype=np.uint64, buffer=buf, strides=(1,))
        for c in range(chunks):
            offsets = starts + 8 * c
            words[:, c] = windows[np.minimum(offsets, last)]
            for i in np.flatnonzero((offsets > last) & (lengths > 8 * c)).tolist():
                words[i, c] = _tail_word(buf, int(offsets[i]))
    else:
        for i in range(starts.size):
            for c in range(chunks):
                words[i, c] = _tail_word(buf, int(starts[i]) + 8 * c)
    chars = words.view(np.uint8).reshape(starts.size, 8 * chunks)
    chars[np.arange(8 * chunks) >= lengths[:, None]] = 0
    return chars


def _tail_word(buf: npt.NDArray[np.uint8], offset: int) -> np.uint64:
    """The up to eight bytes from ``offset`` to the end of ``buf``, zero-padded, as a word."""
    word = np.zeros(8, dtype=np.uint8)
    tail = buf[offset : offset + 8]
    word[: tail.size] = tail
    return np.uint64(word.view(np.uint64)[0])


def _unparsable(tokens: npt.NDArray[np.bytes_]) -> npt.NDArray[np.bool_]:
    """Which token numpy cannot turn into a float (the slow path, taken on error only)."""
    bad = np.zeros(tokens.size, np.bool_)
    for i in range(tokens.size):
        try:
            tokens[i : i + 1].astype(np.float64)
        except ValueError:
            bad[i] = True
            return bad
    raise AssertionError("numpy refused a token but accepts each one alone")
