"""bottleneck(): profiling ratios classify decode-bound work; absent counters give unknown."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference_obs.analyses.bottleneck import (
    BottleneckClass,
    BottleneckSettings,
    advise,
    bottleneck,
)
from inference_obs.analyses.boundaries import CapacityReading, boundaries
from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError
from inference_obs.metrics import dcgm, vllm
from inference_obs.reading.measurement import Status
from inference_obs.samples import SampleSet, Series, Window
from inference_obs.simulate import simulate
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.dataset.source import DatasetSource

DATASETS = Path(__file__).parents[2] / "datasets"


def _open(name: str) -> tuple[DatasetSource, Window]:
    source = DatasetSource(DATASETS / name)
    edges = source.dataset.manifest.window
    return source, Window(edges.start, edges.end)


def test_decode_bound_reasoning_is_bandwidth_bound() -> None:
    source, window = _open("r1-decode")
    deployment = source.dataset.manifest.deployments[0]
    result = bottleneck(source, deployment, window)
    assert result.classification is BottleneckClass.BANDWIDTH_BOUND_DECODE
    assert result.dram_active.value is not None
    assert result.dram_active.value >= 0.5
    assert result.tensor_active.value is not None
    assert result.tensor_active.value <= 0.3
    assert result.gpu_util.value is not None
    assert result.gpu_util.value > 90.0
    assert result.nonzero_util_share.value is not None
    assert 0.0 <= result.nonzero_util_share.value <= 1.0
    assert result.nonzero_util_share.provenance.computation


def test_thresholds_are_settings() -> None:
    source, window = _open("r1-decode")
    deployment = source.dataset.manifest.deployments[0]
    result = bottleneck(source, deployment, window, dram_high=0.99, tensor_high=0.1)
    assert result.classification is BottleneckClass.COMPUTE_BOUND
    # The same lines given as a settings model; a GPU_UTIL line above its mean reads starved.
    lines = BottleneckSettings(dram_high=0.99, tensor_high=0.1)
    assert bottleneck(source, deployment, window, settings=lines) == result
    starved = bottleneck(source, deployment, window, util_low=100.0)
    assert starved.classification is BottleneckClass.STARVED
    assert "< 100 %" in starved.reason


def test_settings_default_to_the_old_arguments() -> None:
    assert BottleneckSettings().model_dump() == {
        "dram_high": 0.5,
        "tensor_low": 0.3,
        "tensor_high": 0.5,
        "util_low": 20.0,
        "kv_free_below": 0.5,
    }
    assert bottleneck.settings is BottleneckSettings


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("dram_high", 1.5),
        ("tensor_low", -0.1),
        ("tensor_high", 2.0),
        ("util_low", 120.0),
        ("dram", 0.5),
    ],
)
def test_bad_settings_are_refused_naming_them(setting: str, value: float) -> None:
    source, window = _open("r1-decode")
    deployment = source.dataset.manifest.deployments[0]
    overrides: dict[str, Any] = {setting: value}
    with pytest.raises(ConfigurationError, match=rf"bottleneck\.{setting}"):
        bottleneck(source, deployment, window, **overrides)


@pytest.mark.parametrize("name", ["PRO", "H20"])
def test_missing_profiling_counters_give_unknown(name: str) -> None:
    source, window = _open("pro5000-vs-h20")
    deployment = next(d for d in source.dataset.manifest.deployments if d.name == name)
    result = bottleneck(source, deployment, window)
    assert result.classification is BottleneckClass.UNKNOWN
    assert "DCGM_FI_PROF_DRAM_ACTIVE" in result.reason
    assert result.dram_active.status is Status.NO_DATA
    assert "DCGM_FI_PROF_DRAM_ACTIVE" in result.dram_active.annotations[0].message
    assert result.gpu_util.ok


def test_nonzero_util_share_counts_each_gpu_step_above_zero() -> None:
    # Two GPUs scraped every 60 s at +30 s over [0, 600] s: every 60 s step
    # sees each GPU's newest sample once. GPU 0 is above 0 at 3 scrapes,
    # GPU 1 at 1: 4 of 20 GPU-steps.
    times = 30.0 + 60.0 * np.arange(10)
    readings = ([0, 50, 0, 70, 0, 0, 10, 0, 0, 0], [0] * 9 + [5])
    series = [
        Series(dcgm.GPU_UTIL.name, {"pod": "a-0", "gpu": str(g)}, times, np.array(v, float))
        for g, v in enumerate(readings)
    ]
    bundled = read_dataset(DATASETS / "r1-decode")
    source = DatasetSource(dataclasses.replace(bundled, samples=SampleSet.from_series(series)))
    window = Window(datetime.fromtimestamp(0, UTC), datetime.fromtimestamp(600, UTC))
    deployment = Deployment(
        name="A",
        selector={"pod": "~a-.*"},
        hardware={"gpu_model": "NVIDIA H20", "gpus_per_replica": 2},
        engine={"name": "vllm"},
    )
    share = bottleneck(source, deployment, window).nonzero_util_share
    assert share.key == "A/bottleneck/nonzero_util_share"
    assert share.value == pytest.approx(4 / 20, rel=1e-12)
    assert "every 60 s" in (share.provenance.computation or "")
    # Named and defined apart from the stage boundaries' duty cycle (time spent computing).
    assert "nor the share of time it computed" in share.caveats[0]


def _kv_peak(source: DatasetSource, deployment: Deployment, window: Window) -> float:
    """Largest raw vllm:kv_cache_usage_perc sample of the deployment (ground truth)."""
    raw = source.raw(vllm.KV_CACHE_USAGE.select(deployment.matchers), window).values
    return float(np.nanmax(raw))


@pytest.mark.parametrize(
    ("dataset", "name", "action"),
    [
        # Decode-bound (DRAM busy, tensor pipes light) with KV room: batch more.
        ("r1-decode", "R1", "batch more"),
        # No profiling counters, GPU_UTIL ~16 % and the KV cache under half full: batch more.
        ("pro5000-vs-h20", "PRO", "batch more"),
        # No profiling counters, GPU_UTIL ~95 %: nothing says what bounds them: profile first.
        ("pro5000-vs-h20", "H20", "profile before adding GPUs"),
    ],
)
def test_each_reading_says_what_to_do(dataset: str, name: str, action: str) -> None:
    source, window = _open(dataset)
    deployment = next(d for d in source.dataset.manifest.deployments if d.name == name)
    result = bottleneck(source, deployment, window)
    peak = _kv_peak(source, deployment, window)
    assert result.kv_cache_usage_max.value == pytest.approx(peak, rel=1e-12)
    assert result.action == action
    assert (action == "batch more") == (peak < 0.5)  # the default kv_free_below
    assert f"KV cache peak {peak:.0%} used" in result.advice
    if result.classification is BottleneckClass.UNKNOWN:
        assert "DCGM_FI_PROF_DRAM_ACTIVE" in result.advice
    # A KV cache that is not mostly free turns "batch more" into reclaiming KV memory first.
    full = bottleneck(source, deployment, window, kv_free_below=peak / 2)
    assert full.action != "batch more"


def test_work_on_idle_gpus_means_profile_before_adding_gpus(tmp_path: Path) -> None:
    # The gpu-boundaries scenario starves its GPUs on the host and on PCIe: whatever the
    # profiling ratios say, the step is to profile, not to buy GPUs.
    source = DatasetSource(simulate("gpu-boundaries", tmp_path / "d", seed=11))
    deployment = source.dataset.manifest.deployments[0]
    window = source.dataset.manifest.window.window()
    stages = boundaries(source, deployment, window)
    assert stages.reading is CapacityReading.STARVED
    action, sentence = advise(bottleneck(source, deployment, window), stages)
    assert action == "profile before adding GPUs"
    assert sentence.startswith("Work waited or ran while the GPUs idled")
