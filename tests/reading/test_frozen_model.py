"""FrozenModel: instances given the same field names share one set of them, and nothing leaks
from one instance to another through it."""

from __future__ import annotations

import pickle
import tracemalloc
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
    assert one.bounds is not None
    assert two.bounds is not None
    assert one.bounds.model_fields_set is two.bounds.model_fields_set


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


def test_a_measurement_with_bounds_and_provenance_weighs_under_1700_bytes() -> None:
    # Each set of names alone is 216 to 728 bytes: with one set per instance a
    # Measurement, its Bounds and Provenance weighed 2,600 bytes (the values
    # here as a fleet's per-replica latency quantile has them).
    _measurement("warm")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [_measurement(f"replica-{i:04d}") for i in range(500)]
        each = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    assert each < 1_700, f"{each:.0f} bytes a Measurement"
