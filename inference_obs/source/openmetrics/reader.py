"""A strict, vectorised, streaming reader of the OpenMetrics text a dataset keeps its samples in.

It reads what :func:`~inference_obs.source.openmetrics.writer.write_openmetrics`
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
Prometheus stores), exemplars and timestamps that are not whole milliseconds
as promtool reads them (see :func:`read_openmetrics`).

Read as Prometheus reads them: a label with an empty value (``pod_uid=""``) is
dropped, so ``m{a=""}`` is the series ``m``; ``# TYPE m untyped``, the
Prometheus text format's spelling, is the type ``unknown``.

Speed: the text is read in blocks of a few MB (:class:`OpenMetricsReader`
takes it piece by piece, so a file never has to be in memory whole). A block
is first read without a regular expression (:func:`scan_block`), every step a
numpy operation over all its lines: newlines are found eight bytes at a time;
each line's timestamp and value are read from the 16 bytes before the
newline and before the timestamp's space (the writer's forms and plain
decimals digit by digit, bit for bit what ``float()`` gives; anything else
through numpy's own parser); and a line continues the run of the line before
when its series text, the text before its second-to-last space, is the same
bytes, compared eight at a time. Each run's series text is checked against
the grammar once and parsed once per series (the line grammar is
:mod:`inference_obs.source.openmetrics`'s). Any line that read cannot vouch
for (a problem, an unusual form) sends the whole block to the regular
expression path, which finds each run of lines of one series with one
match (a back-reference repeats the series text) and names the first
problem; so both paths give the same samples and the same errors. No Python
object is made per sample.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import numpy.typing as npt

from inference_obs.errors import DatasetError
from inference_obs.query.names import METRIC_NAME as _METRIC_NAME
from inference_obs.samples import Floats, Ints, Labels, SampleSet, describe
from inference_obs.source.openmetrics.grammar import Families, LineProblem, parse_series
from inference_obs.source.openmetrics.scan import (
    BACK,
    HASH,
    KEY_BYTES,
    LABEL_SET,
    NAME,
    NEWLINE,
    SPACE,
    TAIL,
    Scan,
    scan_block,
)
from inference_obs.source.openmetrics.tokens import (
    MAX_TOKEN,
    Fail,
    check_lengths,
    cut,
    floats,
    millis,
    row_tokens,
)

__all__ = ["BLOCK_BYTES", "OpenMetricsReader", "Parsing", "read_openmetrics"]

_KEY_TEXT = re.compile(KEY_BYTES.pattern.decode())
# A metadata line, or a run of sample lines with identical series text. The
# possessive repeat keeps no backtracking state per line.
_CHUNK = re.compile(
    rb"(?P<meta>#[^\n]*)\n"
    rb"|(?P<key>" + NAME + rb"(?:" + LABEL_SET + rb")?) [^\n]*\n(?:(?P=key) [^\n]*\n)*+"
)
_EOF = b"# EOF"
#: Bytes parsed at a time: temporaries of a few times this stay in the CPU
#: caches (whole-file arrays made the reader several times slower).
BLOCK_BYTES = 8 << 20
# A value, a space and a timestamp, each token at most MAX_TOKEN bytes.
_MAX_PAYLOAD = 2 * MAX_TOKEN + 1
_AFTER_EOF = "text after '# EOF', which must be the last line"
_NO_EOF = "the text ends without a '# EOF' line (a truncated file?)"


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
        ``source:LINE: problem`` for the first problem found (a missing or
        misplaced final ``# EOF`` first).

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
    _check_end(data, source)
    reader = OpenMetricsReader(source)
    reader.feed(data)
    return reader.finish()


def _check_end(data: bytes, source: str) -> None:
    """Refuse text whose last line is not ``# EOF``, naming the line (an early one's, if any)."""
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    start = data.rfind(b"\n", 0, end) + 1
    if data[start:end] == _EOF:
        return  # an earlier "# EOF" is refused where the parse meets it
    found = data.find(b"\n# EOF\n")
    early = 0 if data.startswith(b"# EOF\n") else found + 1 if found >= 0 else -1
    if early >= 0:
        line, problem = data.count(b"\n", 0, early) + 1, _AFTER_EOF
    else:
        line, problem = (data.count(b"\n", 0, len(data) - 1) + 1 if data else 1), _NO_EOF
    raise DatasetError(f"{source}:{line}: {problem}")


@dataclass
class _Columns:
    """What the blocks found so far: runs (series, samples, first line) and the samples."""

    run_series: list[Ints] = field(default_factory=list)
    run_sizes: list[Ints] = field(default_factory=list)
    run_lines: list[Ints] = field(default_factory=list)
    t_ms: list[Ints] = field(default_factory=list)
    values: list[Floats] = field(default_factory=list)


class Parsing(Enum):
    """How :class:`OpenMetricsReader` reads each block; both give the same samples and errors."""

    #: :func:`~inference_obs.source.openmetrics.scan.scan_block` first, the regular
    #: expression only for a block the scan cannot vouch for (the fast way).
    SCAN_FIRST = "scan_first"
    #: Every block through the regular expression: the reference the scan is tested against.
    REGEX_ONLY = "regex_only"


class OpenMetricsReader:
    """OpenMetrics text fed in pieces of any size, parsed :data:`BLOCK_BYTES` at a time.

    :meth:`feed` the text in order (any split), then :meth:`finish` checks
    the final ``# EOF`` and returns the sample set. Problems raise
    :class:`~inference_obs.errors.DatasetError` as soon as their block is
    parsed: the first problem in the text, block by block. ``parsing`` says
    how each block is read (:class:`Parsing`).
    """

    def __init__(
        self, source: str, *, block_bytes: int = BLOCK_BYTES, parsing: Parsing = Parsing.SCAN_FIRST
    ) -> None:
        self.source = source
        self._block = block_bytes
        self._carry = b""
        self._lines = 0  # complete lines parsed so far
        self._eof_line: int | None = None
        self._families = Families()
        self._parsed: dict[bytes, int] = {}
        self._index: dict[tuple[str, Labels], int] = {}
        self._names: list[str] = []
        self._labels: list[Labels] = []
        self._columns = _Columns()
        self._buffer = np.zeros(0, dtype=np.uint8)
        self._scan = parsing is Parsing.SCAN_FIRST
        # Each series' last time taken by take(), by series index (int64 ms).
        self._last_taken = np.zeros(0, np.int64)

    def feed(self, data: bytes) -> None:
        """Take the next piece of the text; parse every whole block it completes."""
        text = _Joined(self._carry, data)
        pos, size = 0, text.size
        while size - pos >= self._block:
            end = text.rfind_newline(pos, pos + self._block) + 1
            if end <= pos:  # a line longer than a block: take it whole
                end = text.find_newline(pos + self._block) + 1
                if end <= 0:
                    break
            self._parse(text, pos, end, more=end < size)
            pos = end
        self._carry = text.rest(pos)

    def take(self) -> SampleSet:
        """The samples of the blocks parsed so far, which the reader then forgets.

        For text too large to hold whole: feed a block, take its samples,
        send them on. Each series' samples are in time order, and the first
        of each must be after the last one taken before (else
        :class:`~inference_obs.errors.DatasetError`, as in :meth:`finish`).
        The series are all those seen so far, in text order; one without new
        samples has none. Text not yet parsed (the end of the last piece,
        under a block) stays for the next :meth:`feed` or :meth:`finish`,
        which then returns only the samples not taken.
        """
        if not self._columns.run_series:
            offsets = np.zeros(len(self._names) + 1, np.int64)
            empty = (offsets, np.zeros(0, np.int64), np.zeros(0, np.float64))
            for array in empty:
                array.flags.writeable = False
            return SampleSet(tuple(self._names), tuple(self._labels), *empty)
        first_lines = self._first_lines()
        taken = self._assemble()
        self._check_after_taken(taken, first_lines)
        return taken

    def _first_lines(self) -> dict[int, int]:
        """The line of each series' first sample among the columns not yet taken."""
        lines: dict[int, int] = {}
        columns = self._columns
        for series, starts in zip(columns.run_series, columns.run_lines, strict=True):
            for s, line in zip(series.tolist(), starts.tolist(), strict=True):
                lines.setdefault(s, line)
        return lines

    def _check_after_taken(self, taken: SampleSet, first_lines: dict[int, int]) -> None:
        """Refuse a series whose first sample here is not after its last one taken before."""
        offsets, t_ms = taken.offsets, taken.t_ms
        last = np.full(len(self._names), np.iinfo(np.int64).min, np.int64)
        last[: self._last_taken.size] = self._last_taken
        has = offsets[1:] > offsets[:-1]
        firsts = t_ms[np.minimum(offsets[:-1], max(t_ms.size - 1, 0))]
        bad = np.flatnonzero(has & (firsts <= last))
        if bad.size:
            i = int(bad[0])
            raise self._fail(
                first_lines[i],
                f"series {describe(self._names[i], self._labels[i])}: timestamp "
                f"{int(firsts[i])} ms is not after the previous sample's {int(last[i])} ms "
                "(in an earlier block); a series' samples must strictly increase in time",
            )
        last[has] = t_ms[offsets[1:][has] - 1]
        self._last_taken = last

    def finish(self) -> SampleSet:
        """Parse what is left, check the final ``# EOF``, and return every sample not taken."""
        tail, self._carry = self._carry, b""
        end = tail.rfind(b"\n") + 1
        last = tail[end:]
        if end:
            self._parse(_Joined(tail, b""), 0, end, more=bool(last))
        if last and self._eof_line is not None:
            raise self._fail(self._eof_line, _AFTER_EOF)
        if (last and last != _EOF) or (not last and self._eof_line is None):
            raise self._fail(self._lines + 1 if last else max(self._lines, 1), _NO_EOF)
        if self._last_taken.size:  # samples were taken: what is left must follow them
            return self.take()
        return self._assemble()

    def _fail(self, line: int, problem: str) -> DatasetError:
        return DatasetError(f"{self.source}:{line}: {problem}")

    def _parse(self, text: _Joined, start: int, end: int, *, more: bool) -> None:
        """Check and convert the whole lines ``text[start:end]`` (``more``: text follows them).

        The block is copied once, with room around it, into a buffer kept from
        block to block. The fast path reads it when it can vouch for every
        line; anything else (a problem, an unusual line) goes to the regular
        expression, which names the first problem.
        """
        size = end - start
        if self._buffer.size < TAIL + size + BACK:
            self._buffer = np.zeros(TAIL + size + BACK, dtype=np.uint8)
        buf = self._buffer[: TAIL + size + BACK]
        text.copy_to(buf[TAIL : TAIL + size], start)
        buf[TAIL + size :] = 0
        scan = scan_block(buf, TAIL, TAIL + size) if self._scan else None
        if scan is None:
            self._parse_slowly(buf[TAIL : TAIL + size].tobytes(), more=more)
        else:
            self._take(scan, more=more)

    def _take(self, scan: Scan, *, more: bool) -> None:
        """Check a scanned block's metadata and series in text order, then keep its samples."""
        first = self._lines
        run_series: list[int] = []
        for line, meta, key in scan.events():
            if self._eof_line is not None:
                raise self._fail(self._eof_line, _AFTER_EOF)
            if meta == _EOF:
                self._eof_line = first + line + 1
                continue
            try:
                series = self._note(meta, key)
            except UnicodeDecodeError:
                raise self._fail(first + line + 1, "the line is not valid UTF-8") from None
            except LineProblem as exc:
                raise self._fail(first + line + 1, str(exc)) from None
            if series is not None:
                run_series.append(series)
        if more and self._eof_line is not None:
            raise self._fail(self._eof_line, _AFTER_EOF)
        if run_series:
            columns = self._columns
            columns.values.append(scan.values)
            columns.t_ms.append(scan.t_ms)
            columns.run_series.append(np.asarray(run_series, np.int64))
            columns.run_sizes.append(np.diff(scan.run_rows, append=scan.rows.size))
            columns.run_lines.append(scan.rows[scan.run_rows] + (first + 1))
        self._lines += scan.lines

    def _note(self, meta: bytes | None, key: bytes | None) -> int | None:
        """Check a metadata line (not ``# EOF``), or a run's series text: the series' index.

        Raises :class:`LineProblem` or :class:`UnicodeDecodeError` for a bad line.
        """
        if meta is not None:
            self._families.meta(meta.decode("utf-8"))
            return None
        assert key is not None
        series = self._parsed.get(key)
        if series is None:
            name, pairs = parse_series(key.decode("utf-8"))
            names = self._names
            series = self._index.setdefault((name, pairs), len(names))
            if series == len(names):
                names.append(name)
                self._labels.append(pairs)
            self._parsed[key] = series
        self._families.sample(self._names[series])
        return series

    def _parse_slowly(self, block: bytes, *, more: bool) -> None:
        """Check and convert one block with the regular expression, naming the first problem."""
        buf = np.frombuffer(block, dtype=np.uint8)
        newlines = np.flatnonzero(buf == NEWLINE)
        first = self._lines

        def line_at(offset: int) -> int:
            return first + int(np.searchsorted(newlines, offset)) + 1

        run_starts: list[int] = []
        run_series: list[int] = []
        run_key_bytes: list[int] = []
        pos, end = 0, len(block)
        while pos < end:
            if self._eof_line is not None:
                raise self._fail(self._eof_line, _AFTER_EOF)
            match = _CHUNK.match(block, pos, end)
            try:
                if match is None:
                    raise LineProblem(_diagnose(_line_text(block, pos)))
                meta, key = match.group("meta", "key")
                if meta == _EOF:
                    self._eof_line = line_at(pos)
                else:
                    series = self._note(meta, key)
                    if series is not None:
                        run_starts.append(pos)
                        run_series.append(series)
                        run_key_bytes.append(len(key))
            except UnicodeDecodeError:
                raise self._fail(line_at(pos), "the line is not valid UTF-8") from None
            except LineProblem as exc:
                raise self._fail(line_at(pos), str(exc)) from None
            pos = match.end()
        if more and self._eof_line is not None:  # refused before the block's values
            raise self._fail(self._eof_line, _AFTER_EOF)
        if run_starts:
            self._samples(block, buf, newlines, run_starts, run_series, run_key_bytes)
        self._lines += int(newlines.size)

    def _samples(
        self,
        block: bytes,
        buf: npt.NDArray[np.uint8],
        newlines: Ints,
        run_starts: list[int],
        run_series: list[int],
        run_key_bytes: list[int],
    ) -> None:
        """Values and timestamps of the block's sample lines, and its runs."""
        starts = np.empty(newlines.size, dtype=np.int64)
        starts[:1] = 0
        starts[1:] = newlines[:-1] + 1
        rows = np.flatnonzero(buf[starts] != HASH)
        line_numbers = rows + (self._lines + 1)
        row_starts, ends = starts[rows], newlines[rows].astype(np.int64)
        run_of_row = np.searchsorted(np.asarray(run_starts, np.int64), row_starts, "right") - 1
        value_starts = row_starts + np.asarray(run_key_bytes, np.int64)[run_of_row] + 1

        def fail(i: int, problem: str) -> DatasetError:
            return self._fail(int(line_numbers[i]), problem)

        lengths = ends - value_starts
        payload = cut(buf, value_starts, np.minimum(lengths, _MAX_PAYLOAD))
        split = _split(block, payload, value_starts, lengths, fail)
        check_lengths(split, "value", fail)
        value_chars = row_tokens(payload, np.zeros_like(split), split)
        columns = self._columns
        columns.values.append(floats(value_chars, split, "value", fail, specials=True))
        after = split + 1
        stamps = millis(buf, value_starts + after, lengths - after, fail)
        columns.t_ms.append(stamps)
        n_runs = len(run_starts)
        columns.run_series.append(np.asarray(run_series, np.int64))
        columns.run_sizes.append(np.bincount(run_of_row, minlength=n_runs).astype(np.int64))
        columns.run_lines.append(line_numbers[np.searchsorted(run_of_row, np.arange(n_runs))])

    def _assemble(self) -> SampleSet:
        """The blocks' columns as one sample set, each series' samples together and in time."""
        names, labels, columns = self._names, self._labels, self._columns
        if not names:
            empty = (np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))
            for array in empty:
                array.flags.writeable = False
            return SampleSet((), (), *empty)
        run_series = np.concatenate(columns.run_series)
        run_sizes = np.concatenate(columns.run_sizes)
        run_lines = np.concatenate(columns.run_lines)
        t_ms = np.concatenate(columns.t_ms)
        values = np.concatenate(columns.values)
        self._columns = _Columns()
        order: Ints | None = None
        if np.any(np.diff(run_series) < 0):  # series interleave (as OpenMetrics histograms may)
            order = np.argsort(np.repeat(run_series, run_sizes), kind="stable")
            t_ms, values = t_ms[order], values[order]
        counts = np.bincount(run_series, weights=run_sizes, minlength=len(names))
        offsets = np.zeros(len(names) + 1, dtype=np.int64)
        np.cumsum(counts.astype(np.int64), out=offsets[1:])
        steps_back = t_ms[1:] <= t_ms[:-1]
        # The first sample of a series has no previous (a series taken earlier may have none here).
        bounds = offsets[1:-1]
        steps_back[bounds[(bounds > 0) & (bounds < t_ms.size)] - 1] = False
        if np.any(steps_back):
            self._refuse_step_back(steps_back, order, t_ms, offsets, run_sizes, run_lines)
        for array in (offsets, t_ms, values):
            array.flags.writeable = False
        return SampleSet(tuple(names), tuple(labels), offsets, t_ms, values)

    def _refuse_step_back(
        self,
        steps_back: npt.NDArray[np.bool_],
        order: Ints | None,
        t_ms: Ints,
        offsets: Ints,
        run_sizes: Ints,
        run_lines: Ints,
    ) -> None:
        """Raise for the first sample in the text whose time is not after its predecessor's."""
        positions = np.flatnonzero(steps_back) + 1  # in series order
        in_text = positions if order is None else order[positions]
        k = int(np.argmin(in_text))
        at, before = int(positions[k]), int(positions[k]) - 1
        run_offsets = np.concatenate(([0], np.cumsum(run_sizes)))

        def line(sample: int) -> int:
            if order is not None:
                sample = int(order[sample])
            run = int(np.searchsorted(run_offsets, sample, "right")) - 1
            return int(run_lines[run]) + sample - int(run_offsets[run])

        series = int(np.searchsorted(offsets, at, "right")) - 1
        raise self._fail(
            line(at),
            f"series {describe(self._names[series], self._labels[series])}: timestamp "
            f"{int(t_ms[at])} ms is not after the previous sample's {int(t_ms[before])} ms "
            f"(line {line(before)}); a series' samples must strictly increase in time",
        )


class _Joined:
    """The text carried from the last piece and the new piece, read as one without joining them."""

    def __init__(self, head: bytes, tail: bytes) -> None:
        self.head, self.tail = head, tail
        self.size = len(head) + len(tail)

    def rfind_newline(self, lo: int, hi: int) -> int:
        """Offset of the last ``\\n`` in ``[lo, hi)``, or -1."""
        cut = len(self.head)
        if hi > cut:
            found = self.tail.rfind(b"\n", max(lo - cut, 0), hi - cut)
            if found >= 0:
                return found + cut
        return self.head.rfind(b"\n", lo, min(hi, cut)) if lo < cut else -1

    def find_newline(self, lo: int) -> int:
        """Offset of the first ``\\n`` at or after ``lo``, or -1."""
        cut = len(self.head)
        if lo < cut and (found := self.head.find(b"\n", lo)) >= 0:
            return found
        found = self.tail.find(b"\n", max(lo - cut, 0))
        return found + cut if found >= 0 else -1

    def copy_to(self, out: npt.NDArray[np.uint8], start: int) -> None:
        """Copy the ``out.size`` bytes from ``start`` into ``out``."""
        cut, end = len(self.head), start + out.size
        in_head = max(min(end, cut) - start, 0)
        if in_head:
            out[:in_head] = np.frombuffer(self.head, np.uint8, in_head, start)
        if end > cut:
            lo = max(start - cut, 0)
            out[in_head:] = np.frombuffer(self.tail, np.uint8, end - cut - lo, lo)

    def rest(self, start: int) -> bytes:
        """The text from ``start`` on."""
        cut = len(self.head)
        return self.tail[start - cut :] if start >= cut else self.head[start:] + self.tail


def _split(
    block: bytes,
    payload: npt.NDArray[np.uint8],
    starts: Ints,
    lengths: Ints,
    fail: Fail,
) -> Ints:
    """Offset of the space in each line's ``value timestamp`` (``payload``: its first bytes)."""
    spaces = payload == SPACE
    count = spaces.sum(axis=1)
    split = spaces.argmax(axis=1).astype(np.int64) if payload.shape[1] else np.zeros_like(lengths)
    for i in np.flatnonzero(lengths > payload.shape[1]).tolist():
        lo, hi = int(starts[i]), int(starts[i] + lengths[i])
        count[i] = block.count(b" ", lo, hi)
        split[i] = block.find(b" ", lo, hi) - lo
    if np.any(count != 1):
        i = int(np.flatnonzero(count != 1)[0])
        tail = block[int(starts[i]) : int(starts[i] + lengths[i])].decode("utf-8", "replace")
        raise fail(
            i,
            "no timestamp; every sample in a dataset carries one"
            if count[i] == 0
            else "exemplars are not supported"
            if " # " in tail
            else f"expected 'value timestamp' after the series, got {tail[:60]!r}",
        )
    return split


def _line_text(data: bytes, offset: int) -> str:
    end = data.find(b"\n", offset)
    return data[offset : end if end >= 0 else len(data)].decode("utf-8", errors="replace")


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
