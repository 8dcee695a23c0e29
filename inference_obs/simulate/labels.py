"""Where simulated replicas run and the labels their series carry.

Replicas of a deployment are packed ``replicas_per_node`` to a node; each
node runs one dcgm-exporter. Names and addresses are made up but stable:

- pod ``<pod_prefix>-01``, node ``<pod_prefix>-node-01``;
- vLLM target ``10.<deployment>.<replica>.10:8000`` (job ``vllm``), GPU
  exporter ``10.<deployment>.<node>.20:9400`` (job ``dcgm-exporter``), the
  kubelet's cAdvisor ``10.<deployment>.<node>.21:10250`` (job ``kubelet``)
  and node_exporter ``10.<deployment>.<node>.22:9100`` (job
  ``node-exporter``), both labelled with the node's name (``node``);
- GPU UUIDs are derived from the scenario, node and index (UUID version 5),
  so they are the same on every run.

Label names come from the catalogue (:data:`~inference_obs.metrics.vllm.STANDARD_LABELS`,
:data:`~inference_obs.metrics.dcgm.GPU_LABELS`); only the scrape labels
``instance``, ``job``, ``pod`` and ``namespace`` are added here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from inference_obs.metrics import dcgm, host, vllm
from inference_obs.simulate.scenario import DeploymentSpec

__all__ = [
    "APP_JOB",
    "GPU_JOB",
    "GpuSlot",
    "Node",
    "app_labels",
    "cadvisor_labels",
    "cadvisor_pod_labels",
    "engine_labels",
    "gpu_labels",
    "node_labels",
    "nodes_of",
]

APP_JOB = "vllm"
GPU_JOB = "dcgm-exporter"
_CONTAINER = "vllm"
_NAMESPACE = uuid.UUID("5b1e0c8e-6a7d-4c55-9d0f-3f4f0b0a9c11")
# PCI buses of the eight GPUs of a typical HGX baseboard.
_BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")


@dataclass(frozen=True, slots=True)
class GpuSlot:
    """One GPU of a node and the engine that drives it."""

    index: int
    replica: int
    engine: int


@dataclass(frozen=True, slots=True)
class Node:
    """A node of a deployment, its GPU exporter and the GPUs it reports."""

    deployment: int
    index: int
    name: str
    instance: str
    replicas: tuple[int, ...]
    gpus: tuple[GpuSlot, ...]


def nodes_of(spec: DeploymentSpec, deployment: int) -> tuple[Node, ...]:
    """The nodes of a deployment, with each GPU mapped to its replica and engine."""
    per_node = spec.replicas_per_node
    gpus = spec.hardware.gpus_per_replica
    gpus_per_engine = gpus // spec.engines_per_replica
    nodes = []
    for index in range(-(-len(spec.replicas) // per_node)):
        replicas = tuple(range(index * per_node, min((index + 1) * per_node, len(spec.replicas))))
        slots = tuple(
            GpuSlot(local * gpus + g, replica, g // gpus_per_engine)
            for local, replica in enumerate(replicas)
            for g in range(gpus)
        )
        nodes.append(
            Node(
                deployment,
                index,
                f"{spec.pod_prefix}-node-{index + 1:02d}",
                f"10.{deployment}.{index}.20:9400",
                replicas,
                slots,
            )
        )
    return tuple(nodes)


def app_labels(spec: DeploymentSpec, deployment: int, replica: int) -> dict[str, str]:
    """Scrape labels of a replica's vLLM target (``instance``, ``job``, ``namespace``, ``pod``)."""
    return {
        "instance": f"10.{deployment}.{replica}.10:8000",
        "job": APP_JOB,
        "namespace": spec.namespace,
        "pod": spec.pod(replica),
    }


def engine_labels(
    spec: DeploymentSpec, deployment: int, replica: int, engine: int
) -> dict[str, str]:
    """Labels of a replica engine's vLLM series: the standard engine labels plus scrape labels."""
    standard = {"model_name": spec.model_name, "engine": str(engine)}
    if set(standard) != set(vllm.STANDARD_LABELS):
        raise AssertionError(f"engine labels {sorted(standard)} differ from the catalogue's")
    return {**standard, **app_labels(spec, deployment, replica)}


def gpu_labels(spec: DeploymentSpec, node: Node, slot: GpuSlot, scenario: str) -> dict[str, str]:
    """dcgm-exporter labels of one GPU, with the workload's pod and the exporter's target."""
    bus_ids = spec.gpu.pci_bus_ids
    bus = (
        bus_ids[slot.index % len(bus_ids)]
        if bus_ids
        else f"00000000:{_BUSES[slot.index % len(_BUSES)]}:00.0"
    )
    gpu_uuid = uuid.uuid5(_NAMESPACE, f"{scenario}/{node.name}/{slot.index}")
    labels = {
        "gpu": str(slot.index),
        "UUID": f"GPU-{gpu_uuid}",
        "pci_bus_id": bus,
        "device": f"nvidia{slot.index}",
        "modelName": spec.hardware.gpu_model,
        "Hostname": node.name,
        "DCGM_FI_DRIVER_VERSION": spec.gpu.driver_version,
        "pod": spec.pod(slot.replica),
        "namespace": spec.namespace,
        "container": _CONTAINER,
    }
    # The exporter's label scheme is the catalogue's; a change there must show up here.
    if set(labels) != set(dcgm.GPU_LABELS):
        raise AssertionError(f"GPU labels {sorted(labels)} differ from {sorted(dcgm.GPU_LABELS)}")
    return {**labels, "instance": node.instance, "job": GPU_JOB}


def cadvisor_labels(
    spec: DeploymentSpec, node: Node, replica: int, scenario: str
) -> dict[str, str]:
    """cAdvisor labels of a replica's server container (:func:`cadvisor_pod_labels`: its pod's)."""
    pod, cgroup = _pod_cgroup(spec, replica, scenario)
    runtime_id = uuid.uuid5(_NAMESPACE, f"{scenario}/{pod}/{_CONTAINER}").hex
    labels = {
        "pod": pod,
        "namespace": spec.namespace,
        "id": f"{cgroup}/{runtime_id}",
        "container": _CONTAINER,
        "image": spec.engine.image or f"vllm/vllm-openai:v{spec.engine.version or 'latest'}",
        "name": runtime_id,
    }
    return _kubelet(node, labels)


def cadvisor_pod_labels(
    spec: DeploymentSpec, node: Node, replica: int, scenario: str
) -> dict[str, str]:
    """cAdvisor labels of a replica's pod's own cgroup.

    The pod-level cgroup has no container, image or name: cAdvisor exports
    ``container=""``, which Prometheus stores as no ``container`` label.
    """
    pod, cgroup = _pod_cgroup(spec, replica, scenario)
    return _kubelet(node, {"pod": pod, "namespace": spec.namespace, "id": cgroup})


def _pod_cgroup(spec: DeploymentSpec, replica: int, scenario: str) -> tuple[str, str]:
    """A replica's pod name and the cgroup path of its pod."""
    pod = spec.pod(replica)
    pod_uid = uuid.uuid5(_NAMESPACE, f"{scenario}/{pod}")
    return pod, f"/kubepods/burstable/pod{pod_uid}"


def _kubelet(node: Node, labels: dict[str, str]) -> dict[str, str]:
    """cAdvisor ``labels`` as the kubelet's scrape of ``node`` adds to them."""
    if not set(labels) <= set(host.CADVISOR_LABELS):
        raise AssertionError(f"cAdvisor labels {sorted(labels)} are not the catalogue's")
    instance = node.instance.replace(".20:9400", ".21:10250")
    return {**labels, "instance": instance, "job": "kubelet", "node": node.name}


def node_labels(node: Node, cpu: int, mode: str) -> dict[str, str]:
    """node_exporter labels of one logical CPU's time in one mode, with the node's name."""
    return {
        "cpu": str(cpu),
        "mode": mode,
        "instance": node.instance.replace(".20:9400", ".22:9100"),
        "job": "node-exporter",
        "node": node.name,
    }
