"""Throughput over a window: token and request increases, rates, and what limited them.

Every number is a :class:`~inference_obs.reading.measurement.Measurement`
from a counter ``increase`` (per series, then summed) or from local
arithmetic on such measurements, with the PromQL behind it kept. The output
rate is wall-clock: tokens over the whole window, idle minutes included. A
deployment whose waiting queue stayed empty and whose KV cache never filled
was limited by its traffic: its rate is an observed floor, not a capacity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum
from functools import partial

from inference_obs.deployment import Deployment
from inference_obs.errors import NoDataError
from inference_obs.metrics import builders as b, dcgm, vllm
from inference_obs.metrics.family import Family, resolve_label
from inference_obs.query import Matcher, count_over_time
from inference_obs.reading.joined import instants
from inference_obs.reading.measurement import (
    Measurement,
    derive,
    local_measurement,
    measure,
)
from inference_obs.reading.resolution import positive_share
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Window
from inference_obs.source.base import Source
from inference_obs.source.remembering import soon

__all__ = ["Regime", "ThroughputResult", "replicas_seen", "throughput"]

ANALYSIS = "throughput"
EXTRAPOLATED = (
    "Prometheus increase() extrapolates to the window edges: the value is fractional and "
    "an estimate, not an audited count."
)
WALL_CLOCK = "Wall-clock rate over the whole window, idle time included; not a saturated capacity."
FLOOR = "Demand-limited: an observed floor, not a capacity."


class Regime(StrEnum):
    """What limited the output in the window, by the queue and KV-cache evidence."""

    DEMAND_LIMITED = "demand_limited"
    CAPACITY_LIMITED = "capacity_limited"
    #: The evidence families have no data: nothing is claimed.
    UNKNOWN = "unknown"


def replicas_seen(
    source: Source,
    deployment: Deployment,
    window: Window,
    family: Family,
    matchers: Sequence[Matcher],
    analysis: str,
) -> Measurement:
    """Number of distinct pods with samples of ``family`` in the window (unit: replicas).

    The pod label is resolved among :data:`~inference_obs.metrics.dcgm.POD_LABELS`
    (falling back to ``instance``); ``no_data`` when the family has no series.
    """
    selector = family.select(matchers)
    labels = source.series(selector, window)
    available = {name for one in labels for name in one}
    try:
        pod = resolve_label((*dcgm.POD_LABELS, "instance"), available)
    except NoDataError:
        pod = "instance"
    expr = count_over_time(selector.over(window.seconds)).count(by=(pod,)).count()
    return measure(
        source,
        deployment,
        window,
        analysis=analysis,
        statistic="replicas_seen",
        expr=expr,
        unit="replicas",
        families=[family],
        matchers=matchers,
    )


class ThroughputResult(AnalysisResult):
    """Token and request throughput of one deployment over one window.

    Attributes
    ----------
    regime
        What limited the output; :attr:`regime_reason` says why.
    """

    output_tokens: Measurement
    prompt_tokens: Measurement
    finished_requests: Measurement
    output_tokens_per_second: Measurement
    replicas_seen: Measurement
    output_tokens_per_second_per_replica: Measurement
    output_tokens_per_gpu_hour: Measurement
    waiting_sample_share: Measurement
    waiting_max: Measurement
    kv_cache_usage_max: Measurement
    regime: Regime
    regime_reason: str


def _waiting_share(
    source: Source, deployment: Deployment, window: Window, step: float | None
) -> Measurement:
    """Share (0-1) of waiting-queue samples above 0: raw per scrape, or per tile by the server."""
    family = vllm.NUM_REQUESTS_WAITING
    share, asked, how = positive_share(source, family.select(deployment.matchers), window, step)
    caveat = (
        "Sampled every scrape: a queue between two scrapes is not seen."
        if step is None
        else f"Per {step:g} s tile: a tile counts once, however many of its scrapes saw a queue."
    )
    return local_measurement(
        source, deployment, window, analysis=ANALYSIS, statistic="waiting_sample_share",
        value=share, unit="ratio", selectors=asked, computation=how, caveats=(caveat,),
        missing=[family.name],
    )  # fmt: skip


def throughput(
    source: Source,
    deployment: Deployment,
    window: Window,
    *,
    queue_share_threshold: float = 0.05,
    kv_full: float = 0.99,
    step: float | None = None,
) -> ThroughputResult:
    """Throughput of ``deployment`` over ``window``.

    Parameters
    ----------
    source
        Where the samples come from.
    deployment
        The deployment; its engine matchers select the vLLM series.
    window
        The window; every query is evaluated at its end over its length.
    queue_share_threshold
        Share (0-1) of scrapes (or tiles) with a non-empty waiting queue from
        which the deployment counts as capacity-limited.
    kv_full
        KV-cache usage (0-1) that counts as full.
    step
        ``None`` (default) to count the waiting queue's raw samples; else the
        width, seconds, of the tiles to count it in (see
        :mod:`~inference_obs.reading.resolution`).

    Returns
    -------
    ThroughputResult
        Increases in tokens and requests (fractional estimates), the wall-clock
        output rate in tokens/s, its per-replica mean, tokens per GPU-hour, and
        the demand/capacity classification with its evidence.
    """
    m = deployment.matchers
    w = window.seconds

    # The replicas and the waiting share alongside one request for every other number.
    replicas_asked = soon(source, partial(
        replicas_seen, source, deployment, window, vllm.GENERATION_TOKENS, m, ANALYSIS
    ))  # fmt: skip
    share_asked = soon(source, partial(_waiting_share, source, deployment, window, step))
    totals = {
        family: b.increase_total(family, m, w)
        for family in (vllm.GENERATION_TOKENS, vllm.PROMPT_TOKENS, vllm.REQUEST_SUCCESS)
    }
    maxima = {
        family: b.maximum(family, m, w)
        for family in (vllm.NUM_REQUESTS_WAITING, vllm.KV_CACHE_USAGE)
    }
    answers = dict(
        zip(
            (*totals.values(), *maxima.values()),
            instants(source, [*totals.values(), *maxima.values()], window.end_s),
            strict=True,
        )
    )

    def run(statistic: str, expr_family: Family, unit: str, caveats: Sequence[str]) -> Measurement:
        expr = totals[expr_family]
        return measure(
            source,
            deployment,
            window,
            analysis=ANALYSIS,
            statistic=statistic,
            expr=expr,
            unit=unit,
            families=[expr_family],
            matchers=m,
            caveats=caveats,
            answer=answers[expr],
        )

    output = run("output_tokens", vllm.GENERATION_TOKENS, "tokens", (EXTRAPOLATED,))
    prompt = run("prompt_tokens", vllm.PROMPT_TOKENS, "tokens", (EXTRAPOLATED,))
    finished = run(
        "finished_requests",
        vllm.REQUEST_SUCCESS,
        "requests",
        (
            EXTRAPOLATED,
            "Requests the engine finished for any reason (stop, length, abort, error); "
            "not validated client success.",
        ),
    )
    out = output.value or 0.0
    rate = derive(
        "output_tokens_per_second",
        out / w,
        "tokens/s",
        [output],
        f"output_tokens / {w:g} s",
        (WALL_CLOCK,),
    )
    replicas = replicas_asked.result()
    n = replicas.value or math.nan
    per_replica = derive(
        "output_tokens_per_second_per_replica",
        out / w / n,
        "tokens/s",
        [output, replicas],
        f"output_tokens / {w:g} s / replicas_seen",
        (WALL_CLOCK, "A mean over the replicas seen, not any one replica's rate."),
    )
    gpus = deployment.hardware.gpus_per_replica * n
    per_gpu_hour = derive(
        "output_tokens_per_gpu_hour",
        out / (gpus * w / 3600.0),
        "tokens/GPU-hour",
        [output, replicas],
        f"output_tokens / ({deployment.hardware.gpus_per_replica} GPUs/replica x "
        f"replicas_seen x {w / 3600.0:g} h)",
        (WALL_CLOCK, "GPUs are as declared per replica, not verified from DCGM."),
    )
    share = share_asked.result()
    waiting_max = measure(
        source,
        deployment,
        window,
        analysis=ANALYSIS,
        statistic="waiting_max",
        expr=maxima[vllm.NUM_REQUESTS_WAITING],
        answer=answers[maxima[vllm.NUM_REQUESTS_WAITING]],
        unit="requests",
        families=[vllm.NUM_REQUESTS_WAITING],
        matchers=m,
        caveats=("A sampled maximum: a peak between two scrapes is not seen.",),
    )
    kv_max = measure(
        source,
        deployment,
        window,
        analysis=ANALYSIS,
        statistic="kv_cache_usage_max",
        expr=maxima[vllm.KV_CACHE_USAGE],
        answer=answers[maxima[vllm.KV_CACHE_USAGE]],
        unit="ratio",
        families=[vllm.KV_CACHE_USAGE],
        matchers=m,
        caveats=("Fraction of logical KV blocks in use (1 = full), sampled.",),
    )
    counted = "scrapes" if step is None else f"{step:g} s tiles"
    regime, reason = _classify(share, kv_max, queue_share_threshold, kv_full, counted)
    if regime is Regime.DEMAND_LIMITED:
        rate = rate.model_copy(update={"caveats": (*rate.caveats, FLOOR)})
        per_replica = per_replica.model_copy(update={"caveats": (*per_replica.caveats, FLOOR)})
    return ThroughputResult(
        output_tokens=output,
        prompt_tokens=prompt,
        finished_requests=finished,
        output_tokens_per_second=rate,
        replicas_seen=replicas,
        output_tokens_per_second_per_replica=per_replica,
        output_tokens_per_gpu_hour=per_gpu_hour,
        waiting_sample_share=share,
        waiting_max=waiting_max,
        kv_cache_usage_max=kv_max,
        regime=regime,
        regime_reason=reason,
    )


def _classify(
    share: Measurement, kv_max: Measurement, threshold: float, kv_full: float, counted: str
) -> tuple[Regime, str]:
    reasons = []
    if share.value is not None and share.value > threshold:
        reasons.append(
            f"the waiting queue was > 0 in {share.value:.1%} of {counted} "
            f"(threshold {threshold:.0%})"
        )
    if kv_max.value is not None and kv_max.value >= kv_full:
        reasons.append(f"KV-cache usage reached {kv_max.value:.3f} (full at {kv_full:g})")
    if reasons:
        return Regime.CAPACITY_LIMITED, "; ".join(reasons)
    if share.value is None or kv_max.value is None:
        gaps = [m.statistic for m in (share, kv_max) if m.value is None]
        return Regime.UNKNOWN, f"no data for {', '.join(gaps)}: no classification"
    return Regime.DEMAND_LIMITED, (
        f"the waiting queue was > 0 in {share.value:.1%} of {counted} (threshold "
        f"{threshold:.0%}) and KV-cache usage peaked at {kv_max.value:.3f}: {FLOOR}"
    )
