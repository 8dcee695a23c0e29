"""``discover``: the deployments of every bundled dataset found again, under either DCGM scheme.

Found deployments must select the same replicas and the same GPUs as the
dataset's manifest, and their file must read back as the same deployments.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_obs.deployment import Deployment
from inference_obs.discover import Inventory, Replica, discover, unmatched_selectors
from inference_obs.discover.group import deployments, stem
from inference_obs.discover.inventory import Gpu, ReplicaKey
from inference_obs.discover.yaml_file import deployments_yaml
from inference_obs.query import Selector
from inference_obs.samples import Labels, Series, Window
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset
from inference_obs.source.deployments_file import load_deployments

DATASETS = Path(__file__).resolve().parents[2] / "datasets"
BUNDLED = ("pro5000-vs-h20", "h100-vs-h200", "r1-decode")
WINDOW = Window.parse("2026-01-01T00:00:00Z", "1h")


def engine_pods(source: DatasetSource, d: Deployment, window: Window) -> set[str]:
    found = source.series(Selector("vllm:num_requests_running", d.matchers), window)
    return {labels["pod"] for labels in found}


def gpus(source: DatasetSource, d: Deployment, window: Window) -> set[str]:
    found = source.series(Selector("DCGM_FI_DEV_GPU_UTIL", d.gpu_matchers), window)
    return {labels["UUID"] for labels in found}


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_deployment_is_found_with_its_replicas_and_gpus(
    name: str, tmp_path: Path
) -> None:
    source = DatasetSource(DATASETS / name)
    window = source.dataset.manifest.window.window()
    found = discover(source, window)
    declared = source.dataset.manifest.deployments
    assert len(found.deployments) == len(declared)
    for d in declared:
        pods = engine_pods(source, d, window)
        (mine,) = (f for f in found.deployments if engine_pods(source, f, window) == pods)
        assert gpus(source, mine, window) == gpus(source, d, window)
        assert len(mine.replicas) == len(d.replicas)
        assert mine.hardware.gpu_model == d.hardware.gpu_model
        assert mine.hardware.gpus_per_replica == d.hardware.gpus_per_replica
        assert mine.config.kv_cache_dtype == d.config.kv_cache_dtype
        assert mine.config.prefix_caching == d.config.prefix_caching
    path = tmp_path / "deployments.yaml"
    path.write_text(found.to_yaml(name), encoding="utf-8")
    assert load_deployments(path) == found.deployments  # the file is read as written
    text = path.read_text()
    assert '{regex: "' in text  # explicit regexes ...
    assert '"~' not in text  # ... never the shorthand
    assert unmatched_selectors(source, found.deployments, window) == []


def test_data_parallel_engines_are_counted(tmp_path: Path) -> None:
    source = DatasetSource(DATASETS / "h100-vs-h200")
    found = discover(source, source.dataset.manifest.window.window())
    by_gpu = {d.hardware.gpu_model: d for d in found.deployments}
    assert by_gpu["NVIDIA H200"].config.data_parallel_size == 8  # eight engines, one pod
    assert by_gpu["NVIDIA H100 PCIe"].config.data_parallel_size is None
    assert by_gpu["NVIDIA H200"].name.endswith("-H200")  # one model, two GPU classes


def _gpu_operator_scrape(dataset: Path, out: Path) -> Path:
    """``dataset`` as a default GPU-operator scrape labels DCGM: the workload pod in exported_*."""
    read = read_dataset(dataset)
    relabelled = []
    for s in read.samples:
        labels = dict(s.labels)
        if s.name.startswith("DCGM_"):
            labels["exported_pod"] = labels.pop("pod")
            labels["exported_namespace"] = labels.pop("namespace")
            labels["pod"] = f"nvidia-dcgm-exporter-{labels['Hostname'][-2:]}x7k2q"
            labels["namespace"] = "gpu-operator"
        relabelled.append(Series(s.name, Labels(labels), s.timestamps, s.values))
    return write_dataset(out, read.manifest, relabelled).path


def test_gpus_labelled_exported_pod_are_attributed_and_selected(tmp_path: Path) -> None:
    source = DatasetSource(_gpu_operator_scrape(DATASETS / "r1-decode", tmp_path / "d"))
    window = source.dataset.manifest.window.window()
    found = discover(source, window)
    (d,) = found.deployments
    assert d.hardware.gpus_per_replica == 8
    assert d.gpu_selector == {"exported_namespace": "llm", "exported_pod": "~r1-.*"}
    assert len(gpus(source, d, window)) == 16
    assert unmatched_selectors(source, [d], window) == []
    # The manifest's selector reads the exporter's pod label now: it finds no GPU, and says so.
    (declared,) = source.dataset.manifest.deployments
    (line,) = unmatched_selectors(source, [declared], window)
    assert line.startswith('R1: selector {namespace="llm",pod=~"r1-.*"} matches no DCGM series')


def _replica(pod: str, model: str = "m", gpus: int = 2, namespace: str = "ns") -> Replica:
    replica = Replica(ReplicaKey(namespace, "pod", pod), "vllm", {model}, {"0"})
    for i in range(gpus):
        gpu = Gpu(f"GPU-{pod}-{i}", "NVIDIA H20", pod, namespace, "pod")
        replica.gpus[gpu.id] = gpu
    return replica


def _found(*replicas: Replica) -> list[Deployment]:
    inventory = Inventory(WINDOW, {r.key: r for r in replicas}, {})
    return [f.deployment for f in deployments(inventory)]


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        ("h20-model-01", "h20-model"),
        ("vllm-llama-7d9f8b6c5-x2k4z", "vllm-llama"),
        ("sglang-0", "sglang"),
        ("solo", "solo"),
        ("model-v2-ab12c", "model-v2"),
    ],
)
def test_stems_drop_what_kubernetes_generates(pod: str, expected: str) -> None:
    assert stem(pod) == expected


def test_a_stem_that_would_catch_another_deployment_becomes_an_exact_list() -> None:
    found = _found(
        _replica("chat-0"), _replica("chat-1"), _replica("chat-big-0", model="big", gpus=8)
    )
    small, big = sorted(found, key=lambda d: len(d.replicas), reverse=True)
    assert small.selector["pod"] == "~chat-0|chat-1"  # chat-.* would select chat-big-0
    assert big.selector["pod"] == "~chat-big-.*"
    (only,) = _found(_replica("solo"))
    assert only.selector == {"namespace": "ns", "pod": "solo"}


def test_names_say_what_sets_deployments_apart() -> None:
    found = _found(
        _replica("a-0", model="org/Llama-3-70B", gpus=8),
        _replica("b-0", model="org/Llama-3-70B", gpus=4),
        _replica("c-0", model="org/Qwen3", gpus=2, namespace="prod"),
        _replica("d-0", model="org/Qwen3", gpus=2, namespace="staging"),
    )
    assert [d.name for d in found] == [
        "Llama-3-70B-H20-x4",
        "Llama-3-70B-H20-x8",
        "Qwen3-prod",
        "Qwen3-staging",
    ]


def test_a_replica_without_gpu_series_gets_placeholders_and_a_note() -> None:
    inventory = Inventory(WINDOW, {(r := _replica("x-0", gpus=0)).key: r}, {})
    (found,) = deployments(inventory)
    assert found.deployment.hardware.gpu_model == "unknown"
    assert any(note.startswith("NOT SEEN") for note in found.notes)


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085", "\r"])
def test_a_line_break_in_a_model_name_cannot_add_a_deployment(
    tmp_path: Path, separator: str
) -> None:
    # YAML ends a line at U+2028, U+2029 and U+0085 too: a model name holding one, written
    # as is in an entry's comment, would end the comment and add a deployment of its own.
    injected = [
        "  - name: injected",
        "    replicas: [x]",
        "    selector: {pod: x}",
        "    hardware: {gpu_model: g, gpus_per_replica: 1}",
        "    engine: {name: vllm}",
    ]
    model = "org/m" + separator + separator.join(injected)
    inventory = Inventory(WINDOW, {(r := _replica("a-0", model=model)).key: r}, {})
    found = deployments(inventory)
    path = tmp_path / "deployments.yaml"
    text = deployments_yaml(found, source=f"s{separator}x", window="w", notes=[model])
    path.write_text(text, encoding="utf-8", newline="")
    (read,) = load_deployments(path)
    assert read == found[0].deployment
    assert f"\\u{ord(separator):04x}  - name: injected" in text  # escaped, still readable
