"""What goes on the wire: remote-write protobuf in a snappy block, VictoriaMetrics JSON lines.

Remote write 1.0 (Prometheus, Mimir, Thanos Receive, Cortex) takes a
``WriteRequest`` protobuf, snappy-compressed in the block format. The four
messages it needs, restated from ``prometheus/prompb`` (``remote.proto``,
``types.proto``)::

    WriteRequest { repeated TimeSeries timeseries = 1; }
    TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
    Label        { string name = 1; string value = 2; }
    Sample       { double value = 1; int64 timestamp = 2; }

are encoded here by hand: a length-delimited field is its key (``field << 3 |
wire type``), a varint length and the bytes; a double is wire type 1, eight
little-endian bytes; an int64 is a varint of its 64-bit two's complement.
Samples are encoded as numpy columns, never one Python object each.

The snappy block is made of literals only: the uncompressed length as a
varint, then one literal element (a tag byte, the length minus one in one to
four little-endian bytes, the bytes). Every snappy decoder reads it; it does
not compress, which costs bandwidth but no native dependency. A store run for
the purpose of a load is usually near the machine that loads it.

VictoriaMetrics' ``/api/v1/import`` takes JSON lines, one per series:
``{"metric":{...},"values":[...],"timestamps":[...]}``. JSON carries any
Unicode label value exactly; VictoriaMetrics 1.79 reads NaN and infinities as
the bare tokens ``NaN``, ``Inf`` and ``-Inf`` (a quoted one makes it skip the
whole line), and floats written with :func:`repr` round-trip.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

__all__ = [
    "encode_labels",
    "encode_samples",
    "encode_timeseries",
    "snappy_block",
    "vm_line",
    "vm_metric",
]

_VARINT, _FIXED64, _BYTES = 0, 1, 2
# A varint of a 64-bit value takes at most 10 bytes (7 bits each).
_VARINT_MAX = 10
# A Sample message: key, 8 bytes of double, key, the timestamp's varint.
_SAMPLE_KEY = np.uint8(1 << 3 | _FIXED64)
_TIMESTAMP_KEY = np.uint8(2 << 3 | _VARINT)
_SAMPLES_FIELD = np.uint8(2 << 3 | _BYTES)


def _varint(n: int) -> bytes:
    """``n`` as a protobuf varint; negative numbers as their 64-bit two's complement."""
    n &= (1 << 64) - 1
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: key, length, bytes."""
    return _varint(number << 3 | _BYTES) + _varint(len(payload)) + payload


def encode_labels(name: str, labels: Mapping[str, str]) -> bytes:
    """The ``labels`` fields of a ``TimeSeries``: ``__name__`` and every label, sorted by name.

    The remote-write specification requires labels sorted by name (byte
    order): ``__name__`` sorts after upper-case names such as ``Hostname``.

    >>> encode_labels("up", {"job": "a"}).hex(" ")
    '0a 0e 0a 08 5f 5f 6e 61 6d 65 5f 5f 12 02 75 70 0a 08 0a 03 6a 6f 62 12 01 61'
    """
    pairs = sorted([("__name__", name), *labels.items()], key=lambda p: p[0].encode("utf-8"))
    return b"".join(
        _field(1, _field(1, key.encode("utf-8")) + _field(2, value.encode("utf-8")))
        for key, value in pairs
    )


def _varints(values: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """Each value's varint bytes (one row each, ``_VARINT_MAX`` wide) and byte count."""
    rest = values.astype(np.int64).view(np.uint64).copy()
    rows = np.zeros((rest.size, _VARINT_MAX), np.uint8)
    sizes = np.ones(rest.size, np.int64)
    for i in range(_VARINT_MAX):
        low = (rest & np.uint64(0x7F)).astype(np.uint8)
        rest >>= np.uint64(7)
        more = rest > 0
        rows[:, i] = low | (more.astype(np.uint8) << 7)
        sizes += more
        if not more.any():
            break
    return rows, sizes


def encode_samples(t_ms: npt.NDArray[np.int64], values: npt.NDArray[np.float64]) -> bytes:
    """The ``samples`` fields of a ``TimeSeries``, one per sample, in the order given.

    Parameters
    ----------
    t_ms
        Unix timestamps in int64 milliseconds.
    values
        float64 values; every bit is kept (a staleness NaN stays one).

    >>> encode_samples(np.array([1000]), np.array([1.0])).hex(" ")
    '12 0c 09 00 00 00 00 00 00 f0 3f 10 e8 07'
    """
    n = t_ms.size
    stamps, sizes = _varints(np.asarray(t_ms, np.int64))
    # Each row: field key, message length, value key, 8 value bytes, timestamp key, varint.
    width = 2 + 1 + 8 + 1 + _VARINT_MAX
    rows = np.zeros((n, width), np.uint8)
    rows[:, 0] = _SAMPLES_FIELD
    rows[:, 1] = (1 + 8 + 1 + sizes).astype(np.uint8)  # at most 20: a one-byte varint
    rows[:, 2] = _SAMPLE_KEY
    rows[:, 3:11] = np.ascontiguousarray(values, "<f8").view(np.uint8).reshape(n, 8)
    rows[:, 11] = _TIMESTAMP_KEY
    rows[:, 12:] = stamps
    keep = np.arange(width) < (12 + sizes)[:, None]
    return rows[keep].tobytes()


def encode_timeseries(labels: bytes, samples: bytes) -> bytes:
    """One ``timeseries`` field of a ``WriteRequest`` from encoded labels and samples.

    A ``WriteRequest`` is these fields one after another.
    """
    return _field(1, labels + samples)


def snappy_block(data: bytes) -> bytes:
    """``data`` as a snappy block of one literal element (valid snappy, not compressed).

    A literal's length minus one sits in the tag byte below 60; tags 60 to 63
    say it follows in 1 to 4 little-endian bytes.

    >>> snappy_block(b"abc").hex(" ")
    '03 08 61 62 63'
    """
    out = bytearray(_varint(len(data)))
    if data:
        n = len(data) - 1
        if n < 60:
            out.append(n << 2)
        else:
            size = (n.bit_length() + 7) // 8
            out.append((59 + size) << 2)
            out += n.to_bytes(size, "little")
        out += data
    return bytes(out)


def vm_metric(name: str, labels: Mapping[str, str]) -> str:
    """The ``"metric"`` object of a VictoriaMetrics import line, as JSON text."""
    return json.dumps({"__name__": name, **labels}, ensure_ascii=False, separators=(",", ":"))


def vm_line(metric: str, t_ms: npt.NDArray[np.int64], values: npt.NDArray[np.float64]) -> str:
    """One ``/api/v1/import`` line: a series' samples in the order given.

    >>> vm_line('{"__name__":"up"}', np.array([1000, 2000]), np.array([1.5, np.nan]))
    '{"metric":{"__name__":"up"},"values":[1.5,NaN],"timestamps":[1000,2000]}'
    """
    texts = [repr(v) for v in values.tolist()]
    for i in np.flatnonzero(~np.isfinite(values)).tolist():
        v = float(values[i])
        texts[i] = "NaN" if v != v else "Inf" if v > 0 else "-Inf"
    stamps = ",".join(map(str, t_ms.tolist()))
    return f'{{"metric":{metric},"values":[{",".join(texts)}],"timestamps":[{stamps}]}}'
