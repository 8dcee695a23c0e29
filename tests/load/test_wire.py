"""The remote-write body and VictoriaMetrics lines, against hand-worked bytes and a decoder."""

from __future__ import annotations

import json
import struct

import numpy as np

from inference_obs.load import wire
from inference_obs.samples import STALE_NAN
from tests.integration.servers import encode_write_request

# --- an independent reader of what the encoder writes -----------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """Protobuf fields as (number, value): varints as ints, fixed64 and strings as bytes."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif kind == 1:
            out.append((number, data[pos : pos + 8]))
            pos += 8
        else:
            assert kind == 2, kind
            size, pos = _varint(data, pos)
            out.append((number, data[pos : pos + size]))
            pos += size
    return out


def _unsnappy(block: bytes) -> bytes:
    """Snappy's block format, literals and copies (google/snappy format_description.txt)."""
    size, pos = _varint(block, 0)
    out = bytearray()
    while pos < len(block):
        tag = block[pos]
        pos += 1
        if tag & 3 == 0:
            n = tag >> 2
            if n >= 60:
                width = n - 59
                n = int.from_bytes(block[pos : pos + width], "little")
                pos += width
            out += block[pos : pos + n + 1]
            pos += n + 1
            continue
        if tag & 3 == 1:
            length, offset = 4 + (tag >> 2 & 7), (tag >> 5) << 8 | block[pos]
            pos += 1
        else:
            width = 2 if tag & 3 == 2 else 4
            length, offset = (tag >> 2) + 1, int.from_bytes(block[pos : pos + width], "little")
            pos += width
        for _ in range(length):
            out.append(out[-offset])
    assert len(out) == size
    return bytes(out)


def _decode(body: bytes) -> list[tuple[dict[str, str], list[tuple[int, bytes]]]]:
    """A WriteRequest as [(labels, [(t_ms, value's 8 bytes), ...]), ...]."""
    series = []
    for number, ts in _fields(_unsnappy(body)):
        assert number == 1
        assert isinstance(ts, bytes)
        labels: dict[str, str] = {}
        samples: list[tuple[int, bytes]] = []
        for field, payload in _fields(ts):
            assert isinstance(payload, bytes)
            parts = dict(_fields(payload))
            if field == 1:
                assert isinstance(parts[1], bytes)
                assert isinstance(parts[2], bytes)
                labels[parts[1].decode()] = parts[2].decode()
            else:
                t = parts[2]
                assert isinstance(t, int)
                value = parts[1]
                assert isinstance(value, bytes)
                samples.append((t - (1 << 64) if t >= 1 << 63 else t, value))
        assert list(labels) == sorted(labels, key=str.encode)  # the specification's order
        series.append((labels, samples))
    return series


# --- hand-worked bytes ---------------------------------------------------------


def test_one_series_one_sample_is_the_hand_worked_write_request() -> None:
    # up{job="a"} 1.0 at 1000 ms:
    #   label __name__="up": 0a 08 "__name__" 12 02 "up"        (14 bytes) -> 0a 0e ...
    #   label job="a":        0a 03 "job" 12 01 "a"             (8 bytes)  -> 0a 08 ...
    #   sample: 09 <1.0 little-endian: 00 00 00 00 00 00 f0 3f> 10 <1000: e8 07> (12) -> 12 0c ...
    #   TimeSeries: 16 + 10 + 14 = 40 bytes -> 0a 28 ...
    # snappy: the length 42 as a varint (2a), one literal of 42 bytes: tag (42 - 1) << 2 = a4.
    expected = bytes.fromhex(
        "2a a4"
        "0a 28"
        "0a 0e 0a 08 5f5f6e616d655f5f 12 02 7570"
        "0a 08 0a 03 6a6f62 12 01 61"
        "12 0c 09 000000000000f03f 10 e807"
    )
    labels = wire.encode_labels("up", {"job": "a"})
    samples = wire.encode_samples(np.array([1000]), np.array([1.0]))
    assert wire.snappy_block(wire.encode_timeseries(labels, samples)) == expected


def test_labels_are_sorted_by_bytes_so_upper_case_names_precede_the_metric_name() -> None:
    # "Hostname" (0x48...) < "__name__" (0x5f...) < "gpu" (0x67...).
    encoded = wire.encode_labels("m", {"gpu": "0", "Hostname": "h"})
    names = [dict(_fields(p))[1] for _, p in _fields(encoded) if isinstance(p, bytes)]
    assert names == [b"Hostname", b"__name__", b"gpu"]


def test_a_negative_timestamp_is_a_ten_byte_varint() -> None:
    # int64 -1 is 2**64 - 1 on the wire: nine ff bytes, then 01; the message is 1+8+1+10 = 20.
    encoded = wire.encode_samples(np.array([-1]), np.array([0.0]))
    assert encoded == bytes.fromhex("12 14 09 0000000000000000 10 ffffffffffffffffff01")


def test_snappy_literal_lengths_past_60_take_extra_bytes() -> None:
    # 60 bytes: length-1 = 59 fits the tag (59 << 2 = ec); 61 bytes: tag 60 << 2 = f0, then 60.
    assert wire.snappy_block(b"x" * 60)[:2] == bytes([60, 0xEC])
    assert wire.snappy_block(b"x" * 61)[:3] == bytes([61, 0xF0, 60])
    # 70,000 bytes: length-1 = 69,999 = 0x01116f in three bytes: tag 62 << 2 = f8.
    assert wire.snappy_block(b"x" * 70_000)[3:7] == bytes([0xF8, 0x6F, 0x11, 0x01])
    assert wire.snappy_block(b"") == b"\x00"


# --- round trips ---------------------------------------------------------------


def test_a_write_request_decodes_to_the_samples_encoded_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    specials = np.array([np.nan, STALE_NAN, np.inf, -np.inf, -0.0, 5e-324, 1e308])
    series = []
    for i in range(5):
        n = int(rng.integers(1, 300))
        t = np.cumsum(rng.integers(1, 10**6, n)) + int(rng.integers(-(10**12), 2 * 10**12))
        v = rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, n)
        v[: min(n, specials.size)] = specials[: min(n, specials.size)]
        series.append(({"i": str(i), "é": "中😀", "q": 'a"b\\c\n'}, t.astype(np.int64), v))
    body = wire.snappy_block(
        b"".join(
            wire.encode_timeseries(wire.encode_labels("m", labels), wire.encode_samples(t, v))
            for labels, t, v in series
        )
    )
    decoded = _decode(body)
    assert len(decoded) == len(series)
    for (labels, t, v), (got_labels, got) in zip(series, decoded, strict=True):
        assert got_labels == {"__name__": "m", **labels}
        assert [s[0] for s in got] == t.tolist()
        assert b"".join(s[1] for s in got) == v.astype("<f8").tobytes()  # NaN payloads kept


def test_the_protobuf_equals_the_test_servers_own_encoder() -> None:
    # tests/integration/servers.py encodes remote write field by field, in plain Python.
    labels = {"pod": "p-1", "Hostname": "h"}
    t = np.array([1_792_403_200_000, 1_792_403_260_001])
    v = np.array([0.1 + 0.2, -3.5])
    mine = wire.encode_timeseries(wire.encode_labels("x_total", labels), wire.encode_samples(t, v))
    theirs = encode_write_request(
        [({"__name__": "x_total", **labels}, list(zip(t.tolist(), v.tolist(), strict=True)))]
    )
    assert mine == theirs


def test_a_vm_line_is_json_but_for_the_bare_special_values() -> None:
    metric = wire.vm_metric("m", {"l": 'é"\n'})
    line = wire.vm_line(
        metric, np.array([1, 2, 3, 4]), np.array([0.1 + 0.2, np.nan, np.inf, -np.inf])
    )
    assert line.endswith('"values":[0.30000000000000004,NaN,Inf,-Inf],"timestamps":[1,2,3,4]}')
    parsed = json.loads(line.replace("NaN", "null").replace("-Inf", "null").replace("Inf", "null"))
    assert parsed["metric"] == {"__name__": "m", "l": 'é"\n'}
    assert struct.pack("<d", parsed["values"][0]) == struct.pack("<d", 0.1 + 0.2)
