"""Series and SampleSet: validation, millisecond timestamps, columnar layout."""

from __future__ import annotations

import math
import tracemalloc
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from inference_obs.errors import ConfigurationError, DatasetError
from inference_obs.samples import STALE_NAN, Labels, SampleSet, Series, Window, is_stale


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


def test_a_window_ending_at_a_time_keeps_its_timezone() -> None:
    end = datetime(2026, 10, 19, 18, 40, tzinfo=timezone(timedelta(hours=8)))
    for length, seconds in (("30m", 1800.0), ("1h", 3600.0), ("6h", 21600.0), ("1h30m", 5400.0)):
        w = Window.ending(end, length)
        assert (w.end, w.seconds) == (end, seconds)
        assert w.start.utcoffset() == timedelta(hours=8)
    assert Window.ending(end, "1h").start.isoformat() == "2026-10-19T17:40:00+08:00"


@pytest.mark.parametrize(
    ("end", "length", "named"),
    [
        (datetime(2026, 10, 19, 18, 40), "1h", "window end 2026-10-19T18:40:00 has no timezone"),
        ("2026-10-19T18:40:00+08:00", "1h", "is not a datetime"),
        (datetime(2026, 10, 19, tzinfo=UTC), "1x", "window length '1x' is not a duration"),
        (datetime(2026, 10, 19, tzinfo=UTC), "", "window length '' is not a duration"),
        (datetime(2026, 10, 19, tzinfo=UTC), "-1h", "window length '-1h' is not a duration"),
        (datetime(2026, 10, 19, tzinfo=UTC), 3600, "window length 3600 is not a duration"),
        (datetime(2026, 10, 19, tzinfo=UTC), "3000y", "'3000y' ending 2026-10-19T00:00:00+00:00"),
        (
            datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14))),
            "1h",
            "window end 9999-12-31T23:00:00-14:00 is outside the years 1 to 9999 in UTC",
        ),
    ],
)
def test_a_window_ending_refuses_what_is_no_time_or_no_duration(
    end: object, length: object, named: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Window.ending(end, length)  # type: ignore[arg-type]
    assert named in str(caught.value)


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


def test_a_label_set_is_one_small_dict_and_hashes_as_its_items() -> None:
    # A fleet's answers carry a label set per series: 8 labels cost under 500 bytes
    # (a tuple of pairs kept beside the dict made it over 900).
    names = ("__name__", "engine", "finished_reason", "instance", "job", "model", "ns", "pod")
    tracemalloc.start()
    try:
        made = [Labels({n: f"{n}-{i}" if n == "pod" else n for n in names}) for i in range(2000)]
        per_set = tracemalloc.get_traced_memory()[0] / len(made)
    finally:
        tracemalloc.stop()
    assert per_set < 500
    one = made[7]
    assert hash(one) == hash(Labels(dict(reversed(list(one.items())))))
    assert hash(one) != hash(made[8])
    assert one == Labels(dict(one))
    assert one != made[8]
    assert list(one) == sorted(names)


def test_label_sets_decoded_apart_hold_one_copy_of_each_text() -> None:
    # Each answer decodes its own strings: made at run time here, so equal but not one object.
    def decoded(pod: int) -> dict[str, str]:
        return {"".join(["name", "space"]): "".join(["ll", "m"]), "pod": "".join(["p-", str(pod)])}

    one, two, three = Labels(decoded(1)), Labels(decoded(2)), Labels(decoded(1))
    assert one == three
    [(n1, v1), _], [(n2, v2), _], [_, (_, p3)] = one.items(), two.items(), three.items()
    assert n1 is n2
    assert v1 is v2
    assert dict(one.items())["pod"] is p3
    assert dict(one.items())["pod"] is not dict(two.items())["pod"]


def test_the_shared_texts_are_emptied_when_full_and_sets_stay_equal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import inference_obs.samples as samples

    monkeypatch.setattr(samples, "_SHARED_TEXTS", {})
    monkeypatch.setattr(samples, "SHARED_TEXTS_MAX", 10)
    made = [Labels({"pod": f"p-{i}"}) for i in range(25)]
    assert 0 < len(samples._SHARED_TEXTS) <= 10
    assert [dict(m) for m in made] == [{"pod": f"p-{i}"} for i in range(25)]
    assert Labels({"pod": "p-3"}) == made[3]
    assert hash(Labels({"pod": "p-3"})) == hash(made[3])


def test_label_sets_of_a_fleet_hold_its_repeated_texts_once() -> None:
    # 2,000 series of 8 labels, each decoded apart, 7 of the texts repeated in every one:
    # about 700 bytes a set with a copy each, under 500 with them shared.
    names = ("__name__", "engine", "finished_reason", "instance", "job", "model", "ns", "pod")
    Labels({"warm": "up"})
    tracemalloc.start()
    try:
        made = [
            Labels(
                {n: "".join([n, "-", str(i)]) if n == "pod" else "".join([n, "!"]) for n in names}
            )
            for i in range(2000)
        ]
        per_set = tracemalloc.get_traced_memory()[0] / len(made)
    finally:
        tracemalloc.stop()
    assert per_set < 500, f"{per_set:.0f} bytes a set"
