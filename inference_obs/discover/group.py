"""Replicas grouped into deployments: one per model and hardware class, with explicit selectors.

Replicas belong together when they run the same engine and models in the
same namespace on the same hardware class (GPU model and GPUs per replica).
Each group gets:

- a **selector** on the label that names its replicas (``pod``, or
  ``instance`` where the series carry no pod) plus its namespace. Pod names
  are written as ``<stem>-.*`` regexes, where the stem is the name without
  the parts Kubernetes generates (a StatefulSet ordinal ``-0``, a ReplicaSet
  hash and pod suffix ``-7d9f8b6c5-x2k4z``), so the file keeps working when
  pods are replaced. A stem regex is used only when it selects exactly the
  group's pods among every pod seen with engine or GPU series; otherwise the
  pods are listed exactly;
- a **GPU selector** on ``exported_pod``/``exported_namespace`` when DCGM
  labels the pods that way (a default GPU-operator scrape), else none (the
  selector serves both);
- what the series say of the configuration: data-parallel engines per
  replica, and ``vllm:cache_config_info``'s KV-cache dtype and prefix caching.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from inference_obs.deployment import REGEX_LOOKING, DeclaredConfig, Deployment, Engine, Hardware
from inference_obs.discover.inventory import Inventory, Replica, ReplicaKey
from inference_obs.query import regex_alternation, regex_escape

__all__ = ["Found", "GroupKey", "deployments", "stem"]

# A part Kubernetes generates: an ordinal (-0, -01), or a lowercase alphanumeric hash or
# suffix with a digit in it (ReplicaSet hashes are 5-10 characters, pod suffixes 5).
_GENERATED = re.compile(r"[0-9]+|(?=[a-z0-9]*[0-9])[a-z0-9]{5,10}")
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
UNKNOWN_GPU = "unknown"
# Words of a GPU product name that do not tell two deployments apart in practice.
_GPU_NOISE = re.compile(
    r"NVIDIA|[0-9]+\s*[GT]B|Blackwell|Hopper|Ada|Ampere|Lovelace|Generation|Edition",
    re.IGNORECASE,
)


def stem(pod: str) -> str:
    """``pod`` without its generated trailing parts: ``vllm-7d9f8b6c5-x2k4z`` -> ``vllm``.

    Examples
    --------
    >>> stem("h20-model-01"), stem("vllm-llama-7d9f8b6c5-x2k4z"), stem("r1-0"), stem("solo")
    ('h20-model', 'vllm-llama', 'r1', 'solo')
    """
    parts = pod.split("-")
    while len(parts) > 1 and _GENERATED.fullmatch(parts[-1]):
        parts.pop()
    return "-".join(parts)


@dataclass(frozen=True, slots=True, order=True)
class GroupKey:
    """What makes replicas one deployment."""

    models: tuple[str, ...]
    engine: str
    namespace: str | None
    gpu_model: str
    gpus_per_replica: int
    label: str


@dataclass(frozen=True)
class Found:
    """A discovered deployment, the replicas behind it, and what the file says about them."""

    deployment: Deployment
    key: GroupKey
    replicas: tuple[Replica, ...]
    notes: tuple[str, ...]


def _key(replica: Replica) -> GroupKey:
    models = sorted({g.model or UNKNOWN_GPU for g in replica.gpus.values()})
    return GroupKey(
        tuple(sorted(replica.models)) or ("unknown-model",),
        replica.engine,
        replica.key.namespace,
        " + ".join(models) if models else UNKNOWN_GPU,
        len(replica.gpus),
        replica.key.label,
    )


def _pattern(names: list[str], others: set[str]) -> str:
    """A compact selector value selecting exactly ``names`` among ``names | others``.

    The stems' regex (``h20-model-.*``) where it selects exactly ``names``,
    else ``names`` listed exactly.
    """
    alternatives = []
    for root in sorted({stem(n) for n in names}):
        mine = [n for n in names if stem(n) == root]
        escaped = regex_escape(root)
        if root not in mine:
            alternatives.append(f"{escaped}-.*")
        elif len(mine) == 1:
            alternatives.append(escaped)
        else:
            alternatives.append(f"{escaped}(?:-.*)?")
    regex = "|".join(alternatives)
    compiled = re.compile(f"(?:{regex})", re.DOTALL)
    if all(compiled.fullmatch(n) for n in names) and not any(compiled.fullmatch(o) for o in others):
        if len(names) == 1 and regex == regex_escape(names[0]):
            return _literal(names[0])
        return "~" + regex
    if len(names) == 1:
        return _literal(names[0])
    return "~" + regex_alternation(sorted(names))


def _literal(name: str) -> str:
    """The compact form of the literal ``name`` (escaped where it could read as another form)."""
    plain = not name.startswith(("~", "!", "=")) and not REGEX_LOOKING & set(name)
    return name if plain else "=" + name


def _short(text: str) -> str:
    return _NAME_UNSAFE.sub("-", text).strip("-") or "deployment"


def _gpu_short(model: str) -> str:
    """The GPU's product without vendor, memory size and architecture.

    Examples
    --------
    >>> _gpu_short("NVIDIA RTX PRO 5000 72GB Blackwell"), _gpu_short("NVIDIA H100 PCIe")
    ('RTX-PRO-5000', 'H100-PCIe')
    """
    words = [w for w in model.split() if not _GPU_NOISE.fullmatch(w)]
    return _short("-".join(words) or model)


def _names(keys: list[GroupKey]) -> dict[GroupKey, str]:
    """Short unique names: the model, then its GPU class, then its namespace where needed."""
    out: dict[GroupKey, str] = {}
    for key in keys:
        parts = [_short("+".join(m.rsplit("/", 1)[-1] for m in key.models))]
        same_model = [k for k in keys if k.models == key.models]
        if len({(k.gpu_model, k.gpus_per_replica) for k in same_model}) > 1:
            parts.append(_gpu_short(key.gpu_model))
            if len({k.gpus_per_replica for k in same_model if k.gpu_model == key.gpu_model}) > 1:
                parts.append(f"x{key.gpus_per_replica}")
        if len({k.namespace for k in same_model}) > 1 and key.namespace:
            parts.append(_short(key.namespace))
        out[key] = "-".join(parts)
    counts: dict[str, int] = defaultdict(int)
    for key in keys:
        counts[out[key]] += 1
    seen: dict[str, int] = defaultdict(int)
    for key in keys:  # still equal (an engine or label scheme apart): number them
        if counts[out[key]] > 1:
            seen[out[key]] += 1
            out[key] = f"{out[key]}-{seen[out[key]]}"
    return out


def _config(replicas: list[Replica], notes: list[str]) -> DeclaredConfig:
    """What the series prove of the configuration, agreed by every replica."""
    fields: dict[str, object] = {}
    engines = {len(r.engines) for r in replicas}
    if len(engines) == 1 and (count := engines.pop()) > 1:
        fields["data_parallel_size"] = count
    values: dict[str, set[str]] = defaultdict(set)
    for replica in replicas:
        for label, seen in replica.cache_config.items():
            values[label] |= seen
    if len(values.get("cache_dtype", ())) == 1:
        fields["kv_cache_dtype"] = next(iter(values["cache_dtype"]))
    prefix = values.get("enable_prefix_caching", set())
    if len(prefix) == 1 and next(iter(prefix)).lower() in ("true", "false"):
        fields["prefix_caching"] = next(iter(prefix)).lower() == "true"
    shown = [
        f"{label} {', '.join(sorted(v))}"
        for label, v in sorted(values.items())
        if label not in ("cache_dtype", "enable_prefix_caching")
    ]
    if shown:
        notes.append(f"vllm:cache_config_info: {'; '.join(shown)}")
    return DeclaredConfig.model_validate(fields)


def _neighbours(every_pod: dict[tuple[str | None, str], set[str]], key: GroupKey) -> set[str]:
    """Every pod a selector of ``key``'s namespace and label could also match."""
    out: set[str] = set()
    for (namespace, label), pods in every_pod.items():
        same_place = namespace == key.namespace or namespace is None or key.namespace is None
        if label == key.label and same_place:
            out |= pods
    return out


def deployments(found: Inventory) -> list[Found]:
    """Group the inventory's replicas into deployments (sorted by model, GPU and namespace).

    Returns
    -------
    list of Found
        Each deployment with its replicas and the notes its file entry carries;
        every deployment is valid as :class:`~inference_obs.deployment.Deployment`.
    """
    groups: dict[GroupKey, list[Replica]] = defaultdict(list)
    for replica in sorted(found.replicas.values(), key=lambda r: r.key):
        groups[_key(replica)].append(replica)
    keys = sorted(groups)
    names = _names(keys)
    every_pod: dict[tuple[str | None, str], set[str]] = defaultdict(set)
    for replica_key in found.replicas:
        every_pod[(replica_key.namespace, replica_key.label)].add(replica_key.name)
    for gpu in found.gpus.values():
        if gpu.pod is not None:
            every_pod[(gpu.namespace, "pod")].add(gpu.pod)
    out = []
    for key in keys:
        replicas = groups[key]
        pods = [r.key.name for r in replicas]
        others = _neighbours(every_pod, key) - set(pods)
        value = _pattern(pods, others)
        selector = {"namespace": key.namespace} if key.namespace else {}
        selector[key.label] = value
        schemes = {g.scheme for r in replicas for g in r.gpus.values()}
        gpu_selector = None
        if schemes == {"exported"}:
            namespaces = {g.namespace for r in replicas for g in r.gpus.values()}
            gpu_selector = {"exported_namespace": key.namespace} if None not in namespaces else {}
            gpu_selector["exported_pod"] = value
        notes = _notes(key, replicas)
        deployment = Deployment(
            name=names[key],
            replicas=tuple(pods),
            selector=selector,
            gpu_selector=gpu_selector if gpu_selector else None,
            hardware=Hardware(
                gpu_model=key.gpu_model, gpus_per_replica=max(key.gpus_per_replica, 1)
            ),
            engine=Engine(name="sglang" if key.engine == "sglang" else "vllm"),
            config=_config(replicas, notes),
        )
        out.append(Found(deployment, key, tuple(replicas), tuple(notes)))
    return out


def _notes(key: GroupKey, replicas: list[Replica]) -> list[str]:
    where = f" in namespace {key.namespace}" if key.namespace else ""
    noun = "replica" if len(replicas) == 1 else "replicas"
    gpus = f"{key.gpus_per_replica} x {key.gpu_model}" if key.gpus_per_replica else "no GPU seen"
    notes = [
        f"{', '.join(key.models)} ({key.engine}) on {len(replicas)} {noun} of {gpus}{where}",
        f"{noun} seen: {', '.join(r.key.name for r in replicas)}",
    ]
    if not key.gpus_per_replica:
        notes.append(
            "NOT SEEN: no DCGM series names these pods, so gpu_model and gpus_per_replica "
            "below are placeholders; set them (GPU numbers read no data until a GPU "
            "selector matches)"
        )
    else:
        engines = max(len(r.engines) for r in replicas)
        per_engine = key.gpus_per_replica / engines
        if per_engine == int(per_engine):
            notes.append(
                f"{key.gpus_per_replica} GPUs and {engines} "
                f"{'engine' if engines == 1 else 'engines'} per replica: "
                f"tensor_parallel_size x pipeline_parallel_size = {int(per_engine)} per engine "
                "(the series do not say which; declare it if you know)"
            )
    return notes


def replica_keys(found: list[Found]) -> set[ReplicaKey]:
    """Every replica the deployments hold."""
    return {r.key for f in found for r in f.replicas}
