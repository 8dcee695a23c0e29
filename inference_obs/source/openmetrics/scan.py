"""The fast path of the OpenMetrics reader: a block's lines as columns without a regular expression.

:func:`scan_block` reads a block's whole lines in a fixed number of numpy
operations over all of them, none per line: newlines found eight bytes at a
time; each line's timestamp and value read from the 16 bytes before the
newline and before the timestamp's space; runs of lines of one series found
by comparing each line's series text with the line before's, eight bytes at
a time. It vouches for a block or declines it (None), and then
:class:`~inference_obs.source.openmetrics.reader.OpenMetricsReader` reads the
block with its regular expression, which names the problem. So the fast path
never decides an error message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from inference_obs.errors import DatasetError
from inference_obs.samples import Floats, Ints
from inference_obs.source.openmetrics.tokens import (
    Words,
    byte_marks,
    cut,
    decimals,
    floats,
    highest_byte,
    lowest_byte,
    millis,
    words_at,
    words_before,
    writer_millis,
)

__all__ = [
    "BACK",
    "COMPARED_BYTES",
    "FAST_KEY",
    "HASH",
    "KEY_BYTES",
    "LABEL_SET",
    "NAME",
    "NEWLINE",
    "SPACE",
    "TAIL",
    "Scan",
    "scan_block",
]

NAME = rb"[a-zA-Z_:][a-zA-Z0-9_:]*"
# Lenient about what lies between the braces (the strict parse runs once per
# series); the quoted-string branch keeps `}` and spaces inside values apart.
LABEL_SET = rb'\{(?:[^"}\n]|"(?:[^"\\\n]|\\.)*")*\}'
KEY_BYTES = re.compile(NAME + rb"(?:" + LABEL_SET + rb")?")
SPACE, HASH, NEWLINE = ord(" "), ord("#"), ord("\n")
# The fast path (:func:`scan_block`) finds a line's last two spaces within the
# 32 bytes before its newline and before its last space, so it reads up to
# 32 bytes before a block; and it compares series text a word at a time from
# each line's start, so up to FAST_KEY + 8 bytes after it.
TAIL = 32
FAST_KEY = 1024  # longer series text goes through the regular expression
BACK = FAST_KEY + 8
COMPARED_BYTES = 1024 << 10  # series text compared at a time (see _first_difference)


@dataclass(frozen=True)
class Scan:
    """A block the fast path vouches for; line and row numbers count from 0 in the block."""

    lines: int
    meta_lines: list[int]  # the lines that start with "#"
    metas: list[bytes]  # their text
    rows: Ints  # the line of each sample
    run_rows: Ints  # the first row of each run of lines with one series text
    keys: list[bytes]  # that series text, run by run
    values: Floats
    t_ms: Ints

    def events(self) -> list[tuple[int, bytes | None, bytes | None]]:
        """``(line, metadata, series text)`` of each metadata line and run, in text order."""
        lines = self.rows[self.run_rows].tolist()
        runs: list[tuple[int, bytes | None, bytes | None]] = [
            (line, None, key) for line, key in zip(lines, self.keys, strict=True)
        ]
        if not self.metas:
            return runs
        metas = zip(self.meta_lines, self.metas, strict=True)
        return sorted(runs + [(line, meta, None) for line, meta in metas], key=lambda e: e[0])


def _refuse(row: int, problem: str) -> DatasetError:
    """A problem the fast path leaves to the regular expression to name (with its line)."""
    return DatasetError(problem)


def scan_block(buf: npt.NDArray[np.uint8], lo: int, hi: int) -> Scan | None:
    """The whole lines ``buf[lo:hi]`` read without the regular expression, or None.

    None unless every sample line is ``series value timestamp`` with the two
    fields within 31 bytes each, every run's series text is what the regular
    expression would take for it, and every value and timestamp converts:
    then the answer is the regular expression's, and its problems are left
    to it to name. ``buf`` has :data:`TAIL` bytes before ``lo`` and
    :data:`BACK` after ``hi``. A run is found by comparing each line's
    first bytes (its series text and the space after it, the text before the
    second-to-last space) with the line before it, a word at a time.
    """
    newlines = _newlines(buf, lo, hi)
    starts = np.empty_like(newlines)
    starts[:1] = lo
    starts[1:] = newlines[:-1] + 1
    is_meta = buf[starts] == HASH
    meta_lines = np.flatnonzero(is_meta).tolist()
    metas = [buf[starts[i] : newlines[i]].tobytes() for i in meta_lines]
    rows = np.flatnonzero(~is_meta)
    none = np.zeros(0, np.int64)
    scan = Scan(newlines.size, meta_lines, metas, rows, none, [], np.zeros(0), none)
    if rows.size == 0:
        return scan
    row_starts, ends = starts[rows], newlines[rows]
    fields = _fields(buf, row_starts, ends)
    if fields is None:
        return None
    value_space, values, t_ms = fields
    key_bytes = value_space - row_starts
    run_rows = _runs(buf, row_starts, key_bytes, rows)
    if run_rows is None:
        return None
    keys, text = [], buf.data
    first_bytes, sizes = row_starts[run_rows].tolist(), key_bytes[run_rows].tolist()
    for start, size in zip(first_bytes, sizes, strict=True):
        if KEY_BYTES.fullmatch(text, start, start + size) is None:
            return None  # not series text: the regular expression says why
        keys.append(buf[start : start + size].tobytes())
    return Scan(newlines.size, meta_lines, metas, rows, run_rows, keys, values, t_ms)


def _newlines(buf: npt.NDArray[np.uint8], lo: int, hi: int) -> Ints:
    """Offsets of the newlines in ``buf[lo:hi]`` (``buf`` has 8 bytes to spare on either side)."""
    first, last = lo - lo % 8, hi + (-hi) % 8
    found = buf[first:last] == NEWLINE
    found[: lo - first] = False
    found[hi - first :] = False
    # Eight bytes a word: far fewer words than bytes hold a newline, and numpy
    # finds nonzero booleans fast; a word's one newline is its one marked byte.
    marks = found.view("<u8")
    words = np.flatnonzero(marks != 0)
    marked = marks[words]
    if np.any(marked & (marked - np.uint64(1))):  # lines shorter than a word
        return np.flatnonzero(found) + first
    column = (marked.astype(np.float64).view(np.int64) >> 52) - 1023  # 8 * the byte
    offsets: Ints = 8 * words + (column >> 3) + first
    return offsets


def _fields(
    buf: npt.NDArray[np.uint8], starts: Ints, ends: Ints
) -> tuple[Ints, Floats, Ints] | None:
    """Each sample line's value space (offset), value and timestamp (ms), or None.

    None when a line lacks two spaces with text between and after them (the
    last 31 bytes or fewer each), or a value or timestamp does not convert.
    The writer's timestamp forms and values of up to 16 bytes are read from
    the 16 bytes before each field's end; other lines are searched further.
    """
    t_ms, stamp_bytes = writer_millis(words_before(buf, ends, 2))
    odd = np.flatnonzero(stamp_bytes == 0)
    if odd.size:
        spaces = _last_space(words_before(buf, ends[odd], 4), ends[odd])
        if not np.all((spaces > starts[odd]) & (spaces < ends[odd] - 1)):
            return None
        stamp_bytes[odd] = ends[odd] - spaces - 1
        try:
            t_ms[odd] = millis(buf, spaces + 1, stamp_bytes[odd], _refuse)
        except DatasetError:
            return None
    stamp_space = ends - stamp_bytes - 1
    heads = words_before(buf, stamp_space, 2)
    value_space = _last_space(heads, stamp_space)
    far = np.flatnonzero(value_space < 0)  # no space in the 16 bytes before
    if far.size:
        value_space[far] = _last_space(words_before(buf, stamp_space[far], 4), stamp_space[far])
    if not np.all((value_space > starts) & (value_space < stamp_space - 1)):
        return None
    values = _values(buf, heads, value_space, stamp_space - value_space - 1)
    if values is None:
        return None
    return value_space, values, t_ms


def _last_space(words: Words, ends: Ints) -> Ints:
    """Offset of the last space in each row of ``words`` (the bytes before ``ends``), or -1."""
    column = highest_byte(byte_marks(words, SPACE))
    offsets: Ints = np.where(column >= 0, ends - 8 * words.shape[1] + column, -1)
    return offsets


def _runs(buf: npt.NDArray[np.uint8], starts: Ints, key_bytes: Ints, rows: Ints) -> Ints | None:
    """The rows that start a run: a line whose series text (and space) is not the line before's.

    None when some series text is longer than :data:`FAST_KEY`.
    """
    width = key_bytes + 1
    widest = int(width.max())
    if widest > FAST_KEY:
        return None
    differs_at = _first_difference(buf, starts, -(-widest // 8))
    same = (width[1:] == width[:-1]) & (rows[1:] == rows[:-1] + 1) & (differs_at >= width[1:])
    starts_run: Ints = np.flatnonzero(np.concatenate(([True], ~same)))
    return starts_run


def _first_difference(buf: npt.NDArray[np.uint8], starts: Ints, words: int) -> Ints:
    """Where each line after the first first differs from the line before, in bytes from its start.

    ``8 * words`` where their first ``8 * words`` bytes are equal. Lines go a
    few thousand at a time, so the words compared stay in the CPU caches.
    """
    differs_at = np.full(starts.size - 1, 8 * words)
    step = max(COMPARED_BYTES // (8 * words), 1)
    for lo in range(0, starts.size - 1, step):
        heads = words_at(buf, starts[lo : lo + step + 1], words)
        later, earlier = heads[1:], heads[:-1]
        where = np.flatnonzero(later != earlier)  # flat, row-major: a line's words in order
        pair = where // words
        first = np.ones(where.size, np.bool_)
        first[1:] = pair[1:] != pair[:-1]
        where, pair = where[first], pair[first]
        word = later.reshape(-1)[where] ^ earlier.reshape(-1)[where]
        differs_at[lo + pair] = 8 * (where - pair * words) + lowest_byte(word)
    return differs_at


def _values(buf: npt.NDArray[np.uint8], heads: Words, spaces: Ints, lengths: Ints) -> Floats | None:
    """The values (``lengths`` bytes after ``spaces``, ending ``heads``), or None if one is bad."""
    values, plain = decimals(heads, lengths)
    others = np.flatnonzero(~plain)
    if others.size:
        chars = cut(buf, spaces[others] + 1, lengths[others])
        try:
            values[others] = floats(chars, lengths[others], "value", _refuse, specials=True)
        except DatasetError:
            return None
    return values
