"""Caches and speculative decoding, GPU activity and bottleneck, stage boundaries.

Each table is followed by the definitions and caveats its numbers carry
(:attr:`~inference_obs.reading.measurement.Measurement.caveats`), so what a
number does not mean is read beside it, not only in report.json.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.analyses.bottleneck import BottleneckClass
from inference_obs.analyses.boundaries import BoundariesResult, BoundaryCause, BoundaryInterval
from inference_obs.analyses.naming import MANY
from inference_obs.analyses.regime import judge
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.wording import cell, number, share_cell, when
from inference_obs.report.document import Block, Heading, Items, Paragraph, Table
from inference_obs.report.figure_plan import DRAM_VS_TENSOR, GPU_HEATMAP, cite, cite_each
from inference_obs.report.sections.queues import listed_at_most

if TYPE_CHECKING:
    from inference_obs.analyses.run import DeploymentResults
    from inference_obs.report.model import Report

__all__ = ["caches", "gpus", "stage_boundaries"]

_NOTES = "What these numbers mean and do not mean:"


def caveats(measurements: Iterable[Measurement], definition: str = "") -> Iterator[Block]:
    """The caveats of the numbers shown, each once, in the order first shown, after the
    ``definition`` of what the table shows where it needs one."""
    found = tuple(dict.fromkeys(c for m in measurements for c in m.caveats))
    if found:
        yield Items(found, lead=f"{definition} {_NOTES}".strip())
    elif definition:
        yield Paragraph(definition)


def caches(report: Report) -> Iterator[Block]:
    yield Heading(2, "Caches and speculative decoding")
    shown = [
        (
            d.deployment.name,
            (
                d.of(analyses.cache).prefix_cache_hit_rate,
                d.of(analyses.cache).external_kv_hit_rate,
                d.of(analyses.cache).preemptions,
                d.of(analyses.cache).spec_acceptance_rate,
                d.of(analyses.cache).spec_mean_acceptance_length,
            ),
        )
        for d in report.deployments
    ]
    yield Table(
        (
            "deployment",
            "prefix-cache hit rate",
            "external KV hit rate",
            "preemptions",
            "draft acceptance",
            "mean acceptance length",
        ),
        tuple((name, *(cell(m) for m in ms)) for name, ms in shown),
    )
    yield from caveats(
        (m for _, ms in shown for m in ms),
        "Draft acceptance is accepted over proposed draft tokens; mean acceptance length is "
        "tokens per verification step, the bonus token included.",
    )


def gpus(report: Report) -> Iterator[Block]:
    yield Heading(2, "GPU activity and bottleneck")
    rows, shown = [], list[Measurement]()
    for d in report.deployments:
        g, b = d.of(analyses.gpu), d.of(analyses.bottleneck)
        action = judge(d).action
        numbers = (
            g.utilization_mean,
            g.utilization_replica_min,
            g.utilization_replica_max,
            g.power_mean_watts,
            g.fb_used_mean_mib,
            g.fb_capacity_mib,
            b.nonzero_util_share,
            b.kv_cache_usage_max,
        )
        shown.extend(numbers)
        rows.append(
            (
                d.deployment.name,
                cell(g.utilization_mean),
                f"{cell(g.utilization_replica_min)} to {cell(g.utilization_replica_max)}",
                cell(g.power_mean_watts),
                cell(g.fb_used_mean_mib),
                cell(g.fb_capacity_mib),
                share_cell(b.nonzero_util_share),
                cell(b.kv_cache_usage_max),
                b.classification.value.replace("_", " "),
                action,
            )
        )
    yield Table(
        (
            "deployment",
            "GPU util % (mean)",
            "per-replica range",
            "board power W",
            "FB used MiB",
            "FB capacity MiB",
            "GPU-steps with util > 0",
            "KV cache peak (share used)",
            "bound",
            "what to do",
        ),
        tuple(rows),
    )
    yield from caveats(
        shown,
        "GPU-steps with util > 0: the share of GPU-steps (each GPU's latest GPU_UTIL sample at "
        "every scrape interval) in which some kernel ran; not the duty cycle of the stage "
        "boundaries below, which is the share of time the GPUs compute.",
    )
    for d in report.deployments:
        if missing := d.of(analyses.gpu).missing_gpus:
            yield Paragraph(f"{d.deployment.name}: GPUs without samples: {', '.join(missing)}.")
        if stopped := d.of(analyses.gpu).stopped_gpus:
            names = ", ".join(f"{g.name} (last sample {when(g.last_sample)})" for g in stopped)
            yield Paragraph(
                f"{d.deployment.name}: GPUs that stopped reporting part-way: {names}; the "
                "utilisation mean weighs only the samples they sent."
            )
        yield Paragraph(_advice(d))
        yield cite(d, GPU_HEATMAP, f"{d.deployment.name}: utilisation per GPU over time.")
    yield from cite_each(
        report.deployments,
        DRAM_VS_TENSOR,
        lambda d: (
            f"{d.deployment.name}: DRAM against tensor-pipe activity, with the bottleneck "
            "classifier's thresholds and the window means it classified."
        ),
    )


def _advice(d: DeploymentResults) -> str:
    """The deployment's reading and its step, then what the profiling counters say bounds
    the GPUs where the step did not come from them."""
    found, b = judge(d), d.of(analyses.bottleneck)
    said = f"{d.deployment.name} ({found.label}): {found.advice}"
    if found.advice != b.advice:
        bound = b.classification.value.replace("_", " ")
        said += f" What bounds the GPUs: {bound} ({b.reason})."
        if b.classification is BottleneckClass.UNKNOWN:
            said = said.replace(f"{bound} (", "unknown: ", 1).removesuffix(").") + "."
    return said


def stage_boundaries(report: Report) -> Iterator[Block]:
    yield Heading(2, "Stage boundaries: what the GPUs wait on")
    families = sorted({d.of(analyses.boundaries).duty_family for d in report.deployments})
    yield Paragraph(
        "Duty cycle: the share of wall time the GPUs compute, the mean of "
        f"{' or '.join(families) or 'the duty family'} (GPU_UTIL read as a share); not the "
        "share of GPU-steps with util > 0 above. Intervals where requests waited or ran while "
        "the GPUs idled (duty cycle under the idle line, or rows the queue table classes "
        "starved or inconsistent) are attributed to the host CPU (saturated or throttled), to "
        "host-device transfer (PCIe near its limit), or left unexplained, with the evidence. "
        "Sustained intervals (boundaries.min_samples rows in a row or more, 2 by default) "
        "decide the reading; shorter ones are listed. Output tokens per GPU-hour: every "
        "output token over the declared GPUs x the window; not the useful tokens per GPU-hour "
        "of Cost and the comparison verdicts, which count only useful output tokens."
    )
    shown: list[Measurement] = []
    rows = []
    for d in report.deployments:
        found = d.of(analyses.boundaries)
        shown += [found.duty_cycle, found.tokens_per_gpu_hour]
        rows.append(
            (
                d.deployment.name,
                judge(d).label,
                share_cell(found.duty_cycle),
                cell(found.tokens_per_gpu_hour),
                found.reason,
            )
        )
    yield Table(
        ("deployment", "reading", "duty cycle", "output tokens per GPU-hour", "boundary finding"),
        tuple(rows),
    )
    yield from caveats(shown)
    for d in report.deployments:
        yield from _intervals(d.deployment.name, d.of(analyses.boundaries), d.step_seconds)


def _times(replica: str, brief: list[BoundaryInterval]) -> str:
    """``replica: 10:00:01 (inconsistent), ...``: every one, so that each row of the queue
    table on idle GPUs is named here too (a fleet's are counted instead)."""
    said = ", ".join(
        f"{when(i.start)} ({', '.join(i.queue_classes) or i.cause.value})" for i in brief
    )
    return f"{replica}: {said}"


def _intervals(name: str, found: BoundariesResult, step: float | None) -> Iterator[Block]:
    """One deployment's boundary intervals, each named by its times to the second.

    Short intervals nothing explains (a row or two of the queue table's
    starved or inconsistent, no host or transfer evidence) are named in one
    sentence; sustained or explained ones get a table row with their evidence.
    """
    if not found.intervals:
        return
    # What the table needs said, in one paragraph: a fleet's section stays short.
    said = [] if step is None else [f"rows are {step:g} s tiles: rows counts tiles."]
    brief = [i for i in found.intervals if not i.sustained and i.cause is BoundaryCause.UNEXPLAINED]
    listed = [i for i in found.intervals if i not in brief]
    if brief:
        replicas = list(dict.fromkeys(i.replica for i in brief))
        # A fleet's short intervals are counted; a few replicas' are named with their times.
        if len(found.replicas) <= MANY:
            named = "; ".join(
                _times(replica, [i for i in brief if i.replica == replica]) for replica in replicas
            )
        else:
            named = f"{len(brief)} on {len(replicas)} replicas (report.json, boundaries.intervals)"
        reasons = {i.reason for i in brief}
        why = f" {brief[0].reason[0].upper()}{brief[0].reason[1:]}." if len(reasons) == 1 else ""
        said.append(
            f"short intervals (under boundaries.min_samples rows), unexplained: {named}.{why}"
        )
    shared = None
    if listed:
        reasons = {i.reason for i in listed}
        shared = reasons.pop() if len(reasons) == 1 else None
        if shared is not None:
            said.append(f"every interval in the table: {shared}.")
    rows = listed_at_most(len(found.replicas), len(listed))
    if len(listed) > rows:
        # Many intervals: the explained ones first, then the longest; all in report.json.
        total = len(listed)
        listed = sorted(
            listed, key=lambda i: (i.cause is BoundaryCause.UNEXPLAINED, -i.samples, i.start)
        )[:rows]
        listed.sort(key=lambda i: i.start)
        said.append(
            f"{rows} of {total:,} intervals, the explained then the longest; every one in "
            "report.json (boundaries.intervals)."
        )
    if said:
        yield Paragraph(f"{name}: " + " ".join(said))
    if not listed:
        return
    yield Table(
        (
            "replica",
            "queue class",
            "cause",
            "start",
            "end",
            "rows",
            "sustained",
            "duty",
            "server CPU cores",
            "throttled",
            "PCIe share of link",
            *(() if shared is not None else ("why",)),
        ),
        tuple(
            (
                i.replica,
                ", ".join(i.queue_classes) or "—",
                i.cause.value,
                when(i.start),
                when(i.end),
                str(i.samples),
                "yes" if i.sustained else "no",
                f"{number(100 * i.duty)}%",
                number(i.server_cpu_cores),
                number(i.throttled_ratio),
                number(i.pcie_limit_share),
                *(() if shared is not None else (i.reason,)),
            )
            for i in listed
        ),
    )
