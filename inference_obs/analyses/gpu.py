"""GPU utilisation, framebuffer and board power of a deployment's allocated GPUs.

Utilisation is sample-weighted over every allocated GPU, zeros included
(``sum(sum_over_time(u[w])) / sum(count_over_time(u[w]))``). GPUs that should
have reported and did not are listed by name, never counted as 0: the GPUs
expected are those seen in any DCGM family over the window (and, as a count,
replicas x GPUs per replica from the deployment). A GPU that stopped
reporting part-way is named too, with its last sample: the mean then weighs
only the samples it sent, so it is ``partial`` and says so. A family with no
series is ``no_data`` naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from pydantic import AwareDatetime, BaseModel, ConfigDict

from inference_obs.analyses.unit import Analysis, NoSettings
from inference_obs.errors import Annotation, NoDataError
from inference_obs.metrics import builders as b, dcgm
from inference_obs.metrics.family import Family, resolve_label
from inference_obs.query import Expr, to_promql
from inference_obs.reading.alignment import gpu_label_sets
from inference_obs.reading.context import Reading
from inference_obs.reading.coverage import Coverage, coverage
from inference_obs.reading.measurement import Measurement, Status, derive
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Instant, Labels, Vector

__all__ = [
    "STOP_FACTOR",
    "GpuPresence",
    "GpuResult",
    "StoppedGpu",
    "gpu",
    "gpu_coverage",
    "gpu_name",
    "gpu_presence",
    "stopped_gpus",
]

#: A GPU whose last utilisation sample lies more than this many measured scrape
#: intervals before the window's end stopped reporting: a late scrape (jitter) stays
#: under it, one missed scrape (two intervals) does not.
STOP_FACTOR = 1.75

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


class StoppedGpu(BaseModel):
    """A GPU that stopped sending utilisation samples before the window's end."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    last_sample: AwareDatetime


class GpuResult(AnalysisResult):
    """GPU usage of one deployment over one window.

    Attributes
    ----------
    missing_gpus
        GPUs seen in some DCGM family but with no utilisation sample, by name.
    stopped_gpus
        GPUs whose utilisation samples stopped part-way, with their last sample.
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
    stopped_gpus: tuple[StoppedGpu, ...]
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


def _mean_questions(r: Reading) -> list[tuple[str, Expr, str, str]]:
    """Statistic, query, unit and caveat of each whole-deployment mean :func:`_means` reads."""
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
    return questions


def _first_questions(r: Reading, settings: NoSettings) -> list[Expr]:
    """The means :func:`_means` asks first, in one query."""
    return [expr for _, expr, _, _ in _mean_questions(r)]


def _means(r: Reading) -> list[Measurement]:
    """Utilisation, framebuffer used and capacity, and power: the whole deployment's means."""
    questions = _mean_questions(r)
    answers = r.ask([q[1] for q in questions])
    return r.together(
        [
            partial(r.measure, statistic, expr, unit, caveats=(note,), answer=answer)
            for (statistic, expr, unit, note), answer in zip(questions, answers, strict=True)
        ],
    )


@dataclass(frozen=True, slots=True)
class GpuPresence:
    """Which of a deployment's GPUs showed up in the window, and how they are identified.

    Attributes
    ----------
    ident
        Labels identifying one GPU (hostname and index, else UUID, else index).
    pod
        The label naming a replica on GPU series.
    seen
        GPUs (their ``ident`` labels) with a series of any DCGM presence family.
    with_util
        GPUs with a utilisation series.
    missing
        Names of the GPUs seen without a utilisation series.
    expected
        max(GPUs seen, declared replicas x GPUs per replica).
    """

    ident: tuple[str, ...]
    pod: str
    seen: frozenset[Labels]
    with_util: frozenset[Labels]
    missing: tuple[str, ...]
    expected: int

    @property
    def unnamed(self) -> int:
        """GPUs declared but seen in no DCGM family: counted, not nameable."""
        return max(0, self.expected - len(self.with_util) - len(self.missing))


def gpu_presence(r: Reading) -> GpuPresence:
    """The deployment's GPUs seen in any DCGM family over the window, and those without
    utilisation samples (one grouped label query per presence family)."""
    asked_sets = r.together(
        [partial(gpu_label_sets, r.source, r.deployment, f, r.window) for f in PRESENCE]
    )
    found = dict(zip(PRESENCE, asked_sets, strict=True))
    available = {name for label_sets in found.values() for labels in label_sets for name in labels}
    ident = _identity(available)

    def key(labels: Labels) -> Labels:
        return Labels({k: labels[k] for k in ident if k in labels})

    seen = frozenset(key(labels) for label_sets in found.values() for labels in label_sets)
    with_util = frozenset(key(labels) for labels in found[dcgm.GPU_UTIL])
    try:
        pod = resolve_label(dcgm.POD_LABELS, available)
    except NoDataError:
        pod = "instance"
    declared = r.deployment.hardware.gpus_per_replica * len(r.deployment.replicas)
    return GpuPresence(
        ident=ident,
        pod=pod,
        seen=seen,
        with_util=with_util,
        missing=tuple(sorted(gpu_name(k) for k in seen if k not in with_util)),
        expected=max(len(seen), declared),
    )


def gpu_coverage(r: Reading, gap_factor: float = STOP_FACTOR) -> Coverage:
    """When each GPU sent utilisation samples: every raw sample of the window, by GPU name."""
    samples = r.raw(dcgm.GPU_UTIL.select(r.deployment.gpu_matchers))
    return coverage(samples, gpu_name, gap_factor)


def _second(moment: datetime) -> str:
    return moment.isoformat(sep=" ", timespec="seconds")


def stopped_gpus(r: Reading, found: Coverage, gap_factor: float) -> tuple[StoppedGpu, ...]:
    """GPUs of ``found`` whose last sample is over ``gap_factor`` scrape intervals before
    the window's end, with that sample's time (in the window's time zone)."""
    zone = r.window.start.tzinfo
    return tuple(
        StoppedGpu(name=name, last_sample=datetime.fromtimestamp(t / 1000, zone))
        for name, t in found.stopped(r.window.end_s * 1000, gap_factor).items()
    )


def _gpu(r: Reading, settings: NoSettings) -> GpuResult:
    """GPU utilisation, framebuffer and power of the deployment's GPUs over the window.

    Utilisation in percent (0-100), sample-weighted overall and per replica /
    per GPU with their ranges; the GPUs without utilisation samples by name,
    and those that stopped part-way with their last sample; framebuffer used
    and DCGM-reported capacity in MiB (per-GPU sample means); board power mean
    in W. Every query is evaluated at the window's end over its length.
    """
    m, w = r.deployment.gpu_matchers, r.seconds
    # The means (one request) and the GPUs' scrape times alongside the label sets.
    asked = r.soon(partial(_means, r))
    covered = r.soon(partial(gpu_coverage, r))
    presence = gpu_presence(r)
    ident, missing = presence.ident, presence.missing
    grouped = (
        b.sample_mean(dcgm.GPU_UTIL, m, w, by=(presence.pod,)),
        b.sample_mean(dcgm.GPU_UTIL, m, w, by=ident),
    )
    by_replica, by_gpu = r.ask(grouped)
    per_replica = _grouped(r, "utilization_replica", grouped[0], presence.pod, by_replica)
    per_gpu = _grouped(r, "utilization_gpu", grouped[1], "gpu", by_gpu)
    mean, fb_used, capacity, power = asked.result()
    stopped = stopped_gpus(r, covered.result(), STOP_FACTOR)
    counted = presence.expected
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
        float(len(presence.with_util)),
        "GPUs",
        Status.OK,
        promql=mean.provenance.promql,
        computation=f"distinct ({', '.join(ident)}) with samples",
    )
    notes: list[Annotation] = []
    if len(presence.with_util) < counted:
        text = f"GPUs without utilisation samples: {', '.join(missing) or 'none named'}"
        if presence.unnamed > 0:
            text += f"; {presence.unnamed} more declared but seen in no DCGM family"
        notes.append(Annotation("missing_gpus", text))
    if stopped:
        names = ", ".join(f"{g.name} (last sample {_second(g.last_sample)})" for g in stopped)
        notes.append(
            Annotation(
                "stopped_gpus",
                f"GPUs that stopped reporting part-way: {names}; the mean weighs only the "
                "samples they sent, none after",
            )
        )
    if mean.ok and notes:
        mean = mean.model_copy(
            update={"status": Status.PARTIAL, "annotations": (*mean.annotations, *notes)}
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
        stopped_gpus=stopped,
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
    questions=_first_questions,
)
