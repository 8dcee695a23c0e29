"""gpu_per_replica(): a GPU family averaged per replica by the engine, one reading per scrape.

A hand-made dataset over [0, 600] s: GPUs scraped every 10 s at +4 s (4, 14,
24, ...), and GPU ``g`` reads ``(g + 1) * k`` at its ``k``-th scrape, so each
value tells which scrape it came from. Replica ``a``: GPU 0 throughout, GPU 1
until 54 s, then a staleness marker at 64 s. Replica ``b``: GPU 0 throughout,
GPU 1 until 94 s with no staleness marker (as in a backfilled dataset).
Replica ``c``: two GPUs throughout. The grid's steps fall every 5 s.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from inference_obs.metrics import dcgm
from inference_obs.query import to_promql
from inference_obs.reading.alignment import (
    GpuScrapes,
    gpu_label_sets,
    gpu_per_replica,
    grid_step_ms,
    nearest,
    scrape_interval_ms,
)
from inference_obs.samples import STALE_NAN, SampleSet, Series, Window
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.dataset.source import DatasetSource

BUNDLED = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"
SCRAPES = np.arange(4.0, 600.0, 10.0)
SELECTOR = dcgm.GPU_UTIL.select([])
KEYS = ("pod",)
TOLERANCE_MS = 10_000.0


def _gpu(pod: str, gpu: int, until_s: float = 600.0, *, stale: bool = False) -> Series:
    times = SCRAPES[np.less_equal(SCRAPES, until_s)]
    values = (gpu + 1) * np.arange(times.size, dtype=np.float64)
    if stale:
        times, values = np.append(times, until_s + 10.0), np.append(values, STALE_NAN)
    return Series(dcgm.GPU_UTIL.name, {"pod": pod, "gpu": str(gpu)}, times, values)


@pytest.fixture(scope="module")
def source() -> DatasetSource:
    series = [
        _gpu("a", 0),
        _gpu("a", 1, 54.0, stale=True),
        _gpu("b", 0),
        _gpu("b", 1, 94.0),
        _gpu("c", 0),
        _gpu("c", 1),
    ]
    # Any manifest will do: the engine reads only the samples.
    bundled = read_dataset(BUNDLED)
    return DatasetSource(dataclasses.replace(bundled, samples=SampleSet.from_series(series)))


@pytest.fixture(scope="module")
def window() -> Window:
    return Window(datetime.fromtimestamp(0, UTC), datetime.fromtimestamp(600, UTC))


@pytest.fixture(scope="module")
def read(source: DatasetSource, window: Window) -> GpuScrapes:
    return gpu_per_replica(source, SELECTOR, KEYS, window)


def _at(read: GpuScrapes, replica: str, t_ms: int, tolerance_ms: float = TOLERANCE_MS) -> float:
    return float(read.at(replica, np.array([t_ms], dtype=np.int64), tolerance_ms)[0])


def test_one_reading_per_gpu_scrape_at_its_sample_time(
    source: DatasetSource, window: Window, read: GpuScrapes
) -> None:
    # Samples per series 60, 6, 60, 10, 60, 60: the median 60 gives 600 s / 60.
    assert scrape_interval_ms(source, SELECTOR, window) == 10_000
    # The readings 10 s apart; the grid at half that, 5 s.
    assert (read.interval_ms, read.step_ms) == (10_000, 5_000)
    assert [to_promql(q) for q in read.queries] == [
        "avg by (pod) (DCGM_FI_DEV_GPU_UTIL)",
        "max by (pod) (timestamp(DCGM_FI_DEV_GPU_UTIL))",
    ]
    times, means = read.replicas["c"]
    # Every scrape once, at its own time (4, 14, ..., 594 s), not at a step.
    assert times.tolist() == list(range(4_000, 600_000, 10_000))
    # Scrape k = 5 (at 54 s) of both GPUs: (5 + 10) / 2.
    assert means[times.tolist().index(54_000)] == 7.5


def test_a_scrape_is_paired_with_the_nearest_gpu_sample_time(read: GpuScrapes) -> None:
    # At 19.8 s the nearest sample is scrape 2 (24 s, 4.2 s away), not scrape 1
    # (14 s, 5.8 s away): (2 + 4) / 2.
    assert _at(read, "c", 19_800) == 3.0
    raw_times = (SCRAPES * 1000).astype(np.int64)
    raw = nearest(raw_times, np.arange(SCRAPES.size, dtype=np.float64), 19_800, TOLERANCE_MS)
    assert raw == 2.0  # GPU 0's nearest raw sample is the same scrape 2
    # A tie (19 s, 5 s from 14 s and from 24 s) takes the earlier: scrape 1, (1 + 2) / 2.
    assert _at(read, "c", 19_000) == 1.5


def test_a_sample_within_the_tolerance_is_paired_one_beyond_it_is_not(read: GpuScrapes) -> None:
    # The first GPU scrape is at 4 s, reading (0 + 0) / 2; an app scrape 10 s before
    # it is within the 10 s tolerance, one 1 ms earlier is not, unless it is wider.
    assert _at(read, "c", -6_000) == 0.0
    assert np.isnan(_at(read, "c", -6_001))
    assert _at(read, "c", -6_001, tolerance_ms=10_001.0) == 0.0
    # Past the last scrape (594 s) by 10 s: paired; by more: not.
    assert _at(read, "c", 604_000) == (59.0 + 118.0) / 2
    assert np.isnan(_at(read, "c", 604_001))


def test_a_gpu_that_stops_leaves_the_mean_and_is_not_zero(read: GpuScrapes) -> None:
    # Replica a: GPU 1 ended by a staleness marker at 64 s; the 64 s reading is GPU 0's.
    assert _at(read, "a", 55_000) == (5.0 + 10.0) / 2
    assert _at(read, "a", 65_000) == 6.0  # GPU 0 alone, not (6 + 0) / 2
    # Replica b: GPU 1 stopped at 94 s with no marker: its last value (18)
    # counts until the 5-minute look-back has passed it. The 384 s reading is
    # first held at the 385 s step (291 s after 94 s), the 394 s one at 395 s (301 s).
    assert _at(read, "b", 385_000) == (38.0 + 18.0) / 2
    assert _at(read, "b", 395_000) == 39.0


def test_the_readings_do_not_depend_on_the_window(source: DatasetSource) -> None:
    def readings(start: float, end: float) -> dict[int, float]:
        window = Window(datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC))
        times, means = gpu_per_replica(source, SELECTOR, KEYS, window).replicas["c"]
        return dict(zip(times.tolist(), means.tolist(), strict=True))

    whole, part = readings(0, 600), readings(7.5, 301.3)
    # Every reading the part holds is the whole's, at the same time with the same mean,
    assert part == {t: whole[t] for t in part}
    # and it holds every one within the 10 s tolerance of its edges: 4 s ... 304 s.
    assert {t for t in whole if -2_500 <= t <= 311_300} <= set(part)


def test_nothing_aligns_for_an_unknown_replica(read: GpuScrapes) -> None:
    assert np.isnan(_at(read, "nope", 60_000))


def test_a_family_without_series_gives_no_reading(source: DatasetSource, window: Window) -> None:
    none = gpu_per_replica(source, dcgm.PROF_PCIE_RX_BYTES.select([]), KEYS, window)
    assert (none.interval_ms, none.step_ms) == (0, 0)
    assert none.replicas == {}
    assert len(none.queries) == 2


def test_grid_steps_are_half_the_interval_in_whole_seconds() -> None:
    assert grid_step_ms(15_000) == 7_000
    assert grid_step_ms(14_900) == grid_step_ms(15_100) == 7_000  # jitter moves nothing
    assert grid_step_ms(60_000) == 30_000
    assert grid_step_ms(1_000) == 500
    assert grid_step_ms(0) == 0


def test_gpu_label_sets_are_the_series_cut_to_the_labels_read() -> None:
    bundled = DatasetSource(BUNDLED)
    window = bundled.dataset.manifest.window.window()
    for deployment in bundled.dataset.manifest.deployments:
        series = bundled.series(dcgm.GPU_UTIL.select(deployment.gpu_matchers), window)
        kept = set(dcgm.DISCOVERY_LABELS) | {m.label for m in deployment.gpu_matchers}
        want = {frozenset((k, v) for k, v in s.items() if k in kept) for s in series}
        got = gpu_label_sets(bundled, deployment, dcgm.GPU_UTIL, window)
        assert {frozenset(s.items()) for s in got} == want
        assert len(got) == len(series) == 8 * len(deployment.replicas)  # one per GPU
        # What is dropped is what a GPU series carries beyond: driver, PCI bus, device...
        assert {"pci_bus_id", "DCGM_FI_DRIVER_VERSION"} <= set(series[0]) - set(got[0])
