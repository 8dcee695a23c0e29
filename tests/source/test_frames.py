"""API JSON -> arrays and frames: special values, empty answers, raw trimming, frame shapes."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest

from inference_obs.errors import MalformedAnswer, SourceError
from inference_obs.samples import Labels, Matrix
from inference_obs.source.frames import (
    parse_matrix,
    parse_matrix_body,
    parse_raw,
    parse_vector,
    to_frame,
    to_wide_frame,
)

RESULT = [
    {"metric": {"__name__": "x", "job": "a"}, "values": [[1.5, "1"], [2, "NaN"], [3, "+Inf"]]},
    {"metric": {"__name__": "x", "gpu": "0"}, "values": [[2.001, "-Inf"], [3, "2.5e3"]]},
]


def test_parse_matrix_reads_special_values_and_milliseconds() -> None:
    m = parse_matrix(RESULT, "x")
    assert m.offsets.tolist() == [0, 3, 5]
    assert m.t_ms.tolist() == [1500, 2000, 3000, 2001, 3000]
    assert np.array_equal(m.values, [1, np.nan, np.inf, -np.inf, 2500], equal_nan=True)
    assert m.labels[1] == Labels({"__name__": "x", "gpu": "0"})
    assert m.values.dtype == np.float64
    assert m.t_ms.dtype == np.int64


def test_empty_results() -> None:
    assert len(parse_matrix([])) == 0
    assert parse_matrix([]).offsets.tolist() == [0]
    assert len(parse_vector([])) == 0
    assert to_frame(parse_matrix([])).shape[0] == 0
    assert to_wide_frame(parse_matrix([])).shape == (0, 0)


def test_parse_vector() -> None:
    v = parse_vector(
        [{"metric": {"a": "b"}, "value": [1, "NaN"]}, {"metric": {}, "value": [1, "3"]}]
    )
    assert np.array_equal(v.values, [np.nan, 3.0], equal_nan=True)


def test_parse_raw_trims_before_start_and_moves_name_out() -> None:
    s = parse_raw(RESULT, start_ms=2001)
    assert s.names == ("x", "x")
    assert s.labels == (Labels({"job": "a"}), Labels({"gpu": "0"}))
    assert s.offsets.tolist() == [0, 1, 3]
    assert s.t_ms.tolist() == [3000, 2001, 3000]
    assert not s.values.flags.writeable


def test_parse_raw_drops_a_series_left_empty() -> None:
    s = parse_raw(RESULT, start_ms=2500)
    assert s.offsets.tolist() == [0, 1, 2]


def test_long_frame() -> None:
    frame = to_frame(parse_matrix(RESULT))
    assert list(frame.columns) == ["timestamp", "value", "__name__", "gpu", "job"]
    assert (
        str(frame["timestamp"].dtype) == "datetime64[ns, UTC]"
        or frame["timestamp"].dt.tz is not None
    )
    assert frame["value"].dtype == np.float64
    assert isinstance(frame["job"].dtype, pd.CategoricalDtype)
    assert frame["job"].tolist()[:3] == ["a"] * 3
    assert pd.isna(frame["job"].iloc[3])
    assert frame["timestamp"].iloc[0] == pd.Timestamp(1500, unit="ms", tz="UTC")


def test_long_frame_times_are_pandas_own_conversion_of_the_milliseconds() -> None:
    # The frame's times are built by a view and a cast; pandas's own conversion of
    # the same milliseconds is the reference, dtype (unit and zone) included, from
    # before 1970 to past 2262 (where nanoseconds would no longer hold them).
    t_ms = [-86_400_000, 0, 1_500, 1_700_000_000_001, 9_000_000_000_000_000]
    result = [{"metric": {"job": "a"}, "values": [[t / 1000, "1"] for t in t_ms]}]
    frame = to_frame(parse_matrix(result))
    expected = pd.Series(pd.to_datetime(np.array(t_ms), unit="ms", utc=True), name="timestamp")
    pd.testing.assert_series_equal(frame["timestamp"], expected)


def test_a_label_set_s_items_are_in_name_order() -> None:
    labels = Labels({"pod": "b", "gpu": "0", "job": "a"})
    assert list(labels.items()) == [("gpu", "0"), ("job", "a"), ("pod", "b")]
    assert labels.items() == {("job", "a"), ("pod", "b"), ("gpu", "0")}


def test_wide_frame() -> None:
    frame = to_wide_frame(parse_matrix(RESULT))
    assert frame.shape == (4, 2)
    assert frame.index.name == "timestamp"
    assert frame.iloc[:, 1].dropna().tolist() == [-np.inf, 2500.0]


# --- parse_matrix_body: the byte-level path must equal the json.loads path exactly ---

AWKWARD = [
    {
        "metric": {"__name__": "x", "q": 'a"b', "bs": "c\\", "end": "]]}", "m": '{"metric":'},
        "values": [[1.5, "1"], [2, "NaN"], [3, "+Inf"], [4.001, "-Inf"]],
    },
    {
        "metric": {"u": "gpu-ü-日本", "v": ',"values":[[1,"2"]]},{"metric":'},
        "values": [[5, "2.5e3"]],
    },
    {"metric": {}, "values": [[1700000000.123, "0.1"], [1700000015, "142.71428571428572"]]},
    {"metric": {"e": ""}, "values": []},
]


def _body(result: Sequence[object], **extra: object) -> bytes:
    doc = {"status": "success", "data": {"resultType": "matrix", "result": result}, **extra}
    return json.dumps(doc, separators=(",", ":")).encode()


def _assert_same(body: bytes, fast: bool | None) -> None:
    """Both paths agree; ``fast`` (when not None) says whether the byte-level path applies."""
    from inference_obs.source import frames

    if fast is not None:
        assert (frames._fast_matrix(body, "", ()) is not None) == fast
    want = parse_matrix(json.loads(body)["data"]["result"], "q")
    got, envelope = parse_matrix_body(body, "q")
    assert got.labels == want.labels
    assert got.promql == "q"
    for name in ("offsets", "t_ms", "values"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype
        assert np.array_equal(a, b, equal_nan=True), name
    doc = json.loads(body)
    doc["data"]["result"] = []
    assert envelope == doc


def test_body_path_equals_json_path_on_awkward_labels() -> None:
    _assert_same(_body(AWKWARD), fast=True)
    raw = json.dumps(
        {"status": "success", "data": {"resultType": "matrix", "result": AWKWARD}},
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()
    _assert_same(raw, fast=True)


def test_body_path_keeps_the_envelope() -> None:
    body = _body(RESULT, warnings=["w ]]} 1"], infos=["i"])
    _assert_same(body, fast=True)
    _, envelope = parse_matrix_body(body)
    assert envelope["warnings"] == ["w ]]} 1"]
    assert envelope["infos"] == ["i"]


def test_body_path_empty_results() -> None:
    _assert_same(_body([]), fast=True)
    _assert_same(_body([{"metric": {"a": "b"}, "values": []}]), fast=True)
    m, _ = parse_matrix_body(_body([]))
    assert len(m) == 0
    assert m.offsets.tolist() == [0]


def test_body_path_falls_back_for_other_layouts() -> None:
    doc = {"status": "success", "data": {"resultType": "matrix", "result": RESULT}}
    _assert_same(json.dumps(doc).encode(), fast=False)  # spaces
    _assert_same(json.dumps(doc, indent=2).encode(), fast=False)  # newlines
    compact = _body(RESULT)
    # Blanks inside a pair are read alike by both paths.
    _assert_same(compact.replace(b'"values":[[1.5,', b'"values":[[ 1.5,'), fast=None)
    _assert_same(compact.replace(b'"values":[[1.5,"1"]', b'"values":[[1.5, "1"]'), fast=None)
    _assert_same(compact.replace(b'"NaN"],[', b'"NaN"], ['), fast=None)
    _assert_same(compact.replace(b'"NaN"],[', b'"NaN"],\n['), fast=False)
    _assert_same(compact.replace(b'"values"', b'"extra":1,"values"', 1), fast=False)  # a field
    _assert_same(compact.replace(b'"+Inf"]]}', b'"+Inf"]],"histograms":[]}'), fast=False)
    reordered = compact.replace(b'"resultType":"matrix","result"', b'"result"')
    reordered = reordered[:-2] + b',"resultType":"matrix"}}'
    _assert_same(reordered, fast=False)


def test_body_path_rejects_non_matrices() -> None:
    with pytest.raises(MalformedAnswer, match="result type 'vector' is not matrix"):
        parse_matrix_body(b'{"status":"success","data":{"resultType":"vector","result":[]}}')
    with pytest.raises(MalformedAnswer, match=r"not a successful .* \(status 'error'\)"):
        parse_matrix_body(b'{"status":"error","errorType":"bad_data","error":"x"}')
    with pytest.raises(MalformedAnswer, match=r"without a data\.result list"):
        parse_matrix_body(b'{"status":"success","data":{"resultType":"matrix"}}')
    with pytest.raises(MalformedAnswer, match="a JSON list, not a Prometheus API answer"):
        parse_matrix_body(b"[1, 2]")
    # Not JSON at all (a truncated body, say) stays json's own error: a client may ask again.
    with pytest.raises(json.JSONDecodeError, match="Expecting value"):
        parse_matrix_body(b"not json")
    with pytest.raises(json.JSONDecodeError, match="Expecting"):
        parse_matrix_body(b'{"status":"success","data":{"resultType":"matrix","result":[')


def test_a_malformed_answer_is_caught_as_a_source_error_and_as_a_value_error() -> None:
    # Callers catch either: a source's errors, or the builtin that fits a bad value.
    bad = [{"metric": {}, "values": [[float("nan"), "1"]]}]
    for caught in (MalformedAnswer, SourceError, ValueError):
        with pytest.raises(caught, match=r"timestamp .*nan.* is not a time a server can hold"):
            parse_matrix(bad)


def test_matrix_points_are_each_series_times_and_values() -> None:
    matrix = Matrix(
        labels=(Labels({"a": "1"}), Labels({"a": "2"})),
        offsets=np.array([0, 2, 3], dtype=np.int64),
        t_ms=np.array([10, 20, 10], dtype=np.int64),
        values=np.array([1.0, 2.0, 5.0]),
        promql="x",
    )
    t_ms, values = matrix.points(1)
    assert (t_ms.tolist(), values.tolist()) == ([10], [5.0])
    assert matrix.points(0)[1].tolist() == [1.0, 2.0]
