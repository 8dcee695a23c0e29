"""Caches and speculative decoding, GPU activity and bottleneck, stage boundaries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.report.document import (
    Block,
    FigureRef,
    Heading,
    Paragraph,
    Table,
    cell,
    number,
    when,
)

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["caches", "gpus", "stage_boundaries"]


def caches(report: Report) -> Iterator[Block]:
    yield Heading(2, "Caches and speculative decoding")
    rows = tuple(
        (
            d.deployment.name,
            cell(d.of(analyses.cache).prefix_cache_hit_rate),
            cell(d.of(analyses.cache).external_kv_hit_rate),
            cell(d.of(analyses.cache).preemptions),
            cell(d.of(analyses.cache).spec_acceptance_rate),
            cell(d.of(analyses.cache).spec_mean_acceptance_length),
        )
        for d in report.deployments
    )
    yield Table(
        (
            "deployment",
            "prefix-cache hit rate",
            "external KV hit rate",
            "preemptions",
            "draft acceptance",
            "mean acceptance length",
        ),
        rows,
    )
    yield Paragraph(
        "The two hit rates have different denominators (every prompt token looked up, and the "
        "tokens the local cache missed) and are never added."
    )


def gpus(report: Report) -> Iterator[Block]:
    yield Heading(2, "GPU activity and bottleneck")
    rows = []
    for d in report.deployments:
        g, b = d.of(analyses.gpu), d.of(analyses.bottleneck)
        rows.append(
            (
                d.deployment.name,
                cell(g.utilization_mean),
                f"{cell(g.utilization_replica_min)} to {cell(g.utilization_replica_max)}",
                cell(g.power_mean_watts),
                cell(g.fb_used_mean_mib),
                cell(g.fb_capacity_mib),
                cell(b.duty_cycle),
                b.classification.value,
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
            "duty cycle",
            "bottleneck",
        ),
        tuple(rows),
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
        yield Paragraph(f"{d.deployment.name} bottleneck: {d.of(analyses.bottleneck).reason}")
        yield FigureRef(
            f"{d.deployment.name}-gpu-heatmap",
            f"{d.deployment.name}: utilisation per GPU over time.",
        )
        yield FigureRef(
            f"{d.deployment.name}-dram-vs-tensor",
            f"{d.deployment.name}: DRAM against tensor-pipe activity.",
        )


def stage_boundaries(report: Report) -> Iterator[Block]:
    yield Heading(2, "Stage boundaries: what the GPUs wait on")
    yield Paragraph(
        "Duty cycle is the share of wall time the GPUs compute. Intervals where requests wait "
        "or run while the GPUs idle are attributed to the host CPU (saturated or throttled), "
        "to host-device transfer (PCIe near its limit), or left unexplained, with the evidence."
    )
    rows = tuple(
        (
            d.deployment.name,
            d.of(analyses.boundaries).reading.value,
            cell(d.of(analyses.boundaries).duty_cycle),
            cell(d.of(analyses.boundaries).tokens_per_gpu_hour),
            d.of(analyses.boundaries).reason,
        )
        for d in report.deployments
    )
    yield Table(("deployment", "reading", "duty cycle", "tokens per GPU-hour", "why"), rows)
    for d in report.deployments:
        if not d.of(analyses.boundaries).intervals:
            continue
        yield Heading(3, d.deployment.name)
        if d.step_seconds is not None:
            yield Paragraph(f"Rows are {d.step_seconds:g} s tiles: samples counts tiles.")
        yield Table(
            (
                "replica",
                "cause",
                "start",
                "end",
                "samples",
                "duty",
                "server CPU cores",
                "throttled",
                "PCIe share of link",
                "why",
            ),
            tuple(
                (
                    i.replica,
                    i.cause.value,
                    when(i.start),
                    when(i.end),
                    str(i.samples),
                    number(i.duty),
                    number(i.server_cpu_cores),
                    number(i.throttled_ratio),
                    number(i.pcie_limit_share),
                    i.reason,
                )
                for i in d.of(analyses.boundaries).intervals
            ),
        )
