"""One reading per deployment: what limited it over the window, from the results that judge it.

Throughput, queueing, the GPUs' bottleneck and the stage boundaries each
read one side of a deployment, with their own lines; read side by side they
can disagree (a queue share over the line says "capacity" while the GPUs
idle). :func:`judge` reads those results of one run
(:class:`~inference_obs.analyses.run.DeploymentResults`, never the source)
and reconciles them into one :class:`RegimeResult`: a reading, the evidence
for it and the evidence against it (each a sentence with its numbers and the
Measurement keys it rests on), and the step it suggests. Every section that
names a regime quotes this reading; the analyses' own numbers stay theirs.

The rules, in the order they are applied:

- **unknown**: throughput could not classify (no queue or KV-cache series),
  or no app row had a GPU reading aligned: nothing is claimed;
- **host-starved / transfer-starved / starved**: the stage boundaries read
  ``starved`` (sustained intervals of work beside idle GPUs), named by the
  cause of its sustained intervals where they name one alone (host, or
  transfer); with several causes, or none explained, plain starved. When
  more than a third of the waiting requests (below) were on busy GPUs as
  well, the deployment is **mixed**: both need reading;
- **demand-limited**: no queue beyond throughput's line and the KV cache
  never full: the deployment served what it was sent;
- with a queue, the rows that had one are weighed by the requests waiting in
  them (so a row that caught a burst at 19 waiting outweighs one at 1, and a
  row the alignment of app and GPU scrapes moves between classes moves
  little). A row's GPUs are busy at or above queueing's busy threshold and
  idle below it; a row where every GPU read 0 while work was there counts as
  idle;
- **capacity-limited** needs queues WITH busy GPUs: at least :data:`MOSTLY`
  of the waiting requests were in rows with busy GPUs, and the GPUs were
  busy on average (or the boundaries read ``saturated``); with the GPUs idle
  on average, the same queue is **capacity-limited in bursts**. A KV cache
  that filled (throughput's default line) with no queued row aligned is
  capacity-limited too;
- queues beside idle GPUs are never capacity: when at least :data:`MOSTLY`
  of the waiting requests were in rows with idle GPUs, the deployment is
  **stalled** if those rows form one run of at most :data:`STALL_SECONDS`
  (one short stall), else **starved**, named host- or transfer-starved
  where the boundary intervals name that cause alone;
- **mixed** otherwise: queues of both kinds, neither holding :data:`MOSTLY`.

Advice follows the facts: "batch more" only when the KV cache stayed mostly
free and the queues were not beside idle GPUs; "fewer replicas" only for a
deployment with more than one replica whose GPUs were underused; queues
beside idle GPUs ask for profiling before any GPU is added.

The evidence is gathered by the functions of :data:`WEIGHERS`, each reading
one part of the run; a further source of evidence (a time line of events,
say) joins the reading by adding its function there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.bottleneck import (
    BATCH_MORE,
    PROFILE_FIRST,
    RECLAIM_KV,
    BottleneckClass,
    bottleneck,
)
from inference_obs.analyses.boundaries import BoundaryCause, CapacityReading, boundaries
from inference_obs.analyses.gpu import gpu
from inference_obs.analyses.queueing import queueing
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.throughput import Regime, ThroughputSettings, throughput

__all__ = [
    "LABELS",
    "MOSTLY",
    "STALL_SECONDS",
    "WEIGHERS",
    "Evidence",
    "Queued",
    "RegimeReading",
    "RegimeResult",
    "Weight",
    "classify",
    "judge",
    "queued_rows",
]

#: Share of the waiting requests that makes one kind of queue the deployment's: two thirds,
#: so that a reading never rests on a bare majority of a handful of rows.
MOSTLY = 2 / 3
#: Longest run, seconds, of consecutive rows (app scrapes, or tiles) with a queue beside idle
#: GPUs that still reads as one stall (a scheduler hold, a slow external-cache fetch): three
#: scrapes at the usual 60 s; longer is a lasting starvation.
STALL_SECONDS = 180.0
#: Stalls named in a sentence before "and N more": a report stays flat in fleet size.
NAMED = 3
#: The step a deployment that served its demand needs: none.
NO_CHANGE = "no capacity change"
#: The step for a queue that grew only in bursts.
ABSORB_BURSTS = "absorb bursts"


class RegimeReading(StrEnum):
    """What limited a deployment over the window: the one reading every section quotes."""

    CAPACITY_LIMITED = "capacity_limited"
    BURST_LIMITED = "burst_limited"
    DEMAND_LIMITED = "demand_limited"
    HOST_STARVED = "host_starved"
    TRANSFER_STARVED = "transfer_starved"
    STARVED = "starved"
    STALLED = "stalled"
    MIXED = "mixed"
    UNKNOWN = "unknown"


#: Each reading in the words the report shows.
LABELS = {
    RegimeReading.CAPACITY_LIMITED: "capacity-limited",
    RegimeReading.BURST_LIMITED: "capacity-limited in bursts",
    RegimeReading.DEMAND_LIMITED: "demand-limited",
    RegimeReading.HOST_STARVED: "host-starved",
    RegimeReading.TRANSFER_STARVED: "transfer-starved",
    RegimeReading.STARVED: "starved",
    RegimeReading.STALLED: "stalled",
    RegimeReading.MIXED: "mixed",
    RegimeReading.UNKNOWN: "unknown",
}
_QUEUED = frozenset(LABELS) - {RegimeReading.DEMAND_LIMITED, RegimeReading.UNKNOWN}
_CAPACITY = frozenset({RegimeReading.CAPACITY_LIMITED, RegimeReading.BURST_LIMITED})
_IDLE = frozenset(
    {
        RegimeReading.HOST_STARVED,
        RegimeReading.TRANSFER_STARVED,
        RegimeReading.STARVED,
        RegimeReading.STALLED,
    }
)


class Evidence(BaseModel):
    """One sentence of evidence, with its numbers, and the Measurement keys it rests on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    keys: tuple[str, ...]


class RegimeResult(BaseModel):
    """The one reading of a deployment, with the evidence for and against it.

    Attributes
    ----------
    deployment
        Whose.
    reading
        The reading (see the module's rules).
    evidence, against
        Sentences with their numbers and keys that support the reading, and
        that weigh against it (never dropped: a reading says what it overrules).
    action, advice
        The step the reading suggests, and why, as one sentence with its numbers.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    deployment: str
    reading: RegimeReading
    evidence: tuple[Evidence, ...]
    against: tuple[Evidence, ...] = Field(description="Evidence the reading overrules.")
    action: str
    advice: str

    @property
    def label(self) -> str:
        """The reading in the report's words (``capacity-limited in bursts``)."""
        return LABELS[self.reading]


@dataclass(frozen=True, slots=True)
class Queued:
    """What the queueing rows with a queue and a GPU reading say, weighed by requests waiting.

    Attributes
    ----------
    rows, queued
        Rows with a GPU reading; of them, rows with requests waiting.
    busy_rows, idle_rows
        Rows with a queue whose GPUs were busy (at or above the threshold) or idle.
    busy_depth, idle_depth
        Requests waiting summed over those rows (request-rows).
    stalls
        Rows with a queue while every GPU read 0 and work was there: time, requests waiting.
    idle_runs, longest_idle_run
        Runs of consecutive rows with a queue beside idle GPUs, and the longest (rows).
    """

    rows: int
    queued: int
    busy_rows: int
    idle_rows: int
    busy_depth: float
    idle_depth: float
    stalls: tuple[tuple[datetime, float], ...]
    idle_runs: int
    longest_idle_run: int

    @property
    def busy_share(self) -> float | None:
        """Share (0-1) of the waiting requests in rows with busy GPUs; None without a queue."""
        total = self.busy_depth + self.idle_depth
        return self.busy_depth / total if total else None


def _runs(mask: np.ndarray) -> tuple[int, int]:
    """How many runs of consecutive True a boolean array holds, and the longest's length.

    Examples
    --------
    >>> _runs(np.array([True, True, False, True, False]))
    (2, 2)
    """
    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return len(starts), int((ends - starts).max(initial=0))


def queued_rows(d: DeploymentResults) -> Queued:
    """Count the queueing analysis's rows with a queue by their GPUs, busy or idle.

    Rows without a GPU reading are left out (they neither start nor end a run). A row
    with work running while every GPU read 0 (queueing's ``inconsistent``) counts as idle
    whatever the busy threshold.
    """
    q = d.of(queueing)
    rows = busy_rows = idle_rows = runs = longest = 0
    busy_depth = idle_depth = 0.0
    stalls: list[tuple[datetime, float]] = []
    zone = d.window.start.tzinfo
    for one in q.rows:
        seen = ~np.isnan(one.gpu_util)
        waiting, util, t = one.waiting[seen], one.gpu_util[seen], one.t[seen]
        idle = (util < q.busy_threshold) | ((util == 0) & (one.running[seen] > 0))
        beside, on = (waiting > 0) & idle, (waiting > 0) & ~idle
        rows += int(seen.sum())
        busy_rows, busy_depth = busy_rows + int(on.sum()), busy_depth + float(waiting[on].sum())
        idle_rows += int(beside.sum())
        idle_depth += float(waiting[beside].sum())
        count, length = _runs(beside)
        runs, longest = runs + count, max(longest, length)
        # Work there and every GPU at 0: the GPUs were not even asked.
        for k in np.flatnonzero(beside & (util == 0)):
            stalls.append((datetime.fromtimestamp(float(t[k]), tz=zone), float(waiting[k])))
    return Queued(
        rows=rows,
        queued=busy_rows + idle_rows,
        busy_rows=busy_rows,
        idle_rows=idle_rows,
        busy_depth=busy_depth,
        idle_depth=idle_depth,
        stalls=tuple(sorted(stalls)),
        idle_runs=runs,
        longest_idle_run=longest,
    )


@dataclass(frozen=True, slots=True)
class Weight:
    """One piece of evidence and the readings it supports and opposes.

    A weight neither supports nor opposes a reading is left out of that reading's lists.
    """

    text: str
    keys: tuple[str, ...]
    supports: frozenset[RegimeReading]
    opposes: frozenset[RegimeReading] = frozenset()


Weigher = Callable[[DeploymentResults], Iterable[Weight]]


def _rows_word(d: DeploymentResults) -> str:
    return "scrapes" if d.step_seconds is None else "tiles"


def _clock(moment: datetime) -> str:
    """A time of day to the second, rounded as the report's tables round it."""
    return f"{moment + timedelta(microseconds=500_000):%H:%M:%S}"


def _pct(value: float) -> str:
    """A share (0-1) as a percent to three significant digits: ``0.1561`` reads ``15.6 %``."""
    return f"{100 * value:.3g} %"


def _queue(d: DeploymentResults) -> Iterator[Weight]:
    """Whether requests waited, by throughput's line for a queue (or a full KV cache)."""
    t, q = d.of(throughput), d.of(queueing)
    share = t.waiting_sample_share
    if share.value is None:
        return
    peak = ""
    if q.peak_waiting.value and q.peak_time is not None:
        peak = f" (peak {q.peak_waiting.value:g} waiting at {_clock(q.peak_time)})"
    keys = (share.key, q.peak_waiting.key)
    if t.regime is Regime.CAPACITY_LIMITED:
        text = f"Requests waited in {_pct(share.value)} of its {_rows_word(d)}{peak}."
        yield Weight(text, keys, _QUEUED, frozenset({RegimeReading.DEMAND_LIMITED}))
    else:
        text = f"Requests waited in only {_pct(share.value)} of its {_rows_word(d)}{peak}."
        if share.value == 0:  # a queue between scrapes is not seen: say what was read
            text = f"None of its {_rows_word(d)} saw a request waiting."
        yield Weight(text, keys, frozenset({RegimeReading.DEMAND_LIMITED}), _QUEUED)


def _kv(d: DeploymentResults) -> Iterator[Weight]:
    """Whether the KV cache filled: a full cache is capacity (of memory), queue or not."""
    kv = d.of(throughput).kv_cache_usage_max
    if kv.value is None:
        return
    # The throughput result keeps its reading, not its line: the default line is read here.
    if kv.value >= ThroughputSettings().kv_full:
        text = f"The KV cache filled (peak {_pct(kv.value)} of its blocks in use)."
        yield Weight(text, (kv.key,), _CAPACITY, _IDLE | {RegimeReading.DEMAND_LIMITED})
    else:
        text = f"The KV cache never filled (peak {_pct(kv.value)} of its blocks in use)."
        yield Weight(text, (kv.key,), frozenset({RegimeReading.DEMAND_LIMITED}))


def _queue_gpus(d: DeploymentResults) -> Iterator[Weight]:
    """The rows with a queue, by whether their GPUs were busy: capacity needs busy GPUs."""
    q, found = d.of(queueing), queued_rows(d)
    share, rows, line = found.busy_share, _rows_word(d), f"{q.busy_threshold:g} %"
    table = q.waiting_idle
    if found.busy_rows and share is not None:
        yield Weight(
            f"{found.busy_rows} of the {found.queued} {rows} with a queue had busy GPUs (at or "
            f"above {line}), holding {_pct(share)} of the requests seen waiting.",
            (table.waiting_busy.key, table.waiting_idle.key),
            _CAPACITY | {RegimeReading.MIXED},
            _IDLE,
        )
    if found.idle_rows and share is not None:
        stalls = ""
        if found.stalls:
            # A fleet can stall many times: the first few named, the rest counted.
            at = ", ".join(f"{_clock(t)} ({w:g} waiting)" for t, w in found.stalls[:NAMED])
            if len(found.stalls) > NAMED:
                at += f" and {len(found.stalls) - NAMED} more"
            stalls = f"; every GPU read 0 % at {at}: a stall, not capacity"
        yield Weight(
            f"{found.idle_rows} of the {found.queued} {rows} with a queue had idle GPUs (under "
            f"{line}), holding {_pct(1 - share)} of the requests seen waiting{stalls}.",
            (table.waiting_idle.key, table.waiting_busy.key),
            _IDLE | {RegimeReading.MIXED},
            _CAPACITY,
        )


def _gpus_busy(d: DeploymentResults) -> Iterator[Weight]:
    """The GPUs' mean utilisation against queueing's busy line."""
    util, line = d.of(gpu).utilization_mean, d.of(queueing).busy_threshold
    if util.value is None:
        return
    if util.value >= line:
        text = (
            f"The GPUs averaged {util.value:.3g} % utilisation, at or above the {line:g} % busy "
            "line: busy most of the window."
        )
        others = _IDLE | {RegimeReading.BURST_LIMITED, RegimeReading.DEMAND_LIMITED}
        yield Weight(text, (util.key,), frozenset({RegimeReading.CAPACITY_LIMITED}), others)
    else:
        text = (
            f"The GPUs averaged {util.value:.3g} % utilisation, under the {line:g} % busy line: "
            "idle most of the window."
        )
        fits = _IDLE | {RegimeReading.BURST_LIMITED, RegimeReading.DEMAND_LIMITED}
        yield Weight(text, (util.key,), fits, frozenset({RegimeReading.CAPACITY_LIMITED}))


def _boundaries(d: DeploymentResults) -> Iterator[Weight]:
    """The stage boundaries: sustained work beside idle GPUs, or saturated GPUs."""
    b = d.of(boundaries)
    keys = (b.duty_cycle.key,)
    duty = f"duty cycle {b.duty_cycle.value:.3g}" if b.duty_cycle.value is not None else ""
    starved = {RegimeReading.STARVED, RegimeReading.HOST_STARVED, RegimeReading.TRANSFER_STARVED}
    if b.reading is CapacityReading.STARVED:
        text = f"The stage boundaries found sustained work beside idle GPUs ({b.reason})."
        fits = frozenset({*starved, RegimeReading.MIXED})
        yield Weight(text, keys, fits, _CAPACITY | {RegimeReading.DEMAND_LIMITED})
    elif b.reading is CapacityReading.SATURATED:
        text = f"The stage boundaries read the GPUs saturated ({b.reason})."
        yield Weight(text, keys, frozenset({RegimeReading.CAPACITY_LIMITED}), _IDLE)
    elif b.reading is CapacityReading.HEALTHY:
        brief = f"{len(b.intervals)} shorter interval(s)" if b.intervals else ""
        detail = "; ".join(part for part in (duty, brief) if part)
        text = "The stage boundaries found no sustained interval of work beside idle GPUs"
        text += f" ({detail})." if detail else "."
        yield Weight(text, keys, _CAPACITY | {RegimeReading.DEMAND_LIMITED}, frozenset(starved))


def _bound(d: DeploymentResults) -> Iterator[Weight]:
    """What the profiling counters say bounds busy GPUs, where they are exported."""
    b = d.of(bottleneck)
    if b.classification in (BottleneckClass.BANDWIDTH_BOUND_DECODE, BottleneckClass.COMPUTE_BOUND):
        text = (
            f"The profiling counters read {b.classification.value.replace('_', ' ')} ({b.reason})."
        )
        yield Weight(text, (b.dram_active.key, b.tensor_active.key), _CAPACITY)


#: Where the evidence comes from, in the order it is listed. A further source of evidence (a
#: time line of the window's events, say) adds its function here.
WEIGHERS: tuple[Weigher, ...] = (_queue, _queue_gpus, _gpus_busy, _kv, _boundaries, _bound)


def _starved(d: DeploymentResults) -> RegimeReading:
    """Starved, named by what the boundary intervals (sustained ones first) waited on: the
    host or transfers when that is their only named cause, else plain starved."""
    found = d.of(boundaries).intervals
    sustained = [i for i in found if i.sustained] or list(found)
    causes = {i.cause for i in sustained}
    if causes == {BoundaryCause.HOST}:
        return RegimeReading.HOST_STARVED
    if causes == {BoundaryCause.TRANSFER}:
        return RegimeReading.TRANSFER_STARVED
    return RegimeReading.STARVED


def classify(d: DeploymentResults) -> RegimeReading:
    """The deployment's reading, by the rules of the module docstring."""
    t, b = d.of(throughput), d.of(boundaries)
    found = queued_rows(d)
    if t.regime is Regime.UNKNOWN or not found.rows:
        return RegimeReading.UNKNOWN
    share = found.busy_share
    if b.reading is CapacityReading.STARVED:
        # Sustained work beside idle GPUs; a queue mostly on busy GPUs as well makes it mixed.
        queued_busy = t.regime is Regime.CAPACITY_LIMITED and (share or 0.0) > 1 - MOSTLY
        return RegimeReading.MIXED if queued_busy else _starved(d)
    if t.regime is Regime.DEMAND_LIMITED:
        return RegimeReading.DEMAND_LIMITED
    if share is None:  # over the line by a full KV cache alone, or no queued row aligned
        kv = t.kv_cache_usage_max.value
        full = kv is not None and kv >= ThroughputSettings().kv_full
        return RegimeReading.CAPACITY_LIMITED if full else RegimeReading.UNKNOWN
    if share >= MOSTLY:
        util = d.of(gpu).utilization_mean.value
        busy = util is not None and util >= d.of(queueing).busy_threshold
        if busy or b.reading is CapacityReading.SATURATED:
            return RegimeReading.CAPACITY_LIMITED
        return RegimeReading.BURST_LIMITED
    if share <= 1 - MOSTLY:
        lasted = found.longest_idle_run * d.of(queueing).row_seconds
        if found.idle_runs == 1 and lasted <= STALL_SECONDS:
            return RegimeReading.STALLED
        return _starved(d)
    return RegimeReading.MIXED


def _advice(d: DeploymentResults, reading: RegimeReading) -> tuple[str, str]:
    """The step ``reading`` suggests for this deployment, and why, with its numbers."""
    t, bn = d.of(throughput), d.of(bottleneck)
    util, kv = d.of(gpu).utilization_mean.value, t.kv_cache_usage_max.value
    free = kv is not None and kv < bn.thresholds.kv_free_below
    peak = "no KV-cache usage data" if kv is None else f"KV cache peak {_pct(kv)} used"
    mean = "no utilisation data" if util is None else f"{util:.3g} % mean utilisation"
    if reading is RegimeReading.CAPACITY_LIMITED:
        if bn.classification in (
            BottleneckClass.BANDWIDTH_BOUND_DECODE,
            BottleneckClass.COMPUTE_BOUND,
        ):
            return bn.action, bn.advice
        if free:
            return BATCH_MORE, (
                f"Requests waited while the GPUs were busy and the KV cache stayed mostly free "
                f"({peak}): batch more (more concurrent requests per replica) before adding GPUs."
            )
        return RECLAIM_KV, (
            f"Requests waited while the GPUs were busy and the KV cache filled ({peak}): "
            "reclaim KV memory (FP8 KV cache, prefix reuse) or add replicas."
        )
    if reading is RegimeReading.BURST_LIMITED:
        why = f"The queue grew in bursts on busy GPUs that idled otherwise ({mean})"
        if free:
            return BATCH_MORE, (
                f"{why}: batch more per replica ({peak}) or scale on queue depth, rather than "
                "adding GPUs that would idle between bursts."
            )
        return ABSORB_BURSTS, (
            f"{why}: scale on queue depth or smooth the bursts, rather than adding GPUs that "
            "would idle between bursts."
        )
    if reading is RegimeReading.DEMAND_LIMITED:
        said = "It served the demand it was sent: its rates are a floor, not a capacity"
        replicas = int(t.replicas_seen.value or 0)
        if util is not None and util < bn.thresholds.util_low and replicas > 1:
            said += f"; its {replicas} replicas averaged {mean}: fewer replicas could carry it"
        elif util is not None and util >= d.of(queueing).busy_threshold:
            said += f"; its GPUs were busy ({mean}): more demand would soon queue"
        return NO_CHANGE, said + "."
    return PROFILE_FIRST, _idle_advice(d, reading)


def _idle_advice(d: DeploymentResults, reading: RegimeReading) -> str:
    """Why a queue beside idle GPUs (or no reading) asks for profiling first."""
    if reading is RegimeReading.UNKNOWN:
        return (
            "Not enough aligned queue, KV-cache and GPU data to say what limited it: check the "
            "series before sizing it."
        )
    if reading is RegimeReading.MIXED:
        return (
            "Requests waited both on busy GPUs and beside idle ones: find what held the idle "
            "rows (host, transfers, scheduler) before adding GPUs, which would idle the same way."
        )
    if reading is RegimeReading.STALLED:
        return (
            "Requests waited beside idle GPUs in one short run: a stall (scheduler, host or an "
            "external cache), not capacity; find its cause before adding GPUs."
        )
    named = {
        BoundaryCause.HOST: "the host (CPU, tokenisation, scheduling)",
        BoundaryCause.TRANSFER: "host-device transfers",
    }
    seen = {i.cause for i in d.of(boundaries).intervals}
    on = " and on ".join(text for cause, text in named.items() if cause in seen)
    on = on or "something the exported series do not show"
    return (
        f"Requests waited beside idle GPUs: the GPUs wait on {on}; re-place that work and "
        "profile before adding GPUs, which would wait the same way."
    )


def judge(d: DeploymentResults) -> RegimeResult:
    """The deployment's one reading, with the evidence for and against it and its advice.

    Reads only ``d``'s results (throughput, queueing, GPU, bottleneck,
    boundaries); the same run always gives the same reading.
    """
    reading = classify(d)
    weights = [w for weigh in WEIGHERS for w in weigh(d)]
    action, advice = _advice(d, reading)
    return RegimeResult(
        deployment=d.deployment.name,
        reading=reading,
        evidence=tuple(
            Evidence(text=w.text, keys=w.keys) for w in weights if reading in w.supports
        ),
        against=tuple(Evidence(text=w.text, keys=w.keys) for w in weights if reading in w.opposes),
        action=action,
        advice=advice,
    )
