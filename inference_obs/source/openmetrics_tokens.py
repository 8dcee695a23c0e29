"""Values and timestamps of OpenMetrics sample lines, cut from the bytes and converted by numpy.

The helpers of :mod:`inference_obs.source.openmetrics_read`: tokens are cut
out of a byte buffer eight bytes at a time into fixed-width rows, checked
byte by byte, and converted in one numpy call per column. A problem calls
``fail(row, message)`` with the row of the first bad token, which returns the
:class:`~inference_obs.errors.DatasetError` to raise (naming the file and line).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from inference_obs.errors import DatasetError

__all__ = ["MAX_TOKEN", "Fail", "check_lengths", "cut", "floats", "millis", "row_tokens"]

Fail = Callable[[int, str], DatasetError]
Int64Array = npt.NDArray[np.int64]

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


def cut(
    buf: npt.NDArray[np.uint8], starts: Int64Array, lengths: Int64Array
) -> npt.NDArray[np.uint8]:
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


def row_tokens(
    chars: npt.NDArray[np.uint8], first: Int64Array, lengths: Int64Array
) -> npt.NDArray[np.uint8]:
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
    chars: npt.NDArray[np.uint8], lengths: Int64Array, what: str, fail: Fail, *, specials: bool
) -> npt.NDArray[np.float64]:
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


def check_lengths(lengths: Int64Array, what: str, fail: Fail) -> None:
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


def millis(
    buf: npt.NDArray[np.uint8], starts: Int64Array, lengths: Int64Array, fail: Fail
) -> Int64Array:
    """Timestamps ``buf[starts[i]:][:lengths[i]]`` (decimal unix seconds) in ms, as promtool 2.42.

    The writer's two forms are read digit by digit (exactly what the float
    path gives for them); any other text goes through :func:`floats` and the promtool rule
    ``int64(seconds * 1000)``, which must land on a whole millisecond (see
    :func:`~inference_obs.source.openmetrics_read.read_openmetrics`).
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


def _promtool_millis(seconds: npt.NDArray[np.float64], fail: Fail) -> Int64Array:
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
    result: Int64Array = whole.astype(np.int64)
    return result
