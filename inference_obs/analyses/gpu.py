"""GPU utilisation, framebuffer and board power of a deployment's allocated GPUs.

Utilisation is sample-weighted over every allocated GPU, zeros included
(``sum(sum_over_time(u[w])) / sum(count_over_time(u[w]))``). GPUs that should
have reported and did not are listed by name, never counted as 0: the GPUs
expected are those seen in any DCGM family over the window (and, as a count,
replicas x GPUs per replica from the deployment). A family with no series is
``no_data`` naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from inference_obs.analyses.unit import Analysis, NoSettings
from inference_obs.errors import Annotation, NoDataError
from inference_obs.metrics import builders as b, dcgm
from inference_obs.metrics.family import Family, resolve_label
from inference_obs.query import Expr, to_promql
from inference_obs.reading.alignment import gpu_label_sets
from inference_obs.reading.context import Reading
from inference_obs.reading.measurement import Measurement, Status, derive
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Instant, Labels, Vector
from inference_obs.source.remembering import soon, together

__all__ = ["GpuResult", "gpu", "gpu_name"]

#: DCGM families whose series reveal which GPUs exist, util first.
PRESENCE: tuple[Family, ...] = (
    dcgm.GPU_UTIL,
    dcgm.FB_USED,
    dcgm.FB_FREE,
    dcgm.POWER_USAGE,
    dcgm.GPU_TEMP,
    dcgm.SM_CLOCK,
)
SAMPLE_WEIGHTED = (
    "Sample-weighted over every GPU sample, zeros included; not time-weighted, and not the "
    "share of time the GPU was busy at full speed (GPU_UTIL counts any kernel running)."
)
BOARD_POWER = (
    "A measured board-power mean under this traffic; a rated (TDP) figure is a different "
    "definition. Excludes CPU, memory, networking and the rest of the server."
)
DCGM_CAPACITY = "FB_USED + FB_FREE as DCGM reports it, MiB: not the product's rated memory."


class GpuResult(AnalysisResult):
    """GPU usage of one deployment over one window.

    Attributes
    ----------
    missing_gpus
        GPUs seen in some DCGM family but with no utilisation sample, by name.
    """

    utilization_mean: Measurement
    utilization_per_replica: tuple[Measurement, ...]
    utilization_replica_min: Measurement
    utilization_replica_max: Measurement
    utilization_per_gpu: tuple[Measurement, ...]
    utilization_gpu_min: Measurement
    utilization_gpu_max: Measurement
    gpus_expected: Measurement
    gpus_with_samples: Measurement
    missing_gpus: tuple[str, ...]
    fb_used_mean_mib: Measurement
    fb_capacity_mib: Measurement
    power_mean_watts: Measurement


def gpu_name(labels: Labels) -> str:
    """A readable name of a GPU series: ``host/gpuN`` (or the UUID, or the labels)."""
    host = next((labels[k] for k in dcgm.HOSTNAME_LABELS if k in labels), None)
    if host is not None and "gpu" in labels:
        return f"{host}/gpu{labels['gpu']}"
    uuid = next((labels[k] for k in dcgm.UUID_LABELS if k in labels), None)
    return uuid or ",".join(f"{k}={v}" for k, v in labels.items() if k != "__name__")


def _identity(available: set[str]) -> tuple[str, ...]:
    """Labels identifying one GPU: hostname and index, else the UUID, else the index alone."""
    for labels, extra in ((dcgm.HOSTNAME_LABELS, ("gpu",)), (dcgm.UUID_LABELS, ())):
        if any(label in available for label in labels):
            return (resolve_label(labels, available), *extra)
    return ("gpu",)


def _grouped(
    r: Reading, statistic: str, expr: Expr, name: str, answer: Instant
) -> tuple[Measurement, ...]:
    """One Measurement per series of a grouped ``expr`` (percent) as ``answer`` holds them,
    keyed by its labels."""
    out = []
    if isinstance(answer.value, Vector):
        for labels, value in zip(answer.value.labels, answer.value.values.tolist(), strict=True):
            tag = gpu_name(labels) if name == "gpu" else ",".join(labels.values())
            out.append(
                r.made(
                    f"{statistic}[{tag}]",
                    value,
                    "percent",
                    Status.OK,
                    promql=(to_promql(expr),),
                    caveats=(SAMPLE_WEIGHTED,),
                )
            )
    return tuple(sorted(out, key=lambda m: m.statistic))


def _range(
    statistic: str, parts: Sequence[Measurement], pick: str, overall: Measurement
) -> Measurement:
    values = [m.value for m in parts if m.value is not None]
    value = (min(values) if pick == "min" else max(values)) if values else None
    return derive(
        statistic,
        value,
        "percent",
        list(parts) or [overall.model_copy(update={"status": Status.NO_DATA, "value": None})],
        f"{pick} of the per-group sample-weighted means",
        (SAMPLE_WEIGHTED,),
    )


def _means(r: Reading) -> list[Measurement]:
    """Utilisation, framebuffer used and capacity, and power: the whole deployment's means."""
    m, w = r.deployment.gpu_matchers, r.seconds
    fb_used = (
        "Per-GPU sample mean of memory allocated (weights, KV reserve, workspaces); "
        "not KV-cache occupancy."
    )
    capacity = b.sample_mean(dcgm.FB_USED, m, w) + b.sample_mean(dcgm.FB_FREE, m, w)
    questions: list[tuple[str, Expr, str, str]] = [
        ("utilization_mean", b.sample_mean(dcgm.GPU_UTIL, m, w), "percent", SAMPLE_WEIGHTED),
        ("fb_used_mean_mib", b.sample_mean(dcgm.FB_USED, m, w), "MiB", fb_used),
        ("fb_capacity_mib", capacity, "MiB", DCGM_CAPACITY),
        ("power_mean_watts", b.sample_mean(dcgm.POWER_USAGE, m, w), "W", BOARD_POWER),
    ]
    answers = r.instants([q[1] for q in questions])
    return together(
        r.source,
        [
            partial(r.measure, statistic, expr, unit, caveats=(note,), answer=answer)
            for (statistic, expr, unit, note), answer in zip(questions, answers, strict=True)
        ],
    )


def _gpu(r: Reading, settings: NoSettings) -> GpuResult:
    """GPU utilisation, framebuffer and power of the deployment's GPUs over the window.

    Utilisation in percent (0-100), sample-weighted overall and per replica /
    per GPU with their ranges; the GPUs without utilisation samples by name;
    framebuffer used and DCGM-reported capacity in MiB (per-GPU sample means);
    board power mean in W. Every query is evaluated at the window's end over its length.
    """
    m, w = r.deployment.gpu_matchers, r.seconds
    # The means (one request) alongside the label sets the per-group means need.
    asked = soon(r.source, partial(_means, r))
    asked_sets = together(
        r.source, [partial(gpu_label_sets, r.source, r.deployment, f, r.window) for f in PRESENCE]
    )
    found = dict(zip(PRESENCE, asked_sets, strict=True))
    available = {name for label_sets in found.values() for labels in label_sets for name in labels}
    ident = _identity(available)
    seen: dict[Labels, tuple[str, ...]] = {}
    for family, label_sets in found.items():
        for labels in label_sets:
            seen.setdefault(Labels({k: labels[k] for k in ident if k in labels}), (family.name,))
    with_util = {
        Labels({k: labels[k] for k in ident if k in labels}) for labels in found[dcgm.GPU_UTIL]
    }
    missing = tuple(sorted(gpu_name(k) for k in seen if k not in with_util))
    try:
        pod = resolve_label(dcgm.POD_LABELS, available)
    except NoDataError:
        pod = "instance"
    grouped = (
        b.sample_mean(dcgm.GPU_UTIL, m, w, by=(pod,)),
        b.sample_mean(dcgm.GPU_UTIL, m, w, by=ident),
    )
    by_replica, by_gpu = r.instants(grouped)
    per_replica = _grouped(r, "utilization_replica", grouped[0], pod, by_replica)
    per_gpu = _grouped(r, "utilization_gpu", grouped[1], "gpu", by_gpu)
    mean, fb_used, capacity, power = asked.result()
    declared = r.deployment.hardware.gpus_per_replica * len(r.deployment.replicas)
    counted = max(len(seen), declared)
    expected = r.made(
        "gpus_expected",
        float(counted),
        "GPUs",
        Status.OK,
        promql=mean.provenance.promql,
        computation="max(GPUs seen in any DCGM family, declared replicas x gpus_per_replica)",
    )
    having = r.made(
        "gpus_with_samples",
        float(len(with_util)),
        "GPUs",
        Status.OK,
        promql=mean.provenance.promql,
        computation=f"distinct ({', '.join(ident)}) with samples",
    )
    if mean.ok and len(with_util) < counted:
        unnamed = counted - len(with_util) - len(missing)
        text = f"GPUs without utilisation samples: {', '.join(missing) or 'none named'}"
        if unnamed > 0:
            text += f"; {unnamed} more declared but seen in no DCGM family"
        mean = mean.model_copy(
            update={
                "status": Status.PARTIAL,
                "annotations": (*mean.annotations, Annotation("missing_gpus", text)),
            }
        )
    return GpuResult(
        utilization_mean=mean,
        utilization_per_replica=per_replica,
        utilization_replica_min=_range("utilization_replica_min", per_replica, "min", mean),
        utilization_replica_max=_range("utilization_replica_max", per_replica, "max", mean),
        utilization_per_gpu=per_gpu,
        utilization_gpu_min=_range("utilization_gpu_min", per_gpu, "min", mean),
        utilization_gpu_max=_range("utilization_gpu_max", per_gpu, "max", mean),
        gpus_expected=expected,
        gpus_with_samples=having,
        missing_gpus=missing,
        fb_used_mean_mib=fb_used,
        fb_capacity_mib=capacity,
        power_mean_watts=power,
    )


gpu = Analysis(
    name="gpu",
    title="GPUs",
    entry=_gpu,
    result=GpuResult,
    settings=NoSettings,
    summary="Sample-weighted GPU utilisation (zeros kept, no data apart), framebuffer, power.",
)
