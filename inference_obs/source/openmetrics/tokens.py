"""Values and timestamps of OpenMetrics sample lines, cut from the bytes and converted by numpy.

The helpers of :mod:`inference_obs.source.openmetrics.reader`: tokens are cut
out of a byte buffer eight bytes at a time into fixed-width rows, checked
byte by byte, and converted in one numpy call per column. A problem calls
``fail(row, message)`` with the row of the first bad token, which returns the
:class:`~inference_obs.errors.DatasetError` to raise (naming the file and line).

The fast path's converters (:func:`decimals`, :func:`writer_millis`) read
the common forms with integer arithmetic on 64-bit words and say which rows
they read; the rest go to :func:`floats` and :func:`millis`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from inference_obs.errors import DatasetError
from inference_obs.samples import Floats, Ints

__all__ = [
    "MAX_TOKEN",
    "Fail",
    "Words",
    "byte_marks",
    "check_lengths",
    "cut",
    "decimals",
    "floats",
    "highest_byte",
    "lowest_byte",
    "millis",
    "row_tokens",
    "words_at",
    "words_before",
    "writer_millis",
]

Fail = Callable[[int, str], DatasetError]
# The longest value repr() writes is 24 bytes ("-2.2250738585072014e-308");
# a bound keeps the fixed-width token arrays small whatever the input.
MAX_TOKEN = 64
_VALUE_BYTES = np.zeros(256, dtype=np.bool_)
_VALUE_BYTES[list(b"0123456789+-.eE")] = True
_SPECIALS = {b"NaN": np.nan, b"+Inf": np.inf, b"-Inf": -np.inf}
# Same bound as Series: float64 seconds keep sub-millisecond precision within it.
_MAX_ABS_SECONDS = 1e11
# A whole-millisecond timestamp, read as promtool reads it (seconds * 1000 in
# float64), lies within float error of a whole number, or of the midpoint the
# writer uses; at 1e11 s that error is about 0.03 ms.
_MS_TOLERANCE = 0.1
# The writer's two timestamp forms: ten digits of whole seconds, or ten digits,
# a point, three digits of milliseconds and the midpoint's 5 ("1772409606.8505").
_POWERS = 10.0 ** np.arange(9, -1, -1)
_MS_POWERS = np.array([100.0, 10.0, 1.0])
Words = npt.NDArray[np.uint64]

# The fast path reads a field from the 16 bytes that end it, as two
# little-endian 64-bit words (text bytes 0-7, then 8-15): numpy classifies the
# bytes (a digit? a point?), and viewing the byte-wise answers as words lets a
# few word operations check and combine whole rows ("SWAR": byte i of a word
# is its bits 8i..8i+7). A byte-wise answer is a *mark*: 0x01 in each byte
# where it holds. A field that is not plain goes to the general converters.
_ONES = 0x0101010101010101
_DECIMAL_WIDTH = 16
# A plain decimal's digits read as one integer below 10**16 fit a uint64, and
# are exact in float64 up to 2**53.
_EXACT = np.uint64(1 << 53)
_POWERS_OF_TEN = 10.0 ** np.arange(_DECIMAL_WIDTH + 1)  # all exact in float64


def _marks(columns: list[list[int]]) -> Words:
    """Rows of two words marking the given byte columns (0-15) of each row."""
    rows = np.zeros((len(columns), _DECIMAL_WIDTH), np.uint8)
    for row, chosen in zip(rows, columns, strict=True):
        row[chosen] = 1
    words: Words = rows.view("<u8")
    return words


def _full(marks: Words) -> Words:
    """Marks (0x01) as byte masks (0xFF)."""
    masks: Words = marks * np.uint64(0xFF)
    return masks


# By a token's first column s: its bytes (columns s to 15).
_FROM = _marks([list(range(s, _DECIMAL_WIDTH)) for s in range(_DECIMAL_WIDTH + 1)])
# By a point's column + 1 (0 for none): the bytes before it, as masks.
_BEFORE = _full(_marks([list(range(s - 1)) for s in range(_DECIMAL_WIDTH + 1)]))
# The writer's timestamps in the 16 bytes before a newline, " SSSSSSSSSS.mmm5"
# and "?????<space>SSSSSSSSSS": their digits, and their fixed bytes.
_LONG_DIGITS, _SHORT_DIGITS = _marks([[*range(1, 11), 12, 13, 14], list(range(6, 16))])
_LONG_FIXED = np.frombuffer(b" " + b"\0" * 10 + b"." + b"\0" * 3 + b"5", "<u8")
_LONG_FIXED_MASK = _full(_marks([[0, 11, 15]])[0])
_SHORT_FIXED = np.frombuffer(b"\0" * 5 + b" " + b"\0" * 10, "<u8")
_SHORT_FIXED_MASK = _full(_marks([[5]])[0])
# The long form's digit groups, SSSSSSS (bytes 1-7), SSS (8-10) and mmm (12-14),
# as masks of the word each lies in; the short form's SS (bytes 6-7).
_LONG_HIGH = _full(_LONG_DIGITS[0])
_LONG_SECONDS, _LONG_MILLIS = _full(_marks([[8, 9, 10], [12, 13, 14]])[:, 1])
_SHORT_HIGH = _full(_SHORT_DIGITS[0])


def cut(buf: npt.NDArray[np.uint8], starts: Ints, lengths: Ints) -> npt.NDArray[np.uint8]:
    """Bytes ``buf[starts[i] : starts[i] + lengths[i]]`` as rows, zero-padded to a multiple of 8.

    Eight bytes at a time: a view of ``buf`` as overlapping unaligned 64-bit
    words (stride one byte) lets one fancy index fetch eight bytes per token.
    """
    chunks = -(-int(lengths.max()) // 8) if lengths.size else 0
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
    chars *= np.arange(8 * chunks) < lengths[:, None]
    return chars


def _tail_word(buf: npt.NDArray[np.uint8], offset: int) -> np.uint64:
    """The up to eight bytes from ``offset`` to the end of ``buf``, zero-padded, as a word."""
    word = np.zeros(8, dtype=np.uint8)
    tail = buf[offset : offset + 8]
    word[: tail.size] = tail
    return np.uint64(word.view(np.uint64)[0])


def words_at(buf: npt.NDArray[np.uint8], starts: Ints, words: int) -> Words:
    """The ``8 * words`` bytes from each offset in ``starts`` as little-endian words, a row each.

    One fancy index of a view of ``buf`` as overlapping records of that many
    bytes (byte stride), so ``buf`` must hold ``8 * words`` bytes from every
    offset.
    """
    width = 8 * words
    records = np.ndarray(
        (buf.size - width + 1,), dtype=np.dtype((np.void, width)), buffer=buf, strides=(1,)
    )
    chosen: Words = records[starts].view("<u8").reshape(starts.size, words)
    return chosen


def words_before(buf: npt.NDArray[np.uint8], ends: Ints, words: int) -> Words:
    """The ``8 * words`` bytes before each offset in ``ends`` (see :func:`words_at`)."""
    return words_at(buf, ends - 8 * words, words)


def byte_marks(words: Words, byte: int) -> Words:
    """Marks (0x01) of the bytes of ``words`` (a C-contiguous array) equal to ``byte``."""
    marks: Words = (words.view(np.uint8) == byte).view("<u8")
    return marks


def highest_byte(marks: Words) -> Ints:
    """Column of the last marked byte in each row of words (8 columns a word), or -1."""
    last, base = marks[:, -1], np.full(marks.shape[0], 8 * (marks.shape[1] - 1))
    for k in range(marks.shape[1] - 2, -1, -1):  # the last word with a mark
        empty = last == 0
        last = np.where(empty, marks[:, k], last)
        base[empty] = 8 * k
    # A word whose highest mark is byte i (bit 8i) is at least 2**(8i) and, one bit a
    # byte, rounds to below 2**(8i+1): float64 exponent field (bits 52 on, biased by
    # 1023) 8i. A word without marks is 0.0, exponent field 0.
    exponent = (last.astype(np.float64).view(np.int64) >> 52) - 1023
    column: Ints = np.where(exponent >= 0, base + (exponent >> 3), -1)
    return column


def lowest_byte(words: Words) -> Ints:
    """Column (0-7) of the first nonzero byte of each word; 8 for a zero word."""
    low7, high = np.uint64(0x7F * _ONES), np.uint64(0x80 * _ONES)
    nonzero = (((words & low7) + low7) | words) & high  # 0x80 in each nonzero byte
    lowest = (nonzero & (~nonzero + np.uint64(1))) >> np.uint64(7)  # bit 8i of byte i
    exponent = (lowest.astype(np.float64).view(np.int64) >> 52) - 1023
    column: Ints = np.where(lowest != 0, exponent >> 3, 8)
    return column


def _has(words: Words, masks: Words, wanted: Words) -> npt.NDArray[np.bool_]:
    """Rows of two words whose bytes under ``masks`` are ``wanted`` (a word pair each)."""
    # Column by column: numpy broadcasts a (2,) operand over (n, 2) rows slowly.
    high = (words[:, 0] & masks[0]) == wanted[0]
    result: npt.NDArray[np.bool_] = high & ((words[:, 1] & masks[1]) == wanted[1])
    return result


def _eight_digits(words: Words) -> Words:
    """Each word's bytes (each 0-9) as an eight-digit number, its first byte the leading digit."""
    pairs = (words * np.uint64(10) + (words >> np.uint64(8))) & np.uint64(0x00FF00FF00FF00FF)
    fours = (pairs * np.uint64(100) + (pairs >> np.uint64(16))) & np.uint64(0x0000FFFF0000FFFF)
    eights: Words = (fours * np.uint64(10000) + (fours >> np.uint64(32))) & np.uint64(0xFFFFFFFF)
    return eights


def decimals(words: Words, lengths: Ints) -> tuple[Floats, npt.NDArray[np.bool_]]:
    """Plain decimal tokens ending the 16 bytes of each row as float64; which rows were plain.

    ``words`` (C-contiguous, two words a row) holds the 16 bytes that end
    with each token, ``lengths[i]`` bytes long. A token is plain when it is an
    optional ``-`` then digits with at most one point, 16 bytes in all, and
    its digits read as one integer ``M`` are at most ``2**53`` (``0.25``,
    ``-7``, ``724012.164214376``; also ``.5``, ``3.``, ``-0.0``). ``M`` is then
    exact in float64 and so is ``10**f`` (``f`` digits after the point), and
    ``M / 10**f`` is one correctly rounded division: bit for bit what
    ``float()`` and numpy make of the text. Other rows (exponents, ``NaN``,
    ``+Inf``, a leading ``+``, more digits, anything malformed) are 0.0 and
    not plain: convert them with :func:`floats`, which also says what is
    wrong with them.
    """
    rows = lengths.size
    chars = words.view(np.uint8)
    fits = (lengths >= 1) & (lengths <= _DECIMAL_WIDTH)
    first = np.where(fits, _DECIMAL_WIDTH - lengths, 0)  # the token's first column
    negative = chars.reshape(-1)[
        np.arange(0, _DECIMAL_WIDTH * rows, _DECIMAL_WIDTH) + first
    ] == ord("-")
    body = np.take(_FROM, first + negative, axis=0)
    shifted = chars - np.uint8(ord("0"))  # a digit's value; any other byte is above 9
    digits = (shifted <= 9).view("<u8") & body
    points = (chars == ord(".")).view("<u8") & body
    # Digits and points are parts of the body: what is left of it is neither.
    other = body ^ digits ^ points
    point = highest_byte(points)
    # The digits with the point taken out: the bytes before it move up one byte.
    values = shifted.view("<u8") & _full(digits)
    moved = values & np.take(_BEFORE, point + 1, axis=0)
    values ^= moved
    values |= moved << np.uint64(8)
    values[:, 1] |= moved[:, 0] >> np.uint64(56)
    whole = _eight_digits(values)
    mantissa = whole[:, 0] * np.uint64(10**8) + whole[:, 1]
    point_count = (points[:, 0] + points[:, 1]) * np.uint64(_ONES) >> np.uint64(56)
    plain = fits & (point_count <= 1) & ((other[:, 0] | other[:, 1]) == 0)
    plain &= ((digits[:, 0] | digits[:, 1]) != 0) & (mantissa <= _EXACT)
    after = np.where(point >= 0, _DECIMAL_WIDTH - 1 - point, 0)
    result = mantissa.astype(np.float64) / _POWERS_OF_TEN[after]
    np.negative(result, out=result, where=negative)
    result[~plain] = 0.0
    return result, plain


def writer_millis(words: Words) -> tuple[Ints, Ints]:
    """Timestamps in the writer's two forms ending the 16 bytes of each row, in ms; their lengths.

    The forms :func:`millis` reads digit by digit, to the same integers,
    each after a space: ten digits of whole seconds, or ``SSSSSSSSSS.mmm5``
    (``words``: C-contiguous, two words a row). A row in neither form is 0 ms
    long 0.
    """
    shifted = words.view(np.uint8) - np.uint8(ord("0"))  # digits' values; others above 9
    digits = (shifted <= 9).view("<u8")
    long = _has(digits, _LONG_DIGITS, _LONG_DIGITS) & _has(words, _LONG_FIXED_MASK, _LONG_FIXED)
    short = _has(digits, _SHORT_DIGITS, _SHORT_DIGITS)
    short &= (words[:, 0] & _SHORT_FIXED_MASK[0]) == _SHORT_FIXED[0]
    values = shifted.view("<u8")
    high, low = values[:, 0], values[:, 1]
    ms = np.zeros(high.size, np.uint64)
    thousand = np.uint64(1000)
    if np.any(long):
        # Each group of digits moved to its word's end: SSSSSSS, SSS, mmm.
        seconds = _eight_digits(high & _LONG_HIGH) * thousand
        seconds += _eight_digits((low & _LONG_SECONDS) << np.uint64(40))
        thousandths = _eight_digits((low & _LONG_MILLIS) << np.uint64(8))
        np.copyto(ms, seconds * thousand + thousandths, where=long)
    if np.any(short):
        seconds = _eight_digits(high & _SHORT_HIGH) * np.uint64(10**8) + _eight_digits(low)
        np.copyto(ms, seconds * thousand, where=short)
    lengths: Ints = np.where(long, 15, np.where(short, 10, 0))
    return ms.view(np.int64), lengths


def row_tokens(chars: npt.NDArray[np.uint8], first: Ints, lengths: Ints) -> npt.NDArray[np.uint8]:
    """The bytes ``chars[i, first[i] : first[i] + lengths[i]]`` of each row, zero-padded.

    ``lengths`` must be at least 1 and every token must lie inside its row.
    """
    width = -(-int(lengths.max()) // 8) * 8 if lengths.size else 0
    if not np.any(first):
        out = chars[:, :width].copy()
    else:
        columns = np.minimum(first[:, None] + np.arange(width), chars.shape[1] - 1)
        out = np.take_along_axis(chars, columns, axis=1)
    out *= np.arange(width) < lengths[:, None]
    return out


def floats(
    chars: npt.NDArray[np.uint8], lengths: Ints, what: str, fail: Fail, *, specials: bool
) -> Floats:
    """Tokens (rows of ``chars``, zero-padded, ``lengths`` long) as floats, checked.

    Digits, signs, points and exponents; with ``specials``, ``NaN``, ``+Inf``
    and ``-Inf`` too. A token numpy cannot read, or that overflows
    (``1e999``), is refused. Check ``lengths`` with :func:`check_lengths` first.
    """
    if lengths.size == 0:
        return np.zeros(0, np.float64)
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
        raise fail(i, f"bad {what} {tokens[i].decode('utf-8', 'replace')!r}; expected {kind}")
    for text, number in _SPECIALS.items():
        numbers[tokens == text] = number
    return numbers


def check_lengths(lengths: Ints, what: str, fail: Fail) -> None:
    """Refuse an empty token or one longer than :data:`MAX_TOKEN` bytes."""
    too_long = (lengths == 0) | (lengths > MAX_TOKEN)
    if np.any(too_long):
        i = int(np.flatnonzero(too_long)[0])
        raise fail(i, f"no {what}" if lengths[i] == 0 else f"{what} longer than {MAX_TOKEN} bytes")


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


def millis(buf: npt.NDArray[np.uint8], starts: Ints, lengths: Ints, fail: Fail) -> Ints:
    """Timestamps ``buf[starts[i]:][:lengths[i]]`` (decimal unix seconds) in ms, as promtool 2.42.

    The writer's two forms are read digit by digit (exactly what the float
    path gives for them); any other text goes through :func:`floats` and the promtool rule
    ``int64(seconds * 1000)``, which must land on a whole millisecond (see
    :func:`~inference_obs.source.openmetrics.reader.read_openmetrics`).
    """
    out = np.zeros(lengths.size, np.int64)
    rest = np.ones(lengths.size, np.bool_)
    for size in (15, 10):
        rows = np.flatnonzero(lengths == size)
        if rows.size == 0:
            continue
        chars = cut(buf, starts[rows], lengths[rows])
        digits = chars - np.uint8(ord("0"))  # a non-digit wraps around to above 9
        ok = np.all(digits[:, :10] <= 9, axis=1)
        # float64 products and sums of digits are exact (< 2**53) and use BLAS.
        seconds = digits[:, :10] @ _POWERS
        if size == 15:  # "SSSSSSSSSS.mmm5": promtool truncates (s + 0.0005) * 1000 to the ms
            ok &= np.all(digits[:, 11:14] <= 9, axis=1)
            ok &= (chars[:, 10] == ord(".")) & (chars[:, 14] == ord("5"))
            seconds = seconds * 1000 + digits[:, 11:14] @ _MS_POWERS
        else:
            seconds = seconds * 1000
        out[rows] = seconds.astype(np.int64)
        rest[rows[ok]] = False
    others = np.flatnonzero(rest)
    if others.size:

        def again(i: int, problem: str) -> DatasetError:
            return fail(int(others[i]), problem)

        check_lengths(lengths[others], "timestamp", again)
        chars = cut(buf, starts[others], lengths[others])
        seconds = floats(chars, lengths[others], "timestamp", again, specials=False)
        out[others] = _promtool_millis(seconds, again)
    return out


def _promtool_millis(seconds: Floats, fail: Fail) -> Ints:
    outside = np.abs(seconds) > _MAX_ABS_SECONDS
    if np.any(outside):
        raise fail(int(np.flatnonzero(outside)[0]), f"timestamp beyond +-{_MAX_ABS_SECONDS:g} s")
    # promtool 2.42 (openmetricsparse.go): p.ts = int64(ts * 1000), truncating.
    scaled = seconds * 1000.0
    whole = np.trunc(scaled)
    rest = np.abs(scaled - whole)
    off = (rest > _MS_TOLERANCE) & (np.abs(rest - 0.5) > _MS_TOLERANCE)
    if np.any(off):
        i = int(np.flatnonzero(off)[0])
        raise fail(
            i,
            f"timestamp {float(seconds[i])!r} s is not a whole millisecond as promtool reads "
            f"it (it truncates {float(scaled[i])!r} ms to {int(whole[i])} ms); write whole "
            "milliseconds, a fraction as the millisecond's midpoint (1.0015 for 1001 ms)",
        )
    result: Ints = whole.astype(np.int64)
    return result
