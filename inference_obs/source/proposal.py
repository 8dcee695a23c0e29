"""Deployments proposed from scraped series: one per model served, hardware where DCGM says it.

A capture or a conversion of saved scrapes (:mod:`~inference_obs.source.capture`)
given no deployments proposes them here, from what the series show: the models
engines serve (``model_name``), the GPUs dcgm-exporter reports and the pods they
name. What cannot be told is a placeholder that a methodology note names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from inference_obs.deployment import Deployment, Engine, Hardware
from inference_obs.metrics import FAMILIES
from inference_obs.metrics.dcgm import MIG_LABELS
from inference_obs.metrics.dcgm_labels import GpuLabelScheme, scheme_of, workload_labels
from inference_obs.metrics.renames import HISTOGRAM_PARTS, exposed_names
from inference_obs.samples import Labels, Series

__all__ = ["PLACEHOLDER", "proposal_line", "propose_deployments"]

# Engine series prefixes, as exporters spell them: vLLM's, Ray Serve's re-export of vLLM's,
# SGLang's, and the SGLang router's (metrics.renames.REEXPORT_PREFIXES). NVIDIA NIM exports
# vLLM's names without a prefix: those are told by name (_CATALOGUED).
_PREFIXES: tuple[tuple[str, Literal["vllm", "sglang"]], ...] = (
    ("vllm:", "vllm"),
    ("ray_vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("sglang_", "sglang"),
)
# Every exposed series name of the engines' catalogue families, under every prefix they are
# re-exported with, histogram and counter parts included: name -> engine.
_CATALOGUED: dict[str, Literal["vllm", "sglang"]] = {
    f"{name}{part}": "vllm" if family.exporter == "vllm" else "sglang"
    for family in FAMILIES
    if family.exporter in ("vllm", "sglang")
    for name in exposed_names(family)
    for part in ("", *HISTOGRAM_PARTS, "_total")
}
# The label naming the model: model_name; SGLang 0.3 named it "name" (a label
# its function-latency histogram uses for the function, hence only on catalogued series).
_MODEL_LABELS = ("model_name", "name")
#: The deployment proposed when no series names a model.
PLACEHOLDER = "unnamed"


@dataclass
class _Seen:
    """What the scraped series show: models served, GPUs and their pods."""

    models: dict[tuple[str, str], tuple[str, set[str]]] = field(default_factory=dict)
    pods: set[str] = field(default_factory=set)
    engine_instances: set[str] = field(default_factory=set)
    gpus: dict[tuple[str, ...], str] = field(default_factory=dict)
    gpu_models: set[str] = field(default_factory=set)
    gpu_instances: set[str] = field(default_factory=set)

    def engine(self, one: Series) -> None:
        engine = next((e for prefix, e in _PREFIXES if one.name.startswith(prefix)), None)
        engine = engine or _CATALOGUED.get(one.name)
        if engine is None:
            return
        instance = one.labels.get("instance", "")
        self.engine_instances.add(instance)
        self.pods.update(one.labels[k] for k in ("pod", "exported_pod") if one.labels.get(k))
        for label in _MODEL_LABELS:
            model = one.labels.get(label)
            if label == "name" and _CATALOGUED.get(one.name) != "sglang":
                continue
            if model:
                self.models.setdefault((label, model), (engine, set()))[1].add(instance)
                return

    def gpu(self, one: Series) -> None:
        labels = one.labels
        # One unit per GPU, or per MIG instance of a GPU: a MIG instance is its own device.
        gpu = labels.get("UUID") or labels.get("uuid") or labels.get("gpu")
        if gpu:
            instance = labels.get("instance", "")
            unit = (instance, gpu, *(labels.get(k, "") for k in MIG_LABELS))
            self.gpus[unit] = self.gpus.get(unit) or _workload_pod(labels)
            self.gpu_instances.add(instance)
        if labels.get("modelName"):
            self.gpu_models.add(labels["modelName"])


def _workload_pod(labels: Labels) -> str:
    """The pod using the GPU a DCGM series is of: ``exported_pod`` when the scrape moved the
    exporter's label there, ``pod_name`` (1.x names), else ``pod`` unless it is the exporter's
    own; empty when none is named."""
    if scheme_of([labels]) is GpuLabelScheme.EXPORTED:
        return workload_labels(labels).get("pod", "")
    return labels.get("pod") or labels.get("pod_name") or ""


def propose_deployments(series: Iterable[Series]) -> tuple[tuple[Deployment, ...], list[str]]:
    """One deployment per model served (``model_name``, or SGLang 0.3's ``name``, of engine
    series: ``vllm:``, Ray Serve's ``ray_vllm:``, ``sglang:``/``sglang_``, NIM's unprefixed).

    Hardware comes from dcgm-exporter series where they say it: the GPU model
    when one ``modelName`` is seen, GPUs per replica when one model is served
    (GPUs seen divided by the engine instances serving it, when that divides
    evenly; a MIG instance counts as one GPU), and a GPU selector of the
    dcgm-exporter instances when one model is served. A GPU whose series name
    a pod that no engine series names is another pod's: when any is seen, no
    GPU is taken as the deployment's. Otherwise the hardware is a placeholder
    (GPU model ``unknown``, one GPU per replica, no GPU selector) the notes name.
    When no series names a model, one placeholder deployment (:data:`PLACEHOLDER`)
    selects every engine target (every target when none is an engine's).

    Returns
    -------
    tuple
        The deployments, and methodology notes saying how they were proposed.
    """
    seen = _Seen()
    instances: set[str] = set()
    for one in series:
        instances.add(one.labels.get("instance", ""))
        if one.name.lower().startswith("dcgm_"):
            seen.gpu(one)
        else:
            seen.engine(one)
    if not seen.models:
        return _placeholder(seen.engine_instances or instances)
    others = sorted({pod for pod in seen.gpus.values() if pod and pod not in seen.pods})
    gpu_model = next(iter(seen.gpu_models)) if len(seen.gpu_models) == 1 and not others else None
    deployments: list[Deployment] = []
    names: set[str] = set()
    notes = [
        f"Deployments proposed from the scraped series, one per model ({len(seen.models)}); "
        "edit the manifest's deployments or capture again with --deployments to declare them."
    ]
    for (label, model), (engine, served) in sorted(seen.models.items()):
        per_replica, gpu_selector = 1, None
        gpus = len(seen.gpus)
        if len(seen.models) == 1 and gpus and not others and gpus % len(served) == 0:
            per_replica = gpus // len(served)
            pattern = "|".join(re.escape(i) for i in sorted(seen.gpu_instances))
            gpu_selector = {"instance": f"~{pattern}"}
        deployments.append(
            Deployment(
                name=_short_name(model, names),
                selector={label: _equal(model)},
                gpu_selector=gpu_selector,
                hardware=Hardware(gpu_model=gpu_model or "unknown", gpus_per_replica=per_replica),
                engine=Engine(name=engine),
            )
        )
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        notes.append(
            f"GPUs unknown: the GPU series scraped name other pods ({shown}), none an engine "
            "series names, so none is taken as a deployment's; give gpu_selector to name them."
        )
    elif gpu_model is None:
        notes.append("GPU model unknown: no single dcgm-exporter modelName was scraped.")
    if not others and (len(seen.models) > 1 or not seen.gpus):
        notes.append(
            "GPUs per replica set to 1 and no GPU selector: which GPUs serve which model "
            "cannot be told from the scrapes."
        )
    return tuple(deployments), notes


def proposal_line(series: Iterable[Series]) -> str:
    """One line saying which deployments ``series`` would give (see :func:`propose_deployments`)."""
    deployments, notes = propose_deployments(series)
    if deployments[0].name == PLACEHOLDER:
        return notes[0]
    named = "; ".join(
        f"{d.name} ({d.engine.name}, {', '.join(f'{k}={v}' for k, v in d.selector.items())})"
        for d in deployments
    )
    return f"deployments proposed from the first scrape: {named}. " + " ".join(notes[1:])


def _placeholder(instances: set[str]) -> tuple[tuple[Deployment, ...], list[str]]:
    """One placeholder deployment selecting ``instances``, and the note saying how to name it."""
    pattern = "|".join(re.escape(i) for i in sorted(instances)) or ".+"
    deployment = Deployment(
        name=PLACEHOLDER,
        selector={"instance": f"~{pattern}"},
        hardware=Hardware(gpu_model="unknown", gpus_per_replica=1),
        engine=Engine(name="vllm"),
    )
    note = (
        f"No engine series naming a model (model_name) was scraped, so one placeholder "
        f"deployment '{PLACEHOLDER}' selects the targets {', '.join(sorted(instances))}, with "
        "unknown hardware: name the deployments in the manifest (name, selector, hardware) or "
        "capture again with --deployments FILE."
    )
    return (deployment,), [note]


def _short_name(model: str, taken: set[str]) -> str:
    """The model's last path part, made unique among ``taken`` (which it joins)."""
    base = model.rstrip("/").rpartition("/")[2] or model
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def _equal(value: str) -> str:
    """The compact selector text matching exactly ``value`` (see deployment.parse_selector)."""
    if value.startswith("~"):
        return "=" + value  # "=~x" is the literal "~x"
    if value.startswith(("!", "=~")):
        return "~" + re.escape(value)
    return value
