"""The reader's fast path: bit-identical numbers, and the regular expression's answer otherwise.

The fast path (``Parsing.SCAN_FIRST``, the default) must read every text
exactly as the regular-expression path (``Parsing.REGEX_ONLY``) does:
the same samples, or the same error. Its converters must give ``float()``'s
bits, and hand every token they cannot read exactly to the general ones.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import inference_obs.source.openmetrics.reader as reader_module
from inference_obs.errors import DatasetError
from inference_obs.samples import Series
from inference_obs.source.openmetrics.reader import OpenMetricsReader, Parsing
from inference_obs.source.openmetrics.scan import scan_block
from inference_obs.source.openmetrics.tokens import cut, decimals, floats, millis, writer_millis
from inference_obs.source.openmetrics.writer import write_openmetrics


def _right_aligned(tokens: list[bytes], before: bytes = b'x="1 2.5"} ') -> np.ndarray:
    """Each token at the end of 16 bytes, after ``before`` (text that is not the token)."""
    rows = [(before * 16 + token)[-16:] for token in tokens]
    return np.frombuffer(b"".join(rows), "<u8").reshape(len(tokens), 2).copy()


def _decimals(tokens: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.array([len(token) for token in tokens], np.int64)
    return decimals(_right_aligned(tokens), lengths)


PLAIN = [
    b"0", b"-0", b"0.0", b"-0.0", b"1", b"-7", b"0.25", b".5", b"5.", b"-.5", b"00012",
    b"0.1", b"724012.164214376", b"9007199254740992", b"900719925474099.", b"-9007199254740.9",
    b"0.00000000000001", b"1234567.", b"-0.2",
]  # fmt: skip
NOT_PLAIN = [
    b"1e5", b"1E5", b"1.5e-10", b"NaN", b"+Inf", b"-Inf", b"+1", b"+1.5", b"9007199254740993",
    b"724012.1642143768", b"0.30000000000000004", b"-9007199254740992", b"-", b".", b"-.",
    b"1..2", b"1-2", b"--1", b"0x10", b"1_0", b"nan", b"inf", b"1 2", b" 1", b"1\r",
]  # fmt: skip


def test_plain_decimals_are_float_bit_for_bit() -> None:
    values, plain = _decimals(PLAIN)
    assert plain.all()
    for token, value in zip(PLAIN, values, strict=True):
        assert value.tobytes() == np.float64(float(token)).tobytes(), token


def test_everything_else_is_left_to_the_general_converter() -> None:
    _, plain = _decimals(NOT_PLAIN)
    assert not plain.any()


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(
    st.lists(
        st.one_of(
            st.floats(allow_nan=False, allow_infinity=False).map(lambda x: repr(x).encode()),
            st.from_regex(rb"\A-?[0-9]{0,10}\.?[0-9]{0,10}\Z"),
            st.from_regex(rb"\A[0-9.eE+-]{1,16}\Z"),
        ),
        min_size=1,
        max_size=50,
    )
)
@example([b"0.1", b"-0.0", b"9007199254740992", b"9007199254740993", b"1e308"])
def test_decimals_match_numpy_and_float_or_decline(tokens: list[bytes]) -> None:
    values, plain = _decimals(tokens)
    for token, value, ok in zip(tokens, values, plain, strict=True):
        if ok:
            assert value.tobytes() == np.float64(float(token)).tobytes(), token
            assert value.tobytes() == np.array([token]).astype(np.float64)[0].tobytes()


def test_writer_timestamps_are_what_millis_reads() -> None:
    tokens = [b"1772409606.8505", b"1772409606", b"0000000000.0005", b"9999999999.9995"]
    tokens += [b"1772409606.850", b"1772409606.8504", b"177240960.68505", b"1e9", b"17724096060"]
    rows = _right_aligned(tokens, before=b"m 1 ")
    got, lengths = writer_millis(rows)
    taken = lengths > 0
    assert taken.tolist() == [True] * 4 + [False] * 5
    buf = np.frombuffer(b" ".join(tokens), np.uint8)
    starts = np.cumsum([0] + [len(t) + 1 for t in tokens[:-1]])
    sizes = np.array([len(t) for t in tokens[:4]])

    def fail(row: int, problem: str) -> DatasetError:
        return DatasetError(problem)

    assert got[taken].tolist() == millis(buf, starts[:4], sizes, fail).tolist()


def test_floats_still_refuses_what_decimals_declines() -> None:
    tokens = [b"0x10", b"1_0", b"1..2"]
    lengths = np.array([len(t) for t in tokens], np.int64)
    buf = np.frombuffer(b"".join(tokens), np.uint8)
    chars = cut(buf, np.cumsum([0, 4, 3]), lengths)

    def fail(row: int, problem: str) -> DatasetError:
        return DatasetError(f"{row}: {problem}")

    with pytest.raises(DatasetError, match=r"^0: bad value '0x10'"):
        floats(chars, lengths, "value", fail, specials=True)


def _outcome(data: bytes, parsing: Parsing, block_bytes: int = 1 << 20) -> object:
    reader = OpenMetricsReader("s.om", block_bytes=block_bytes, parsing=parsing)
    try:
        reader.feed(data)
        got = reader.finish()
    except DatasetError as exc:
        return str(exc)
    return (
        got.names,
        got.labels,
        got.offsets.tobytes(),
        got.t_ms.tobytes(),
        got.values.tobytes(),
    )


def _same_both_ways(data: bytes, block_bytes: int = 1 << 20) -> object:
    fast = _outcome(data, Parsing.SCAN_FIRST, block_bytes)
    assert fast == _outcome(data, Parsing.REGEX_ONLY, block_bytes)
    return fast


def _written(series: list[Series]) -> bytes:
    out = io.StringIO()
    write_openmetrics(series, out)
    return out.getvalue().encode("utf-8")


def test_writer_output_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    scans: list[object] = []
    real = scan_block

    def counted(*args: object) -> object:
        scans.append(result := real(*args))  # type: ignore[arg-type]
        return result

    monkeypatch.setattr(reader_module, "scan_block", counted)
    series = [
        Series("gpu_util", {"gpu": "0", "pod": "a b"}, [1.0, 16.25, 31.5], [0.5, -0.0, 1e300]),
        Series("req_total", {}, [1.0, 2.0], [np.nan, np.inf]),
        Series("x", {"v": 'a"b\\c\nd} 1 2'}, [1.0, 2.0], [724012.1642143768, 5e-324]),
    ]
    got = _same_both_ways(_written(series))
    assert not isinstance(got, str)
    assert scans
    assert all(scan is not None for scan in scans)
    scans.clear()
    assert _outcome(_written(series), Parsing.REGEX_ONLY) == got
    assert not scans  # the reference path never scans


@pytest.mark.parametrize(
    "text",
    [
        b'm{a="1"} 1 1\nm{a="1"} 0x10 2\n# EOF\n',
        b"m 1 1\nm 1_0 2\n# EOF\n",
        b"m 1 1\nm +1.5 2\nm -0.0 3\nm 1e5 4\nm NaN 5\nm +Inf 6\nm -Inf 7\n# EOF\n",
        b"m 0.12345678901234567 1\nm 9007199254740993 2\nm 1e999 3\n# EOF\n",
        b"m 1 1772409606.8505\nm 2 1772409606.85\nm 3 1772409607\nm 4 1.0012\n# EOF\n",
        b"m 1 1\nm  2 2\n# EOF\n",
        b"m 1 1\nm 2\n# EOF\n",
        b"m 1 1\nm 2 2 # {} 1\n# EOF\n",
        b"m 1 2\nm 2 1\n# EOF\n",
        b'm{a="x 1 2"} 1 1\nm{a="x 1 2"} 2\n# EOF\n',
        b'm{a="1"} 1 1\nm{a="2"} 1 1\nm{a="1"} 2 2\n# EOF\n',
        b"m 1 1\n# EOF\nm 2 2\n# EOF\n",
        b"# TYPE m gauge\nm 1 1\n# HELP m x\n# EOF\n",
        b"m 1 1\n\nm 2 2\n# EOF\n",
        b"m 1 1\r\n# EOF\n",
        b'm{a="\xff"} 1 1\n# EOF\n',
        b"a 1 1\nb 1 1\nc 1 1\nd 1 1\ne 1 1\n# EOF\n",  # several lines to a word
        b'm{a="' + b"v" * 2000 + b'"} 1 1\n# EOF\n',  # series text too long to compare
        b"m 1 " + b"1" * 40 + b"\n# EOF\n",
    ],
)
def test_fast_and_regular_expression_read_alike(text: bytes) -> None:
    _same_both_ways(text)
    _same_both_ways(text, block_bytes=16)


_KEYS = st.sampled_from([b"m", b'm{a="1"}', b'm{a="1 2.5"}', b'm{b="x\\"y"}', b"n", b'n{c="9"}'])
_VALUES = st.one_of(
    st.floats().map(lambda x: b"NaN" if x != x else repr(x).encode()),
    st.sampled_from([b"-0.0", b".5", b"+1", b"1e5", b"0x10", b"", b"NaN", b"-Inf", b"1 2"]),
)
_STAMPS = st.one_of(
    st.integers(0, 10**13).map(lambda ms: b"%d.%03d5" % divmod(ms, 1000)),
    st.integers(0, 10**10).map(lambda s: b"%d" % s),
    st.sampled_from([b"1.5", b"1.001", b"-1", b"", b"1e3", b"x"]),
)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    st.lists(st.tuples(_KEYS, _VALUES, _STAMPS), max_size=30), st.sampled_from([16, 64, 1 << 20])
)
def test_any_text_reads_alike(lines: list[tuple[bytes, bytes, bytes]], block_bytes: int) -> None:
    text = b"".join(b"%s %s %s\n" % line for line in lines) + b"# EOF\n"
    _same_both_ways(text, block_bytes)
