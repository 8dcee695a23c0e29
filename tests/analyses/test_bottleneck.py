"""bottleneck(): profiling ratios classify decode-bound work; absent counters give unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_obs.analyses.bottleneck import BottleneckClass, bottleneck
from inference_obs.analyses.measurement import Status
from inference_obs.samples import Window
from inference_obs.source.dataset_source import DatasetSource

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
    assert result.duty_cycle.value is not None
    assert 0.0 <= result.duty_cycle.value <= 1.0
    assert result.duty_cycle.provenance.computation


def test_thresholds_are_arguments() -> None:
    source, window = _open("r1-decode")
    deployment = source.dataset.manifest.deployments[0]
    result = bottleneck(source, deployment, window, dram_high=0.99, tensor_high=0.1)
    assert result.classification is BottleneckClass.COMPUTE_BOUND


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
