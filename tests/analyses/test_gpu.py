"""gpu(): sample-weighted utilisation, missing GPUs by name, no_data families."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inference_obs.analyses.gpu import GpuResult, gpu, gpu_name
from inference_obs.deployment import Deployment
from inference_obs.metrics import dcgm
from inference_obs.reading.measurement import Status
from inference_obs.samples import Labels, Series, Window
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset

BUNDLED = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"


@pytest.fixture(scope="module")
def window(source: DatasetSource) -> Window:
    edges = source.dataset.manifest.window
    return Window(edges.start, edges.end)


def _deployment(source: DatasetSource, name: str) -> Deployment:
    return next(d for d in source.dataset.manifest.deployments if d.name == name)


@pytest.mark.parametrize("name", ["PRO", "H20"])
def test_mean_is_raw_sum_over_count(source: DatasetSource, window: Window, name: str) -> None:
    deployment = _deployment(source, name)
    result = gpu(source, deployment, window)
    raw = source.raw(dcgm.GPU_UTIL.select(deployment.gpu_matchers), window)
    assert len(raw) == 8 * len(deployment.replicas)
    assert np.any(raw.values == 0.0)  # zeros are in the data and count
    expected = float(raw.values.sum() / raw.values.size)
    assert result.utilization_mean.status is Status.OK
    assert result.utilization_mean.value == pytest.approx(expected, abs=1e-9)
    assert result.utilization_mean.unit == "percent"
    assert result.missing_gpus == ()
    assert result.gpus_expected.value == result.gpus_with_samples.value == len(raw)


def test_pro_low_h20_high(source: DatasetSource, window: Window) -> None:
    pro = gpu(source, _deployment(source, "PRO"), window)
    h20 = gpu(source, _deployment(source, "H20"), window)
    assert pro.utilization_mean.value is not None
    assert h20.utilization_mean.value is not None
    assert 10.0 < pro.utilization_mean.value < 20.0
    assert h20.utilization_mean.value > 80.0
    assert len(h20.utilization_per_replica) == 4
    assert len(h20.utilization_per_gpu) == 32
    low, high = h20.utilization_replica_min.value, h20.utilization_replica_max.value
    assert low is not None
    assert high is not None
    assert low <= h20.utilization_mean.value <= high
    per_gpu = [m.value for m in h20.utilization_per_gpu if m.value is not None]
    assert h20.utilization_gpu_min.value == min(per_gpu)
    assert h20.utilization_gpu_max.value == max(per_gpu)


def test_power_and_framebuffer(source: DatasetSource, window: Window) -> None:
    aggregates = source.dataset.aggregates
    assert aggregates is not None
    result = gpu(source, _deployment(source, "PRO"), window)
    assert result.power_mean_watts.value == pytest.approx(
        aggregates["realised"]["PRO"]["gpu_power_mean_watts"], rel=1e-5
    )
    assert result.power_mean_watts.unit == "W"
    assert any("rated" in c for c in result.power_mean_watts.caveats)
    assert result.fb_used_mean_mib.status is Status.OK
    # The dataset exports no FB_FREE: capacity is no_data naming it, never 0.
    capacity = result.fb_capacity_mib
    assert capacity.status is Status.NO_DATA
    assert capacity.value is None
    assert "DCGM_FI_DEV_FB_FREE" in capacity.annotations[-1].message
    assert "DCGM_FI_DEV_FB_USED" not in capacity.annotations[-1].message


def _without(source: DatasetSource, drop: Labels, names: tuple[str, ...]) -> list[Series]:
    return [
        s
        for s in source.dataset.samples
        if not (s.name in names and all(s.labels.get(k) == v for k, v in drop.items()))
    ]


def test_gpu_without_util_listed_by_name(
    source: DatasetSource, window: Window, tmp_path: Path
) -> None:
    deployment = _deployment(source, "H20")
    victim = Labels({"Hostname": "h20-model-node-02", "gpu": "3"})
    series = _without(source, victim, (dcgm.GPU_UTIL.name,))
    dropped = DatasetSource(write_dataset(tmp_path / "d", source.dataset.manifest, series))
    result = gpu(dropped, deployment, window)
    assert result.missing_gpus == (gpu_name(victim),) == ("h20-model-node-02/gpu3",)
    assert result.utilization_mean.status is Status.PARTIAL
    assert "h20-model-node-02/gpu3" in result.utilization_mean.annotations[-1].message
    assert (result.gpus_expected.value, result.gpus_with_samples.value) == (32.0, 31.0)


def test_gpu_absent_everywhere_counted(
    source: DatasetSource, window: Window, tmp_path: Path
) -> None:
    deployment = _deployment(source, "H20")
    victim = Labels({"Hostname": "h20-model-node-01", "gpu": "0"})
    every = tuple(f.name for f in (dcgm.GPU_UTIL, dcgm.FB_USED, dcgm.POWER_USAGE))
    series = _without(source, victim, every)
    dropped = DatasetSource(write_dataset(tmp_path / "d", source.dataset.manifest, series))
    result = gpu(dropped, deployment, window)
    assert result.missing_gpus == ()
    assert result.utilization_mean.status is Status.PARTIAL
    assert "1 more declared" in result.utilization_mean.annotations[-1].message


def test_absent_family_is_no_data(source: DatasetSource, window: Window) -> None:
    ghost = _deployment(source, "PRO").model_copy(
        update={"name": "X", "gpu_selector": {"pod": "nothing-.*"}}
    )
    result: GpuResult = gpu(source, ghost, window)
    for measured in (result.utilization_mean, result.power_mean_watts, result.fb_used_mean_mib):
        assert measured.status is Status.NO_DATA
        assert measured.value is None
    assert "DCGM_FI_DEV_GPU_UTIL" in result.utilization_mean.annotations[-1].message
    assert result.utilization_per_gpu == ()
    assert result.utilization_gpu_min.status is Status.NO_DATA
    frame = result.to_frame()
    assert set(frame["status"]) >= {"no_data"}
    assert "<table>" in result._repr_html_()
