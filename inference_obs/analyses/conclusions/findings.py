"""What a report concludes: the few findings that matter, ranked, each with what not to conclude.

A judging analysis: it reads the analyses' results
(:class:`~inference_obs.analyses.conclusions.model.Judged`), never a source
or a report. Each kind of finding is one small function of them (a *finder*) that
yields :class:`Conclusion` objects; :data:`FINDERS` lists them in rank order
and :func:`conclusions` runs them (those about a deployment's queue and GPUs,
which quote its one reading, are in :mod:`.capacity`). A new analysis adds its
findings by adding a finder to the tuple. Every conclusion is derived from the
results (each deployment's run, the comparison verdicts, the time line), never
from knowledge of a dataset; it names the Measurement keys it rests on and the
section that shows them.

Rules the sentences follow:

- a quantile is called lower only when its bucket lies wholly below the
  other's (the histogram cannot order two values in overlapping buckets);
- a mean or rate is called lower only when it is at least
  :data:`DIFFERENCE` below the other;
- a side is said to have the lower latency only when its P95 is lower AND
  its mean is too; otherwise the sentence states the split ("P95 lower for
  H20, mean and P50 lower for PRO");
- "a worse tail on the busier side may be load" is said only where the
  buckets show that the side with more requests in flight had the worse P95;
- a finding about one deployment's queue or GPUs quotes its one reading
  (:mod:`~inference_obs.analyses.regime`), never a verdict of its own;
- a comparison the validity checks caveat or invalidate says so, with its
  findings, and what not to conclude comes from the finding that weighs most.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from inference_obs.analyses.collection import collection
from inference_obs.analyses.conclusions.capacity import (
    bottleneck_class,
    boundary_reading,
    gpus_without_samples,
    queued,
)
from inference_obs.analyses.conclusions.model import (
    NAMED,
    SECTIONS,
    Conclusion,
    Conclusions,
    Judged,
)
from inference_obs.analyses.facts import has_data, priced_cost
from inference_obs.analyses.gpu import gpu
from inference_obs.analyses.latency import METRICS, latency
from inference_obs.analyses.outliers import by_replica, outlier_text
from inference_obs.analyses.regime import RegimeReading
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.throughput import throughput
from inference_obs.analyses.timeline import Severity as EventSeverity, named
from inference_obs.analyses.validity.findings import Finding, Severity
from inference_obs.analyses.validity.verdicts import PairValidity, Verdict
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.wording import number, quantity, when

__all__ = [
    "DIFFERENCE",
    "FINDERS",
    "conclusions",
    "lower",
    "weighing",
]

#: Smallest relative difference (10%) for which an exact number (a mean, a rate) is called
#: lower: the tolerance the baseline comparison gives exact numbers (docs/report-json.md).
DIFFERENCE = 0.1

#: The latency metrics the summary compares, by their P95, with the words for them.
HEADLINE_LATENCY = (
    ("ttft", "time to first token"),
    ("tpot", "time per output token"),
    ("e2e", "end-to-end latency"),
)


Finder = Callable[[Judged], Iterable[Conclusion]]


def lower(x: Measurement, y: Measurement) -> int | None:
    """Which of two values is lower, where the numbers can tell: 0 for ``x``, 1 for ``y``.

    With bounds (quantiles), only when one bucket lies wholly at or below the
    other (buckets are ``(lower, upper]``: ``x <= x.upper <= y.lower < y``);
    without, only when one is at least :data:`DIFFERENCE` below the other.
    None when either has no value or they cannot be told apart.
    """
    if not (x.ok and y.ok) or x.value is None or y.value is None:
        return None
    if x.bounds is not None and y.bounds is not None:
        if x.bounds.upper <= y.bounds.lower:
            return 0
        if y.bounds.upper <= x.bounds.lower:
            return 1
        return None
    high = max(abs(x.value), abs(y.value))
    if high == 0 or abs(x.value - y.value) < DIFFERENCE * high:
        return None
    return 0 if x.value < y.value else 1


def _runs(judged: Judged) -> dict[str, DeploymentResults]:
    return judged.by_name()


def _pairs(judged: Judged) -> tuple[PairValidity, ...]:
    return judged.validity.pairs if judged.validity is not None else ()


def _weighing(pair: PairValidity, comparison: str) -> list[Finding]:
    """The findings that weigh on a comparison, the one to heed first first.

    Worst severity first; then findings that say how to compare fairly; then
    the most specific (affecting the fewest comparisons: queueing before
    output length, for TTFT).
    """
    found = [
        f for f in pair.findings if f.affects.get(comparison, Severity.INFO) is not Severity.INFO
    ]
    return sorted(
        found,
        key=lambda f: (-f.affects[comparison].rank, f.how_to_compare is None, len(f.affects)),
    )


def weighing(pair: PairValidity, comparison: str) -> list[Finding]:
    """The findings that weigh on ``comparison``, heaviest first, as the summary names them."""
    return _weighing(pair, comparison)


def _clause(
    pair: PairValidity, comparison: str, unsaid: tuple[str, ...] = ()
) -> tuple[str, str | None, str | None]:
    """The verdict clause ending a sentence, the verdict, and what not to conclude.

    What not to conclude comes from the first finding that weighs on the comparison, other
    than those whose codes are ``unsaid`` (a finding whose message the numbers contradict).
    """
    verdict = pair.verdicts.get(comparison)
    if verdict is None:
        return "", None, None
    weighing = _weighing(pair, comparison)
    codes = [f.code.replace("_", " ") for f in weighing]
    named = ", ".join(codes[:NAMED])
    if len(codes) > NAMED:
        named += f" and {len(codes) - NAMED} more"
    caveat = None
    if heeded := [f for f in weighing if f.code not in unsaid]:
        first = heeded[0]
        caveat = first.message + (f" {first.how_to_compare}" if first.how_to_compare else "")
    if verdict.verdict is Verdict.VALID:
        return "; a valid comparison", verdict.verdict.value, caveat
    return f"; the comparison is {verdict.verdict.value} ({named})", verdict.verdict.value, caveat


def _no_data(judged: Judged) -> Iterator[Conclusion]:
    """A deployment with no series at all: nothing about it is known."""
    for d in judged.runs:
        if has_data(d):
            continue
        seen, gpus = d.of(throughput).replicas_seen, d.of(gpu).gpus_with_samples
        yield Conclusion(
            kind="no_data",
            text=f"{d.deployment.name} had no vLLM or GPU series in its window: none of its "
            "numbers is known.",
            keys=(seen.key, gpus.key),
            section=SECTIONS["deployments"],
            caveat="No series is not an idle or healthy deployment: check its selectors and "
            "that it was scraped.",
            deployments=(d.deployment.name,),
        )


def _latency(judged: Judged) -> Iterator[Conclusion]:
    """Per pair and headline metric: which side had the lower P95, where the buckets tell."""
    runs = _runs(judged)
    for pair in _pairs(judged):
        for metric, words in HEADLINE_LATENCY:
            a, b = (getattr(runs[n].of(latency), metric) for n in (pair.a, pair.b))
            if not (a.p95.ok and b.p95.ok):
                continue
            comparison = f"{metric}_p95"
            order = lower(a.p95, b.p95)
            ordered = (
                () if order is None else ((pair.a, pair.b)[order], (pair.a, pair.b)[1 - order])
            )
            # "A worse tail on the busier side may be load" only where the busier side's was worse.
            unsaid = () if _busier_worse(pair, ordered) else ("concurrency_differs",)
            clause, verdict, caveat = _clause(pair, comparison, unsaid)
            caveat = _matched(pair, metric, caveat)
            means = f"means {quantity(a.mean)} and {quantity(b.mean)}"
            keys: tuple[str, ...] = (a.p95.key, b.p95.key, a.mean.key, b.mean.key)
            split = _split((pair.a, pair.b), order, lower(a.mean, b.mean), lower(a.p50, b.p50))
            if order is None:
                text = (
                    f"The {words} P95 of {pair.a} and {pair.b} cannot be told apart: "
                    f"{quantity(a.p95)} and {quantity(b.p95)} lie in overlapping buckets "
                    f"({means}){clause}."
                )
                kind, named = "latency_indistinguishable", (pair.a, pair.b)
            elif split:
                names = (pair.a, pair.b)
                text = (
                    f"Neither side had the lower {words}: {split} (P95 {quantity(a.p95)} and "
                    f"{quantity(b.p95)}, {means}, P50 {quantity(a.p50)} and {quantity(b.p50)} "
                    f"for {pair.a} and {pair.b}){clause}."
                )
                keys = (*keys, a.p50.key, b.p50.key)
                kind, named = "latency_split", (names[order], names[1 - order])
            else:
                names, p95s = (pair.a, pair.b), (a.p95, b.p95)
                low, high, m_low, m_high = (
                    names[order],
                    names[1 - order],
                    p95s[order],
                    p95s[1 - order],
                )
                text = (
                    f"{low} had the lower {words}: P95 {quantity(m_low)} against {high}'s "
                    f"{quantity(m_high)} ({means} for {pair.a} and {pair.b}){clause}."
                )
                kind, named = "latency_lower", (low, high)
            # The caveat's numbers are its finding's evidence: cited with the sentence's own.
            keys = (*keys, *_evidence_keys(judged, pair, comparison, unsaid))
            yield Conclusion(
                kind=kind,
                text=text,
                keys=keys,
                section=SECTIONS["latency"],
                caveat=caveat,
                verdict=verdict,
                deployments=named,
                comparison=comparison,
            )


def _split(names: tuple[str, str], p95: int | None, mean: int | None, p50: int | None) -> str:
    """Which statistics were lower for which side where the mean does not follow the P95's
    order; empty when it does (then the P95's side is called lower).

    A side is called lower only when its P95 bucket lies below the other's AND its mean
    is lower too (by :data:`DIFFERENCE`); a split names the P50's order as well.
    """
    if p95 is None or mean == p95:
        return ""
    ours, theirs = ["P95"], list[str]()
    for stat, order in (("mean", mean), ("P50", p50)):
        if order is not None:
            (ours if order == p95 else theirs).append(stat)
    said = f"{' and '.join(ours)} lower for {names[p95]}"
    if theirs:
        said += f", {' and '.join(theirs)} lower for {names[1 - p95]}"
    if mean is None:
        said += f"; means within {DIFFERENCE:.0%} of each other"
    return said


def _busier_worse(pair: PairValidity, ordered: tuple[str, ...]) -> bool:
    """Whether the side with more requests in flight had the higher value, where the
    buckets tell (``ordered``: the lower side first; empty when they cannot tell): only
    then may "a worse tail on the busier side" be load."""
    busy = next((f for f in pair.findings if f.code == "concurrency_differs"), None)
    if busy is None or not busy.evidence or len(ordered) < 2:
        return False
    loads = {n: v for n, v in busy.evidence[0].values.items() if isinstance(v, float | int)}
    return len(loads) == 2 and max(loads, key=lambda n: float(loads[n])) == ordered[1]


def _matched(pair: PairValidity, metric: str, caveat: str | None) -> str | None:
    """The caveat, with what latency at matched concurrency showed for the metric's family."""
    family = METRICS[metric][0].name
    found = next((m for m in pair.matched if m.family == family), None)
    if found is None:
        return caveat
    return f"{caveat + ' ' if caveat else ''}At matched concurrency: {found.reason}."


def _latency_alone(judged: Judged) -> Iterator[Conclusion]:
    """Without a comparison: each deployment's headline latency, with its buckets."""
    if judged.validity is not None:
        return
    for d in judged.runs:
        timed = d.of(latency)
        parts, keys = [], []
        for metric, words in HEADLINE_LATENCY:
            summary = getattr(timed, metric)
            if summary.p95.ok:
                parts.append(f"{words} P95 {quantity(summary.p95)}, mean {quantity(summary.mean)}")
                keys += [summary.p95.key, summary.mean.key]
            elif summary.mean.ok:  # buckets dropped or missing: the exact mean still stands
                parts.append(f"{words} mean {quantity(summary.mean)} (no P95: no buckets)")
                keys.append(summary.mean.key)
        if parts:
            yield Conclusion(
                kind="latency_observed",
                text=f"{d.deployment.name}: {'; '.join(parts)}.",
                keys=tuple(keys),
                section=SECTIONS["latency"],
                caveat="Server-side times of the requests vLLM finished; client aborts are "
                "not in them, and a quantile is certain only to its bucket.",
                deployments=(d.deployment.name,),
            )


def _throughput(judged: Judged) -> Iterator[Conclusion]:
    """Per pair: the output-throughput ratio, and whether it means anything."""
    runs = _runs(judged)
    for pair in _pairs(judged):
        served = {n: runs[n].of(throughput) for n in (pair.a, pair.b)}
        ma, mb = (served[n].output_tokens_per_second_per_replica for n in (pair.a, pair.b))
        if not (ma.ok and mb.ok) or not ma.value or not mb.value:
            continue
        clause, verdict, caveat = _clause(pair, "output_throughput")
        ratio = max(ma.value, mb.value) / min(ma.value, mb.value)
        rates = f"{quantity(ma)} and {quantity(mb)} per replica"
        if verdict == Verdict.VALID.value:
            text = f"{pair.a} and {pair.b} produced {rates}, a ratio of {number(ratio, 3)}{clause}."
        else:
            text = (
                f"The output-throughput ratio of {pair.a} and {pair.b} ({number(ratio, 3)}: "
                f"{rates}) says nothing about the hardware{clause}."
            )
        floors = [
            n for n in (pair.a, pair.b) if judged.regimes[n].reading is RegimeReading.DEMAND_LIMITED
        ]
        if floors:
            floor = f"{' and '.join(floors)} served all the demand sent: a floor, not a capacity."
            caveat = f"{caveat} {floor}" if caveat else floor
        yield Conclusion(
            kind="throughput_ratio",
            text=text,
            keys=(ma.key, mb.key, *_evidence_keys(judged, pair, "output_throughput")),
            section=SECTIONS["verdicts"],
            caveat=caveat,
            verdict=verdict,
            deployments=(pair.a, pair.b),
            comparison="output_throughput",
        )


def _evidence_keys(
    judged: Judged, pair: PairValidity, comparison: str, unsaid: tuple[str, ...] | None = None
) -> tuple[str, ...]:
    """Keys of the Measurements the evidence of the findings a clause names rests on; with
    ``unsaid``, of the one finding its caveat quotes (the first not ``unsaid``)."""
    known: dict[tuple[str, str], str] = {}
    for m in judged.measurements:
        known.setdefault((m.deployment, m.statistic), m.key)
    weighing = _weighing(pair, comparison)
    if unsaid is None:
        findings = weighing[:NAMED]
    else:
        findings = [f for f in weighing if f.code not in unsaid][:1]
    keys = [
        known[n, e.statistic]
        for f in findings
        for e in f.evidence
        for n in (pair.a, pair.b)
        if (n, e.statistic) in known
    ]
    return tuple(dict.fromkeys(keys))


#: Critical events the summary names, each its own finding; the rest are in What happened.
INCIDENTS = 3


def _incidents(judged: Judged) -> Iterator[Conclusion]:
    """The time line's critical events (stalls, restarts, queues that a latency spike
    followed): when, where, and the evidence."""
    runs = _runs(judged)
    critical = [e for e in judged.timeline.events if e.severity is EventSeverity.CRITICAL]
    for e in critical[:INCIDENTS]:
        interval = runs[e.deployment].of(collection).scrape_interval
        seen = (
            f"at {when(e.start)}" if e.start == e.end else f"from {when(e.start)} to {when(e.end)}"
        )
        yield Conclusion(
            kind="incident",
            text=f"A {e.kind.words} of {e.deployment} on {named(e.replicas)} {seen}: {e.text}",
            keys=(*e.keys, interval.key),
            section=SECTIONS["timeline"],
            caveat=f"Seen in scrapes {quantity(interval)} apart: it began and ended between "
            "the scrapes around it, and a rolling quantile is interpolated inside its bucket. "
            "The series show when, not why.",
            deployments=(e.deployment,),
        )


def _outliers(judged: Judged) -> Iterator[Conclusion]:
    """Replicas that stand out from their deployment's others, with what makes each one."""
    for name, fleet in judged.fleets.items():
        grouped = by_replica(fleet.outliers)
        if not grouped:
            continue
        # Each replica by its first statistic in the Replicas table's order (latency first),
        # the rest counted, so that the item stays a few lines for any fleet.
        shown = "; ".join(
            f"{replica}: {outlier_text(found[0])}"
            + (
                f" and {len(found) - 1} more statistic{'s' * (len(found) > 2)}"
                if len(found) > 1
                else ""
            )
            for replica, found in list(grouped.items())[:INCIDENTS]
        )
        more = f"; and {len(grouped) - INCIDENTS} more" if len(grouped) > INCIDENTS else ""
        keys = tuple(found[0].key for found in grouped.values() if found[0].key)
        yield Conclusion(
            kind="replica_outliers",
            text=f"{len(grouped)} of {len(fleet.replicas)} replicas of {name} stand out "
            f"from the others: {shown}{more}.",
            keys=keys[:INCIDENTS],
            section=SECTIONS["replicas"],
            caveat="Far from the others by a robust rule (median absolute deviation; a "
            "quantile's bucket above theirs): where to look, not why.",
            deployments=(name,),
        )


def _cost(judged: Judged) -> Iterator[Conclusion]:
    """Cost per useful token, where GPU-hour prices were given."""
    runs = _runs(judged)
    for pair in _pairs(judged):
        if "cost_per_token" not in pair.verdicts:
            continue
        ca, cb = (priced_cost(runs[n]) for n in (pair.a, pair.b))
        if ca is None or cb is None:
            continue
        ma, mb = ca.cost_per_million_useful_output_tokens, cb.cost_per_million_useful_output_tokens
        clause, verdict, caveat = _clause(pair, "cost_per_token")
        # --currency names one currency for every price; without it the unit is the price's.
        money = f"in {ca.currency}" if ca.currency else "in units of the price you gave"
        yield Conclusion(
            kind="cost",
            text=f"Cost per million useful output tokens: {pair.a} {number(ma.value)}, "
            f"{pair.b} {number(mb.value)} (GPU-hour rent only, {money}){clause}.",
            keys=(ma.key, mb.key),
            section=SECTIONS["cost"],
            caveat=caveat,
            verdict=verdict,
            deployments=(pair.a, pair.b),
            comparison="cost_per_token",
        )


#: The finders, in rank order: what is unknown, latency, throughput, incidents, outlying
#: replicas, queues, GPUs, cost.
FINDERS: tuple[Finder, ...] = (
    _no_data,
    _latency,
    _latency_alone,
    _throughput,
    _incidents,
    _outliers,
    queued,
    gpus_without_samples,
    boundary_reading,
    bottleneck_class,
    _cost,
)


def conclusions(judged: Judged, finders: Iterable[Finder] = FINDERS) -> Conclusions:
    """The report's conclusions, ranked: every finder's, in the finders' order."""
    return Conclusions(entries=tuple(c for find in finders for c in find(judged)))
