"""What bounds a deployment's GPUs: memory bandwidth, arithmetic, or nothing to do.

GPU_UTIL only says a kernel was running; decode-bound reasoning workloads read
near 100 % while the tensor pipes idle and the memory interface is saturated
by weight and KV-cache reads. The profiling ratios (``PROF_DRAM_ACTIVE``,
``PROF_PIPE_TENSOR_ACTIVE``, 0-1) tell the cases apart; without them the
class is ``unknown``, never guessed from GPU_UTIL alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from functools import partial

from pydantic import Field

from inference_obs.analyses.unit import Analysis, Settings
from inference_obs.metrics import builders as b, dcgm
from inference_obs.metrics.family import Family
from inference_obs.query import Binary, Number, to_promql
from inference_obs.reading.alignment import scrape_interval_ms
from inference_obs.reading.context import Reading
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.result import AnalysisResult
from inference_obs.source.remembering import soon, together

__all__ = ["BottleneckClass", "BottleneckResult", "BottleneckSettings", "bottleneck"]

SAMPLE_MEAN = "Sample-weighted mean over every GPU sample of the window; not time-weighted."
DUTY = (
    "A sampled share of wall time: the share of GPU-steps (each GPU's latest GPU_UTIL sample "
    "at every scrape interval) above 0. Above 0 means some kernel ran in the NVML period, "
    "not that the GPU was saturated."
)


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
    duty_cycle
        Share (ratio 0-1) of GPU-steps with GPU_UTIL above 0, at the scrape interval.
    """

    classification: BottleneckClass
    reason: str
    dram_active: Measurement
    tensor_active: Measurement
    sm_active: Measurement
    sm_occupancy: Measurement
    gpu_util: Measurement
    duty_cycle: Measurement


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
        description="GPU_UTIL mean (percent 0-100) below which the GPUs are starved of work.",
    )


def _duty_cycle(r: Reading) -> Measurement:
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
        asked = [partial(r.source.range, expr, r.window, step_ms / 1000) for expr in (busy, every)]
        totals = [float(answer.values.sum()) for answer in together(r.source, asked)]
    return r.local(
        "duty_cycle",
        totals[0] / totals[1] if totals[1] else None,
        "ratio",
        reads=[busy, every],
        computation=(
            f"sum over steps of {to_promql(busy)} / sum over steps of {to_promql(every)}, "
            f"range queries every {step_ms / 1000:g} s (the GPU scrape interval)"
        ),
        caveats=(DUTY,),
        missing=[] if totals[1] else [dcgm.GPU_UTIL],
    )


def _bottleneck(r: Reading, settings: BottleneckSettings) -> BottleneckResult:
    """Classify what bounds the deployment's GPUs over the window.

    Every query is evaluated at the window's end over its length. The sample
    means of DRAM, tensor-pipe and SM activity and of SM occupancy (ratios
    0-1) and of GPU_UTIL (percent 0-100), the duty cycle (ratio 0-1), and the
    class with its reason, by the lines of ``settings``.
    """
    gm, w = r.deployment.gpu_matchers, r.seconds
    duty_asked = soon(r.source, partial(_duty_cycle, r))
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
    answers = r.instants(exprs)
    dram, tensor, sm_active, occupancy, util = together(
        r.source,
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
    return BottleneckResult(
        classification=cls,
        reason=reason,
        dram_active=dram,
        tensor_active=tensor,
        sm_active=sm_active,
        sm_occupancy=occupancy,
        gpu_util=util,
        duty_cycle=duty_asked.result(),
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


bottleneck = Analysis(
    name="bottleneck",
    title="Bottleneck",
    entry=_bottleneck,
    result=BottleneckResult,
    settings=BottleneckSettings,
    summary="Memory bandwidth, arithmetic or starvation, from the DCGM profiling ratios.",
)
