"""The sections of an observation report, in the order its method reads them.

Scope first (what was read, and that nothing was sent or changed), then
which deployments are compared and how each statistic is defined, then
request shapes before any throughput, latency, queues against GPU
activity, caches, GPU activity and bottleneck, cost, the comparison
verdicts, and an appendix listing every query behind every number.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.analyses.configuration import CheckStatus
from inference_obs.analyses.latency import METRICS, QUANTILES
from inference_obs.analyses.registry import ANALYSES
from inference_obs.analyses.validity.findings import Severity
from inference_obs.report.baseline_section import baseline_blocks
from inference_obs.report.document import (
    Block,
    Code,
    FigureRef,
    Heading,
    Items,
    Paragraph,
    Table,
    cell,
    number,
)
from inference_obs.report.facts import priced_cost

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["sections"]

DEFINITIONS = (
    "Request-weighted means divide the change of a histogram's _sum by the change of its "
    "_count between the first and last sample of each series (exact; PromQL's increase() "
    "ratio is listed in the appendix for rechecking).",
    "Quantiles come from the buckets of every replica added together before estimating; "
    "the value is interpolated inside the bucket shown in brackets, which must hold the true "
    "quantile. Quantiles are never averaged across replicas.",
    "Token and request counts are extrapolated increases (Prometheus increase()): "
    "fractional estimates, not audited counts. Rates are per wall-clock second of the window.",
    "GPU utilisation is sample-weighted over every allocated GPU, zeros included; GPUs "
    "without samples are listed, not dropped.",
    "No data is never shown as 0: a number without series reads 'no data'.",
)


def _names(report: Report) -> list[str]:
    return [d.deployment.name for d in report.deployments]


def scope(report: Report) -> Iterator[Block]:
    s = report.scope
    yield Heading(1, report.title)
    yield Heading(2, "Scope")
    windows = sorted({f"{w.start.isoformat()} to {w.end.isoformat()}" for w in s.windows.values()})
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


def configurations(report: Report) -> Iterator[Block]:
    yield Heading(2, "Declared and verified configuration")
    yield Paragraph(
        "Each declared field against what the series expose (cache_config_info labels, DCGM "
        "labels): verified, contradicted (both values shown) or unverifiable (why)."
    )
    for d in report.deployments:
        c = d.of(analyses.configuration)
        rows = tuple(
            (k.field, k.declared or "—", k.observed or "—", k.status.value, k.reason)
            for k in c.checks
            if k.status is not CheckStatus.NOT_DECLARED or k.observed
        )
        yield Heading(3, d.deployment.name)
        yield Table(("field", "declared", "series show", "status", "why"), rows)
        if c.topology is not None:
            yield Paragraph(f"Topology: {c.topology.description}")


def _read_at(step: float | None) -> str:
    if step is None:
        return "every app scrape"
    return (
        f"{step:g} s tiles (each engine's largest gauge sample and the mean of the GPUs' "
        "samples in each tile, reduced by the source)"
    )


def definitions(report: Report) -> Iterator[Block]:
    yield Heading(2, "Collection and statistical definitions")
    if report.scope.scrape_interval_seconds:
        yield Paragraph(f"Scrape interval: {report.scope.scrape_interval_seconds:g} s.")
    read = "; ".join(f"{d.deployment.name}: {_read_at(d.step_seconds)}" for d in report.deployments)
    yield Paragraph(
        f"Queues, stage boundaries and the sampled shares (requests waiting, running) read "
        f"{read}. A large scope is read in tiles so that what is asked stays small; "
        "--resolution scrape reads every scrape."
    )
    yield Items(DEFINITIONS)


def request_shapes(report: Report) -> Iterator[Block]:
    yield Heading(2, "Request shapes")
    yield Paragraph("Read these before any throughput: different shapes are different work.")
    rows = []
    for d in report.deployments:
        s = d.of(analyses.shapes)
        mix = ", ".join(
            f"{r} {number((m.value or 0) * 100, 3)}%" for r, m in s.finish_shares.items() if m.value
        )
        rows.append(
            (
                d.deployment.name,
                cell(s.prompt_tokens_mean),
                cell(s.output_tokens_mean),
                cell(s.max_tokens_mean),
                cell(s.max_tokens_share.get(20)),
                cell(s.max_tokens_share.get(50)),
                cell(s.finished),
                mix or "—",
            )
        )
    yield Table(
        (
            "deployment",
            "prompt tokens (mean)",
            "output tokens (mean)",
            "max_tokens (mean)",
            "share max_tokens ≤ 20",
            "share ≤ 50",
            "finished requests",
            "finish reasons",
        ),
        tuple(rows),
    )
    yield Paragraph("Finish reasons say how generation ended, not that a request succeeded.")


def latency(report: Report) -> Iterator[Block]:
    yield Heading(2, "Latency")
    yield Paragraph("Seconds. Brackets: the bucket that holds the true quantile.")
    rows = []
    for d in report.deployments:
        for key in METRICS:
            summary = getattr(d.of(analyses.latency), key)
            rows.append(
                (
                    d.deployment.name,
                    key,
                    cell(summary.mean),
                    *(cell(getattr(summary, label)) for label, _ in QUANTILES),
                )
            )
    yield Table(
        ("deployment", "metric", "mean", *(label.upper() for label, _ in QUANTILES)), tuple(rows)
    )
    yield Items(report.deployments[0].of(analyses.latency).caveats if report.deployments else ())
    for name in _names(report):
        yield FigureRef(
            f"{name}-rolling-quantiles",
            f"{name}: rolling P50/P95/P99 of time to first token (5-minute windows).",
        )


def queues(report: Report) -> Iterator[Block]:
    yield Heading(2, "Queues and GPU activity")
    for d in report.deployments:
        q = d.of(analyses.queueing)
        yield Heading(3, d.deployment.name)
        if d.step_seconds is not None:
            yield Paragraph(f"Rows are {d.step_seconds:g} s tiles: samples counts tiles.")
        peak = (
            f"Peak waiting {cell(q.peak_waiting)} at "
            f"{q.peak_time.isoformat() if q.peak_time else '—'} on {q.peak_replica or '—'}."
        )
        yield Paragraph(peak)
        if q.intervals:
            yield Table(
                (
                    "class",
                    "replica",
                    "start",
                    "end",
                    "samples",
                    "max waiting",
                    "max running",
                    "mean GPU util %",
                ),
                tuple(
                    (
                        i.classification.value,
                        i.replica,
                        i.start.isoformat(),
                        i.end.isoformat(),
                        str(i.samples),
                        number(i.max_waiting),
                        number(i.max_running),
                        number(i.mean_gpu_util),
                    )
                    for i in q.intervals
                ),
            )
        else:
            yield Paragraph("No interval with a queue or with work running on idle GPUs.")
        yield FigureRef(
            f"{d.deployment.name}-queue-vs-gpu",
            f"{d.deployment.name}: waiting and running against GPU utilisation.",
        )
    yield Paragraph(
        "capacity: a queue while GPUs are busy; starved: a queue while GPUs idle (host, "
        "transfer or scheduling); inconsistent: running > 0 while GPU utilisation is 0 "
        "(investigate; scrapes may be misaligned)."
    )


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
                    i.start.isoformat(),
                    i.end.isoformat(),
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


def costs(report: Report) -> Iterator[Block]:
    yield Heading(2, "Cost")
    priced = [(d, c) for d in report.deployments if (c := priced_cost(d)) is not None]
    if not priced:
        yield Paragraph(
            "No GPU-hour price was given: pass --gpu-hour-price NAME=PRICE for cost "
            "per useful token."
        )
    rows = tuple(
        (
            d.deployment.name,
            cell(c.gpu_hours),
            cell(c.cost),
            cell(c.useful_output_tokens),
            cell(c.cost_per_million_useful_output_tokens),
            cell(c.useful_output_tokens_per_gpu_hour),
        )
        for d, c in priced
    )
    if rows:
        yield Table(
            (
                "deployment",
                "GPU-hours",
                "cost",
                "useful output tokens",
                "cost per million useful tokens",
                "useful tokens per GPU-hour",
            ),
            rows,
        )
        yield Paragraph(
            "Total cost over total useful tokens, never a mean of ratios; aborted "
            "and errored requests are not useful."
        )


def verdicts(report: Report) -> Iterator[Block]:
    if report.validity is None:
        return
    yield Heading(2, "Comparison verdicts")
    for pair in report.validity.pairs:
        yield Heading(3, f"{pair.a} vs {pair.b}")
        yield Table(
            ("comparison", "verdict", pair.a, pair.b, "unit", "findings"),
            tuple(
                (
                    v.comparison,
                    v.verdict.value,
                    number(v.values.get(pair.a)),
                    number(v.values.get(pair.b)),
                    v.unit or "",
                    ", ".join(v.findings),
                )
                for v in pair.verdicts.values()
            ),
        )
        rows = []
        for f in pair.findings:
            evidence = "; ".join(
                f"{e.statistic}: "
                + ", ".join(
                    f"{k} {number(v) if isinstance(v, float) else v}" for k, v in e.values.items()
                )
                for e in f.evidence
            )
            affected = [k for k, s in f.affects.items() if s is not Severity.INFO]
            rows.append(
                (
                    f.code,
                    f.severity.value,
                    f.message,
                    evidence or "—",
                    ", ".join(affected) or "(notes only)",
                    f.how_to_compare or "",
                )
            )
        yield Table(
            ("finding", "severity", "what", "evidence", "weighs on", "fair comparison"), tuple(rows)
        )
        for m in pair.matched:
            yield Paragraph(f"{m.family} at matched concurrency: {m.reason}.")
            if m.band is not None:
                yield Table(
                    ("deployment", "intervals", "P50", "P95"),
                    tuple(
                        (name, str(m.intervals[name]), cell(q["p50"]), cell(q["p95"]))
                        for name, q in m.quantiles.items()
                    ),
                )


def baseline(report: Report) -> Iterator[Block]:
    if report.baseline is not None:
        yield from baseline_blocks(report.baseline)


#: The analyses the sections above show; any other registered analysis gets a table.
SHOWN = frozenset(
    {
        "shapes",
        "latency",
        "throughput",
        "cache",
        "gpu",
        "queueing",
        "bottleneck",
        "configuration",
        "boundaries",
        "cost",
        "rolling_quantiles",
        "activity",
    }
)


def other_analyses(report: Report) -> Iterator[Block]:
    """A table of Measurements per registered analysis without a section of its own."""
    for one in ANALYSES:
        if one.name in SHOWN:
            continue
        rows = tuple(
            (d.deployment.name, m.statistic, number(m.value), m.unit, m.status.value)
            for d in report.deployments
            if one.name in d.results
            for m in d.results[one.name].measurements()
        )
        yield Heading(2, one.title)
        yield Paragraph(one.summary)
        yield Table(("deployment", "statistic", "value", "unit", "status"), rows)


def appendix(report: Report) -> Iterator[Block]:
    yield Heading(2, "Appendix: recheck these numbers")
    yield Paragraph(
        "Every number above, by key, with the queries behind it (evaluated at the window's "
        "end) and any local arithmetic. Paste them into Prometheus to recheck."
    )
    lines = []
    for m in report.measurements():
        lines.append(f"# {m.key} = {number(m.value, 6)} {m.unit} ({m.status.value})")
        if m.provenance.computation:
            lines.append(f"#   computed: {m.provenance.computation}")
        lines.extend(m.provenance.promql)
        lines.append("")
    yield Code("\n".join(lines), "promql")


def sections(report: Report) -> tuple[Block, ...]:
    """Every block of the report, in order."""
    parts = (
        scope,
        deployments,
        configurations,
        definitions,
        request_shapes,
        latency,
        queues,
        caches,
        gpus,
        stage_boundaries,
        costs,
        other_analyses,
        verdicts,
        baseline,
        appendix,
    )
    return tuple(block for part in parts for block in part(report))
