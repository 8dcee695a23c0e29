"""A number without data names the families without series: every family's series are asked
at once (one round trip over a slow link), not one after another."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from inference_obs.query import Selector
from inference_obs.reading.context import Reading, missing_families
from inference_obs.reading.schedule import Pool
from inference_obs.samples import Labels, Window
from inference_obs.source.dataset.source import DatasetSource

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "h100-vs-h200"


class Meeting:
    """Delegates to a dataset source; each series request waits until ``parties`` are asked
    at once (a request asked alone breaks the barrier after its timeout, and fails)."""

    def __init__(self, source: DatasetSource, parties: int) -> None:
        self.source = source
        self.meeting = threading.Barrier(parties, timeout=10)

    def series(self, selector: Selector, window: Window) -> tuple[Labels, ...]:
        self.meeting.wait()
        return self.source.series(selector, window)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)


def test_the_families_without_series_are_asked_at_once() -> None:
    source = DatasetSource(DATASET)
    window = source.dataset.manifest.window.window()
    # Two families: one the dataset has, one it has not.
    expr = Selector("vllm:num_requests_running").sum() + Selector("vllm:engine_sleep_state").sum()
    with Pool(4):
        assert missing_families(Meeting(source, 2), expr, window) == ["vllm:engine_sleep_state"]


def test_a_group_without_a_value_names_its_families_asked_at_once() -> None:
    source = DatasetSource(DATASET)
    manifest = source.dataset.manifest
    window, deployment = manifest.window.window(), manifest.deployments[0]
    running = Selector("vllm:num_requests_running", tuple(deployment.matchers))
    absent = Selector("vllm:engine_sleep_state", tuple(deployment.matchers))
    expr = running.sum(by=("pod",)) + absent.sum(by=("pod",))
    with Pool(4):
        r = Reading(Meeting(source, 2), deployment, window, "t")
        got = r.measure_by({Labels({"pod": "p"}): "s"}, expr, ("pod",), "requests")
    (only,) = got.values()
    assert only.status.value == "no_data"
    assert "vllm:engine_sleep_state" in only.annotations[-1].message


class Counting:
    """Delegates to a dataset source, counting series requests."""

    def __init__(self, source: DatasetSource) -> None:
        self.source = source
        self.asked = 0
        self.lock = threading.Lock()

    def series(self, selector: Selector, window: Window) -> tuple[Labels, ...]:
        with self.lock:
            self.asked += 1
        return self.source.series(selector, window)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)


def test_the_groups_without_a_ratio_are_named_from_one_request_per_family() -> None:
    from inference_obs.metrics import builders, vllm
    from inference_obs.reading.counter_ratios import Ratio, counter_ratios_by

    plain = DatasetSource(DATASET)
    manifest = plain.dataset.manifest
    window, deployment = manifest.window.window(), manifest.deployments[0]
    m, family = deployment.matchers, vllm.TIME_TO_FIRST_TOKEN
    mean = Ratio(
        family.select(m, "sum"),
        family.select(m, "count"),
        builders.histogram_mean(family, m, window.seconds, by=("pod",)),
        "mean",
        "seconds",
    )

    def asked_for(pods: int) -> int:
        # Pods the data has not: every group names its missing families.
        source = Counting(plain)
        absent = [Labels({"pod": f"absent-{i}"}) for i in range(pods)]
        with Pool(4):
            got = counter_ratios_by(
                Reading(source, deployment, window, "t"),
                mean,
                by=("pod",),
                groups=absent,
                statistic=lambda g: f"mean[{g['pod']}]",
            )
        assert [one.status.value for one in got.values()] == ["no_data"] * pods
        assert all(one.annotations for one in got.values())  # each names what is missing
        return source.asked

    # As many series requests for 2 groups as for 12: one per family, not per group.
    assert asked_for(2) == asked_for(12) > 0
