"""gpu_per_replica(): a GPU family averaged per replica by the engine, aligned with app scrapes.

A hand-made dataset over [0, 600] s: GPUs scraped every 10 s at +4 s (4, 14,
24, ...), and GPU ``g`` reads ``(g + 1) * k`` at its ``k``-th scrape, so each
value tells which scrape it came from. Replica ``a``: GPU 0 throughout, GPU 1
until 54 s, then a staleness marker at 64 s. Replica ``b``: GPU 0 throughout,
GPU 1 until 94 s with no staleness marker (as in a backfilled dataset).
Replica ``c``: two GPUs throughout. Steps fall at 0, 10, ..., 600 s.
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
    GpuSteps,
    gpu_label_sets,
    gpu_per_replica,
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
def steps(source: DatasetSource, window: Window) -> GpuSteps:
    return gpu_per_replica(source, SELECTOR, KEYS, window)


def _at(steps: GpuSteps, replica: str, t_ms: int) -> float:
    return float(steps.at(replica, np.array([t_ms], dtype=np.int64), TOLERANCE_MS)[0])


def test_the_step_is_the_scrape_interval(
    source: DatasetSource, window: Window, steps: GpuSteps
) -> None:
    # Samples per series 60, 6, 60, 10, 60, 60: the median 60 gives 600 s / 60.
    assert scrape_interval_ms(source, SELECTOR, window) == 10_000
    assert steps.step_ms == 10_000
    assert [to_promql(q) for q in steps.queries] == ["avg by (pod) (DCGM_FI_DEV_GPU_UTIL)"]
    times, _ = steps.replicas["c"]
    # No sample at or before 0 s; then every step.
    assert times.tolist() == list(range(10_000, 600_001, 10_000))


def test_a_step_holds_each_gpus_latest_sample_at_or_before_it(steps: GpuSteps) -> None:
    times, means = steps.replicas["c"]
    at_60 = times.tolist().index(60_000)
    # Scrape k = 5 (at 54 s) of both GPUs: (5 + 10) / 2; at 60 s, not 64 s.
    assert means[at_60] == 7.5


def test_look_back_alignment_is_not_the_nearest_raw_sample(steps: GpuSteps) -> None:
    # Step 20 s stands for 15 s, step 30 s for 25 s: at 19.8 s, step 20 s,
    # whose value is scrape 1 (14 s), although scrape 2 (24 s) is nearer.
    assert _at(steps, "c", 19_800) == (1.0 + 2.0) / 2
    raw_times = (SCRAPES * 1000).astype(np.int64)
    old = nearest(raw_times, np.arange(SCRAPES.size, dtype=np.float64), 19_800, TOLERANCE_MS)
    assert old == 2.0  # what the raw nearest-sample alignment gave for GPU 0
    # A tie between two steps takes the earlier.
    assert _at(steps, "c", 20_000) == 3.0 / 2


def test_a_gpu_that_stops_leaves_the_mean_and_is_not_zero(steps: GpuSteps) -> None:
    # Replica a: GPU 1 ended by a staleness marker at 64 s; absent from step 70 s.
    assert _at(steps, "a", 55_000) == (5.0 + 10.0) / 2
    assert _at(steps, "a", 65_000) == 6.0  # GPU 0 alone, not (6 + 0) / 2
    # Replica b: GPU 1 stopped at 94 s with no marker: its last value (18)
    # counts until the 5-minute look-back has passed it (step 390 s), then not.
    assert _at(steps, "b", 385_000) == (38.0 + 18.0) / 2
    assert _at(steps, "b", 395_000) == 39.0


def test_nothing_aligns_beyond_the_tolerance_or_for_an_unknown_replica(steps: GpuSteps) -> None:
    assert np.isnan(_at(steps, "c", 700_000))
    assert np.isnan(_at(steps, "nope", 60_000))


def test_a_family_without_series_gives_no_step(source: DatasetSource, window: Window) -> None:
    none = gpu_per_replica(source, dcgm.PROF_PCIE_RX_BYTES.select([]), KEYS, window)
    assert none.step_ms == 0
    assert none.replicas == {}
    assert len(none.queries) == 1


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
