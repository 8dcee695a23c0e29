"""API JSON -> arrays and frames: special values, empty answers, raw trimming, frame shapes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from inference_obs.samples import Labels
from inference_obs.source.frames import parse_matrix, parse_raw, parse_vector, to_frame

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
    assert to_frame(parse_matrix([]), wide=True).shape == (0, 0)


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


def test_wide_frame() -> None:
    frame = to_frame(parse_matrix(RESULT), wide=True)
    assert frame.shape == (4, 2)
    assert frame.index.name == "timestamp"
    assert frame.iloc[:, 1].dropna().tolist() == [-np.inf, 2500.0]
