"""Exact counter ratios: changes between first and last samples, resets and pairing."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from inference_obs.errors import QueryError
from inference_obs.metrics import vllm
from inference_obs.query import Matcher
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import (
    Pairing,
    Ratio,
    counter_change,
    counter_ratio,
    histogram_mean,
)
from inference_obs.reading.measurement import Status
from inference_obs.samples import STALE_NAN, SampleSet, Series, Window
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset

from .ground_truth import EXACT, deployment, truth
from .test_latency import window

__all__ = ["window"]


def _set(*values: list[float]) -> SampleSet:
    return SampleSet.from_series(
        Series("c_total", {"i": str(i)}, np.arange(len(v), dtype=float), np.array(v))
        for i, v in enumerate(values)
    )


def test_change_adds_steps_and_counts_a_drop_as_a_restart_from_zero() -> None:
    # 5 -> 9 (+4), reset to 2 (+2), 2 -> 6 (+4): 10; a second series +3.
    assert counter_change(_set([5, 9, 2, 6], [1, 4])) == 10 + 3


def test_change_skips_staleness_markers_and_single_samples() -> None:
    assert counter_change(_set([1, STALE_NAN, 4], [7])) == 3
    assert counter_change(_set()) == 0


def test_a_series_without_its_partner_makes_the_mean_partial_and_is_named(
    source: DatasetSource, window: Window, tmp_path: Path
) -> None:
    family = vllm.REQUEST_QUEUE_TIME
    h20 = deployment(source, "H20")
    dropped = "h20-model-03"
    kept = [
        s for s in source.samples
        if not (s.name == f"{family.name}_count" and s.labels.get("pod") == dropped)
    ]  # fmt: skip
    without = write_dataset(tmp_path / "unpaired", source.dataset.manifest, kept)
    mean = histogram_mean(Reading(DatasetSource(without), h20, window, "t"), family, "queue_mean")
    assert mean.status is Status.PARTIAL
    (note,) = [a for a in mean.annotations if a.kind == "unpaired_series"]
    assert dropped in note.message
    # The mean pools the three replicas that have both series, exactly.
    pooled = histogram_mean(Reading(source, h20, window, "t"), family, "queue_mean")
    assert mean.value is not None
    assert pooled.value is not None
    assert not math.isclose(mean.value, pooled.value, rel_tol=1e-6)
    assert math.isclose(pooled.value, float(truth(source, "H20", "queue_time").mean()),
                        rel_tol=EXACT)  # fmt: skip


def test_series_that_collide_once_labels_are_ignored_are_refused(
    source: DatasetSource, window: Window
) -> None:
    success = vllm.REQUEST_SUCCESS
    h20 = deployment(source, "H20")
    every = success.select(h20.matchers)
    ratio = Ratio(every, every, every, "s", "ratio", ignoring=("finished_reason",))
    # As PromQL refuses duplicate series in a one-to-one match group: the query must change.
    collide = r"vllm:request_success_total\{.*\}: [2-9] series have the labels \{.*\} once "
    told = r"\['finished_reason'\] are ignored, so they are not told apart; ignore fewer"
    with pytest.raises(QueryError, match=collide + told):
        counter_ratio(Reading(source, h20, window, "t"), ratio)


def test_a_part_of_a_whole_divides_the_totals_and_matched_series_pair_up(
    source: DatasetSource, window: Window
) -> None:
    success = vllm.REQUEST_SUCCESS
    h20 = deployment(source, "H20")
    stop = success.select((*h20.matchers, Matcher.equal("finished_reason", "stop")))
    every = success.select(h20.matchers)
    r = Reading(source, h20, window, "t")
    whole = {
        pairing: counter_ratio(r, Ratio(stop, every, stop, "stop_share", "ratio", pairing=pairing))
        for pairing in Pairing
    }
    # One reason over all: the changes of the 'stop' series over those of every series.
    raw = [source.raw(s, window) for s in (stop, every)]
    share = counter_change(raw[0]) / counter_change(raw[1])
    assert 0 < share < 1
    part = whole[Pairing.PART_OF_WHOLE]
    assert part.status is Status.OK
    assert part.value == pytest.approx(share, rel=EXACT)
    # Matched, each 'stop' series meets only itself; the other reasons have no partner.
    matched = whole[Pairing.MATCHED]
    assert matched.value == pytest.approx(1.0, rel=EXACT)
    assert matched.status is Status.PARTIAL
    (note,) = [a for a in matched.annotations if a.kind == "unpaired_series"]
    assert "'length'" in note.message
