"""What not to conclude from a report: the caveats that apply to its numbers and comparisons.

A judging analysis, beside :mod:`.findings`: each kind of caution is one small
function of the analyses' results (:class:`~.model.Judged`) in :data:`CAUTIONS`
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

from inference_obs.analyses.bottleneck import BottleneckClass, bottleneck
from inference_obs.analyses.cache import cache
from inference_obs.analyses.conclusions.model import Caution, Cautions, Judged
from inference_obs.analyses.gpu import gpu
from inference_obs.analyses.latency import latency
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.validity.findings import LATENCY, TAILS, Severity
from inference_obs.analyses.validity.verdicts import Verdict
from inference_obs.reading.measurement import Status
from inference_obs.reading.wording import number, quantity

__all__ = ["CAUTIONS", "cautions"]

#: Comparisons of work done: a ratio of them compares workloads unless the work matched.
_WORK = ("output_throughput", "request_throughput", "tokens_per_gpu_hour")
#: Informational findings that are the comparison's subject, not a caveat.
_SUBJECT = frozenset({"gpu_model_differs"})
#: Notes another caution says already (same_bucket: quantiles inside one bucket).
_SAID = frozenset({"same_bucket"})
#: Annotation kinds and verdict notes saying a quantile or two cannot be told apart.
_BUCKET_NOTES = frozenset({"lowest_bucket", "same_bucket"})
_FAMILY = re.compile(r"no series of (.+?) for ")


Check = Callable[[Judged], Iterable[Caution]]


def _caution(kind: str, text: str, keys: tuple[str, ...] = ()) -> Caution:
    """A :class:`Caution`, its fields in order."""
    return Caution(kind=kind, text=text, keys=keys)


def _different_workloads(judged: Judged) -> Iterator[Caution]:
    for pair in judged.validity.pairs if judged.validity else ():
        bad = [
            k for k in _WORK if k in pair.verdicts and pair.verdicts[k].verdict is not Verdict.VALID
        ]
        if not bad:
            continue
        codes = sorted({c.replace("_", " ") for k in bad for c in pair.verdicts[k].findings})
        yield _caution(
            "different_workloads",
            f"Throughput of different workloads is not a hardware ratio: {pair.a} and "
            f"{pair.b} served different work ({', '.join(codes)}), so dividing their "
            f"{', '.join(k.replace('_', ' ') for k in bad)} measures the traffic, not the GPUs.",
        )


def _one_bucket(judged: Judged) -> Iterator[Caution]:
    shared = []
    runs = judged.by_name()
    for pair in judged.validity.pairs if judged.validity else ():
        for metric in LATENCY:
            for stat in TAILS:
                a, b = (
                    getattr(getattr(runs[n].of(latency), metric), stat) for n in (pair.a, pair.b)
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
    lowest = [m for m in judged.measurements if any(a.kind in _BUCKET_NOTES for a in m.annotations)]
    if not shared and not lowest and not any(m.bounds for m in judged.measurements):
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
    yield _caution(
        "one_bucket",
        text + ".",
        tuple(
            dict.fromkeys([m.key for _, a, b in shared for m in (a, b)] + [m.key for m in lowest])
        ),
    )


def _utilisation(judged: Judged) -> Iterator[Caution]:
    shown = [d.of(gpu).utilization_mean for d in judged.runs]
    shown = [m for m in shown if m.ok]
    if not shown:
        return
    listed = ", ".join(f"{m.deployment} {quantity(m)}" for m in shown)
    yield _caution(
        "utilisation_not_saturation",
        f"Utilisation is not saturation: GPU utilisation ({listed}) is the share of time a "
        "kernel ran, not how much of the GPU it used; a high mean can hide headroom and a low "
        "mean busy minutes.",
        tuple(m.key for m in shown),
    )


def _no_series(judged: Judged) -> Iterator[Caution]:
    missing = [m for m in judged.measurements if m.status is Status.NO_DATA]
    if not missing:
        return
    families = sorted(
        {found for m in missing for a in m.annotations for found in _FAMILY.findall(a.message)}
    )
    named = f" (no series of {', '.join(families)})" if families else ""
    yield _caution(
        "no_series_no_problem",
        f"No series is not no problem: {len(missing)} number(s) had no data{named}; the "
        "absence of data is not evidence that nothing went wrong.",
    )


def _speculative(judged: Judged) -> Iterator[Caution]:
    rates = [
        m
        for d in judged.runs
        for m in (
            d.of(cache).spec_acceptance_rate,
            d.of(cache).spec_mean_acceptance_length,
        )
        if m.ok
    ]
    if not rates:
        return
    listed = ", ".join(
        f"{m.deployment} {m.statistic.replace('_', ' ')} {number(m.value)}" for m in rates
    )
    yield _caution(
        "acceptance_not_speedup",
        f"Speculative acceptance is not a speed-up: {listed} describe the progress of each "
        "verification step, not how much faster the service answered.",
        tuple(m.key for m in rates),
    )


def _bottleneck_unknown(judged: Judged) -> Iterator[Caution]:
    # Deployments unknown for one reason share one sentence.
    by_reason: dict[str, list[DeploymentResults]] = {}
    for d in judged.runs:
        b = d.of(bottleneck)
        if b.classification is BottleneckClass.UNKNOWN:
            by_reason.setdefault(b.reason, []).append(d)
    for reason, runs in by_reason.items():
        names = " and ".join(f"{d.deployment.name}'s" for d in runs)
        keys = tuple(
            k
            for d in runs
            for k in (
                d.of(bottleneck).dram_active.key,
                d.of(bottleneck).tensor_active.key,
            )
        )
        yield _caution(
            "bottleneck_unknown", f"What bounds {names} GPUs is not known: {reason}.", keys
        )


def _notes(judged: Judged) -> Iterator[Caution]:
    seen: set[str] = set()
    for pair in judged.validity.pairs if judged.validity else ():
        for f in pair.findings:
            if f.severity is Severity.INFO and f.code not in _SUBJECT | _SAID | seen:
                seen.add(f.code)
                yield _caution(f.code, f.message)


def _synthetic(judged: Judged) -> Iterator[Caution]:
    # A simulated dataset says so in its methodology, which the scope facts read.
    if judged.scope.synthetic:
        yield _caution(
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


def cautions(judged: Judged, kinds: Iterable[Check] = CAUTIONS) -> Cautions:
    """What not to conclude from ``judged``: every caution whose condition holds, in order."""
    return Cautions(entries=tuple(c for caution in kinds for c in caution(judged)))
