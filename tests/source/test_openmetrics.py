"""The OpenMetrics writer: exact text, escaping, timestamps promtool reads right, validation."""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping

import numpy as np
import pytest
from hypothesis import given, strategies as st

from inference_obs.errors import DatasetError
from inference_obs.samples import Labels, Series
from inference_obs.source.openmetrics.writer import write_openmetrics


def _text(series: Iterable[Series], types: Mapping[str, str] | None = None) -> str:
    out = io.StringIO()
    write_openmetrics(series, out, types=types)
    return out.getvalue()


def _promtool_millis(text: str) -> int:
    # promtool (Prometheus 2.42 openmetricsparse) does int64(ParseFloat(text) * 1000):
    # Python's float() rounds like Go's ParseFloat and int() truncates like int64().
    return int(float(text) * 1000)


def test_small_case_exact_text() -> None:
    series = [
        Series("req_total", {"pod": "b", "model": "m"}, [0.0, 15.0], [1.0, 2.5]),
        Series("gpu_util", {}, [1.25], [0.1]),
        Series("req_created", {"pod": "b", "model": "m"}, [0.0], [0.0]),
        Series("odd", {"k": "v"}, [1.0, 2.0, 3.0, 4.0], [np.nan, np.inf, -np.inf, 1e300]),
    ]
    assert _text(series, types={"req": "counter", "gpu_util": "gauge"}) == (
        "# TYPE req counter\n"
        'req_total{model="m",pod="b"} 1.0 0\n'
        'req_total{model="m",pod="b"} 2.5 15\n'
        # Same family as req_total, so written next to it although given later.
        'req_created{model="m",pod="b"} 0.0 0\n'
        "# TYPE gpu_util gauge\n"
        "gpu_util 0.1 1.2505\n"
        'odd{k="v"} NaN 1\n'
        'odd{k="v"} +Inf 2\n'
        'odd{k="v"} -Inf 3\n'
        'odd{k="v"} 1e+300 4\n'
        "# EOF\n"
    )


def test_without_types_no_type_lines() -> None:
    text = _text([Series("a", {}, [1.0], [-0.0]), Series("b", {}, [2.0], [5e-324])])
    assert text == "a -0.0 1\nb 5e-324 2\n# EOF\n"


def test_empty_input_is_just_eof() -> None:
    assert _text([]) == "# EOF\n"


def test_label_values_escape_backslash_quote_newline_only() -> None:
    value = 'a"b\\c\nd}{,=é😀\r\t\x00'
    text = _text([Series("m", {"v": value}, [1.0], [1.0])])
    assert text == 'm{v="a\\"b\\\\c\\nd}{,=é😀\r\t\x00"} 1.0 1\n# EOF\n'


@pytest.mark.parametrize(
    ("seconds", "written"),
    [
        (1.001, "1.0015"),  # a plain "1.001" would truncate to 1000 ms
        (1.0, "1"),
        (0.0, "0"),
        (0.001, "0.0015"),
        (0.999, "0.9995"),
        (1.003, "1.0035"),  # 1.003 * 1000 == 1002.9999999999999 in float64
        (1_700_000_000.123, "1700000000.1235"),
        (1_700_000_000.0004, "1700000000"),  # rounded to the nearest millisecond
        (-0.001, "-0.0015"),
        (-1.0, "-1"),
        (-1.001, "-1.0015"),
    ],
)
def test_timestamp_text(seconds: float, written: str) -> None:
    text = _text([Series("m", {}, [seconds], [1.0])])
    assert text == f"m 1.0 {written}\n# EOF\n"
    assert _promtool_millis(written) == round(seconds * 1000)


@given(st.integers(min_value=-(10**14), max_value=10**14))
def test_timestamp_survives_promtool_truncation(millis: int) -> None:
    line = _text([Series("m", {}, [millis / 1000], [1.0])]).splitlines()[0]
    assert _promtool_millis(line.rsplit(" ", 1)[1]) == millis


def test_repr_values_parse_back_exactly() -> None:
    values = np.array([0.1, 1 / 3, 2.0**-1074, 1.7976931348623157e308, -123.456e-7])
    lines = _text([Series("m", {}, np.arange(values.size, dtype=float), values)])
    parsed = [float(line.split(" ")[1]) for line in lines.splitlines()[:-1]]
    assert parsed == values.tolist()


def test_raw_series_stores_sorted_hashable_labels_and_read_only_arrays() -> None:
    times = np.array([1.0, 2.0])
    s = Series("m", {"b": "2", "a": "1"}, times, [3, 4])
    assert list(s.labels.items()) == [("a", "1"), ("b", "2")]
    assert s.labels == Labels([("b", "2"), ("a", "1")])
    assert hash(s.labels) == hash(Labels({"a": "1", "b": "2"}))
    assert s.values.dtype == np.float64
    assert not s.timestamps.flags.writeable
    times[0] = -5.0  # the series holds its own copy
    assert s.timestamps[0] == 1.0


@pytest.mark.parametrize(
    ("name", "labels", "timestamps", "values", "message"),
    [
        ("1bad", {}, [1.0], [1.0], "invalid metric name"),
        ("a-b", {}, [1.0], [1.0], "invalid metric name"),
        ("m", {"0x": "v"}, [1.0], [1.0], "invalid label name"),
        ("m", {"a:b": "v"}, [1.0], [1.0], "invalid label name"),
        ("m", {"__name__": "x"}, [1.0], [1.0], "not a label"),
        ("m", {"k": ""}, [1.0], [1.0], "non-empty"),
        ("m", {"k": "\ud800"}, [1.0], [1.0], "UTF-8"),
        ("m", {"k": "v"}, [1.0, 2.0], [1.0], "2 timestamps but 1 values"),
        ("m", {"k": "v"}, [2.0, 1.0], [1.0, 1.0], "strictly increasing"),
        ("m", {"k": "v"}, [1.0, 1.0], [1.0, 1.0], "strictly increasing"),
        ("m", {"k": "v"}, [np.nan], [1.0], "finite"),
        ("m", {"k": "v"}, [np.inf], [1.0], "finite"),
        ("m", {"k": "v"}, [[1.0]], [[1.0]], "one-dimensional"),
        ("m", {"k": "v"}, ["x"], [1.0], "float64"),
    ],
)
def test_raw_series_rejects_bad_input(
    name: str, labels: dict[str, str], timestamps: object, values: object, message: str
) -> None:
    with pytest.raises(DatasetError, match=message) as info:
        Series(name, labels, timestamps, values)  # type: ignore[arg-type]
    assert repr(name) in str(info.value) or f"series {name}{{" in str(info.value)


def test_writer_rejects_repeated_series() -> None:
    one = Series("m", {"k": "v"}, [1.0], [1.0])
    again = Series("m", {"k": "v"}, [2.0], [1.0])
    with pytest.raises(DatasetError, match=r"series m\{k='v'\} is given twice"):
        _text([one, again])


def test_series_rejects_timestamps_in_one_millisecond() -> None:
    with pytest.raises(DatasetError, match=r"m\{k='v'\}.*at least 1 ms apart"):
        Series("m", {"k": "v"}, [1.0001, 1.0002], [1.0, 2.0])


def test_series_rejects_timestamps_beyond_float_precision() -> None:
    with pytest.raises(DatasetError, match="timestamps beyond"):
        Series("m", {}, [2e11], [1.0])


@pytest.mark.parametrize(
    ("types", "message"), [({"m": "counters"}, "unknown type"), ({"1m": "gauge"}, "not a valid")]
)
def test_writer_rejects_bad_types(types: dict[str, str], message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        _text([Series("m", {}, [1.0], [1.0])], types=types)


def test_writer_writes_nothing_when_a_later_series_is_bad() -> None:
    good = Series("good", {}, [1.0], [1.0])
    out = io.StringIO()
    with pytest.raises(DatasetError, match="given twice"):
        write_openmetrics([good, good], out)
    assert out.getvalue() == ""
