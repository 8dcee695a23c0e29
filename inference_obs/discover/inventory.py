"""What a source holds: serving replicas, their models and engines, the GPUs each holds.

:func:`inventory` reads label sets only (the series endpoint, or a dataset's
labels), never samples:

- **replicas**: the pods (the scrape ``instance`` where a series has no
  ``pod`` label) whose vLLM or SGLang series have samples in the window, each
  with its models (``model_name``) and engines (vLLM's ``engine`` label, one
  per data-parallel rank; SGLang's ``dp_rank``);
- **GPUs**: every DCGM series of a GPU-presence family, attributed to the pod
  that holds the GPU. dcgm-exporter labels the pod ``pod``/``namespace``
  when Prometheus keeps its labels (``honor_labels``, a per-node scrape),
  and ``exported_pod``/``exported_namespace`` in a default GPU-operator
  scrape, where ``pod`` and ``namespace`` name the exporter itself; the
  ``exported_*`` labels win where both are present;
- **KV-cache configuration**: the labels of ``vllm:cache_config_info`` per replica.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from inference_obs.metrics import dcgm, sglang, vllm
from inference_obs.metrics.family import Family
from inference_obs.metrics.renames import exposed_names
from inference_obs.query import Selector
from inference_obs.samples import Labels, Window
from inference_obs.source.base import Source

__all__ = [
    "ENGINE_FAMILIES",
    "GPU_FAMILIES",
    "Gpu",
    "Inventory",
    "Replica",
    "ReplicaKey",
    "inventory",
]

#: Per serving engine, the family every engine process exports (one series per engine),
#: and the label that numbers its engines (data-parallel ranks) within a replica.
ENGINE_FAMILIES: dict[str, tuple[Family, str]] = {
    "vllm": (vllm.NUM_REQUESTS_RUNNING, "engine"),
    "sglang": (sglang.NUM_RUNNING_REQS, "dp_rank"),
}
#: DCGM families whose series reveal a GPU (as the GPU analysis counts them). The profiling
#: fields come last: dcgm-exporter exports only them for the instances of a MIG GPU.
GPU_FAMILIES: tuple[Family, ...] = (
    dcgm.GPU_UTIL,
    dcgm.FB_USED,
    dcgm.FB_FREE,
    dcgm.POWER_USAGE,
    dcgm.GPU_TEMP,
    dcgm.SM_CLOCK,
    dcgm.PROF_GR_ENGINE_ACTIVE,
    dcgm.PROF_SM_ACTIVE,
    dcgm.PROF_DRAM_ACTIVE,
    dcgm.PROF_PIPE_TENSOR_ACTIVE,
)


@dataclass(frozen=True, slots=True, order=True)
class ReplicaKey:
    """Which replica: the label naming it (``pod`` or ``instance``), its value, its namespace."""

    namespace: str | None
    label: str
    name: str


@dataclass
class Replica:
    """One serving replica, as its series show it."""

    key: ReplicaKey
    engine: str
    models: set[str] = field(default_factory=set)
    engines: set[str] = field(default_factory=set)
    cache_config: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    gpus: dict[str, Gpu] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU as DCGM labels it.

    Attributes
    ----------
    id
        ``UUID`` where present, else ``Hostname/gpuN``; a MIG instance adds
        ``/GPU_I_ID`` (``GPU-.../1``): each instance is its own device.
    model
        ``modelName`` (``NVIDIA H20``), or None.
    pod, namespace
        The pod holding it and that pod's namespace, under :attr:`scheme`.
    scheme
        ``pod`` (``pod``/``namespace`` labels) or ``exported`` (``exported_pod``/
        ``exported_namespace``); None when no label names a pod.
    """

    id: str
    model: str | None
    pod: str | None
    namespace: str | None
    scheme: str | None


@dataclass
class Inventory:
    """Every serving replica and GPU with series in the window."""

    window: Window
    replicas: dict[ReplicaKey, Replica]
    gpus: dict[str, Gpu]
    #: GPU family names that had series (empty: no DCGM data at all).
    gpu_families: tuple[str, ...] = ()

    def unattributed_gpus(self) -> list[Gpu]:
        """GPUs that no serving replica holds (idle, other workloads, or no pod label)."""
        held = {g.id for r in self.replicas.values() for g in r.gpus.values()}
        return [g for g in self.gpus.values() if g.id not in held]


def _replica_key(labels: Labels) -> ReplicaKey:
    if "pod" in labels:
        return ReplicaKey(labels.get("namespace"), "pod", labels["pod"])
    return ReplicaKey(labels.get("namespace"), "instance", labels.get("instance", ""))


def _gpu(labels: Labels) -> Gpu:
    uuid = next((labels[k] for k in dcgm.UUID_LABELS if k in labels), None)
    host = next((labels[k] for k in dcgm.HOSTNAME_LABELS if k in labels), "")
    ident = uuid or f"{host}/gpu{labels.get('gpu', '?')}"
    if labels.get("GPU_I_ID"):
        ident = f"{ident}/{labels['GPU_I_ID']}"
    model = labels.get("modelName")
    if "exported_pod" in labels:
        return Gpu(
            ident, model, labels["exported_pod"], labels.get("exported_namespace"), "exported"
        )
    for pod_label, namespace_label in (("pod", "namespace"), ("pod_name", "pod_namespace")):
        if pod_label in labels:
            return Gpu(ident, model, labels[pod_label], labels.get(namespace_label), "pod")
    return Gpu(ident, model, None, None, None)


def _series(source: Source, family: Family, window: Window) -> tuple[Labels, ...]:
    """Label sets of ``family`` under the first of its names that has series (another
    exporter's prefix included: NVIDIA NIM's, Ray Serve's, the SGLang router's)."""
    for name in exposed_names(family):
        found = source.series(Selector(name), window)
        if found:
            return found
    return ()


def _holds(replica: ReplicaKey, gpu: Gpu) -> bool:
    if replica.label != "pod" or gpu.pod != replica.name:
        return False
    return gpu.namespace is None or replica.namespace is None or gpu.namespace == replica.namespace


def inventory(source: Source, window: Window) -> Inventory:
    """Read the serving replicas and GPUs with series in ``window`` (labels only).

    Parameters
    ----------
    source
        Any source (live or a dataset).
    window
        Series with at least one sample in it count.

    Returns
    -------
    Inventory
        Replicas keyed by (namespace, pod or instance); GPUs by UUID (and MIG instance).
    """
    replicas: dict[ReplicaKey, Replica] = {}
    for engine, (family, rank_label) in ENGINE_FAMILIES.items():
        for labels in _series(source, family, window):
            key = _replica_key(labels)
            replica = replicas.setdefault(key, Replica(key, engine))
            if "model_name" in labels:
                replica.models.add(labels["model_name"])
            replica.engines.add(labels.get(rank_label, "0"))
    for labels in _series(source, vllm.CACHE_CONFIG_INFO, window):
        cached = replicas.get(_replica_key(labels))
        if cached is not None:
            for name, value in labels.items():
                if name in vllm.CACHE_CONFIG_INFO.labels and name != "engine":
                    cached.cache_config[name].add(value)
    gpus: dict[str, Gpu] = {}
    families = []
    for family in GPU_FAMILIES:
        found = _series(source, family, window)
        if found:
            families.append(family.name)
        for labels in found:
            gpu = _gpu(labels)
            gpus.setdefault(gpu.id, gpu)
    by_pod: dict[str, list[Gpu]] = defaultdict(list)
    for gpu in gpus.values():
        if gpu.pod is not None:
            by_pod[gpu.pod].append(gpu)
    for replica in replicas.values():
        for gpu in by_pod.get(replica.key.name, []):
            if _holds(replica.key, gpu):
                replica.gpus[gpu.id] = gpu
    return Inventory(window, replicas, gpus, tuple(families))
