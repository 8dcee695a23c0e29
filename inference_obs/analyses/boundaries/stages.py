"""GPU duty cycle at the stage boundaries: do the GPUs wait on the host while work is there?

A published essay on GPU duty cycle argues that a low duty cycle is usually a
placement signal, not a reason to buy GPUs: between steps the GPUs wait on
host-side work (tokenisation, batching, detokenisation) and on host-device
copies, and more GPUs would wait the same way. This analysis looks, per
replica, for that waiting in monitoring data:

- **duty cycle**: the share of wall time the GPUs compute, from
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (0-1, averaged over the exporter's
  collect interval) where it is exported, else ``DCGM_FI_DEV_GPU_UTIL / 100``
  (any kernel in NVML's sample period: coarser, and it reads higher);
- **boundary intervals**: at least ``min_samples`` app scrapes in a row with
  work present (waiting + running > 0) while the replica's GPUs compute less
  than ``idle_below`` of the time (aligned as :mod:`~inference_obs.analyses.queueing` aligns them);
- **attribution** of each interval, from the medians over its scrapes of the
  scrape-to-scrape rates (:mod:`.evidence`), so its first and last
  scrapes do not dilute it: to the **host** when the server process is near
  one core (a Python process bound by its GIL), its containers are
  throttled or at their CPU limit, or the node's CPUs are busy; to
  **transfer** when PCIe carries near the link's rate; to the larger margin
  when both; else **unexplained** (a stall, a scheduler hold, or evidence not
  exported: the interval says which);
- **tokens per GPU-hour**: output tokens over declared GPUs x hours, the
  number that should hold or rise while the GPU count stays flat;
- a **reading**: ``starved`` (re-place work before adding GPUs) when boundary
  intervals hold ``starved_share`` of the scrapes with work; ``saturated``
  when the GPUs compute ``saturated_duty`` of the time and requests wait in
  ``queued_share`` of those scrapes; ``healthy`` otherwise;
  ``insufficient_data`` without a duty cycle or app scrapes.
"""

from __future__ import annotations

import html
from enum import StrEnum
from functools import partial

import pandas as pd
from pydantic import BaseModel, ConfigDict

from inference_obs.analyses.boundaries import evidence as ev
from inference_obs.analyses.boundaries.findings import (
    BoundaryCause,
    BoundaryInterval,
    Thresholds,
    find_intervals,
)
from inference_obs.analyses.boundaries.host import pod_matchers, server_matchers
from inference_obs.deployment import Deployment
from inference_obs.metrics import builders as b, dcgm, host, host_queries as hq, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, Matcher, to_promql
from inference_obs.reading.alignment import gpu_label_sets
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import Ratio, counter_ratios_by
from inference_obs.reading.joined import instants
from inference_obs.reading.measurement import (
    Measurement,
    derive,
    local_measurement,
    measure,
    measure_by,
)
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Labels, Window
from inference_obs.source.base import Source
from inference_obs.source.remembering import soon, together

__all__ = [
    "BoundariesResult",
    "BoundaryCause",
    "BoundaryInterval",
    "CapacityReading",
    "ReplicaBoundaries",
    "Thresholds",
    "boundaries",
]

ANALYSIS = "boundaries"
SAMPLED = "Counts of app scrapes, not of wall time: what happens between scrapes is not seen."
DUTY = (
    "Sample-weighted mean of the duty family over the replica's GPUs; GR_ENGINE_ACTIVE is busy "
    "time, not SM saturation, and GPU_UTIL / 100 reads higher (any kernel counts)."
)
GPU_HOURS = "Declared GPUs per replica x the whole window, whether or not the replica served."


class CapacityReading(StrEnum):
    """What a replica's (or deployment's) GPU time says about where capacity is lost."""

    STARVED = "starved"
    SATURATED = "saturated"
    HEALTHY = "healthy"
    INSUFFICIENT_DATA = "insufficient_data"


VERDICTS: dict[CapacityReading, str] = {
    CapacityReading.STARVED: "GPUs starved — re-place work before adding GPUs",
    CapacityReading.SATURATED: "GPUs saturated — requests wait while the GPUs compute",
    CapacityReading.HEALTHY: "healthy — no boundary findings",
    CapacityReading.INSUFFICIENT_DATA: "insufficient data",
}


class ReplicaBoundaries(BaseModel):
    """One replica's duty cycle, tokens per GPU-hour, host and PCIe means and reading."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    replica: str
    reading: CapacityReading
    reason: str
    duty_cycle: Measurement
    boundary_share: Measurement
    queued_share: Measurement
    output_tokens: Measurement
    tokens_per_gpu_hour: Measurement
    server_cpu_cores: Measurement
    container_cpu_cores: Measurement
    cpu_limit_cores: Measurement
    throttled_ratio: Measurement
    pcie_rx_bytes_per_second: Measurement
    pcie_tx_bytes_per_second: Measurement


class BoundariesResult(AnalysisResult):
    """Stage-boundary findings of one deployment over one window.

    Attributes
    ----------
    reading, reason
        The deployment's reading (the most severe of its replicas') and why.
    duty_family
        The DCGM family the duty cycle was read from.
    intervals
        Boundary intervals of every replica, in time order.
    replicas
        Per replica: its Measurements and reading.
    duty_cycle, tokens_per_gpu_hour
        Over the whole deployment (ratio 0-1; tokens/GPU-hour).
    step_seconds
        ``None`` when each row is an app scrape; else the tile width, seconds.
    evidence_promql
        What the intervals' evidence was read with, for rechecking: the raw
        reads as range selectors over the window, and the server's
        reductions (per scrape the GPU families' per-replica ``avg`` at their
        scrape interval, per tile every family's tile query).
    """

    reading: CapacityReading
    reason: str
    duty_family: str
    intervals: tuple[BoundaryInterval, ...]
    replicas: tuple[ReplicaBoundaries, ...]
    duty_cycle: Measurement
    tokens_per_gpu_hour: Measurement
    step_seconds: float | None
    evidence_promql: tuple[str, ...]

    @property
    def verdict(self) -> str:
        """The reading in words."""
        return VERDICTS[self.reading]

    def intervals_frame(self) -> pd.DataFrame:
        """One row per boundary interval, its evidence as columns."""
        return pd.DataFrame([i.model_dump() for i in self.intervals])

    def _repr_html_(self) -> str:
        head = f"<p><b>{html.escape(self.verdict)}</b>: {html.escape(self.reason)}</p>"
        found = self.intervals_frame()
        table = found.to_html(index=False) if len(found) else "<p>No boundary intervals.</p>"
        return head + table + super()._repr_html_()


def _duty_family(source: Source, deployment: Deployment, window: Window) -> Family:
    # The fallback's label sets are wanted either way (the GPU analysis reads them).
    soon(source, partial(gpu_label_sets, source, deployment, dcgm.GPU_UTIL, window))
    if gpu_label_sets(source, deployment, dcgm.PROF_GR_ENGINE_ACTIVE, window):
        return dcgm.PROF_GR_ENGINE_ACTIVE
    return dcgm.GPU_UTIL


def _read(
    duty: Measurement, boundary: Measurement, queued: Measurement, th: Thresholds
) -> tuple[CapacityReading, str]:
    if duty.value is None or boundary.value is None:
        return (
            CapacityReading.INSUFFICIENT_DATA,
            "no duty cycle or no app scrapes with work aligned",
        )
    if boundary.value >= th.starved_share:
        return CapacityReading.STARVED, (
            f"{boundary.value:.0%} of the scrapes with work had the GPUs computing under "
            f"{th.idle_below:.0%} of the time (>= {th.starved_share:.0%})"
        )
    waited = queued.value or 0.0
    if duty.value >= th.saturated_duty and waited >= th.queued_share:
        return CapacityReading.SATURATED, (
            f"duty cycle {duty.value:.0%} >= {th.saturated_duty:.0%} with requests waiting in "
            f"{waited:.0%} of the scrapes with work"
        )
    return (
        CapacityReading.HEALTHY,
        f"duty cycle {duty.value:.0%}; no starved or saturated share reached",
    )


_Question = tuple[Expr, str, Family, str, tuple[Matcher, ...]]


def _questions(
    deployment: Deployment, window: Window, duty_family: Family, by: tuple[str, ...]
) -> dict[str, _Question]:
    """Each per-replica statistic's query, grouped ``by`` the replica labels, with its unit,
    family, caveat and the matchers that find its series."""
    m, gm, w = deployment.matchers, deployment.gpu_matchers, window.seconds
    pods = pod_matchers(m)
    server = server_matchers(m)
    scale = 0.01 if duty_family is dcgm.GPU_UTIL else 1.0
    rate = "Mean per GPU sample; already a rate, never rate() it."
    return {
        "duty_cycle": (
            b.sample_mean(duty_family, gm, w, by) * scale, "ratio", duty_family, DUTY, gm,
        ),
        "output_tokens": (
            b.increase_total(vllm.GENERATION_TOKENS, m, w, by), "tokens", vllm.GENERATION_TOKENS,
            "Extrapolated to the window's edges by increase().", m,
        ),
        "server_cpu_cores": (
            hq.server_process_cpu_cores(server, w, by), "cores", host.PROCESS_CPU_SECONDS,
            host.PROCESS_CPU_SECONDS.traps[0], server,
        ),
        "container_cpu_cores": (
            hq.container_cpu_cores(pods, w, by), "cores",
            host.CONTAINER_CPU_USAGE, host.CONTAINER_CPU_USAGE.traps[1], pods,
        ),
        "cpu_limit_cores": (
            hq.container_cpu_limit_cores(pods, w, by), "cores",
            host.CONTAINER_SPEC_CPU_QUOTA, host.CONTAINER_SPEC_CPU_QUOTA.traps[0], pods,
        ),
        "pcie_rx_bytes_per_second": (
            b.sample_mean(dcgm.PROF_PCIE_RX_BYTES, gm, w, by), "bytes/s",
            dcgm.PROF_PCIE_RX_BYTES, rate, gm,
        ),
        "pcie_tx_bytes_per_second": (
            b.sample_mean(dcgm.PROF_PCIE_TX_BYTES, gm, w, by), "bytes/s",
            dcgm.PROF_PCIE_TX_BYTES, rate, gm,
        ),
    }  # fmt: skip


def _per_replica(
    source: Source,
    deployment: Deployment,
    window: Window,
    evidence: ev.Evidence,
    duty_family: Family,
) -> dict[str, dict[str, Measurement]]:
    """Every per-replica statistic, each asked once for the whole fleet (grouped ``by``
    the replica labels), so the number of requests does not grow with the replicas.

    Returns replica -> statistic -> Measurement.
    """
    by = evidence.keys
    groups = {Labels(evidence.names[r]): r for r in evidence.tracks}
    out: dict[str, dict[str, Measurement]] = {r: {} for r in evidence.tracks}
    questions = _questions(deployment, window, duty_family, by)
    containers = hq.container_matchers(pod_matchers(deployment.matchers))
    # Every statistic asked at once; each is one query for the whole fleet.
    throttled = Ratio(
        host.CONTAINER_CPU_CFS_THROTTLED_PERIODS.select(containers),
        host.CONTAINER_CPU_CFS_PERIODS.select(containers),
        hq.container_cpu_throttled_ratio(pod_matchers(deployment.matchers), window.seconds, by),
        "throttled_ratio",
        "ratio",
        caveats=host.CONTAINER_CPU_CFS_THROTTLED_PERIODS.traps[:1],
    )
    throttling = soon(source, lambda: counter_ratios_by(
        Reading(source, deployment, window, ANALYSIS), throttled, by=by, groups=list(groups),
        statistic=lambda g: f"throttled_ratio[{groups[g]}]",
    ))  # fmt: skip
    answers = instants(source, [q[0] for q in questions.values()], window.end_s)
    measured = together(source, [
        partial(
            measure_by, source, deployment, window, analysis=ANALYSIS,
            statistics={g: f"{key}[{r}]" for g, r in groups.items()}, expr=expr, by=by,
            unit=unit, families=[family], matchers=where, caveats=(caveat,), answer=answer,
        )
        for (key, (expr, unit, family, caveat, where)), answer in zip(
            questions.items(), answers, strict=True
        )
    ])  # fmt: skip
    for key, by_group in zip(questions, measured, strict=True):
        for group, replica in groups.items():
            out[replica][key] = by_group[group]
    throttled = throttling.result()
    for group, replica in groups.items():
        out[replica]["throttled_ratio"] = throttled[group]
    return out


def _replica(
    source: Source,
    deployment: Deployment,
    window: Window,
    evidence: ev.Evidence,
    replica: str,
    asked: dict[str, Measurement],
    found: list[BoundaryInterval],
    th: Thresholds,
) -> ReplicaBoundaries:
    w = window.seconds
    got = {k: v for k, v in asked.items() if k != "throttled_ratio"}
    track = evidence.tracks[replica]
    work = track.waiting + track.running > 0
    app = evidence.selectors[:3]  # waiting, running and duty: what the shares count

    def share(statistic: str, count: int, what: str) -> Measurement:
        return local_measurement(
            source, deployment, window, analysis=ANALYSIS, statistic=f"{statistic}[{replica}]",
            value=count / int(work.sum()) if work.any() else None, unit="ratio",
            selectors=app, computation=f"{what} / app scrapes with work (waiting + running > 0)",
            caveats=(SAMPLED,),
            missing=[n for n in evidence.missing if n in {s.metric for s in app}],
        )  # fmt: skip

    boundary = share("boundary_share", sum(i.samples for i in found), "scrapes in intervals")
    queued = share("queued_share", int((work & (track.waiting > 0)).sum()), "scrapes queued")
    gpus = deployment.hardware.gpus_per_replica
    tokens = got["output_tokens"]
    per_gpu_hour = derive(
        f"tokens_per_gpu_hour[{replica}]", (tokens.value or 0.0) / (gpus * w / 3600.0),
        "tokens/GPU-hour", [tokens], f"output_tokens / ({gpus} GPUs x window hours)",
        (GPU_HOURS,),
    )  # fmt: skip
    reading, reason = _read(got["duty_cycle"], boundary, queued, th)
    return ReplicaBoundaries(
        replica=replica,
        reading=reading,
        reason=reason,
        boundary_share=boundary,
        queued_share=queued,
        tokens_per_gpu_hour=per_gpu_hour,
        throttled_ratio=asked["throttled_ratio"],
        **got,
    )


_SEVERITY = (
    CapacityReading.STARVED,
    CapacityReading.SATURATED,
    CapacityReading.HEALTHY,
    CapacityReading.INSUFFICIENT_DATA,
)


def boundaries(
    source: Source,
    deployment: Deployment,
    window: Window,
    *,
    pcie_limit_bytes_per_second: float = 5.0e10,
    thresholds: Thresholds | None = None,
    step: float | None = None,
    tolerance_s: float | None = None,
) -> BoundariesResult:
    """Duty cycle, boundary intervals and their causes, and a reading, per replica.

    Parameters
    ----------
    source
        Where the samples come from.
    deployment
        The deployment: its matchers select the vLLM series and (without the
        vLLM engine labels) the server process's, its GPU matchers the DCGM
        series, and its pod and namespace matchers the cAdvisor series.
        Nodes are found by the GPUs' ``Hostname`` in node_exporter's ``node``
        label.
    window
        The window; interval times are in its timezone.
    pcie_limit_bytes_per_second
        Usable PCIe rate of one GPU's link, per direction, bytes/s. Default
        5e10 (Gen5 x16); use about 2.5e10 for Gen4 x16.
    thresholds
        Where the lines are drawn (:class:`Thresholds`).
    step
        ``None`` (default) to read every app scrape; else the width, seconds,
        of the tiles to read (it must divide the window; see
        :func:`~inference_obs.reading.resolution.tile_step`).
    tolerance_s
        Per scrape only: largest distance, seconds, between an app scrape and
        the GPU step (or host sample) aligned with it; default the larger of
        the app's median scrape interval and the GPU families' (see
        :class:`~inference_obs.reading.alignment.GpuSteps`).

    Returns
    -------
    BoundariesResult
        The reading; boundary intervals with their cause and evidence; per
        replica the duty cycle (ratio 0-1), the share of scrapes with work in
        boundary intervals and with requests waiting (ratio), output tokens
        and tokens per GPU-hour, server and container CPU (cores), CPU limit
        (cores), throttled share (ratio) and PCIe rates (bytes/s).
    """
    if not pcie_limit_bytes_per_second > 0:
        raise ValueError(
            f"pcie_limit_bytes_per_second must be > 0, got {pcie_limit_bytes_per_second!r}"
        )
    th = thresholds or Thresholds()
    gm = deployment.gpu_matchers
    duty_family = _duty_family(source, deployment, window)
    scale = 0.01 if duty_family is dcgm.GPU_UTIL else 1.0
    duty_asked = soon(source, partial(
        measure, source, deployment, window, analysis=ANALYSIS, statistic="duty_cycle",
        expr=b.sample_mean(duty_family, gm, window.seconds) * scale, unit="ratio",
        families=[duty_family], matchers=gm, caveats=(DUTY,),
    ))  # fmt: skip
    evidence = ev.gather(
        source, deployment, window, duty_family, scale,
        tolerance_s=tolerance_s, step=step, idle_below=th.idle_below,
    )  # fmt: skip
    intervals: list[BoundaryInterval] = []
    replicas = []
    asked = _per_replica(source, deployment, window, evidence, duty_family)
    for name, track in evidence.tracks.items():
        found = find_intervals(name, track, th, pcie_limit_bytes_per_second, window)
        intervals += found
        replicas.append(
            _replica(source, deployment, window, evidence, name, asked[name], found, th)
        )
    duty = duty_asked.result()
    outputs = [r.output_tokens for r in replicas]
    gpu_hours = deployment.hardware.gpus_per_replica * len(replicas) * window.seconds / 3600.0
    if outputs:
        per_gpu_hour = derive(
            "tokens_per_gpu_hour", sum(o.value or 0.0 for o in outputs) / gpu_hours,
            "tokens/GPU-hour", outputs, "sum of replicas' output_tokens / (GPUs x hours)",
            (GPU_HOURS,),
        )  # fmt: skip
    else:
        per_gpu_hour = local_measurement(
            source, deployment, window, analysis=ANALYSIS, statistic="tokens_per_gpu_hour",
            value=None, unit="tokens/GPU-hour", selectors=evidence.selectors[:1],
            computation="no replica has app scrapes", missing=evidence.missing[:1],
        )  # fmt: skip
    worst = min(
        (r.reading for r in replicas),
        key=_SEVERITY.index,
        default=CapacityReading.INSUFFICIENT_DATA,
    )
    named = [r.replica for r in replicas if r.reading is worst]
    causes = sorted({i.cause.value for i in intervals if i.replica in named})
    reason = f"{', '.join(named) or 'no replica'}: {VERDICTS[worst]}"
    if causes:
        reason += f" (boundary intervals attributed to: {', '.join(causes)})"
    return BoundariesResult(
        reading=worst,
        reason=reason,
        duty_family=duty_family.name,
        intervals=tuple(sorted(intervals, key=lambda i: (i.start, i.replica))),
        replicas=tuple(replicas),
        duty_cycle=duty,
        tokens_per_gpu_hour=per_gpu_hour,
        step_seconds=step,
        evidence_promql=(
            *(to_promql(s.over(window.seconds)) for s in evidence.read_raw),
            *(to_promql(q) for q in evidence.queries),
        ),
    )
