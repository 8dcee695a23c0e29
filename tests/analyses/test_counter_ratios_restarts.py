"""Exact counter ratios where a replica restarted: values, raw reads and groups.

Expected values are worked out by hand in :mod:`tests.analyses.restarts`.
"""

from __future__ import annotations

from typing import Any

import pytest

from inference_obs.metrics import builders, vllm
from inference_obs.query import Selector, to_promql
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import (
    Ratio,
    counter_ratios_by,
    histogram_mean,
    histogram_share,
)
from inference_obs.reading.measurement import Status
from inference_obs.reading.schedule import Pool
from inference_obs.samples import Labels, SampleSet, Window
from inference_obs.source.base import Source
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.remembering import RememberingSource

from .restarts import DEPLOYMENT, WINDOW, restarted_dataset

FAMILY = vllm.REQUEST_QUEUE_TIME


class RawReads:
    """Delegates to a source and keeps every ``raw()`` selector and the series it returned."""

    def __init__(self, source: Source) -> None:
        self._source = source
        self.reads: list[tuple[str, SampleSet]] = []

    def raw(self, selector: Selector, window: Window) -> SampleSet:
        got = self._source.raw(selector, window)
        self.reads.append((to_promql(selector), got))
        return got

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> DatasetSource:
    return DatasetSource(restarted_dataset(tmp_path_factory.mktemp("restarts")))


def test_mean_counts_the_restart_exactly(source: DatasetSource) -> None:
    mean = histogram_mean(Reading(source, DEPLOYMENT, WINDOW, "t"), FAMILY, "m")
    assert mean.status is Status.OK
    assert mean.value == pytest.approx(30 / 55, rel=1e-12)


def test_only_the_restarted_replica_is_read_raw(source: DatasetSource) -> None:
    reads = RawReads(source)
    histogram_mean(Reading(reads, DEPLOYMENT, WINDOW, "t"), FAMILY, "m")
    assert reads.reads
    for promql, got in reads.reads:
        assert 'pod="a-1"' in promql
        assert {labels["pod"] for labels in got.labels} <= {"a-1"}


def test_nothing_is_read_raw_without_a_restart(source: DatasetSource) -> None:
    calm = DEPLOYMENT.model_copy(update={"selector": {"pod": "~a-[02]"}})
    reads = RawReads(source)
    mean = histogram_mean(Reading(reads, calm, WINDOW, "t"), FAMILY, "m")
    assert reads.reads == []
    assert mean.value == pytest.approx(15 / 30, rel=1e-12)


def test_share_pairs_buckets_across_the_restart(source: DatasetSource) -> None:
    share = histogram_share(Reading(source, DEPLOYMENT, WINDOW, "t"), FAMILY, 0.5, "s")
    assert share.status is Status.OK
    assert share.value == pytest.approx(32 / 55, rel=1e-12)


def test_groups_get_their_own_ratio_and_an_empty_group_has_no_data(
    source: DatasetSource,
) -> None:
    m, w = DEPLOYMENT.matchers, WINDOW.seconds
    pods = [Labels({"pod": p}) for p in ("a-0", "a-1", "a-9")]
    mean = Ratio(
        FAMILY.select(m, "sum"),
        FAMILY.select(m, "count"),
        builders.histogram_mean(FAMILY, m, w, by=("pod",)),
        "mean",
        "seconds",
    )
    got = counter_ratios_by(
        Reading(source, DEPLOYMENT, WINDOW, "t"),
        mean,
        by=("pod",),
        groups=pods,
        statistic=lambda g: f"mean[{g['pod']}]",
    )
    assert got[pods[0]].value == pytest.approx(0.5, rel=1e-12)
    assert got[pods[1]].value == pytest.approx(0.6, rel=1e-12)
    assert got[pods[2]].status is Status.NO_DATA
    assert got[pods[1]].statistic == "mean[a-1]"
    assert "no series of vllm:request_queue_time_seconds" in got[pods[2]].annotations[0].message


def test_asked_in_threads_a_restart_gives_the_same_measurements(source: DatasetSource) -> None:
    # The restarted side asks its stretches, edges and cleaned sums together.
    def both(on: Source) -> tuple[str, str]:
        mean = histogram_mean(Reading(on, DEPLOYMENT, WINDOW, "t"), FAMILY, "m")
        share = histogram_share(Reading(on, DEPLOYMENT, WINDOW, "t"), FAMILY, 0.5, "s")
        return mean.model_dump_json(), share.model_dump_json()

    with Pool(4):
        threaded = both(RememberingSource(source))
    assert threaded == both(source)
