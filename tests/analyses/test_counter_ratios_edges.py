"""Exact counter changes read the sample at the window's start under every rule set.

The pods and the fleet of :mod:`tests.analyses.window_edges`, through the
local engine under Prometheus 2.x rules (closed ranges) and under
Prometheus 3.x and VictoriaMetrics rules (ranges open at their start).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_obs.engine.rules import Rules
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import histogram_mean
from inference_obs.samples import Window
from inference_obs.source.dataset import Dataset
from inference_obs.source.dataset.source import DatasetSource

from .window_edges import (
    START,
    TTFT,
    RawWindows,
    edge_deployment,
    edges_dataset,
    exact_mean_and_count,
    finished_count,
    fleet_deployment,
    fleet_truth,
    fleet_window,
)

WINDOW = Window.parse(START, 60)
#: Long enough that drops are searched in ranges of 30 s, twice the scrape interval.
LONG = Window.parse(START, 960)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return edges_dataset(Path(tmp_path_factory.mktemp("edges")))


@pytest.fixture(params=list(Rules), ids=lambda r: r.value)
def source(request: pytest.FixtureRequest, dataset: Dataset) -> DatasetSource:
    return DatasetSource(dataset, rules=request.param)


@pytest.mark.parametrize(
    ("pod", "count"),
    [
        ("one", 30),  # 10 -> 40: the 10 requests before the first scrape after the start count
        ("reset", 22),  # restarted after the start scrape: 2 after the drop, then +10 +10
        ("early", 30),  # the scrape a millisecond before the start stays out (40 with it)
    ],
)
def test_a_scrape_at_the_start_is_read_by_every_rule_set(
    source: DatasetSource, pod: str, count: float
) -> None:
    mean, counted = exact_mean_and_count(source, edge_deployment(pod), WINDOW)
    assert (mean, counted) == (2.0, count)
    measured = histogram_mean(Reading(source, edge_deployment(pod), WINDOW, "t"), TTFT, "m")
    assert measured.value == 2.0


def test_the_provenance_names_the_range_each_rule_set_was_asked(source: DatasetSource) -> None:
    measured = histogram_mean(Reading(source, edge_deployment("one"), WINDOW, "t"), TTFT, "m")
    reach = "1m1ms" if source.rules.left_open else "1m"
    assert measured.provenance.promql[:2] == (
        f'{TTFT.name}_sum{{pod="one"}}[{reach}]',
        f'{TTFT.name}_count{{pod="one"}}[{reach}]',
    )


def test_a_fleet_scraped_at_the_start_counts_every_request(source: DatasetSource) -> None:
    truth, window, deployment = fleet_truth(), fleet_window(), fleet_deployment()
    mean, counted = exact_mean_and_count(source, deployment, window)
    assert counted == truth.ttft_count
    assert mean == pytest.approx(truth.ttft_mean, rel=1e-12)
    assert finished_count(source, deployment, window) == truth.finished
    # What leaving the start sample out would lose: the replica scraped at the start.
    assert truth.first_interval > 0


def test_a_restart_after_the_start_scrape_is_found_without_reading_the_window(
    source: DatasetSource,
) -> None:
    # The drop counted over the window and the one found in the stretches
    # around it agree, so only stretches (at most a sixteenth of the window)
    # are read, never the whole window.
    reads = RawWindows(source)
    assert exact_mean_and_count(reads, edge_deployment("restart"), LONG) == (2.0, 632)
    assert reads.seconds
    assert max(reads.seconds) <= LONG.seconds / 16
