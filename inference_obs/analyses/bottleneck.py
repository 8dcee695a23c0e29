"""What bounds a deployment's GPUs: memory bandwidth, arithmetic, or nothing to do.

GPU_UTIL only says a kernel was running; decode-bound reasoning workloads read
near 100 % while the tensor pipes idle and the memory interface is saturated
by weight and KV-cache reads. The profiling ratios (``PROF_DRAM_ACTIVE``,
``PROF_PIPE_TENSOR_ACTIVE``, 0-1) tell the cases apart; without them the
class is ``unknown``, never guessed from GPU_UTIL alone.

Each class comes with the step it suggests, after a published essay on GPU
boundaries: profile before adding GPUs when the counters are missing, no
line is crossed, or work waits while the GPUs idle (:func:`advise`, with the
stage-boundary reading); batch more when the GPUs are underused, or
bandwidth-bound, while the KV cache stays mostly free
(``vllm:kv_cache_usage_perc``); reclaim KV memory when it does not; add
compute only when the tensor pipes are busy.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from functools import partial

from pydantic import Field

from inference_obs.analyses.boundaries.stages import BoundariesResult, CapacityReading
from inference_obs.analyses.unit import Analysis, Settings
from inference_obs.metrics import builders as b, dcgm, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Binary, Number, to_promql
from inference_obs.reading.alignment import scrape_interval_ms
from inference_obs.reading.context import Reading
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.result import AnalysisResult

__all__ = [
    "PROFILE_FIRST",
    "BottleneckClass",
    "BottleneckResult",
    "BottleneckSettings",
    "advise",
    "bottleneck",
]

SAMPLE_MEAN = "Sample-weighted mean over every GPU sample of the window; not time-weighted."
NONZERO_UTIL = (
    "Share of GPU-steps (each GPU's latest GPU_UTIL sample at every scrape interval) above 0: "
    "some kernel ran in the NVML sample period, not that the GPU was saturated, nor the share "
    "of time it computed (the stage boundaries' duty cycle)."
)
KV_PEAK = (
    "Largest sampled share of one engine's KV block pool in use: a peak between scrapes is "
    "not seen."
)
#: The actions a reading suggests, in the words the report shows.
PROFILE_FIRST = "profile before adding GPUs"
BATCH_MORE = "batch more"
RECLAIM_KV = "reclaim KV memory to batch more"
ADD_COMPUTE = "add compute"


class BottleneckClass(StrEnum):
    """What bounds the GPUs over the window."""

    BANDWIDTH_BOUND_DECODE = "bandwidth_bound_decode"
    COMPUTE_BOUND = "compute_bound"
    STARVED = "starved"
    MIXED = "mixed"
    UNKNOWN = "unknown"


class BottleneckResult(AnalysisResult):
    """Profiling ratios and their reading for one deployment over one window.

    Attributes
    ----------
    classification
        The class; ``unknown`` when DRAM or tensor activity has no data.
    reason
        Why: the thresholds crossed, or the family missing.
    dram_active, tensor_active, sm_active, sm_occupancy
        Sample means, ratio 0-1.
    gpu_util
        Sample mean, percent 0-100.
    nonzero_util_share
        Share (ratio 0-1) of GPU-steps with GPU_UTIL above 0, at the scrape interval.
    kv_cache_usage_max
        Largest sampled ``vllm:kv_cache_usage_perc`` of any engine (ratio 0-1).
    action, advice
        The step the class suggests (:data:`PROFILE_FIRST`, ``"batch more"``,
        ...) and the reading as a sentence with its numbers.
    thresholds
        The lines the class was read against (the run's settings).
    """

    classification: BottleneckClass
    reason: str
    dram_active: Measurement
    tensor_active: Measurement
    sm_active: Measurement
    sm_occupancy: Measurement
    gpu_util: Measurement
    nonzero_util_share: Measurement
    kv_cache_usage_max: Measurement
    action: str
    advice: str
    thresholds: BottleneckSettings


class BottleneckSettings(Settings):
    """Where the profiling ratios and GPU_UTIL draw the lines between the classes."""

    dram_high: float = Field(
        0.5,
        ge=0,
        le=1,
        description="DRAM active mean (ratio 0-1) at or above which memory bandwidth is busy: "
        "with light arithmetic (tensor_low), the work is bandwidth-bound decode.",
    )
    tensor_low: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Tensor-pipe active mean (ratio 0-1) at or below which arithmetic is light.",
    )
    tensor_high: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Tensor-pipe active mean (ratio 0-1) at or above which the work is "
        "compute-bound.",
    )
    util_low: float = Field(
        20.0,
        ge=0,
        le=100,
        description="GPU_UTIL mean (percent 0-100) below which the GPUs are starved of work "
        "(underused).",
    )
    kv_free_below: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Largest sampled KV-cache usage (ratio 0-1) below which the KV cache stays "
        "mostly free: underused or bandwidth-bound GPUs can then batch more.",
    )


def _nonzero_util_share(r: Reading) -> Measurement:
    """Share (0-1) of GPU-steps with ``GPU_UTIL > 0``, every GPU pooled, reduced by the source.

    Two range queries at the family's scrape interval: ``sum(x > bool 0)``
    (GPUs busy at the step) and ``count(x)`` (GPUs with a sample, each its
    latest within the look-back); the share is their totals' ratio. A fleet's
    answer is two series, whatever its number of GPUs.
    """
    selector = dcgm.GPU_UTIL.select(r.deployment.gpu_matchers)
    busy, every = Binary(">", selector, Number(0), bool_=True).sum(), selector.count()
    step_ms = scrape_interval_ms(r.source, selector, r.window)
    totals = [0.0, 0.0]
    if step_ms:
        asked = [partial(r.range, expr, step_ms / 1000) for expr in (busy, every)]
        totals = [float(answer.values.sum()) for answer in r.together(asked)]
    return r.local(
        "nonzero_util_share",
        totals[0] / totals[1] if totals[1] else None,
        "ratio",
        reads=[busy, every],
        computation=(
            f"sum over steps of {to_promql(busy)} / sum over steps of {to_promql(every)}, "
            f"range queries every {step_ms / 1000:g} s (the GPU scrape interval)"
        ),
        caveats=(NONZERO_UTIL,),
        missing=[] if totals[1] else [dcgm.GPU_UTIL],
    )


def _bottleneck(r: Reading, settings: BottleneckSettings) -> BottleneckResult:
    """Classify what bounds the deployment's GPUs over the window.

    Every query is evaluated at the window's end over its length. The sample
    means of DRAM, tensor-pipe and SM activity and of SM occupancy (ratios
    0-1) and of GPU_UTIL (percent 0-100), the share of GPU-steps with GPU_UTIL
    above 0 (ratio 0-1), the largest sampled KV-cache usage (ratio 0-1), and
    the class with its reason and the step it suggests, by the lines of
    ``settings``.
    """
    gm, w = r.deployment.gpu_matchers, r.seconds
    nonzero_asked = r.soon(partial(_nonzero_util_share, r))
    kv_expr = b.maximum(vllm.KV_CACHE_USAGE, r.matchers, w)
    kv_asked = r.soon(
        partial(r.measure, "kv_cache_usage_max", kv_expr, "ratio", caveats=(KV_PEAK,)),
    )
    questions: tuple[tuple[str, Family, str], ...] = (
        ("dram_active", dcgm.PROF_DRAM_ACTIVE, "ratio"),
        ("tensor_active", dcgm.PROF_PIPE_TENSOR_ACTIVE, "ratio"),
        ("sm_active", dcgm.PROF_SM_ACTIVE, "ratio"),
        ("sm_occupancy", dcgm.PROF_SM_OCCUPANCY, "ratio"),
        ("gpu_util", dcgm.GPU_UTIL, "percent"),
    )
    exprs = [b.sample_mean(family, gm, w) for _, family, _ in questions]
    # Every mean in one request; together, as a mean without data looks up which families
    # have series.
    answers = r.ask(exprs)
    dram, tensor, sm_active, occupancy, util = r.together(
        [
            partial(
                r.measure,
                statistic,
                expr,
                unit,
                caveats=(SAMPLE_MEAN, *family.traps[:1]),
                answer=answer,
            )
            for (statistic, family, unit), expr, answer in zip(
                questions, exprs, answers, strict=True
            )
        ],
    )
    cls, reason = _classify(dram, tensor, util, settings)
    kv = kv_asked.result()
    action, advice = _advice(cls, dram, tensor, util, kv, settings, len(r.deployment.replicas))
    return BottleneckResult(
        classification=cls,
        reason=reason,
        dram_active=dram,
        tensor_active=tensor,
        sm_active=sm_active,
        sm_occupancy=occupancy,
        gpu_util=util,
        nonzero_util_share=nonzero_asked.result(),
        kv_cache_usage_max=kv,
        action=action,
        advice=advice,
        thresholds=settings,
    )


def _classify(
    dram: Measurement, tensor: Measurement, util: Measurement, settings: BottleneckSettings
) -> tuple[BottleneckClass, str]:
    dram_high, tensor_low = settings.dram_high, settings.tensor_low
    tensor_high, util_low = settings.tensor_high, settings.util_low
    missing: Sequence[str] = [
        f.name
        for f, m in ((dcgm.PROF_DRAM_ACTIVE, dram), (dcgm.PROF_PIPE_TENSOR_ACTIVE, tensor))
        if m.value is None
    ]
    if missing:
        return (
            BottleneckClass.UNKNOWN,
            f"no data for {', '.join(missing)}: profiling counters not exported; "
            "GPU_UTIL alone cannot tell bandwidth- from compute-bound work",
        )
    assert dram.value is not None
    assert tensor.value is not None
    if util.value is not None and util.value < util_low:
        return BottleneckClass.STARVED, f"GPU_UTIL mean {util.value:.3g} % < {util_low:g} %"
    if dram.value >= dram_high and tensor.value <= tensor_low:
        return (
            BottleneckClass.BANDWIDTH_BOUND_DECODE,
            f"DRAM active {dram.value:.3g} >= {dram_high:g} and tensor active "
            f"{tensor.value:.3g} <= {tensor_low:g}",
        )
    if tensor.value >= tensor_high:
        return (
            BottleneckClass.COMPUTE_BOUND,
            f"tensor active {tensor.value:.3g} >= {tensor_high:g}",
        )
    return (
        BottleneckClass.MIXED,
        f"DRAM active {dram.value:.3g}, tensor active {tensor.value:.3g}: no threshold crossed",
    )


def _advice(
    cls: BottleneckClass,
    dram: Measurement,
    tensor: Measurement,
    util: Measurement,
    kv: Measurement,
    settings: BottleneckSettings,
    replicas: int,
) -> tuple[str, str]:
    """The step the class suggests, and the reading as a sentence with its numbers.

    ``replicas`` is the number declared: fewer replicas are suggested only where there
    are several to consolidate.
    """
    free = kv.value is not None and kv.value < settings.kv_free_below
    peak = "no KV-cache usage data" if kv.value is None else f"KV cache peak {kv.value:.0%} used"
    busy = "no GPU_UTIL data" if util.value is None else f"GPU_UTIL {util.value:.0f} %"
    underused = util.value is not None and util.value < settings.util_low
    profiled = f"DRAM active {dram.value or 0:.0%}, tensor pipes active {tensor.value or 0:.0%}"
    if cls is BottleneckClass.BANDWIDTH_BOUND_DECODE:
        bound = f"Decode is bound by memory bandwidth ({profiled}; {peak}): "
        if free:
            return BATCH_MORE, bound + (
                "batch more (more concurrent requests per replica) so each weight read "
                "serves more tokens; more GPUs of the same kind would stall the same way."
            )
        return RECLAIM_KV, bound + (
            "reclaim KV memory (FP8 KV cache, prefix reuse, quantised weights) to batch more "
            "before adding GPUs."
        )
    if cls is BottleneckClass.COMPUTE_BOUND:
        return ADD_COMPUTE, (
            f"The tensor pipes are busy ({profiled}): the GPUs are compute-bound; more or "
            "faster GPUs, or lower precision, raise throughput."
        )
    missing = [
        f.name
        for f, m in ((dcgm.PROF_DRAM_ACTIVE, dram), (dcgm.PROF_PIPE_TENSOR_ACTIVE, tensor))
        if m.value is None
    ]
    unknown = f"the profiling counters ({', '.join(missing)}) are not exported"
    if underused and free:
        why = f" What bounds them is not known: {unknown}." if missing else ""
        fewer = ", or fewer replicas" if replicas > 1 else ""
        return BATCH_MORE, (
            f"The GPUs are underused ({busy}, under {settings.util_low:g} %) while the KV "
            f"cache stays mostly free ({peak}): batch more (more concurrent requests per "
            f"replica{fewer}) before adding GPUs.{why}"
        )
    if missing:
        return PROFILE_FIRST, (
            f"Bound unknown: {unknown}, and {busy} says only that a kernel ran ({peak}): "
            "export them and profile before adding GPUs."
        )
    return PROFILE_FIRST, (
        f"No single bound ({profiled}; {busy}; {peak}): profile a step (e.g. Nsight) before "
        "adding GPUs."
    )


def advise(result: BottleneckResult, stages: BoundariesResult | None = None) -> tuple[str, str]:
    """The step a deployment's GPU readings suggest, and why, in one sentence.

    The bottleneck's own (``result.action``, ``result.advice``), unless the
    stage boundaries read ``starved``: work waited or ran while the GPUs
    idled, which more GPUs would do the same way, so profile first.
    """
    if stages is not None and stages.reading is CapacityReading.STARVED:
        return PROFILE_FIRST, (
            f"Work waited or ran while the GPUs idled ({stages.reason}): the GPUs wait on "
            f"the host or on transfers, so profile before adding GPUs. {result.advice}"
        )
    return result.action, result.advice


bottleneck = Analysis(
    name="bottleneck",
    title="Bottleneck",
    entry=_bottleneck,
    result=BottleneckResult,
    settings=BottleneckSettings,
    summary="Memory bandwidth, arithmetic or starvation, from the DCGM profiling ratios.",
)
