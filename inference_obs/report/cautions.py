"""What not to conclude from a report: the caveats that apply to its numbers and comparisons.

Each kind of caution is one small function of the report in :data:`CAUTIONS`
that yields :class:`Caution` objects only when its condition holds in this
report: throughput of different workloads, quantiles that share a bucket,
utilisation read as saturation, a missing series read as no problem,
speculative acceptance read as a speed-up, an unknown bottleneck, the
informational notes of the comparison checks, and synthetic data. A new
analysis adds its cautions by adding a function to the tuple.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.analyses.bottleneck import BottleneckClass
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.validity.findings import LATENCY, TAILS, Severity
from inference_obs.analyses.validity.verdicts import Verdict
from inference_obs.reading.measurement import Status
from inference_obs.reading.wording import number, quantity

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["CAUTIONS", "Caution", "cautions"]

#: Comparisons of work done: a ratio of them compares workloads unless the work matched.
_WORK = ("output_throughput", "request_throughput", "tokens_per_gpu_hour")
#: Informational findings that are the comparison's subject, not a caveat.
_SUBJECT = frozenset({"gpu_model_differs"})
#: Notes another caution says already (same_bucket: quantiles inside one bucket).
_SAID = frozenset({"same_bucket"})
#: Annotation kinds and verdict notes saying a quantile or two cannot be told apart.
_BUCKET_NOTES = frozenset({"lowest_bucket", "same_bucket"})
_FAMILY = re.compile(r"no series of (.+?) for ")


@dataclass(frozen=True, slots=True)
class Caution:
    """One thing not to conclude from the report, in plain words.

    Attributes
    ----------
    kind
        Stable code of the caution (``different_workloads``, ``one_bucket``, ...).
    text
        The caution, naming the numbers it concerns.
    keys
        Measurement keys it concerns, where it concerns particular numbers.
    """

    kind: str
    text: str
    keys: tuple[str, ...] = ()


Check = Callable[["Report"], Iterable[Caution]]


def _different_workloads(report: Report) -> Iterator[Caution]:
    for pair in report.validity.pairs if report.validity else ():
        bad = [
            k for k in _WORK if k in pair.verdicts and pair.verdicts[k].verdict is not Verdict.VALID
        ]
        if not bad:
            continue
        codes = sorted({c.replace("_", " ") for k in bad for c in pair.verdicts[k].findings})
        yield Caution(
            "different_workloads",
            f"Throughput of different workloads is not a hardware ratio: {pair.a} and "
            f"{pair.b} served different work ({', '.join(codes)}), so dividing their "
            f"{', '.join(k.replace('_', ' ') for k in bad)} measures the traffic, not the GPUs.",
        )


def _one_bucket(report: Report) -> Iterator[Caution]:
    shared = []
    runs = {d.deployment.name: d for d in report.deployments}
    for pair in report.validity.pairs if report.validity else ():
        for metric in LATENCY:
            for stat in TAILS:
                a, b = (
                    getattr(getattr(runs[n].of(analyses.latency), metric), stat)
                    for n in (pair.a, pair.b)
                )
                verdict = pair.verdicts.get(f"{metric}_{stat}")
                noted = verdict is not None and bool(_BUCKET_NOTES & set(verdict.notes))
                overlap = (
                    a.bounds is not None
                    and b.bounds is not None
                    and a.ok
                    and b.ok
                    and a.bounds.lower < b.bounds.upper
                    and b.bounds.lower < a.bounds.upper
                )
                if overlap or noted:
                    shared.append((f"{metric} {stat.upper()}", a, b))
    lowest = [
        m for m in report.measurements() if any(a.kind in _BUCKET_NOTES for a in m.annotations)
    ]
    if not shared and not lowest and not any(m.bounds for m in report.measurements()):
        return
    text = (
        "Quantiles inside one bucket cannot be ordered: a quantile is interpolated inside "
        "the bucket in brackets and only that bucket is certain"
    )
    if shared:
        listed = "; ".join(f"{what} {quantity(a)} and {quantity(b)}" for what, a, b in shared)
        text += f". These lie in overlapping buckets: {listed}"
    if lowest:
        text += f". {len(lowest)} quantile(s) lie in the lowest bucket: at most its upper bound"
    yield Caution(
        "one_bucket",
        text + ".",
        tuple(
            dict.fromkeys([m.key for _, a, b in shared for m in (a, b)] + [m.key for m in lowest])
        ),
    )


def _utilisation(report: Report) -> Iterator[Caution]:
    shown = [d.of(analyses.gpu).utilization_mean for d in report.deployments]
    shown = [m for m in shown if m.ok]
    if not shown:
        return
    listed = ", ".join(f"{m.deployment} {quantity(m)}" for m in shown)
    yield Caution(
        "utilisation_not_saturation",
        f"Utilisation is not saturation: GPU utilisation ({listed}) is the share of time a "
        "kernel ran, not how much of the GPU it used; a high mean can hide headroom and a low "
        "mean busy minutes.",
        tuple(m.key for m in shown),
    )


def _no_series(report: Report) -> Iterator[Caution]:
    missing = [m for m in report.measurements() if m.status is Status.NO_DATA]
    if not missing:
        return
    families = sorted(
        {found for m in missing for a in m.annotations for found in _FAMILY.findall(a.message)}
    )
    named = f" (no series of {', '.join(families)})" if families else ""
    yield Caution(
        "no_series_no_problem",
        f"No series is not no problem: {len(missing)} number(s) had no data{named}; the "
        "absence of data is not evidence that nothing went wrong.",
    )


def _speculative(report: Report) -> Iterator[Caution]:
    rates = [
        m
        for d in report.deployments
        for m in (
            d.of(analyses.cache).spec_acceptance_rate,
            d.of(analyses.cache).spec_mean_acceptance_length,
        )
        if m.ok
    ]
    if not rates:
        return
    listed = ", ".join(
        f"{m.deployment} {m.statistic.replace('_', ' ')} {number(m.value)}" for m in rates
    )
    yield Caution(
        "acceptance_not_speedup",
        f"Speculative acceptance is not a speed-up: {listed} describe the progress of each "
        "verification step, not how much faster the service answered.",
        tuple(m.key for m in rates),
    )


def _bottleneck_unknown(report: Report) -> Iterator[Caution]:
    # Deployments unknown for one reason share one sentence.
    by_reason: dict[str, list[DeploymentResults]] = {}
    for d in report.deployments:
        b = d.of(analyses.bottleneck)
        if b.classification is BottleneckClass.UNKNOWN:
            by_reason.setdefault(b.reason, []).append(d)
    for reason, runs in by_reason.items():
        names = " and ".join(f"{d.deployment.name}'s" for d in runs)
        keys = tuple(
            k
            for d in runs
            for k in (
                d.of(analyses.bottleneck).dram_active.key,
                d.of(analyses.bottleneck).tensor_active.key,
            )
        )
        yield Caution(
            "bottleneck_unknown", f"What bounds {names} GPUs is not known: {reason}.", keys
        )


def _notes(report: Report) -> Iterator[Caution]:
    seen: set[str] = set()
    for pair in report.validity.pairs if report.validity else ():
        for f in pair.findings:
            if f.severity is Severity.INFO and f.code not in _SUBJECT | _SAID | seen:
                seen.add(f.code)
                yield Caution(f.code, f.message)


def _synthetic(report: Report) -> Iterator[Caution]:
    # A simulated dataset says so in its methodology ("Synthetic: every sample was produced by
    # the inference_obs simulator ..."), and the report carries that methodology.
    if any(line.lower().startswith("synthetic") for line in report.methodology):
        yield Caution(
            "synthetic",
            "These are synthetic data from a simulator: they show what the method reads, not how "
            "any real service or GPU performs.",
        )


#: The cautions, in the order the section lists them.
CAUTIONS: tuple[Check, ...] = (
    _synthetic,
    _different_workloads,
    _one_bucket,
    _utilisation,
    _no_series,
    _speculative,
    _bottleneck_unknown,
    _notes,
)


def cautions(report: Report, kinds: Iterable[Check] = CAUTIONS) -> tuple[Caution, ...]:
    """What not to conclude from ``report``: every caution whose condition holds, in order."""
    return tuple(c for caution in kinds for c in caution(report))
