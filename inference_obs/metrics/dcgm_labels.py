"""Whose pod a DCGM series names, and GPUs whose series repeat once per pod.

dcgm-exporter puts the pod using a GPU in ``pod``/``namespace``/``container``.
A Prometheus that scrapes the exporter through Kubernetes service discovery adds
the *exporter's own* pod, namespace and container under the same names; with
``honor_labels: false`` (the GPU Operator's ServiceMonitor default) the
exposed ones move to ``exported_pod``/``exported_namespace``/``exported_container``
(Prometheus 2.42 ``mutateSampleLabels``). The plain labels then name
``nvidia-dcgm-exporter-xxxxx`` on every GPU series, and a GPU joined to its
replica on ``pod`` finds none. :func:`scheme_of` tells the two schemes apart
from the data, and :func:`in_workload_terms` rewrites an expression so that the
answer names the workload's pod as ``pod`` whichever the scheme.

With GPU time-slicing, or MIG with pod mapping, one GPU's series is exported
once per pod using it: a sum or mean over series counts that GPU several times.
:func:`shared_gpus` finds such GPUs; :func:`in_workload_terms` (``dedupe``)
reduces each GPU to one series (by :data:`GPU_IDENTITY`) before aggregating.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from enum import StrEnum

from inference_obs.metrics import dcgm
from inference_obs.query import Aggregate, Expr, Selector, label_replace, selectors
from inference_obs.query.walk import transform, walk
from inference_obs.samples import Labels

__all__ = [
    "GPU_IDENTITY",
    "WORKLOAD_LABELS",
    "GpuLabelScheme",
    "gpu_names",
    "in_workload_terms",
    "raw",
    "reads_only_gpus",
    "scheme_of",
    "shared_gpus",
    "without_copies",
    "workload_labels",
]

#: Labels dcgm-exporter sets to the pod using the GPU, and a scrape sets to the exporter's.
WORKLOAD_LABELS: tuple[str, ...] = ("pod", "namespace", "container")
#: Labels that identify one GPU (or MIG instance) whatever pod its series names; a series
#: lacks some of them (``Hostname`` or ``hostname``; ``UUID`` or ``uuid``), which groups alike.
GPU_IDENTITY: tuple[str, ...] = (*dcgm.HOSTNAME_LABELS, "gpu", *dcgm.UUID_LABELS, *dcgm.MIG_LABELS)
# The exporter's own pods are named after its DaemonSet: nvidia-dcgm-exporter-xxxxx (GPU
# Operator), <release>-dcgm-exporter-xxxxx (its Helm chart), dcgm-exporter-xxxxx.
_EXPORTER_POD = "dcgm-exporter"
# Aggregations a GPU counted several times changes; max, min, group and topk it does not.
_COUNTING = frozenset({"sum", "avg", "count", "stddev", "stdvar", "quantile"})
_GPU_NAMES = frozenset(name for family in dcgm.FAMILIES for name in family.names)


class GpuLabelScheme(StrEnum):
    """Whose pod the plain ``pod``/``namespace``/``container`` of DCGM series name."""

    WORKLOAD = "workload"
    """The workload's (``honor_labels: true``, or no Kubernetes target labels)."""
    EXPORTED = "exported"
    """The exporter's; the workload's are ``exported_pod``, ``exported_namespace``, ...."""


def scheme_of(label_sets: Iterable[Labels]) -> GpuLabelScheme:
    """The scheme of DCGM series with these label sets.

    ``exported`` when any carries an ``exported_*`` workload label, or a ``pod``
    named after the exporter (a GPU no pod uses then has only the exporter's):

    >>> scheme_of([Labels({"pod": "nvidia-dcgm-exporter-5tc8x", "exported_pod": "vllm-0"})])
    <GpuLabelScheme.EXPORTED: 'exported'>
    >>> scheme_of([Labels({"pod": "vllm-0", "gpu": "0"})])
    <GpuLabelScheme.WORKLOAD: 'workload'>
    """
    for labels in label_sets:
        if any(f"exported_{k}" in labels for k in WORKLOAD_LABELS):
            return GpuLabelScheme.EXPORTED
        if _EXPORTER_POD in labels.get("pod", ""):
            return GpuLabelScheme.EXPORTED
    return GpuLabelScheme.WORKLOAD


def workload_labels(labels: Labels) -> Labels:
    """A label set of the ``exported`` scheme in workload terms.

    The exporter's ``pod``/``namespace``/``container`` are dropped and the
    ``exported_*`` ones take their names; a GPU no pod uses is left with none.

    >>> dict(workload_labels(Labels({"pod": "nvidia-dcgm-exporter-5tc8x", "exported_pod": "v-0"})))
    {'pod': 'v-0'}
    """
    out = {k: v for k, v in labels.items() if k not in WORKLOAD_LABELS}
    for label in WORKLOAD_LABELS:
        moved = out.pop(f"exported_{label}", None)
        if moved is not None:
            out[label] = moved
    return Labels(out)


def without_copies(labels: Labels) -> Labels:
    """A label set of an aggregation :func:`in_workload_terms` rewrote, in workload terms.

    Such an aggregation groups by the ``exported_*`` labels and copies them to the
    workload names; the copies stay, the ``exported_*`` originals go. Labels the
    aggregation did not group by are left as they are.

    >>> dict(without_copies(Labels({"pod": "v-0", "exported_pod": "v-0", "gpu": "1"})))
    {'gpu': '1', 'pod': 'v-0'}
    """
    out = dict(labels)
    for label in WORKLOAD_LABELS:
        moved = out.pop(f"exported_{label}", None)
        if moved is not None:
            out[label] = moved
    return Labels(out)


def raw(expr: Expr) -> bool:
    """Whether ``expr`` still carries its series' own labels (no aggregation in it)."""
    return not any(isinstance(node, Aggregate) for node in walk(expr))


def reads_only_gpus(expr: Expr) -> bool:
    """Whether every selector of ``expr`` reads a DCGM family (and it has one)."""
    found = selectors(expr)
    return bool(found) and all(s.metric in _GPU_NAMES for s in found)


def gpu_names(identities: Iterable[Labels]) -> list[str]:
    """Readable names of GPUs: ``host/gpuN`` (MIG: ``/gi<ID>``), else the UUID."""
    out = []
    for labels in identities:
        host = next((labels[k] for k in dcgm.HOSTNAME_LABELS if k in labels), None)
        uuid = next((labels[k] for k in dcgm.UUID_LABELS if k in labels), None)
        name = (
            f"{host}/gpu{labels['gpu']}" if host and "gpu" in labels else uuid or str(dict(labels))
        )
        out.append(name + (f"/gi{labels['GPU_I_ID']}" if "GPU_I_ID" in labels else ""))
    return sorted(out)


def shared_gpus(label_sets: Sequence[Labels]) -> list[str]:
    """GPUs (by :func:`gpu_names`) whose series in ``label_sets`` (workload terms) name
    several pods: time-slicing or MIG with pod mapping. Series without a GPU
    identity label are not compared."""
    pods: dict[Labels, set[str]] = defaultdict(set)
    for labels in label_sets:
        identity = Labels({k: labels[k] for k in GPU_IDENTITY if k in labels})
        if identity and "pod" in labels:
            pods[identity].add(labels["pod"])
    return gpu_names(k for k, found in pods.items() if len(found) > 1)


def _exported(label: str) -> str:
    return f"exported_{label}" if label in WORKLOAD_LABELS else label


def _grouped(op: str, inner: Expr, by: tuple[str, ...], param: Expr | None, moved: bool) -> Expr:
    """``op by (by) (inner)`` over raw series; ``moved``: group on the ``exported_*`` labels
    and copy them back to the workload names, so the answer (and any join on it)
    names the workload's pod as ``pod``."""
    if not moved or not set(by) & set(WORKLOAD_LABELS):
        return Aggregate(op, inner, by=by, param=param)
    grouped: Expr = Aggregate(op, inner, by=tuple(dict.fromkeys(map(_exported, by))), param=param)
    for label in WORKLOAD_LABELS:
        if label in by:
            grouped = label_replace(grouped, label, "$1", f"exported_{label}", "(.*)")
    return grouped


def in_workload_terms(expr: Expr, scheme: GpuLabelScheme, *, dedupe: bool) -> Expr:
    """``expr`` rewritten so its DCGM parts read the workload's pod labels, each GPU once.

    Only parts that read DCGM families alone are changed:

    - ``exported`` scheme: a matcher on ``pod``/``namespace``/``container`` of a
      DCGM selector matches ``exported_*`` instead; an aggregation of raw
      series by those labels groups by the ``exported_*`` ones and copies them
      back under the workload names (``label_replace``);
    - ``dedupe``: a counting aggregation (sum, avg, count, ...) of raw series
      first takes one series per GPU, ``max by (its labels, GPU identity)``
      (duplicates of one GPU hold the same samples, so ``max`` is their value).

    >>> from inference_obs.query import Matcher, to_promql
    >>> util = Selector("DCGM_FI_DEV_GPU_UTIL", (Matcher.equal("pod", "v-0"),))
    >>> asked = in_workload_terms(util.avg(by=("pod",)), GpuLabelScheme.EXPORTED, dedupe=False)
    >>> for part in to_promql(asked).split(", "):
    ...     print(part)
    label_replace(avg by (exported_pod) (DCGM_FI_DEV_GPU_UTIL{exported_pod="v-0"})
    "pod"
    "$1"
    "exported_pod"
    "(.*)")
    """
    moved = scheme is GpuLabelScheme.EXPORTED
    if not moved and not dedupe:
        return expr

    def change(node: Expr) -> Expr:
        if moved and isinstance(node, Selector) and node.metric in _GPU_NAMES:
            matchers = tuple(replace(m, label=_exported(m.label)) for m in node.matchers)
            return node if matchers == node.matchers else replace(node, matchers=matchers)
        if not isinstance(node, Aggregate) or node.without is not None:
            return node
        if not (raw(node.expr) and reads_only_gpus(node.expr)):
            return node
        by = node.by or ()
        if dedupe and node.op in _COUNTING:
            one_each = _grouped(
                "max", node.expr, tuple(dict.fromkeys((*by, *GPU_IDENTITY))), None, moved
            )
            return replace(node, expr=one_each)
        if moved and set(by) & set(WORKLOAD_LABELS):
            return _grouped(node.op, node.expr, by, node.param, moved)
        return node

    return transform(expr, change)
