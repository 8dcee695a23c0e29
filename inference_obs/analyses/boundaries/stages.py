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
- **boundary intervals**: app scrapes in a row with work present (waiting +
  running > 0) while the replica's GPUs compute less than ``idle_below`` of
  the time, or that the queueing analysis classifies ``starved`` or
  ``inconsistent`` (its classification, at ``idle_below`` x 100 percent
  GPU_UTIL, so the two sections agree). ``min_samples`` rows or more make a
  *sustained* interval; a shorter one is kept where queueing named a row of
  it, so no starved or inconsistent row of the queue table goes unnamed;
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
- a **reading**: ``starved`` (re-place work before adding GPUs) when sustained
  boundary intervals hold ``starved_share`` of the scrapes with work; ``saturated``
  when the GPUs compute ``saturated_duty`` of the time and requests wait in
  ``queued_share`` of those scrapes; ``healthy`` otherwise (its reason
  counts any interval below those shares: "healthy" never hides one);
  ``insufficient_data`` without a duty cycle or app scrapes.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from inference_obs.analyses.boundaries import evidence as ev
from inference_obs.analyses.boundaries.findings import (
    BoundariesSettings,
    BoundaryCause,
    BoundaryInterval,
    find_intervals,
)
from inference_obs.analyses.boundaries.host import pod_matchers, server_matchers
from inference_obs.analyses.collection import app_coverage
from inference_obs.analyses.naming import named as named_replicas
from inference_obs.analyses.queueing import QueueingResult, QueueingSettings, queueing
from inference_obs.analyses.unit import Analysis
from inference_obs.metrics import builders as b, dcgm, host, host_queries as hq, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, to_promql
from inference_obs.reading.alignment import gpu_label_sets, replica_of
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import Ratio, counter_ratios_by
from inference_obs.reading.measurement import FrozenModel, Measurement, derive
from inference_obs.reading.result import AnalysisResult
from inference_obs.reading.rows import tolerance_ms
from inference_obs.samples import Labels

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BoundariesResult",
    "BoundariesSettings",
    "BoundaryCause",
    "BoundaryInterval",
    "CapacityReading",
    "ReplicaBoundaries",
    "boundaries",
]

SAMPLED = "Counts of app scrapes, not of wall time: what happens between scrapes is not seen."
DUTY = (
    "Sample-weighted mean of the duty family over the replica's GPUs; GR_ENGINE_ACTIVE is busy "
    "time, not SM saturation, and GPU_UTIL / 100 reads higher (any kernel counts)."
)
GPU_HOURS = (
    "Declared GPUs per replica x the hours the replica's series cover (the window, unless "
    "it started or stopped inside it), whether or not it served."
)


class CapacityReading(StrEnum):
    """What a replica's (or deployment's) GPU time says about where capacity is lost."""

    STARVED = "starved"
    SATURATED = "saturated"
    HEALTHY = "healthy"
    INSUFFICIENT_DATA = "insufficient_data"


VERDICTS: dict[CapacityReading, str] = {
    CapacityReading.STARVED: "GPUs starved — re-place work before adding GPUs",
    CapacityReading.SATURATED: "GPUs saturated — requests wait while the GPUs compute",
    CapacityReading.HEALTHY: "no boundary findings",
    CapacityReading.INSUFFICIENT_DATA: "insufficient data",
}
HEALTHY_WITH_INTERVALS = "boundary intervals below the starved share"


@dataclass(frozen=True, slots=True)
class _Question:
    """One per-replica statistic's query, its unit and its caveat."""

    expr: Expr
    unit: str
    caveat: str


class ReplicaBoundaries(FrozenModel):
    """One replica's duty cycle, tokens per GPU-hour, host and PCIe means and reading."""

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
        reductions (per scrape the GPU families' per-replica ``avg`` and its
        sample times at each of their scrapes, per tile every family's tile query).
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
        """The reading in words; a healthy one says whether it has intervals below the shares."""
        if self.reading is CapacityReading.HEALTHY and self.intervals:
            return HEALTHY_WITH_INTERVALS
        return VERDICTS[self.reading]

    def intervals_frame(self) -> pd.DataFrame:
        """One row per boundary interval, its evidence as columns."""
        import pandas as pd  # here, not at the top: `import inference_obs` stays free of pandas

        return pd.DataFrame([i.model_dump() for i in self.intervals])

    def _repr_html_(self) -> str:
        head = f"<p><b>{html.escape(self.verdict)}</b>: {html.escape(self.reason)}</p>"
        found = self.intervals_frame()
        table = found.to_html(index=False) if len(found) else "<p>No boundary intervals.</p>"
        return head + table + super()._repr_html_()


def _duty_family(r: Reading) -> Family:
    # The fallback's label sets are wanted either way (the GPU analysis reads them).
    r.soon(partial(gpu_label_sets, r.source, r.deployment, dcgm.GPU_UTIL, r.window))
    if gpu_label_sets(r.source, r.deployment, dcgm.PROF_GR_ENGINE_ACTIVE, r.window):
        return dcgm.PROF_GR_ENGINE_ACTIVE
    return dcgm.GPU_UTIL


def _read(
    duty: Measurement, boundary: Measurement, queued: Measurement, th: BoundariesSettings
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


def _questions(r: Reading, duty_family: Family, by: tuple[str, ...]) -> dict[str, _Question]:
    """Each per-replica statistic's query, grouped ``by`` the replica labels, with its unit
    and caveat."""
    m, gm, w = r.matchers, r.deployment.gpu_matchers, r.seconds
    pods = pod_matchers(m)
    scale = 0.01 if duty_family is dcgm.GPU_UTIL else 1.0
    rate = "Mean per GPU sample; already a rate, never rate() it."
    extrapolated = "Extrapolated to the window's edges by increase()."
    return {
        "duty_cycle": _Question(b.sample_mean(duty_family, gm, w, by) * scale, "ratio", DUTY),
        "output_tokens": _Question(
            b.increase_total(vllm.GENERATION_TOKENS, m, w, by), "tokens", extrapolated
        ),
        "server_cpu_cores": _Question(
            hq.server_process_cpu_cores(server_matchers(m), w, by),
            "cores",
            host.PROCESS_CPU_SECONDS.traps[0],
        ),
        "container_cpu_cores": _Question(
            hq.container_cpu_cores(pods, w, by), "cores", host.CONTAINER_CPU_USAGE.traps[1]
        ),
        "cpu_limit_cores": _Question(
            hq.container_cpu_limit_cores(pods, w, by),
            "cores",
            host.CONTAINER_SPEC_CPU_QUOTA.traps[0],
        ),
        "pcie_rx_bytes_per_second": _Question(
            b.sample_mean(dcgm.PROF_PCIE_RX_BYTES, gm, w, by), "bytes/s", rate
        ),
        "pcie_tx_bytes_per_second": _Question(
            b.sample_mean(dcgm.PROF_PCIE_TX_BYTES, gm, w, by), "bytes/s", rate
        ),
    }


def _per_replica(
    r: Reading, evidence: ev.Evidence, duty_family: Family
) -> dict[str, dict[str, Measurement]]:
    """Every per-replica statistic, each asked once for the whole fleet (grouped ``by``
    the replica labels), so the number of requests does not grow with the replicas.

    Returns replica -> statistic -> Measurement.
    """
    by = evidence.keys
    groups = {Labels(evidence.names[name]): name for name in evidence.tracks}
    out: dict[str, dict[str, Measurement]] = {name: {} for name in evidence.tracks}
    questions = _questions(r, duty_family, by)
    pods = pod_matchers(r.matchers)
    containers = hq.container_matchers(pods)
    # Every statistic asked at once; each is one query for the whole fleet.
    throttled = Ratio(
        host.CONTAINER_CPU_CFS_THROTTLED_PERIODS.select(containers),
        host.CONTAINER_CPU_CFS_PERIODS.select(containers),
        hq.container_cpu_throttled_ratio(pods, r.seconds, by),
        "throttled_ratio",
        "ratio",
        caveats=host.CONTAINER_CPU_CFS_THROTTLED_PERIODS.traps[:1],
    )

    def throttled_of(group: Labels) -> str:
        return f"throttled_ratio[{groups[group]}]"

    throttling = r.soon(
        partial(
            counter_ratios_by, r, throttled, by=by, groups=list(groups), statistic=throttled_of
        ),
    )
    answers = r.ask([q.expr for q in questions.values()])
    measured = r.together(
        [
            partial(
                r.measure_by,
                {group: f"{key}[{name}]" for group, name in groups.items()},
                q.expr,
                by,
                q.unit,
                caveats=(q.caveat,),
                answer=answer,
            )
            for (key, q), answer in zip(questions.items(), answers, strict=True)
        ],
    )
    for key, by_group in zip(questions, measured, strict=True):
        for group, name in groups.items():
            out[name][key] = by_group[group]
    ratios = throttling.result()
    for group, name in groups.items():
        out[name]["throttled_ratio"] = ratios[group]
    return out


def _replica(
    r: Reading,
    evidence: ev.Evidence,
    replica: str,
    asked: dict[str, Measurement],
    found: list[BoundaryInterval],
    th: BoundariesSettings,
    seconds: float,
) -> ReplicaBoundaries:
    """One replica's figures and reading; ``seconds``: how long its series cover."""
    got = {k: v for k, v in asked.items() if k != "throttled_ratio"}
    track = evidence.tracks[replica]
    work = track.waiting + track.running > 0
    app = evidence.selectors[:3]  # waiting, running and duty: what the shares count

    def share(statistic: str, count: int, what: str) -> Measurement:
        return r.local(
            f"{statistic}[{replica}]",
            count / int(work.sum()) if work.any() else None,
            "ratio",
            reads=app,
            computation=f"{what} / app scrapes with work (waiting + running > 0)",
            caveats=(SAMPLED,),
            missing=[n for n in evidence.missing if n in {s.metric for s in app}],
        )

    sustained = sum(i.samples for i in found if i.sustained)
    boundary = share("boundary_share", sustained, "scrapes in sustained boundary intervals")
    queued = share("queued_share", int((work & (track.waiting > 0)).sum()), "scrapes queued")
    gpus = r.deployment.hardware.gpus_per_replica
    tokens = got["output_tokens"]
    per_gpu_hour = derive(
        f"tokens_per_gpu_hour[{replica}]",
        (tokens.value or 0.0) / (gpus * seconds / 3600.0) if seconds > 0 else math.nan,
        "tokens/GPU-hour",
        [tokens],
        f"output_tokens / ({gpus} GPUs x {seconds / 3600.0:g} h covered)",
        (GPU_HOURS,),
    )
    reading, reason = _read(got["duty_cycle"], boundary, queued, th)
    if reading is CapacityReading.HEALTHY and found:
        reason += f"; {_counted(found)}"
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


def _counted(found: list[BoundaryInterval]) -> str:
    """How many intervals, how many rows, and their causes, in words."""
    causes = ", ".join(sorted({i.cause.value for i in found}))
    rows = sum(i.samples for i in found)
    many, rows_many = "s" if len(found) > 1 else "", "s" if rows > 1 else ""
    return (
        f"{len(found)} interval{many} over {rows} row{rows_many} where requests waited or ran "
        f"on idle GPUs; cause: {causes}"
    )


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _queue_classes(track: ev.Track, replica: str, queued: QueueingResult) -> list[str]:
    """The queueing class of each row of ``track`` (``""`` where no queueing row aligns)."""
    classes = [""] * track.times_ms.size
    begins = track.times_ms - track.tile_ms
    for i in queued.intervals:
        if i.replica != replica:
            continue
        low = int(np.searchsorted(begins, _ms(i.start), side="left"))
        high = int(np.searchsorted(track.times_ms, _ms(i.end), side="right"))
        classes[low:high] = [i.classification.value] * max(high - low, 0)
    return classes


_SEVERITY = (
    CapacityReading.STARVED,
    CapacityReading.SATURATED,
    CapacityReading.HEALTHY,
    CapacityReading.INSUFFICIENT_DATA,
)


def _fleet_tokens(
    r: Reading, replicas: list[ReplicaBoundaries], evidence: ev.Evidence, covered: dict[str, float]
) -> Measurement:
    """Output tokens per declared GPU-hour over every replica (tokens/GPU-hour), the hours
    each replica's series cover (``covered``, seconds; the window where unknown)."""
    outputs = [one.output_tokens for one in replicas]
    if not outputs:
        return r.local(
            "tokens_per_gpu_hour",
            None,
            "tokens/GPU-hour",
            reads=evidence.selectors[:1],
            computation="no replica has app scrapes",
            missing=evidence.missing[:1],
        )
    seconds = sum(covered.get(one.replica, r.seconds) for one in replicas)
    gpu_hours = r.deployment.hardware.gpus_per_replica * seconds / 3600.0
    return derive(
        "tokens_per_gpu_hour",
        sum(o.value or 0.0 for o in outputs) / gpu_hours,
        "tokens/GPU-hour",
        outputs,
        "sum of replicas' output_tokens / (GPUs x hours their series cover)",
        (GPU_HOURS,),
    )


def _boundaries(r: Reading, settings: BoundariesSettings) -> BoundariesResult:
    """Duty cycle, boundary intervals and their causes, and a reading, per replica.

    The deployment's matchers select the vLLM series and (without the vLLM
    engine labels) the server process's, its GPU matchers the DCGM series,
    and its pod and namespace matchers the cAdvisor series; nodes are found
    by the GPUs' ``Hostname`` in node_exporter's ``node`` label. Rows are
    every app scrape (``r.step`` None) or tiles of ``r.step`` seconds (see
    :func:`~inference_obs.reading.resolution.tile_step`); ``settings`` draws
    the lines (:class:`BoundariesSettings`).

    The result holds the reading; boundary intervals with their cause and
    evidence (times in the window's timezone); per replica the duty cycle
    (ratio 0-1), the share of scrapes with work in boundary intervals and
    with requests waiting (ratio), output tokens and tokens per GPU-hour,
    server and container CPU (cores), CPU limit (cores), throttled share
    (ratio) and PCIe rates (bytes/s).
    """
    tolerance = tolerance_ms(r.analysis, r.step, settings.tolerance_s)
    # Queueing's own classification of the same rows, at the same idle line: the two
    # sections name the same rows where requests waited or ran on idle GPUs.
    like_queueing = QueueingSettings(
        busy_threshold=100.0 * settings.idle_below, tolerance_s=settings.tolerance_s
    )
    queue_asked = r.soon(partial(queueing.entry, r.of(queueing.name), like_queueing))
    duty_family = _duty_family(r)
    scale = 0.01 if duty_family is dcgm.GPU_UTIL else 1.0
    duty_expr = b.sample_mean(duty_family, r.deployment.gpu_matchers, r.seconds) * scale
    duty_asked = r.soon(partial(r.measure, "duty_cycle", duty_expr, "ratio", caveats=(DUTY,)))
    evidence = ev.gather(
        r, duty_family, scale, tolerance_ms=tolerance, idle_below=settings.idle_below
    )
    intervals: list[BoundaryInterval] = []
    replicas = []
    asked = _per_replica(r, evidence, duty_family)
    app = app_coverage(r, partial(replica_of, keys=evidence.keys))
    covered = {
        k: s.seconds for k, s in app.spans(r.window.start_s * 1e3, r.window.end_s * 1e3).items()
    }
    queued = queue_asked.result()
    for name, track in evidence.tracks.items():
        classes = _queue_classes(track, name, queued)
        found = find_intervals(name, track, settings, r.window, classes)
        intervals += found
        seconds = covered.get(name, r.seconds)
        replicas.append(_replica(r, evidence, name, asked[name], found, settings, seconds))
    worst = min(
        (one.reading for one in replicas),
        key=_SEVERITY.index,
        default=CapacityReading.INSUFFICIENT_DATA,
    )
    named = [one.replica for one in replicas if one.reading is worst]
    theirs = [i for i in intervals if i.replica in named]
    verdict = HEALTHY_WITH_INTERVALS if worst is CapacityReading.HEALTHY and theirs else None
    reason = f"{named_replicas(named) if named else 'no replica'}: {verdict or VERDICTS[worst]}"
    if theirs:
        reason += f" ({_counted(theirs)})"
    others = [i for i in intervals if i.replica not in named]
    if others:
        reason += f"; other replicas: {_counted(others)}"
    return BoundariesResult(
        reading=worst,
        reason=reason,
        duty_family=duty_family.name,
        intervals=tuple(sorted(intervals, key=lambda i: (i.start, i.replica))),
        replicas=tuple(replicas),
        duty_cycle=duty_asked.result(),
        tokens_per_gpu_hour=_fleet_tokens(r, replicas, evidence, covered),
        step_seconds=r.step,
        evidence_promql=(
            *(to_promql(s.over(r.seconds)) for s in evidence.read_raw),
            *(to_promql(q) for q in evidence.queries),
        ),
    )


boundaries = Analysis(
    name="boundaries",
    title="Stage boundaries: what the GPUs wait on",
    entry=_boundaries,
    result=BoundariesResult,
    settings=BoundariesSettings,
    summary="Where work waits while the GPUs idle, attributed to the host, transfer or neither.",
)
