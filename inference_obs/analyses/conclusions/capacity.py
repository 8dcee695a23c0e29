"""The Summary's findings about what limited a deployment: its queue, and its GPUs.

Finders of :data:`~.findings.FINDERS`: each reads the judging's inputs
(:class:`~.model.Judged`) and yields a conclusion per deployment it
concerns, ending with the deployment's one reading
(:mod:`~inference_obs.analyses.regime`), never a verdict of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

from inference_obs.analyses.bottleneck import BottleneckClass, bottleneck
from inference_obs.analyses.boundaries import CapacityReading, boundaries
from inference_obs.analyses.conclusions.model import NAMED, SECTIONS, Conclusion, Judged
from inference_obs.analyses.facts import has_data
from inference_obs.analyses.gpu import gpu
from inference_obs.analyses.latency import latency
from inference_obs.analyses.naming import named
from inference_obs.analyses.queueing import QueueingSettings, queueing
from inference_obs.analyses.regime import RegimeResult
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.throughput import throughput
from inference_obs.analyses.validity.checks import Thresholds
from inference_obs.reading.wording import number, p_is, quantity, share_cell, when

__all__ = [
    "bottleneck_class",
    "boundary_reading",
    "gpus_without_samples",
    "queued",
]


def queued(judged: Judged) -> Iterator[Conclusion]:
    """A deployment that queued in a share of its scrapes, against its GPUs' activity."""
    share = judged.validity.thresholds.queue_share if judged.validity else Thresholds().queue_share
    busy = QueueingSettings().busy_threshold
    for d in judged.runs:
        waiting = d.of(throughput).waiting_sample_share
        q, util = d.of(queueing), d.of(gpu).utilization_mean
        if not waiting.ok or waiting.value is None or waiting.value < share:
            continue
        # The counts the queues section's contingency gives: one reading, one set of numbers.
        table = q.waiting_idle
        # None where no row had a GPU reading: no data, never 0 rows.
        idle, busy_rows = table.waiting_idle.value, table.waiting_busy.value
        gpus = f"its GPUs averaged {quantity(util)} utilisation"
        if util.value is None:
            gpus = f"no GPU utilisation was read ({quantity(util)})"
        elif util.ok and util.value < busy:
            gpus = f"its GPUs were mostly idle ({quantity(util)} mean utilisation)"
        peak = ""
        if q.peak_waiting.ok and q.peak_time is not None:
            peak = f" (peak {number(q.peak_waiting.value)} waiting at {when(q.peak_time)})"
        rows_are = "scrapes" if d.step_seconds is None else "tiles"
        split = (
            f"of the {rows_are} with a queue, whether the GPUs were busy or idle: no data "
            f"(no {rows_are[:-1]} had a GPU reading)"
        )
        if idle is not None and busy_rows is not None:
            split = (
                f"of the {rows_are} with a queue, the GPUs were busy in {number(busy_rows)} and "
                f"idle (under {busy:g}%) in {number(idle)} (Fisher's exact "
                f"{p_is(table.p_value)})"
            )
        text = (
            f"{d.deployment.name} had requests waiting in {number(100 * waiting.value, 3)}% of "
            f"its {rows_are}{peak} while {gpus}; {split}."
        )
        # The deployment's one reading, as every section quotes it, and what it overrules.
        found, waited = judged.regimes[d.deployment.name], d.of(latency).queue.mean
        if waited.ok:
            text += f" Its queue-time mean was {quantity(waited)}."
        # The reading's evidence from these same rows says why the counts read as they do.
        rows = (table.waiting_busy.key, table.waiting_idle.key)
        why = next(
            (e.text.rstrip(".") for e in found.evidence if bool(set(e.keys[:1]) & set(rows))), ""
        )
        text += f" {d.deployment.name} reads {found.label}{f': {why}' if why else ''}."
        caveat = (
            "A low mean utilisation is not spare capacity at every moment: queues form in "
            "bursts, and waiting reasons are scheduler classes, not a diagnosis."
        )
        if found.against:
            caveat += f" Against the reading: {' '.join(e.text for e in found.against)}"
        yield Conclusion(
            kind="queued",
            text=text,
            keys=(
                waiting.key,
                q.peak_waiting.key,
                util.key,
                table.waiting_busy.key,
                table.waiting_idle.key,
                table.p_value.key,
                *((waited.key,) if waited.ok else ()),
            ),
            section=SECTIONS["queues"],
            caveat=caveat,
            deployments=(d.deployment.name,),
        )


def gpus_without_samples(judged: Judged) -> Iterator[Conclusion]:
    """Allocated GPUs without utilisation samples: their activity is unknown, not zero."""
    for d in judged.runs:
        g = d.of(gpu)
        if not g.missing_gpus or not has_data(d):
            continue
        named = ", ".join(g.missing_gpus[:NAMED]) + (" ..." if len(g.missing_gpus) > 3 else "")
        yield Conclusion(
            kind="gpus_without_samples",
            text=f"{len(g.missing_gpus)} of {number(g.gpus_expected.value)} GPUs of "
            f"{d.deployment.name} had no utilisation samples ({named}).",
            keys=(g.gpus_expected.key, g.gpus_with_samples.key, g.utilization_mean.key),
            section=SECTIONS["gpus"],
            caveat="Their activity is unknown, not zero: the mean covers the GPUs with samples.",
            deployments=(d.deployment.name,),
        )


def boundary_reading(judged: Judged) -> Iterator[Conclusion]:
    """A fleet whose GPUs waited on the host or on transfers, or were saturated."""
    for d in judged.runs:
        b = d.of(boundaries)
        if b.reading not in (CapacityReading.STARVED, CapacityReading.SATURATED):
            continue
        causes: dict[str, set[str]] = {}
        for i in b.intervals:
            causes.setdefault(i.cause.value, set()).add(i.replica)
        found = "; ".join(f"{c}: {named(sorted(r))}" for c, r in sorted(causes.items()))
        yield _quoting(
            d,
            judged.regimes[d.deployment.name],
            kind=f"boundaries_{b.reading.value}",
            text=f"{d.deployment.name}'s GPUs read {b.reading.value} (duty cycle "
            f"{share_cell(b.duty_cycle)}){f', by cause: {found}' if found else ''}.",
            keys=(b.duty_cycle.key, b.tokens_per_gpu_hour.key),
            section=SECTIONS["boundaries"],
            caveat="Causes rest on sampled host and PCIe counters beside the queue: "
            "a correlation in time, not a trace of each request.",
        )


def bottleneck_class(judged: Judged) -> Iterator[Conclusion]:
    """What bounded the GPUs, where the profiling counters say."""
    for d in judged.runs:
        b = d.of(bottleneck)
        if b.classification is BottleneckClass.UNKNOWN:
            continue
        # The class names what bounds the GPUs; "starved" there means underused, not the
        # deployment's reading, which the sentence quotes.
        bound = b.classification.value.replace("_", " ").replace("starved", "underused")
        yield _quoting(
            d,
            judged.regimes[d.deployment.name],
            kind="bottleneck",
            text=f"{d.deployment.name}'s GPUs read {bound} over the window: {b.reason}.",
            keys=(b.dram_active.key, b.tensor_active.key, b.gpu_util.key),
            section=SECTIONS["gpus"],
            caveat="Window means of profiling counters: which unit was busy, not that "
            "another GPU would be faster.",
        )


def _quoting(
    d: DeploymentResults,
    found: RegimeResult,
    kind: str,
    text: str,
    keys: tuple[str, ...],
    section: str,
    caveat: str,
) -> Conclusion:
    """A finding about one deployment, ending with its one reading (``found``) and the keys
    of its evidence."""
    cited = tuple(dict.fromkeys((*keys, *(k for e in found.evidence for k in e.keys))))
    return Conclusion(
        kind=kind,
        text=f"{text} {d.deployment.name} reads {found.label}.",
        keys=cited,
        section=section,
        caveat=caveat,
        deployments=(d.deployment.name,),
    )
