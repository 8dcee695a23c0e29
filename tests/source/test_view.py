"""A source read in workload terms (source.view): answers, merged series, the PromQL read."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from inference_obs.deployment import Deployment
from inference_obs.metrics import dcgm
from inference_obs.metrics.dcgm_labels import GpuLabelScheme
from inference_obs.samples import Labels, Series, Vector, Window
from inference_obs.source.dataset.manifest import Manifest, ManifestWindow
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset
from inference_obs.source.view import Found, ViewSource

WINDOW = Window(datetime.fromtimestamp(0, UTC), datetime.fromtimestamp(120, UTC))
GPU = {"Hostname": "n1", "gpu": "0", "exported_pod": "v-0", "exported_namespace": "llm"}


def _source(tmp_path: Path) -> DatasetSource:
    # The exporter restarted at 60 s: the same GPU's series, scraped through two exporter pods.
    before = Series(
        dcgm.GPU_UTIL.name,
        Labels({**GPU, "pod": "nvidia-dcgm-exporter-aaaaa"}),
        np.array([0.0, 30.0]),
        np.array([10.0, 20.0]),
    )
    after = Series(
        dcgm.GPU_UTIL.name,
        Labels({**GPU, "pod": "nvidia-dcgm-exporter-bbbbb"}),
        np.array([60.0, 90.0]),
        np.array([30.0, 40.0]),
    )
    manifest = Manifest(
        title="an exporter restart",
        synthetic=False,
        window=ManifestWindow(start=WINDOW.start, end=WINDOW.end),
        scrape_interval_seconds=30,
        deployments=(
            Deployment(
                name="v",
                selector={"pod": "v-0"},
                hardware={"gpu_model": "NVIDIA H100", "gpus_per_replica": 1},
                engine={"name": "vllm"},
            ),
        ),
        methodology=("made for this test",),
    )
    return DatasetSource(write_dataset(tmp_path / "ds", manifest, [before, after]))


def test_an_exporter_restart_leaves_one_series_per_gpu(tmp_path: Path) -> None:
    view = ViewSource(
        _source(tmp_path), "v", WINDOW, lambda _: Found(scheme=GpuLabelScheme.EXPORTED)
    )
    selector = dcgm.GPU_UTIL.select()
    raw = view.raw(selector, WINDOW)
    assert raw.labels == (Labels({"Hostname": "n1", "gpu": "0", "namespace": "llm", "pod": "v-0"}),)
    assert raw.t_ms.tolist() == [0, 30_000, 60_000, 90_000]
    assert raw.values.tolist() == [10.0, 20.0, 30.0, 40.0]
    (one,) = view.series(selector, WINDOW)
    assert (one["pod"], one["namespace"]) == ("v-0", "llm")
    assert not {"exported_pod", "exported_namespace"} & set(one)


def test_the_promql_read_is_what_was_asked(tmp_path: Path) -> None:
    view = ViewSource(
        _source(tmp_path), "v", WINDOW, lambda _: Found(scheme=GpuLabelScheme.EXPORTED)
    )
    asked = dcgm.GPU_UTIL.select().avg(by=("pod",))
    answer = view.instant(asked, WINDOW.end_s)
    assert view.promql("avg by (pod) (DCGM_FI_DEV_GPU_UTIL)") == answer.promql
    assert "exported_pod" in answer.promql
    assert isinstance(answer.value, Vector)
    assert answer.value.labels == (Labels({"pod": "v-0"}),)
