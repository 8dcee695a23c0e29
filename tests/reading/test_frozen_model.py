"""FrozenModel: instances given the same field names share one set of them, and nothing leaks
from one instance to another through it."""

from __future__ import annotations

import gc
import pickle
import tracemalloc
import weakref
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from inference_obs.reading.measurement import Bounds, Measurement, Provenance, Status

AT = datetime(2026, 12, 7, tzinfo=UTC)


def _measurement(replica: str, **given: object) -> Measurement:
    return Measurement(
        key=f"D/latency/ttft_p50[{replica}]",
        deployment="D",
        analysis="latency",
        statistic=f"ttft_p50[{replica}]",
        value=0.5,
        unit="seconds",
        window_start=AT,
        window_end=AT,
        status=Status.OK,
        bounds=Bounds(lower=0.25, upper=0.5),
        provenance=Provenance(
            promql=(f'histogram_quantile(0.5, sum by (le) (x_bucket{{pod="{replica}"}}))',),
            engine="prometheus",
            rules="prometheus-2",
        ),
        **given,
    )


def test_instances_given_the_same_names_share_one_set() -> None:
    one, two = _measurement("a"), _measurement("b")
    assert one.model_fields_set is two.model_fields_set
    assert one.provenance.model_fields_set is two.provenance.model_fields_set
    assert one.bounds.model_fields_set is two.bounds.model_fields_set  # type: ignore[union-attr]


def test_an_instance_given_other_names_has_its_own_set() -> None:
    plain, noted = _measurement("a"), _measurement("b", caveats=("a caveat",))
    assert "caveats" in noted.model_fields_set
    assert "caveats" not in plain.model_fields_set
    assert set(plain.model_dump(exclude_unset=True)) == set(plain.model_fields_set)
    assert noted.model_dump(exclude_unset=True)["caveats"] == ("a caveat",)


def test_a_copy_gets_its_own_names_and_the_original_keeps_its() -> None:
    one, two = _measurement("a"), _measurement("b")
    before = set(one.model_fields_set)
    copied = one.model_copy(update={"caveats": ("copied",)})
    assert "caveats" in copied.model_fields_set
    assert one.model_fields_set == before
    assert two.model_fields_set == before
    assert copied.caveats == ("copied",)
    assert one.caveats == ()
    # Copies given the same names share again.
    other = two.model_copy(update={"caveats": ("other",)})
    assert other.model_fields_set is copied.model_fields_set


def test_assignment_is_refused_and_the_shared_set_is_unchanged() -> None:
    one, two = _measurement("a"), _measurement("b")
    before = set(two.model_fields_set)
    with pytest.raises(ValidationError, match="frozen"):
        one.caveats = ("assigned",)  # type: ignore[misc]
    assert two.model_fields_set == before


def test_a_pickled_measurement_comes_back_equal() -> None:
    one = _measurement("a", caveats=("kept",))
    back = pickle.loads(pickle.dumps(one))
    assert back == one
    assert back.model_fields_set == one.model_fields_set


def _bytes_each(make: Callable[[str], Measurement]) -> float:
    """Bytes a Measurement made by ``make(replica)`` holds, over 500 of them kept."""
    make("warm")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [make(f"replica-{i:04d}") for i in range(500)]
        return (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()


def test_a_measurement_with_bounds_and_provenance_weighs_under_1700_bytes() -> None:
    # Each set of names alone is 216 to 728 bytes: with one set per instance a
    # Measurement, its Bounds and Provenance weighed 2,600 bytes (the values
    # here as a fleet's per-replica latency quantile has them).
    each = _bytes_each(_measurement)
    assert each < 1_700, f"{each:.0f} bytes a Measurement"


def _of_the_fleet(replica: str, **provenance: object) -> Measurement:
    """A replica's value of a statistic asked of the whole fleet at once: the same queries."""
    given: dict[str, object] = {
        "promql": ('histogram_quantile(0.5, sum by (pod, le) (rate(x_bucket{ns="llm"}[1h])))',),
        "engine": "prometheus",
        "rules": "prometheus-2",
        **provenance,
    }
    return _measurement(replica).model_copy(update={"provenance": Provenance(**given)})


def test_measurements_from_the_same_queries_hold_one_provenance() -> None:
    built = [_of_the_fleet(f"r{i}") for i in range(3)]
    assert built[0].provenance is built[1].provenance is built[2].provenance
    # Built whole, not copied, they share too.
    one = _measurement("a", caveats=())
    fresh = Provenance(**one.provenance.model_dump())
    two = Measurement(**{**one.model_dump(), "provenance": fresh})
    assert two.provenance is one.provenance


def test_provenances_that_differ_in_anything_are_not_shared() -> None:
    base = _of_the_fleet("a")
    for differing in (
        {"engine": "victoriametrics"},
        {"rules": "victoriametrics"},
        {"computation": "local"},
        {"promql": ("other",)},
        {"promql_value": 0.0},
    ):
        other = _of_the_fleet("b", **differing)
        assert other.provenance is not base.provenance, differing
        assert other.provenance != base.provenance
    # -0.0 == 0.0 as floats: kept apart all the same, each printed as given.
    zero, negative = _of_the_fleet("c", promql_value=0.0), _of_the_fleet("d", promql_value=-0.0)
    assert negative.provenance is not zero.provenance
    assert str(negative.provenance.promql_value) == "-0.0"
    assert _of_the_fleet("e", promql_value=0.0).provenance is zero.provenance


def test_a_shared_provenance_goes_with_the_last_measurement_holding_it() -> None:
    kept = [_of_the_fleet(f"r{i}", computation="gone-with-them") for i in range(2)]
    held = weakref.ref(kept[0].provenance)
    del kept
    gc.collect()
    assert held() is None
    # The next ones are shared again, through a new instance.
    again = [_of_the_fleet(f"r{i}", computation="gone-with-them") for i in range(2)]
    assert again[0].provenance is again[1].provenance


def test_a_fleet_s_measurements_weigh_under_1000_bytes_each_with_one_provenance() -> None:
    # With a Provenance each (promql and all) the same values weighed about 1,280 bytes.
    each = _bytes_each(_of_the_fleet)
    assert each < 1_000, f"{each:.0f} bytes a Measurement"


def test_a_measurement_constructed_unchecked_shares_what_it_has() -> None:
    # model_construct skips validation (docs and tests build partial results with it).
    partial = Measurement.model_construct(value=0.5, status=Status.OK)  # type: ignore[call-arg]
    assert partial.model_fields_set == {"value", "status"}
    assert "provenance" not in partial.__dict__
    whole = _of_the_fleet("a")
    built = Measurement.model_construct(**dict(_of_the_fleet("b")))
    assert built.provenance is whole.provenance
