"""The OpenMetrics reader: exact values back, OpenMetrics rules, and every error's line."""

from __future__ import annotations

import io
from collections.abc import Iterable

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from inference_obs.errors import DatasetError
from inference_obs.samples import SampleSet, Series
from inference_obs.source.openmetrics.reader import read_openmetrics
from inference_obs.source.openmetrics.writer import write_openmetrics
from tests.properties.strategies import label_values


def _read(text: str) -> SampleSet:
    return read_openmetrics(text.encode("utf-8"), source="s.om")


def _written(series: Iterable[Series], types: dict[str, str] | None = None) -> str:
    out = io.StringIO()
    write_openmetrics(series, out, types=types)
    return out.getvalue()


def _assert_same(got: SampleSet, want: list[Series]) -> None:
    assert len(got) == len(want)
    for back, one in zip(got, want, strict=True):
        assert (back.name, back.labels) == (one.name, one.labels)
        assert np.array_equal(back.t_ms, one.t_ms)
        # Bit for bit: -0.0 stays -0.0; NaN compares by position.
        assert np.array_equal(np.isnan(back.values), np.isnan(one.values))
        finite = ~np.isnan(one.values)
        assert back.values[finite].tobytes() == one.values[finite].tobytes()


def test_writer_output_reads_back_exactly() -> None:
    series = [
        Series("req_total", {"pod": "b", "model": "m"}, [0.0, 15.0, 30.001], [1.0, 2.5, 0.1]),
        Series("gpu_util", {}, [-1.001, 1.25], [-0.0, 5e-324]),
        Series("odd", {"k": "v"}, [1.0, 2.0, 3.0, 4.0], [np.nan, np.inf, -np.inf, 1e300]),
        Series("big", {"a": "1"}, [1_700_000_000.123, 99_999_999_999.999], [1 / 3, -1.5e-308]),
    ]
    _assert_same(_read(_written(series)), series)


def test_typed_families_and_metadata_are_accepted() -> None:
    series = [
        Series("req_total", {"pod": "b"}, [1.0], [1.0]),
        Series("req_created", {"pod": "b"}, [1.0], [0.0]),
        Series("lat_seconds_bucket", {"le": "+Inf"}, [1.0], [3.0]),
        Series("lat_seconds_count", {}, [1.0], [3.0]),
    ]
    text = _written(series, types={"req": "counter", "lat_seconds": "histogram"})
    text = text.replace(
        "# TYPE lat_seconds histogram\n",
        "# TYPE lat_seconds histogram\n# UNIT lat_seconds seconds\n# HELP lat_seconds a \\\\ \\n\n",
    )
    _assert_same(_read(text), series)


def test_series_of_one_family_may_interleave_in_time() -> None:
    # OpenMetrics writes a histogram's points timestamp by timestamp, so its
    # series alternate; each series must still move forward in time.
    text = (
        "# TYPE h histogram\n"
        'h_bucket{le="1"} 1 10\nh_bucket{le="+Inf"} 2 10\nh_count 2 10\n'
        'h_bucket{le="1"} 3 20\nh_bucket{le="+Inf"} 5 20\nh_count 5 20\n'
        "# EOF"  # the final newline is optional
    )
    got = _read(text)
    assert [dict(labels) for labels in got.labels] == [{"le": "1"}, {"le": "+Inf"}, {}]
    assert got.t_ms.tolist() == [10_000, 20_000] * 3
    assert got.values.tolist() == [1, 3, 2, 5, 2, 5]
    assert got.offsets.tolist() == [0, 2, 4, 6]


def test_label_order_does_not_make_a_new_series() -> None:
    got = _read('m{a="1",b="2"} 1 1\nm{b="2",a="1"} 2 2\n# EOF\n')
    assert len(got) == 1
    assert got.values.tolist() == [1.0, 2.0]


def test_awkward_label_values_and_empty_text() -> None:
    value = 'a"b\\c\nd}{,= é😀\r\t\x00'
    series = [Series("m", {"v": value}, [1.0], [1.0])]
    _assert_same(_read(_written(series)), series)
    assert len(_read("# EOF\n")) == 0


@settings(max_examples=50, deadline=None, derandomize=True, database=None)
@given(st.lists(label_values, min_size=1, max_size=8, unique=True))
def test_any_label_value_round_trips(values: list[str]) -> None:
    series = [Series("m", {"v": v}, [1.0, 2.0], [float(i), 0.5]) for i, v in enumerate(values)]
    series.sort(key=lambda s: s.labels["v"])
    got = _read(_written(series))
    assert sorted(got.labels, key=lambda labels: labels["v"]) == [s.labels for s in series]


@given(st.integers(min_value=-(10**14), max_value=10**14))
def test_every_millisecond_reads_back(millis: int) -> None:
    got = _read(_written([Series("m", {}, [millis / 1000], [1.0])]))
    assert got.t_ms.tolist() == [millis]


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ('m{a="1"} 1 1\nm{a="1"} 2 2\n', 2, "ends without a '# EOF' line"),
        ('m{a="1"} 1 1\nm{a="1"} 2 2', 2, "ends without a '# EOF' line"),
        ("", 1, "ends without a '# EOF' line"),
        ("m 1 1\n# EOF\nm 2 2\n# EOF\n", 2, "text after '# EOF'"),
        ("m 1 1\n# EOF\n# EOF\n", 2, "text after '# EOF'"),
        ('m 1 1\nm{a="x\\ty"} 1 1\n# EOF\n', 2, r"bad escape \\t in the value of label a"),
        ('m{a="x\\\\",b="\\u00e9"} 1 1\n# EOF\n', 1, r"bad escape \\u in the value of label b"),
        ("m 1 1\nm 2 1\n# EOF\n", 2, "timestamp 1000 ms is not after the previous .* 1000 ms"),
        ("m 1 2\nn 1 1\nm 2 1\n# EOF\n", 3, "lines of metric family m resume"),
        ("m 1 1\nm 2 0.5\n# EOF\n", 2, r"series m\{\}: timestamp 500 ms is not after .*\(line 1\)"),
        ('m{a="1"} 1 1\nm{a="1"} 2\n# EOF\n', 2, "no timestamp"),
        ("m 1 1\nm 2 2 # {} 1\n# EOF\n", 2, "exemplars are not supported"),
        ("m 1 1\nm 1x 2\n# EOF\n", 2, "bad value '1x'"),
        ("m 1 1\nm 0x10 2\n# EOF\n", 2, "bad value '0x10'"),
        ("m nan 1\n# EOF\n", 1, "bad value 'nan'"),
        ("m 1e999 1\n# EOF\n", 1, "bad value '1e999'"),
        ("m 1 1_0\n# EOF\n", 1, "bad timestamp '1_0'"),
        ("m 1 NaN\n# EOF\n", 1, "bad timestamp 'NaN'"),
        ("m 1 1\r\n# EOF\n", 1, r"bad timestamp '1\\r'"),
        ("m 1 1.001\n# EOF\n", 1, "not a whole millisecond as promtool reads it"),
        ("m 1 1.0012\n# EOF\n", 1, "not a whole millisecond"),
        ("m 1 1e12\n# EOF\n", 1, "beyond"),
        ("m  1 1\n# EOF\n", 1, "expected 'value timestamp'"),
        ("m 1 1\n\nm 2 2\n# EOF\n", 2, "empty line"),
        ("m 1 1\n1m 1 1\n# EOF\n", 2, "invalid metric name"),
        ('m{a="1"}1 1\n# EOF\n', 1, "expected a space after the series"),
        ('m{a="1" 1 1\n# EOF\n', 1, 'expected label="value"'),
        ('m{a="1",} 1 1\n# EOF\n', 1, "trailing comma"),
        ('m{a="1",a="2"} 1 1\n# EOF\n', 1, "label a appears twice"),
        ('m{__name__="x"} 1 1\n# EOF\n', 1, "__name__ is not allowed"),
        ("# a comment\n# EOF\n", 1, "allows only # TYPE, # HELP, # UNIT and # EOF"),
        ("# TYPE m gauge\n# TYPE m gauge\n# EOF\n", 2, "# TYPE for m twice"),
        ("m 1 1\n# TYPE m gauge\n# EOF\n", 2, "# TYPE for m after its samples"),
        ("# TYPE m nonsense\n# EOF\n", 1, "unknown metric type 'nonsense'"),
        ("# UNIT m seconds\n# EOF\n", 1, "unit 'seconds' is not a suffix of m"),
        ("# HELP m a\\tb\n# EOF\n", 1, r"bad escape \\t"),
        ("# TYPE c counter\nc_total 1 1\nx 1 1\nc_total 2 2\n# EOF\n", 4, "family c resume"),
    ],
)
def test_malformed_text_names_file_line_and_problem(text: str, line: int, problem: str) -> None:
    with pytest.raises(DatasetError, match=rf"^s\.om:{line}: .*{problem}"):
        _read(text)


def test_empty_label_values_are_dropped_as_prometheus_drops_them() -> None:
    # dcgm-exporter 4.x writes pod_uid="", older ones container="",namespace="",pod="".
    text = (
        'm{gpu="0",pod_uid=""} 1 1\n'
        'm{container="",gpu="1",namespace="",pod=""} 2 1\n'
        'm{gpu="0"} 3 2\n'
        "# EOF\n"
    )
    got = _read(text)
    assert [dict(labels) for labels in got.labels] == [{"gpu": "0"}, {"gpu": "1"}]
    # m{gpu="0",pod_uid=""} and m{gpu="0"} are one series, in time order.
    assert got.t_ms.tolist() == [1000, 2000, 1000]
    assert got.values.tolist() == [1.0, 3.0, 2.0]


def test_a_label_given_empty_and_again_is_still_repeated() -> None:
    with pytest.raises(DatasetError, match=r"^s\.om:1: .*label a appears twice"):
        _read('m{a="",a="x"} 1 1\n# EOF\n')


def test_untyped_is_read_as_unknown() -> None:
    got = _read("# TYPE m untyped\n# HELP m a\nm 1 1\nm_total 2 1\n# EOF\n")
    # An unknown family owns no suffixes: m_total is a family of its own.
    assert sorted(got.names) == ["m", "m_total"]


def test_invalid_utf8_is_refused_with_its_line() -> None:
    with pytest.raises(DatasetError, match=r"^s\.om:2: the line is not valid UTF-8"):
        read_openmetrics(b'm 1 1\nm{a="\xff"} 1 1\n# EOF\n', source="s.om")


@pytest.mark.parametrize("kind", ["counter", "gauge", "histogram", "summary", "info", "unknown"])
def test_typed_writer_output_is_never_taken_for_interleaving(kind: str) -> None:
    # The writer groups a typed family's series exactly as the reader does, so
    # suffixed names given first, or names the type does not own, read fine.
    names = ["f_total", "f_bucket", "f", "f_count", "f_info", "f_created", "f_sum"]
    series = [Series(name, {}, [1.0], [1.0]) for name in names]
    got = _read(_written(series, types={"f": kind}))
    assert sorted(got.names) == sorted(names)
