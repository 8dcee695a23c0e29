"""What was read and how: scope, deployments declared and seen, configuration, definitions."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.analyses.configuration import Check, CheckStatus
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.wording import cell, number, when
from inference_obs.report.document import Block, Heading, Items, Paragraph, Table

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["TERMS", "configurations", "definitions", "deployments", "scope"]


DEFINITIONS = (
    "Request-weighted means divide the change of a histogram's _sum by the change of its "
    "_count between the first and last sample of each series (exact; PromQL's increase() "
    "ratio is listed in the appendix for rechecking).",
    "Quantiles come from the buckets of every replica added together before estimating; "
    "the value is interpolated inside the bucket shown in brackets, which must hold the true "
    "quantile. Quantiles are never averaged across replicas.",
    "Token and request counts are extrapolated increases (Prometheus increase()): "
    "fractional estimates, not audited counts. Rates are per wall-clock second of the span "
    "the series cover: the window, unless the data starts or ends inside it (Collection "
    "health then says so); a replica's over its own span. Sample-weighted utilisation "
    "describes the same span, unless the GPU series start or stop apart (said there too).",
    "GPU utilisation is sample-weighted over every allocated GPU, zeros included; GPUs "
    "without samples are listed, not dropped.",
    "SLO attainment (--slo) is the share of observations within a target, from the buckets: "
    "exact where the target is a bucket bound, else between the shares at the bounds around "
    "it [brackets]; budget spent is (1 - attainment) / (1 - objective), 100% the whole budget.",
    "No data is never shown as 0: a number without series reads 'no data'.",
)

#: The abbreviations the report uses, spelt out once in its definitions.
TERMS = (
    ("TTFT", "time to first token (queue and prefill included)"),
    ("TPOT", "time per output token after the first"),
    ("ITL", "inter-token latency, between engine output events"),
    ("E2E", "end-to-end request latency"),
    ("P50/P90/P95/P99", "the 50th/90th/95th/99th percentiles"),
    ("KV cache", "the attention keys and values kept per token on the GPU"),
    ("DCGM", "NVIDIA Data Center GPU Manager, whose exporter serves the GPU counters"),
    ("FB", "framebuffer, the GPU's memory"),
    ("TP/DP/EP", "tensor, data and expert parallelism"),
    ("Xid", "an error code the NVIDIA driver logs for a GPU fault"),
)


def scope(report: Report) -> Iterator[Block]:
    s = report.scope
    yield Heading(1, report.title)
    yield Heading(2, "Scope")
    windows = sorted({f"{when(w.start)} to {when(w.end)}" for w in s.windows.values()})
    yield Paragraph(
        f"Read from {s.source} ({s.engine}; numbers follow {s.rules} rules) over "
        f"{'; '.join(windows)}. Only read-only query and metadata endpoints were used: no "
        "inference request was sent and nothing was changed."
    )
    if report.methodology:
        yield Items(report.methodology)


def deployments(report: Report) -> Iterator[Block]:
    yield Heading(2, "Deployments compared")
    rows = []
    for d in report.deployments:
        hw, engine, config = d.deployment.hardware, d.deployment.engine, d.deployment.config
        declared = ", ".join(f"{k}={v}" for k, v in config.model_dump().items() if v is not None)
        served, gpus = d.of(analyses.throughput), d.of(analyses.gpu)
        rows.append(
            (
                d.deployment.name,
                hw.gpu_model,
                str(hw.gpus_per_replica),
                f"{len(d.deployment.replicas)} / {cell(served.replicas_seen)}",
                f"{cell(gpus.gpus_with_samples)} / {cell(gpus.gpus_expected)}",
                f"{engine.name} {engine.version or ''} {engine.image or ''}".strip(),
                declared or "—",
            )
        )
    yield Table(
        (
            "deployment",
            "GPU",
            "GPUs/replica",
            "replicas declared / seen",
            "GPUs with samples / expected",
            "engine",
            "declared configuration",
        ),
        tuple(rows),
    )
    yield Paragraph(
        "Declared configuration is what the deployment file or manifest says; the counts of "
        "replicas and GPUs seen come from the series themselves. An image tag does not prove a "
        "build, and an allocation of N GPUs does not prove N-way tensor parallelism."
    )


def _check_cell(k: Check | None) -> str:
    """One deployment's side of a configuration row: the status, then the values it rests on."""
    if k is None:
        return "—"
    declared, observed = k.declared or "—", k.observed or "—"
    if k.status is CheckStatus.VERIFIED:
        return f"verified: {observed}"
    if k.status is CheckStatus.CONSISTENT:
        return f"consistent: {declared} declared, series show {observed}"
    if k.status is CheckStatus.CONTRADICTED:
        return f"contradicted: {declared} declared, series show {observed}"
    if k.status is CheckStatus.UNVERIFIABLE:
        return f"unverifiable: {declared} declared"
    return f"not declared; series show {observed}"


def _why(checks: Sequence[tuple[str, Check | None]]) -> str:
    """How a row was checked: once where every side says the same (replica details aside)."""
    reasons = {name: k.reason for name, k in checks if k is not None}
    contradicted = any(k is not None and k.status is CheckStatus.CONTRADICTED for _, k in checks)
    general = {_BY_REPLICA.sub(" per replica", r) for r in reasons.values()}
    if len(general) == 1 and not contradicted:
        return general.pop()
    return "; ".join(f"{name}: {reason}" for name, reason in reasons.items())


#: The per-replica detail of a check's reason (kept in report.json, folded in the table).
_BY_REPLICA = re.compile(r", by replica \([^)]*\)")


def configurations(report: Report) -> Iterator[Block]:
    yield Heading(2, "Declared and verified configuration")
    yield Paragraph(
        "Each declared field against what the series expose (cache_config_info labels, DCGM "
        "labels): verified (the series show it), consistent (the series agree without showing "
        "it, e.g. tensor parallelism from a GPU count), contradicted (both values shown) or "
        "unverifiable (why). Per-replica values are in report.json."
    )
    names = [d.deployment.name for d in report.deployments]
    by_field: dict[str, dict[str, Check]] = {}
    for d in report.deployments:
        for k in d.of(analyses.configuration).checks:
            if k.status is not CheckStatus.NOT_DECLARED or k.observed:
                by_field.setdefault(k.field, {})[d.deployment.name] = k
    rows = []
    for field, found in by_field.items():
        checks = [(name, found.get(name)) for name in names]
        rows.append((field, *(_check_cell(k) for _, k in checks), _why(checks)))
    yield Table(("field", *names, "how it was checked"), tuple(rows))
    for d in report.deployments:
        c = d.of(analyses.configuration)
        if c.topology is None and not c.topology_findings:
            continue
        yield Heading(3, f"{d.deployment.name} topology")
        if c.topology is not None:
            yield Paragraph(f"Topology: {c.topology.description}")
        if c.topology_findings:
            yield Paragraph(
                "Topology findings: what the wiring means for the declared parallel groups "
                "(placed as well as the box allows). They say how the groups run, not that the "
                "declaration is wrong."
            )
            yield Items(tuple(f"{f.finding} — {f.consequence}." for f in c.topology_findings))


def _read_at(step: float | None) -> str:
    if step is None:
        return "every app scrape"
    return (
        f"{step:g} s tiles (each engine's largest gauge sample and the mean of the GPUs' "
        "samples in each tile, reduced by the source)"
    )


def _seconds(m: Measurement) -> str:
    return f"{cell(m)} s" if m.ok else cell(m)


def definitions(report: Report) -> Iterator[Block]:
    yield Heading(2, "Collection and statistical definitions")
    measured = "; ".join(
        f"{d.deployment.name}: app {_seconds(c.scrape_interval)}, "
        f"GPUs {_seconds(c.gpu_scrape_interval)}"
        for d in report.deployments
        for c in (d.of(analyses.collection),)
    )
    declared = report.scope.scrape_interval_seconds
    yield Paragraph(
        f"Scrape interval, measured from the samples (median spacing): {measured or 'none'}."
        + (f" The dataset declares {number(declared)} s." if declared else "")
    )
    read = "; ".join(f"{d.deployment.name}: {_read_at(d.step_seconds)}" for d in report.deployments)
    yield Paragraph(
        f"Queues, stage boundaries and the sampled shares (requests waiting, running) read "
        f"{read}. A large scope is read in tiles so that what is asked stays small; "
        "--resolution scrape reads every scrape."
    )
    yield Items(DEFINITIONS)
    yield Paragraph("Terms: " + "; ".join(f"{term}: {meaning}" for term, meaning in TERMS) + ".")
