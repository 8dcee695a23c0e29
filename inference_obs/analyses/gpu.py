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

from inference_obs.deployment import Deployment
from inference_obs.errors import Annotation, NoDataError
from inference_obs.metrics import builders as b, dcgm
from inference_obs.metrics.family import Family, resolve_label
from inference_obs.query import Expr, to_promql
from inference_obs.reading.alignment import gpu_label_sets
from inference_obs.reading.joined import instants
from inference_obs.reading.measurement import Measurement, Status, derive, measure
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Instant, Labels, Vector, Window
from inference_obs.source.base import Source
from inference_obs.source.remembering import soon, together

__all__ = ["GpuResult", "gpu", "gpu_name"]

ANALYSIS = "gpu"
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
    source: Source,
    deployment: Deployment,
    window: Window,
    statistic: str,
    expr: Expr,
    name: str,
    answer: Instant,
) -> tuple[Measurement, ...]:
    """One Measurement per series of a grouped ``expr`` (percent) as ``answer`` holds them,
    keyed by its labels."""
    info = source.info()
    out = []
    if isinstance(answer.value, Vector):
        for labels, value in zip(answer.value.labels, answer.value.values.tolist(), strict=True):
            tag = gpu_name(labels) if name == "gpu" else ",".join(labels.values())
            out.append(
                Measurement.model_validate(
                    {
                        "key": f"{deployment.name}/{ANALYSIS}/{statistic}[{tag}]",
                        "deployment": deployment.name,
                        "analysis": ANALYSIS,
                        "statistic": f"{statistic}[{tag}]",
                        "value": value,
                        "unit": "percent",
                        "window_start": window.start,
                        "window_end": window.end,
                        "status": Status.OK,
                        "provenance": {
                            "promql": (to_promql(expr),),
                            "engine": info.kind,
                            "rules": info.rules.value,
                        },
                        "caveats": (SAMPLE_WEIGHTED,),
                    }
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


def gpu(source: Source, deployment: Deployment, window: Window) -> GpuResult:
    """GPU utilisation, framebuffer and power of ``deployment``'s GPUs over ``window``.

    Parameters
    ----------
    source
        Where the samples come from.
    deployment
        The deployment; its GPU matchers select the DCGM series.
    window
        The window; every query is evaluated at its end over its length.

    Returns
    -------
    GpuResult
        Utilisation in percent (0-100), sample-weighted overall and per
        replica / per GPU with their ranges; the GPUs without utilisation
        samples by name; framebuffer used and DCGM-reported capacity in MiB
        (per-GPU sample means); board power mean in W.
    """
    m = deployment.gpu_matchers
    w = window.seconds

    def one(
        statistic: str,
        expr: Expr,
        unit: str,
        families: Sequence[Family],
        note: str,
        answer: Instant,
    ) -> Measurement:
        return measure(
            source,
            deployment,
            window,
            analysis=ANALYSIS,
            statistic=statistic,
            expr=expr,
            unit=unit,
            families=families,
            matchers=m,
            caveats=(note,),
            answer=answer,
        )

    util_family = dcgm.GPU_UTIL
    questions: list[tuple[str, Expr, str, list[Family], str]] = [
        ("utilization_mean", b.sample_mean(util_family, m, w), "percent", [util_family],
         SAMPLE_WEIGHTED),
        ("fb_used_mean_mib", b.sample_mean(dcgm.FB_USED, m, w), "MiB", [dcgm.FB_USED],
         "Per-GPU sample mean of memory allocated (weights, KV reserve, workspaces); "
         "not KV-cache occupancy."),
        ("fb_capacity_mib",
         b.sample_mean(dcgm.FB_USED, m, w) + b.sample_mean(dcgm.FB_FREE, m, w), "MiB",
         [dcgm.FB_USED, dcgm.FB_FREE], DCGM_CAPACITY),
        ("power_mean_watts", b.sample_mean(dcgm.POWER_USAGE, m, w), "W",
         [dcgm.POWER_USAGE], BOARD_POWER),
    ]  # fmt: skip

    def means() -> list[Measurement]:
        answers = instants(source, [q[1] for q in questions], window.end_s)
        return together(
            source, [partial(one, *q, a) for q, a in zip(questions, answers, strict=True)]
        )

    # The means (one request) alongside the label sets the per-group means need.
    asked = soon(source, means)
    seen: dict[Labels, tuple[str, ...]] = {}
    available: set[str] = set()
    asked_sets = together(
        source, [partial(gpu_label_sets, source, deployment, f, window) for f in PRESENCE]
    )
    found = dict(zip(PRESENCE, asked_sets, strict=True))
    for label_sets in found.values():
        for labels in label_sets:
            available.update(labels)
    ident = _identity(available)
    for family, label_sets in found.items():
        for labels in label_sets:
            key = Labels({k: labels[k] for k in ident if k in labels})
            seen.setdefault(key, (family.name,))
    with_util = {
        Labels({k: labels[k] for k in ident if k in labels}) for labels in found[util_family]
    }
    missing = tuple(sorted(gpu_name(k) for k in seen if k not in with_util))
    try:
        pod = resolve_label(dcgm.POD_LABELS, available)
    except NoDataError:
        pod = "instance"
    grouped = (
        b.sample_mean(util_family, m, w, by=(pod,)),
        b.sample_mean(util_family, m, w, by=ident),
    )
    by_replica, by_gpu = instants(source, grouped, window.end_s)
    per_replica = _grouped(
        source, deployment, window, "utilization_replica", grouped[0], pod, by_replica
    )
    per_gpu = _grouped(source, deployment, window, "utilization_gpu", grouped[1], "gpu", by_gpu)
    mean, fb_used, capacity, power = asked.result()
    declared = deployment.hardware.gpus_per_replica * len(deployment.replicas)
    counted = max(len(seen), declared)
    expected = derive(
        "gpus_expected",
        float(counted),
        "GPUs",
        [mean],
        "max(GPUs seen in any DCGM family, declared replicas x gpus_per_replica)",
    ).model_copy(update={"status": Status.OK, "value": float(counted), "annotations": ()})
    having = expected.model_copy(
        update={
            "key": f"{deployment.name}/{ANALYSIS}/gpus_with_samples",
            "statistic": "gpus_with_samples",
            "value": float(len(with_util)),
            "provenance": mean.provenance.model_copy(
                update={"computation": f"distinct ({', '.join(ident)}) with samples"}
            ),
        }
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
