"""DCGM series in workload terms: the exporter's pod labels, shared GPUs (metrics.dcgm_labels)."""

from __future__ import annotations

from inference_obs.metrics import builders as b, dcgm
from inference_obs.metrics.dcgm_labels import (
    GpuLabelScheme,
    in_workload_terms,
    scheme_of,
    shared_gpus,
    workload_labels,
)
from inference_obs.query import Matcher, Selector, to_promql
from inference_obs.samples import Labels

POD = (Matcher.equal("pod", "v-0"),)


def test_the_scheme_is_told_by_exported_labels_or_an_exporter_pod() -> None:
    assert scheme_of([Labels({"pod": "v-0"})]) is GpuLabelScheme.WORKLOAD
    assert scheme_of([Labels({"exported_namespace": "llm"})]) is GpuLabelScheme.EXPORTED
    # No GPU in use yet: only the exporter's own pod (GPU Operator's DaemonSet name).
    assert scheme_of([Labels({"pod": "nvidia-dcgm-exporter-5tc8x"})]) is GpuLabelScheme.EXPORTED


def test_a_gpu_no_pod_uses_keeps_no_pod() -> None:
    labels = Labels({"pod": "nvidia-dcgm-exporter-5tc8x", "namespace": "gpu-operator", "gpu": "5"})
    assert workload_labels(labels) == Labels({"gpu": "5"})


def test_nothing_changes_in_the_workload_scheme_without_sharing() -> None:
    asked = b.sample_mean(dcgm.GPU_UTIL, POD, 60, by=("pod",))
    assert in_workload_terms(asked, GpuLabelScheme.WORKLOAD, dedupe=False) is asked


def test_app_series_are_left_alone() -> None:
    asked = Selector("vllm:num_requests_waiting", POD).sum(by=("pod",))
    assert in_workload_terms(asked, GpuLabelScheme.EXPORTED, dedupe=True) is asked


def test_a_shared_gpu_is_one_series_before_a_sum() -> None:
    asked = b.sample_mean(dcgm.POWER_USAGE, (), 60)
    text = to_promql(in_workload_terms(asked, GpuLabelScheme.WORKLOAD, dedupe=True))
    one_each = "max by (Hostname, hostname, gpu, UUID, uuid, GPU_I_PROFILE, GPU_I_ID)"
    assert text == (
        f"sum({one_each} (sum_over_time(DCGM_FI_DEV_POWER_USAGE[1m]))) / "
        f"sum({one_each} (count_over_time(DCGM_FI_DEV_POWER_USAGE[1m])))"
    )


def test_shared_gpus_are_named() -> None:
    sets = [
        Labels({"Hostname": "n1", "gpu": "0", "pod": "a"}),
        Labels({"Hostname": "n1", "gpu": "0", "pod": "b"}),
        Labels({"Hostname": "n1", "gpu": "1", "pod": "a"}),
        Labels({"UUID": "GPU-x", "GPU_I_ID": "1", "pod": "c"}),
        Labels({"UUID": "GPU-x", "GPU_I_ID": "1", "pod": "d"}),
        Labels({"UUID": "GPU-x", "GPU_I_ID": "2", "pod": "e"}),
    ]
    assert shared_gpus(sets) == ["GPU-x/gi1", "n1/gpu0"]
