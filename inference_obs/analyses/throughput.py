"""Throughput over a window: token and request increases, rates, and what limited them.

Every number is a :class:`~inference_obs.reading.measurement.Measurement`
from a counter ``increase`` (per series, then summed) or from local
arithmetic on such measurements, with the PromQL behind it kept. The output
rate is wall-clock, idle minutes included. A deployment whose waiting queue
stayed empty and whose KV cache never filled was limited by its traffic: its
rate is an observed floor, not a capacity.

Rates are per second of the span the series cover, not of the window
(:func:`covered`; collection health measures the same spans): a replica's
rate over its own span, from its first to its last scrape widened as
``increase()`` extrapolates; the deployment's over the union of its replicas'
spans (when that is shorter than the window, as the sum of its replicas' rates
over the part of it each covers, those scraped in the same round as its first
or last scrape counting to its edges: :func:`_over_span`); the per-replica
mean and tokens per GPU-hour over the replica-seconds (the sum of the
replicas' spans). A window the data fills gives the window's
length, so nothing changes; a window longer than the data, or a pod that
starts or stops inside it, is not diluted by the time nobody was there, and
the rates carry a ``coverage`` annotation saying the span. Sample-weighted
GPU utilisation describes the span its samples cover: rates and utilisation
describe the same span, unless the GPU series start or stop apart from the app
series, which collection health then says.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import partial

from pydantic import Field

from inference_obs.analyses.collection import app_coverage, coverage_note
from inference_obs.analyses.unit import Analysis, Settings
from inference_obs.errors import Annotation, NoDataError
from inference_obs.metrics import builders as b, dcgm, vllm
from inference_obs.metrics.family import Family, resolve_label
from inference_obs.query import Expr, count_over_time
from inference_obs.reading.context import Reading
from inference_obs.reading.coverage import Span, union
from inference_obs.reading.measurement import Measurement, derive
from inference_obs.reading.resolution import positive_share
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Labels

__all__ = [
    "Covered",
    "Regime",
    "ThroughputResult",
    "ThroughputSettings",
    "covered",
    "rates_by_replica",
    "replica_label",
    "replicas_seen",
    "throughput",
]

EXTRAPOLATED = (
    "Prometheus increase() extrapolates to the window edges: the value is fractional and "
    "an estimate, not an audited count."
)
WALL_CLOCK = (
    "Wall-clock rate over the span the series cover (the window, unless pods started or "
    "stopped inside it), idle time included; not a saturated capacity."
)
FLOOR = "Demand-limited: an observed floor, not a capacity."


class Regime(StrEnum):
    """What limited the output in the window, by the queue and KV-cache evidence."""

    DEMAND_LIMITED = "demand_limited"
    CAPACITY_LIMITED = "capacity_limited"
    #: The evidence families have no data: nothing is claimed.
    UNKNOWN = "unknown"


def replica_label(r: Reading, family: Family) -> tuple[str, tuple[str, ...]]:
    """The label naming a replica on ``family``'s series, and the replicas it names."""
    found = r.series(family.select(r.matchers))
    available = {name for one in found for name in one}
    try:
        pod = resolve_label((*dcgm.POD_LABELS, "instance"), available)
    except NoDataError:
        pod = "instance"
    return pod, tuple(sorted({one[pod] for one in found if pod in one}))


@dataclass(frozen=True)
class Covered:
    """What a deployment's rates are per second of: the spans its replicas' series cover.

    Attributes
    ----------
    pod
        The label naming a replica.
    by_replica
        Per replica: the span of the window its app series cover.
    together
        Per replica: its span stretched to the deployment's edges where it was scraped
        in the same round as the deployment's first (last) scrape
        (:meth:`~inference_obs.reading.coverage.Coverage.together`).
    seconds
        The union of the replicas' spans, seconds: the deployment's covered span (the
        window's length when no app series has samples to measure it by).
    spans
        That union, disjoint spans in time order.
    note
        The ``coverage`` annotation when the union is shorter than the window.
    """

    pod: str
    by_replica: dict[str, Span]
    together: dict[str, Span]
    seconds: float
    spans: tuple[Span, ...]
    note: Annotation | None

    def replica_seconds(self, replicas: float) -> float:
        """Replica-seconds: the sum of the replicas' covered seconds; ``replicas`` x the
        covered span when no replica's span is known."""
        if not self.by_replica:
            return replicas * self.seconds
        return sum(s.seconds for s in self.by_replica.values())

    def noted(self, m: Measurement) -> Measurement:
        """``m`` with the coverage annotation, when there is one."""
        if self.note is None:
            return m
        return m.model_copy(update={"annotations": (*m.annotations, self.note)})


def covered(r: Reading) -> Covered:
    """The spans the deployment's replicas cover (see the module docstring).

    Each replica's from the raw app samples collection health reads
    (:func:`~inference_obs.analyses.collection.app_coverage`), by the label that names
    replicas on the output-token counter.
    """
    pod, _ = replica_label(r, vllm.GENERATION_TOKENS)
    found = app_coverage(r, lambda labels: labels.get(pod, ""))
    bounds = (r.window.start_s * 1000, r.window.end_s * 1000)
    spans = found.spans(*bounds)
    joined = union(spans.values())
    return Covered(
        pod=pod,
        by_replica=spans,
        together=found.together(*bounds),
        seconds=sum(s.seconds for s in joined) if joined else r.seconds,
        spans=joined,
        note=coverage_note(r, joined),
    )


def _per_second(total: float, seconds: float) -> float:
    """``total`` per second of ``seconds``; NaN over no time (one sample: no increase)."""
    return total / seconds if seconds > 0 else math.nan


def rates_by_replica(
    r: Reading, spans: Covered | None = None
) -> dict[str, tuple[Measurement, Measurement]]:
    """Per replica: its wall-clock output rate (tokens/s) and finished requests per second.

    Each from the replica's extrapolated counter increase over the window
    (``sum by (pod) (increase(c[w]))``) divided by the seconds its series cover
    (``spans``, read when not given): the window's length unless the replica
    started or stopped inside it.
    """
    spans = covered(r) if spans is None else spans
    pod, names = replica_label(r, vllm.GENERATION_TOKENS)
    exprs = [
        b.increase_total(f, r.matchers, r.seconds, by=(pod,))
        for f in (vllm.GENERATION_TOKENS, vllm.REQUEST_SUCCESS)
    ]
    answers = r.ask(exprs)
    parts = []
    for (stat, unit), expr, answer in zip(
        (("output_tokens", "tokens/s"), ("finished_requests", "requests/s")),
        exprs,
        answers,
        strict=True,
    ):
        wanted = {Labels({pod: n}): f"{stat}[{n}]" for n in names}
        measured = r.measure_by(wanted, expr, (pod,), unit.split("/")[0], answer=answer)
        rate = "output_tokens_per_second" if stat == "output_tokens" else "requests_per_second"
        parts.append(
            {
                g[pod]: _replica_rate(r, spans, g[pod], f"{rate}[{g[pod]}]", unit, m)
                for g, m in measured.items()
            }
        )
    return {n: (parts[0][n], parts[1][n]) for n in names}


def _replica_rate(
    r: Reading, spans: Covered, name: str, statistic: str, unit: str, total: Measurement
) -> Measurement:
    """``total`` (one replica's increase) per second of the replica's covered span."""
    own = spans.by_replica.get(name)
    w = spans.seconds if own is None else own.seconds
    rate = derive(
        statistic,
        _per_second(total.value or 0.0, w),
        unit,
        [total],
        f"{total.statistic} / {w:g} s (the seconds its series cover)",
        (WALL_CLOCK, EXTRAPOLATED),
    )
    note = None if own is None else coverage_note(r, (own,), who=name)
    if note is None:
        return rate
    return rate.model_copy(update={"annotations": (*rate.annotations, note)})


def replicas_seen(r: Reading, family: Family) -> Measurement:
    """Number of distinct pods with samples of ``family`` in the window (unit: replicas).

    The pod label is resolved among :data:`~inference_obs.metrics.dcgm.POD_LABELS`
    (falling back to ``instance``); ``no_data`` when the family has no series.
    """
    selector = family.select(r.matchers)
    available = {name for one in r.series(selector) for name in one}
    try:
        pod = resolve_label((*dcgm.POD_LABELS, "instance"), available)
    except NoDataError:
        pod = "instance"
    expr = count_over_time(selector.over(r.seconds)).count(by=(pod,)).count()
    return r.measure("replicas_seen", expr, "replicas")


class ThroughputResult(AnalysisResult):
    """Token and request throughput of one deployment over one window.

    Attributes
    ----------
    regime
        What limited the output; :attr:`regime_reason` says why.
    per_replica
        Per replica: its output tokens/s and finished requests/s (wall clock).
    """

    output_tokens: Measurement
    prompt_tokens: Measurement
    finished_requests: Measurement
    output_tokens_per_second: Measurement
    requests_per_second: Measurement
    per_replica: dict[str, tuple[Measurement, Measurement]]
    replicas_seen: Measurement
    output_tokens_per_second_per_replica: Measurement
    output_tokens_per_gpu_hour: Measurement
    waiting_sample_share: Measurement
    waiting_max: Measurement
    kv_cache_usage_max: Measurement
    regime: Regime
    regime_reason: str


def _waiting_share(r: Reading) -> Measurement:
    """Share (0-1) of waiting-queue samples above 0: raw per scrape, or per tile by the server."""
    family = vllm.NUM_REQUESTS_WAITING
    share, asked, how = positive_share(r.source, family.select(r.matchers), r.window, r.step)
    caveat = (
        "Sampled every scrape: a queue between two scrapes is not seen."
        if r.step is None
        else f"Per {r.step:g} s tile: a tile counts once, however many of its scrapes saw a queue."
    )
    return r.local(
        "waiting_sample_share",
        share,
        "ratio",
        reads=asked,
        computation=how,
        caveats=(caveat,),
        missing=[family],
    )


class ThroughputSettings(Settings):
    """When the deployment counts as capacity-limited."""

    queue_share_threshold: float = Field(
        0.05,
        ge=0,
        le=1,
        description="Share (ratio 0-1) of scrapes (or tiles) with a non-empty waiting queue "
        "from which the deployment counts as capacity-limited.",
    )
    kv_full: float = Field(
        0.99, gt=0, le=1, description="KV-cache usage (ratio 0-1) that counts as full."
    )


def _totals(r: Reading) -> dict[Family, Expr]:
    """The window's increase of each token and request counter, summed over replicas."""
    families = (vllm.GENERATION_TOKENS, vllm.PROMPT_TOKENS, vllm.REQUEST_SUCCESS)
    return {family: b.increase_total(family, r.matchers, r.seconds) for family in families}


def _maxima(r: Reading) -> dict[Family, Expr]:
    """The window's highest waiting queue and KV-cache usage."""
    families = (vllm.NUM_REQUESTS_WAITING, vllm.KV_CACHE_USAGE)
    return {family: b.maximum(family, r.matchers, r.seconds) for family in families}


def _first_questions(r: Reading, settings: ThroughputSettings) -> list[Expr]:
    """The totals and maxima :func:`_throughput` asks first, in one query."""
    return [*_totals(r).values(), *_maxima(r).values()]


def _throughput(r: Reading, settings: ThroughputSettings) -> ThroughputResult:
    """Throughput of the deployment over the window.

    Every query is evaluated at the window's end over its length; the
    waiting queue is counted over raw samples, or over tiles of ``r.step``
    seconds (see :mod:`~inference_obs.reading.resolution`). Increases in
    tokens and requests (fractional estimates), the wall-clock output rate in
    tokens/s, its per-replica mean, tokens per GPU-hour, and the
    demand/capacity classification with its evidence.
    """
    # The replicas and the waiting share alongside one request for every other number.
    replicas_asked = r.soon(partial(replicas_seen, r, vllm.GENERATION_TOKENS))
    # The spans (raw app samples) alongside too: the replicas' rates read them as well,
    # and the source asks a question in flight once.
    spans_asked = r.soon(partial(covered, r))
    by_replica = r.soon(partial(rates_by_replica, r))
    share_asked = r.soon(partial(_waiting_share, r))
    totals, maxima = _totals(r), _maxima(r)
    exprs = [*totals.values(), *maxima.values()]
    answers = dict(zip(exprs, r.ask(exprs), strict=True))

    def run(statistic: str, family: Family, unit: str, caveats: Sequence[str]) -> Measurement:
        expr = totals[family] if family in totals else maxima[family]
        return r.measure(statistic, expr, unit, caveats=caveats, answer=answers[expr])

    output = run("output_tokens", vllm.GENERATION_TOKENS, "tokens", (EXTRAPOLATED,))
    prompt = run("prompt_tokens", vllm.PROMPT_TOKENS, "tokens", (EXTRAPOLATED,))
    engine_finished = (
        "Requests the engine finished for any reason (stop, length, abort, error); "
        "not validated client success."
    )
    finished = run(
        "finished_requests", vllm.REQUEST_SUCCESS, "requests", (EXTRAPOLATED, engine_finished)
    )
    replicas, pods, spans = replicas_asked.result(), by_replica.result(), spans_asked.result()
    rate, requests_rate, per_replica, per_gpu_hour = _rates(
        output, finished, replicas, spans, r.deployment.hardware.gpus_per_replica
    )
    if spans.note is not None:  # over a span shorter than the window: see _over_span
        rate = _over_span("output_tokens_per_second", rate, output, pods, 0, spans)
        requests_rate = _over_span("requests_per_second", requests_rate, finished, pods, 1, spans)
    share = share_asked.result()
    sampled = "A sampled maximum: a peak between two scrapes is not seen."
    waiting_max = run("waiting_max", vllm.NUM_REQUESTS_WAITING, "requests", (sampled,))
    in_use = "Fraction of logical KV blocks in use (1 = full), sampled."
    kv_max = run("kv_cache_usage_max", vllm.KV_CACHE_USAGE, "ratio", (in_use,))
    counted = "scrapes" if r.step is None else f"{r.step:g} s tiles"
    regime, reason = _classify(
        share, kv_max, settings.queue_share_threshold, settings.kv_full, counted
    )
    if regime is Regime.DEMAND_LIMITED:
        rate, per_replica, requests_rate = (
            m.model_copy(update={"caveats": (*m.caveats, FLOOR)})
            for m in (rate, per_replica, requests_rate)
        )
    return ThroughputResult(
        output_tokens=output,
        prompt_tokens=prompt,
        finished_requests=finished,
        output_tokens_per_second=rate,
        requests_per_second=requests_rate,
        per_replica=pods,
        replicas_seen=replicas,
        output_tokens_per_second_per_replica=per_replica,
        output_tokens_per_gpu_hour=per_gpu_hour,
        waiting_sample_share=share,
        waiting_max=waiting_max,
        kv_cache_usage_max=kv_max,
        regime=regime,
        regime_reason=reason,
    )


def _rates(
    output: Measurement,
    finished: Measurement,
    replicas: Measurement,
    spans: Covered,
    gpus_per_replica: int,
) -> tuple[Measurement, Measurement, Measurement, Measurement]:
    """Output tokens/s, requests/s, tokens/s per replica and tokens per GPU-hour: the totals
    over the deployment's covered span (seconds), the per-replica figures over its
    replica-seconds (see the module docstring)."""
    out, n = output.value or 0.0, replicas.value or math.nan
    w, rs = spans.seconds, spans.replica_seconds(n)
    rate = derive(
        "output_tokens_per_second",
        _per_second(out, w),
        "tokens/s",
        [output],
        f"output_tokens / {w:g} s covered",
        (WALL_CLOCK,),
    )
    requests_rate = derive(
        "requests_per_second",
        _per_second(finished.value or 0.0, w),
        "requests/s",
        [finished],
        f"finished_requests / {w:g} s covered",
        (WALL_CLOCK,),
    )
    per_replica = derive(
        "output_tokens_per_second_per_replica",
        _per_second(out, rs),
        "tokens/s",
        [output, replicas],
        f"output_tokens / {rs:g} replica-seconds covered",
        (WALL_CLOCK, "A mean over the replicas seen, not any one replica's rate."),
    )
    per_gpu_hour = derive(
        "output_tokens_per_gpu_hour",
        _per_second(out, gpus_per_replica * rs / 3600.0),
        "tokens/GPU-hour",
        [output, replicas],
        f"output_tokens / ({gpus_per_replica} GPUs/replica x {rs / 3600.0:g} replica-hours "
        "covered)",
        (WALL_CLOCK, "GPUs are as declared per replica, not verified from DCGM."),
    )
    noted = spans.noted
    return noted(rate), noted(requests_rate), noted(per_replica), noted(per_gpu_hour)


def _over_span(
    statistic: str,
    rate: Measurement,
    total: Measurement,
    pods: dict[str, tuple[Measurement, Measurement]],
    which: int,
    spans: Covered,
) -> Measurement:
    """The deployment's rate over a covered span shorter than the window, from its replicas.

    Each replica's increase covers its own span; replicas scraped at other phases begin
    theirs up to a scrape interval apart, so the total increase over the union of the
    spans would miss what each did before its first scrape. Instead: the sum over
    replicas of each one's rate (``pods[name][which]``) x the seconds it covers of the
    deployment's span (:attr:`Covered.together`), over the covered seconds. ``rate``
    (``total`` over the covered seconds) where a replica's rate or span is unknown.
    """
    parts = {name: pair[which] for name, pair in pods.items()}
    if not parts or any(p.value is None or name not in spans.together for name, p in parts.items()):
        return rate
    w = spans.seconds
    value = sum((p.value or 0.0) * spans.together[n].seconds for n, p in parts.items()) / w
    made = derive(
        statistic,
        value,
        rate.unit,
        [total, *parts.values()],
        f"sum over replicas of {statistic}[replica] x the seconds it covers of the "
        f"deployment's span, / {w:g} s covered",
        rate.caveats,
    )
    return made.model_copy(update={"annotations": rate.annotations})


def _classify(
    share: Measurement, kv_max: Measurement, threshold: float, kv_full: float, counted: str
) -> tuple[Regime, str]:
    reasons = []
    if share.value is not None and share.value > threshold:
        reasons.append(
            f"the waiting queue was > 0 in {share.value:.1%} of {counted} "
            f"(threshold {threshold:.0%})"
        )
    if kv_max.value is not None and kv_max.value >= kv_full:
        reasons.append(f"KV-cache usage reached {kv_max.value:.3f} (full at {kv_full:g})")
    if reasons:
        return Regime.CAPACITY_LIMITED, "; ".join(reasons)
    if share.value is None or kv_max.value is None:
        gaps = [m.statistic for m in (share, kv_max) if m.value is None]
        return Regime.UNKNOWN, f"no data for {', '.join(gaps)}: no classification"
    return Regime.DEMAND_LIMITED, (
        f"the waiting queue was > 0 in {share.value:.1%} of {counted} (threshold "
        f"{threshold:.0%}) and KV-cache usage peaked at {kv_max.value:.3f}: {FLOOR}"
    )


throughput = Analysis(
    name="throughput",
    title="Throughput",
    entry=_throughput,
    result=ThroughputResult,
    settings=ThroughputSettings,
    summary="Tokens and requests served, rates per replica and GPU-hour, demand or capacity.",
    questions=_first_questions,
)
