"""Series and SampleSet: validation, millisecond timestamps, columnar layout."""

from __future__ import annotations

import math

import numpy as np
import pytest

from inference_obs.errors import DatasetError
from inference_obs.samples import STALE_NAN, Labels, SampleSet, Series, is_stale


def test_sample_set_is_columnar_with_offsets() -> None:
    a = Series("x", {"pod": "a"}, [1.0, 2.5], [1.0, 2.0])
    b = Series("y", {}, [0.001], [7.0])
    samples = SampleSet.from_series([a, b])
    assert len(samples) == 2
    assert samples.offsets.tolist() == [0, 2, 3]
    assert samples.t_ms.tolist() == [1000, 2500, 1]
    assert samples.values.tolist() == [1.0, 2.0, 7.0]
    assert samples.names == ("x", "y")
    assert samples.labels[0] == {"pod": "a"}
    again = samples.series(1)
    assert (again.name, dict(again.labels), again.timestamps.tolist()) == ("y", {}, [0.001])
    assert [s.name for s in samples.take([1, 0])] == ["y", "x"]
    with pytest.raises(ValueError, match="read-only"):
        samples.values[0] = 3.0


def test_repeated_series_is_an_error() -> None:
    a = Series("x", {"pod": "a"}, [1.0], [1.0])
    with pytest.raises(DatasetError, match=r"x\{pod='a'\} is given twice"):
        SampleSet.from_series([a, Series("x", {"pod": "a"}, [2.0], [1.0])])


def test_staleness_marker_is_not_an_ordinary_nan() -> None:
    values = np.array([STALE_NAN, math.nan, 1.0])
    assert is_stale(values).tolist() == [True, False, False]
    kept = Series("x", {}, [1.0, 2.0, 3.0], values)
    assert is_stale(SampleSet.from_series([kept]).values).tolist() == [True, False, False]


def test_empty_sample_set() -> None:
    samples = SampleSet.from_series([])
    assert len(samples) == 0
    assert samples.offsets.tolist() == [0]


def test_labels_keep_and_drop_are_remembered_per_names() -> None:
    labels = Labels({"pod": "a", "gpu": "0", "le": "1.0"})
    pod = frozenset({"pod"})
    kept = labels.keep(pod)
    assert dict(kept) == {"pod": "a"}
    assert labels.keep(frozenset({"pod"})) is kept  # equal names: the same set again
    assert dict(labels.drop(frozenset({"le", "absent"}))) == {"gpu": "0", "pod": "a"}
    assert labels.drop(frozenset({"absent"})) is labels
    assert labels.keep(frozenset({"pod", "gpu", "le"})) is labels
    assert labels.keep(frozenset()) == Labels()


def test_labels_compare_by_their_items_with_labels_and_any_mapping() -> None:
    a = Labels([("pod", "a"), ("gpu", "0")])
    b = Labels({"gpu": "0", "pod": "a"})
    assert a == b
    assert hash(a) == hash(b)
    assert a != Labels({"gpu": "0", "pod": "b"})
    assert a != Labels({"gpu": "0"})
    assert a == {"pod": "a", "gpu": "0"}
    assert a != {"pod": "a"}
    assert a != [("pod", "a"), ("gpu", "0")]
