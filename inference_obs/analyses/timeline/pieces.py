"""Pieces of evidence for a time line, each read from one analysis's result of a deployment.

A piece is one stretch of time on one replica (or the whole deployment) that
one result shows: a run of scrapes with requests held on idle GPUs, a queue,
a boundary interval, a scrape gap, a GPU that stopped, a latency spike.
:mod:`~inference_obs.analyses.timeline.incidents` merges them into events.
Nothing here reads a source: only the results a run already holds.

Rules, each with its reason:

- **stall**: a run of rows where requests wait while the replica's GPUs read
  at or near 0% (:data:`NEAR_IDLE_PERCENT`) and at least
  :data:`HELD_AT_LEAST` requests are present. A stalled engine holds its
  running requests and new arrivals queue behind it, so requests *waiting*
  beside idle GPUs is the mark of a stall; requests running beside a GPU
  reading of 0 without a queue are as often scrapes of two independent
  targets that missed each other (the queueing analysis's ``inconsistent``).
  The rows around it that also had a queue belong to it, but held rows must
  be at least half of the run's rows with a GPU reading: a queue that mostly
  read busy GPUs is a queue on busy GPUs, and its one idle reading at the
  edge is most often a GPU sample taken before the requests arrived. A stall
  seen in one row only is confirmed by the latency spike that follows it, when
  the spike shows requests held at least half a row (or half a GPU scrape
  interval, when longer), the farthest the GPU reading beside the row may
  lie (:mod:`~inference_obs.analyses.timeline.incidents`, rule 4).
- **queue burst**: any other run of rows with requests waiting.
- **GPUs waiting**: a *sustained* boundary interval (work present, GPUs idle
  for several scrapes), with the cause the boundaries analysis gave it.
- **restart**: an app scrape gap on an instance whose counters reset; a
  reset without a gap is dated only to the window.
- **latency spike**: :func:`latency_spikes`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, tzinfo

import numpy as np

from inference_obs.analyses.boundaries import BoundariesResult, BoundaryCause
from inference_obs.analyses.collection import CollectionResult, ScrapeGap
from inference_obs.analyses.error_signals import ErrorsResult
from inference_obs.analyses.queueing import QueueingResult, QueueRows
from inference_obs.analyses.rolling import QuantileSeries, RollingQuantiles
from inference_obs.analyses.timeline.events import EventKind
from inference_obs.reading.result import format_number
from inference_obs.samples import Window

__all__ = [
    "HELD_AT_LEAST",
    "NEAR_IDLE_PERCENT",
    "SPIKE_FACTOR",
    "Piece",
    "Spike",
    "boundary_pieces",
    "collection_pieces",
    "latency_spikes",
    "queue_pieces",
    "spike_pieces",
    "xid_pieces",
]

#: Mean GPU_UTIL (percent, 0-100) at or below which a replica's GPUs count as doing
#: nothing: a GPU reading averages the exporter's collect interval, so the scrape at a
#: stall's edge reads a little above 0; misaligned scrapes move readings by a few percent.
NEAR_IDLE_PERCENT = 5.0
#: Requests (running + waiting) a stall row holds at least: one request waiting beside a
#: GPU reading of 0 is most often an arrival caught before its first step, beside a GPU
#: reading taken before it arrived.
HELD_AT_LEAST = 2.0
#: Rows holding requests on idle GPUs that show a stall alone; fewer need a latency
#: spike after them to be more than a possible stall (see :attr:`Piece.confirmed`).
STALL_CONFIRMED_ROWS = 2
#: How far above the window's median a rolling quantile must rise to be a spike: ten
#: times, an order of magnitude, so that the quantile's interpolation inside one bucket
#: (a factor of 2 to 2.5 between vLLM's bucket edges) cannot make one alone.
SPIKE_FACTOR = 10.0
#: Rolling points a spike needs the series to have: a median of fewer says little.
SPIKE_MIN_POINTS = 5
#: The quantile a spike is read from, where the rolling analysis computed it.
SPIKE_QUANTILE = 0.95


@dataclass(frozen=True, slots=True)
class Piece:
    """One stretch of evidence: ``replica`` ('' for the deployment), unix seconds."""

    kind: EventKind
    replica: str
    start: float
    end: float
    phrase: str
    keys: tuple[str, ...] = ()
    promql: tuple[str, ...] = ()
    #: Seconds before ``start`` the evidence covers: a rolling quantile's trailing window.
    reach: float = 0.0
    #: Whether the piece alone shows what its kind says. A stall seen in one row is not:
    #: the GPU reading is the sample nearest the scrape, up to a GPU scrape interval
    #: away, and requests that arrived after it meet a reading taken before them.
    confirmed: bool = True
    #: Whether the piece is an event only with a latency spike after it: requests seen
    #: running, none waiting, beside idle GPU readings, as a light load's requests are
    #: most often seen (a GPU_UTIL sample is an instant's, and most instants are idle).
    needs_spike: bool = False
    #: Whether the GPUs still read idle at the next row (or no reading says otherwise): a
    #: latency spike confirms a stall seen in one row only then, since the first scrape of a
    #: burst beside a stale idle reading is followed by busy GPUs and a spike of its own.
    idle_after: bool = True
    #: A stall seen in one row: how long a latency spike after it must show requests held
    #: (seconds) to confirm it. The GPU reading beside the row is the sample nearest it, up
    #: to half a row (or half a GPU scrape interval, when longer) away: only requests held
    #: that long were held while it was read. A
    #: shorter hold is a burst between two GPU samples (a fresh seed's 20 s of long prompts
    #: between samples a minute apart, read 0 % on both sides, with a 5-10 s P95 after it).
    needs_held_s: float = 0.0
    #: A latency spike in seconds: the least its peak's bucket says the slow requests took
    #: (the bucket's lower bound); 0 for a family in another unit.
    held_s: float = 0.0


def clock(t: float, zone: tzinfo | None) -> str:
    """A time of day to the second in ``zone`` (the date is the table's to say)."""
    return datetime.fromtimestamp(round(t), zone).strftime("%H:%M:%S")


def _span(start: float, end: float, zone: tzinfo | None, rows: int, unit: str) -> str:
    if rows == 1:
        return f"1 {unit} at {clock(end, zone)}"
    return f"{rows} {unit}s, {clock(start, zone)}-{clock(end, zone)}"


def _percent(value: float) -> str:
    return f"{format_number(value, 3)}%"


def _requests(count: float) -> str:
    return f"{format_number(count)} request{'' if count == 1 else 's'}"


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) indices of each run of True in ``mask``."""
    found, start = [], None
    for k, on in enumerate(mask.tolist()):
        if on and start is None:
            start = k
        if not on and start is not None:
            found.append((start, k - 1))
            start = None
    if start is not None:
        found.append((start, len(mask) - 1))
    return found


def _held(waiting: np.ndarray, running: np.ndarray, util: np.ndarray) -> np.ndarray:
    """Rows holding requests on idle GPUs; NaN (no GPU reading aligned) compares False."""
    present = np.nan_to_num(waiting) + np.nan_to_num(running)
    with np.errstate(invalid="ignore"):
        held: np.ndarray = (util <= NEAR_IDLE_PERCENT) & (present >= HELD_AT_LEAST)
    return held


def queue_pieces(q: QueueingResult, zone: tzinfo | None) -> list[Piece]:
    """Per replica, each run of rows with requests waiting, or held on idle GPUs: a stall
    or a queue burst. A stall may show no queue at all: requests admitted just before an
    engine hangs sit as running, and the scrapes either side of it see no waiting."""
    keys = (q.peak_waiting.key, q.gpu_alignment.key)
    unit = "scrape" if q.step_seconds is None else "tile"
    # A row's GPU reading is the one nearest it: up to half the longer interval away.
    reach = max(q.row_seconds, q.gpu_seconds) / 2
    return [
        _queue_run(rows, run, zone, unit, keys, reach_s=reach)
        for rows in q.rows
        for run in _queue_runs(rows)
    ]


def _queue_runs(rows: QueueRows) -> list[slice]:
    """Each run of a replica's rows with requests waiting, then each run of rows with
    requests held on idle GPUs and none waiting (evidence only with a spike after it)."""
    waiting = np.nan_to_num(rows.waiting) > 0
    quiet = _held(rows.waiting, rows.running, rows.gpu_util) & ~waiting
    return [slice(a, b + 1) for mask in (waiting, quiet) for a, b in _runs(mask)]


def _queue_run(
    rows: QueueRows,
    run: slice,
    zone: tzinfo | None,
    unit: str,
    keys: tuple[str, ...],
    *,
    reach_s: float = 0.0,
) -> Piece:
    """One run of rows with a queue: a stall where some row held requests on idle GPUs.

    ``reach_s``: how far from a row its GPU reading may lie (seconds), which a spike
    confirming a stall seen in one row must show requests held for."""
    waiting, running, util = rows.waiting[run], rows.running[run], rows.gpu_util[run]
    start, end = float(rows.begin[run][0]), float(rows.t[run][-1])
    held = _held(waiting, running, util)
    span = _span(start, end, zone, len(waiting), unit)
    # A queue whose rows mostly read busy GPUs is a queue on busy GPUs: an idle reading at
    # its edge is most often a GPU sample taken before the requests arrived.
    if held.any() and held.sum() >= np.isfinite(util).sum() / 2:
        ran, queued = float(running[held].max()), float(waiting[held].max())
        if not queued:
            present = f"{_requests(ran)} running, none waiting,"
        elif ran:
            present = f"{_requests(ran)} running and {format_number(queued)} waiting"
        else:
            present = f"{_requests(queued)} waiting"
        phrase = f"{present} while the GPUs read {_percent(float(util[held].max()))} ({span})"
        confirmed = int(held.sum()) >= STALL_CONFIRMED_ROWS
        # GPU_UTIL is an instant's sample: at a light load most read 0 beside requests
        # that ran between them. Without a queue, only a latency rise shows a stall.
        quiet = not (np.nan_to_num(waiting) > 0).any()
        # The next row's GPU reading: a stall keeps the GPUs idle past the scrape that saw
        # it; a burst's first scrape beside a stale reading is followed by busy GPUs.
        stop = run.stop if run.stop is not None else len(rows.gpu_util)
        later = float(rows.gpu_util[stop]) if stop < len(rows.gpu_util) else math.nan
        return Piece(
            EventKind.STALL,
            rows.replica,
            start,
            end,
            phrase,
            keys,
            confirmed=confirmed,
            needs_spike=quiet,
            idle_after=not later > NEAR_IDLE_PERCENT,
            needs_held_s=0.0 if confirmed else reach_s,
        )
    peak = int(np.argmax(waiting))
    readings = util[np.isfinite(util)]
    gpus = ""
    if readings.size:
        low, high = _percent(float(readings.min())), _percent(float(readings.max()))
        gpus = f", GPUs at {low}" if low == high else f", GPUs at {low} to {high}"
    phrase = (
        f"up to {_requests(float(waiting[peak]))} waiting (at "
        f"{clock(float(rows.t[run][peak]), zone)}){gpus} ({span})"
    )
    return Piece(EventKind.QUEUE_BURST, rows.replica, start, end, phrase, keys)


#: What the GPUs of a boundary interval waited on, by the cause the analysis gave it. An
#: unexplained interval is left out: with requests waiting it is a stall (the queue rows
#: show it), without it is most often a light load's short steps.
_CAUSES = {
    BoundaryCause.HOST: "waiting on the host CPUs",
    BoundaryCause.TRANSFER: "waiting on PCIe transfers",
}


def boundary_pieces(b: BoundariesResult) -> list[Piece]:
    """Each sustained boundary interval attributed to the host or to PCIe transfers."""
    keys = (b.duty_cycle.key,)
    out = []
    for i in b.intervals:
        if not i.sustained or i.cause not in _CAUSES:
            continue
        phrase = (
            f"the GPUs computed {_percent(100 * i.duty)} of the time over {i.samples} rows "
            f"with up to {_requests(i.max_running)} running and "
            f"{format_number(i.max_waiting)} waiting, {_CAUSES[i.cause]}"
        )
        start, end = i.start.timestamp(), i.end.timestamp()
        out.append(Piece(EventKind.GPUS_WAITING, i.replica, start, end, phrase, keys))
    return out


def _replica_of_gap(gap: ScrapeGap, q: QueueingResult) -> str | None:
    """The replica whose app scrapes the gap lies between, where its rows show it.

    The collection analysis names a gap by its scrape target (``instance``); the
    queueing rows, read from the same app scrapes, name the replica: the replica
    with two consecutive rows at the gap's two samples is the one.
    """
    first, after = gap.start.timestamp(), gap.end.timestamp()
    for rows in q.rows:
        times = rows.t
        k = int(np.searchsorted(times, first - 0.0005))
        if k + 1 < times.size and abs(times[k] - first) < 1e-3 and abs(times[k + 1] - after) < 1e-3:
            return rows.replica
    return None


def _resets(c: CollectionResult) -> dict[str, int]:
    """Instance -> counter resets seen on it, from the resets Measurement's annotation."""
    said = " ".join(a.message for a in c.counter_resets.annotations)
    found = {}
    for instance in c.app_samples:
        match = re.search(re.escape(instance) + r" \((\d+)\)", said)
        if match and int(match.group(1)) > 0:
            found[instance] = int(match.group(1))
    return found


def collection_pieces(c: CollectionResult, q: QueueingResult, window: Window) -> list[Piece]:
    """Scrape gaps, restarts, counter resets and GPUs that stopped or never reported."""
    zone, begin, end = window.start.tzinfo, window.start_s, window.end_s
    resets = _resets(c)
    gap_keys = (c.scrape_gaps.key,)
    out = []
    for gap in c.gaps:
        kind_of_target, _, target = gap.target.partition(" ")
        seconds = f"no sample of {gap.target} from {clock(gap.start.timestamp(), zone)} to "
        phrase = f"{seconds}{clock(gap.end.timestamp(), zone)} ({format_number(gap.seconds, 3)} s)"
        start, stop = gap.start.timestamp(), gap.end.timestamp()
        if kind_of_target != "app":
            out.append(Piece(EventKind.GPU_SCRAPE_GAP, target, start, stop, phrase, gap_keys))
            continue
        replica = _replica_of_gap(gap, q) or target
        if target in resets:
            phrase += f", and its counters reset ({resets.pop(target)} in the window)"
            keys = (*gap_keys, c.counter_resets.key)
            out.append(Piece(EventKind.RESTART, replica, start, stop, phrase, keys))
        else:
            out.append(Piece(EventKind.SCRAPE_GAP, replica, start, stop, phrase, gap_keys))
    for instance, count in resets.items():
        phrase = f"the counters of {instance} reset {count} times; when, no scrape gap shows"
        out.append(
            Piece(EventKind.COUNTER_RESET, instance, begin, end, phrase, (c.counter_resets.key,))
        )
    for gpu in c.stopped_gpus:
        last = gpu.last_sample.timestamp()
        phrase = f"{gpu.name} sent no utilisation sample after {clock(last, zone)}"
        out.append(Piece(EventKind.GPU_STOPPED, gpu.name, last, end, phrase, (c.gpus_stopped.key,)))
    for name in c.silent_gpus:
        phrase = f"{name} is seen in other DCGM families but sent no utilisation sample"
        out.append(Piece(EventKind.GPU_SILENT, name, begin, end, phrase, (c.gpus_silent.key,)))
    return out


def xid_pieces(e: ErrorsResult, window: Window) -> list[Piece]:
    """GPUs whose last Xid code is not 0: an error, dated only to the window."""
    out = []
    for name, m in e.xid_last_per_gpu.items():
        if m.ok and m.value:
            phrase = (
                f"{name}'s last Xid code was {format_number(m.value)}; DCGM keeps only the "
                "last code, not when"
            )
            out.append(
                Piece(EventKind.XID_ERROR, name, window.start_s, window.end_s, phrase, (m.key,))
            )
    return out


@dataclass(frozen=True, slots=True)
class Spike:
    """Consecutive rolling points above the spike line (unix seconds, the family's unit)."""

    first: float
    last: float
    peak: float
    peak_at: float
    median: float
    #: The bucket that must hold the quantile at the peak: the interpolated ``peak`` is
    #: only a point inside it.
    lower: float = 0.0
    upper: float = math.inf


def _series(rolling: RollingQuantiles) -> QuantileSeries | None:
    """The P95 series, else the highest quantile computed; None without one."""
    if not rolling.series:
        return None
    near = [s for s in rolling.series if np.isclose(s.quantile, SPIKE_QUANTILE)]
    return near[0] if near else max(rolling.series, key=lambda s: s.quantile)


def latency_spikes(series: QuantileSeries, every: float) -> list[Spike]:
    """Runs of rolling points at least :data:`SPIKE_FACTOR` x the series' median.

    The one rule of what a latency spike is. Points further apart than 1.5
    evaluation steps (``every``, seconds) are not consecutive: a gap between
    them had no observation.
    """
    t, values = series.t, series.values
    if values.size < SPIKE_MIN_POINTS:
        return []
    median = float(np.median(values))
    if median <= 0:
        return []
    above = values >= SPIKE_FACTOR * median
    spikes = []
    for first, last in _runs(above):
        # Split a run where the evaluation times skip (no observation in between).
        cut = first
        for k in range(first + 1, last + 2):
            if k == last + 1 or t[k] - t[k - 1] > 1.5 * every:
                part = slice(cut, k)
                top = cut + int(np.argmax(values[part]))
                bucket = float(series.lower[top]), float(series.upper[top])
                peak = float(values[top])
                spikes.append(
                    Spike(float(t[cut]), float(t[k - 1]), peak, float(t[top]), median, *bucket)
                )
                cut = k
    return spikes


def _bucket(spike: Spike, unit: str) -> str:
    """Where the peak must lie, from its bucket; the interpolation is not a value seen."""
    if spike.lower <= 0:
        return f"at most {format_number(spike.upper, 3)}{unit}"
    if math.isinf(spike.upper):
        return f"above {format_number(spike.lower, 3)}{unit} (the highest bucket)"
    return f"between {format_number(spike.lower, 3)} and {format_number(spike.upper, 3)}{unit}"


def _words(family: str) -> str:
    """A histogram's name as words: ``vllm:time_to_first_token_seconds`` -> time to first token."""
    name = family.split(":", 1)[-1].removesuffix("_seconds")
    return name.replace("_", " ")


def spike_pieces(rolling: RollingQuantiles, zone: tzinfo | None) -> list[Piece]:
    """Each latency spike of a rolling quantile: the whole deployment (merged buckets).

    A piece runs from its first point to its last; it reaches ``length``
    seconds before its first point, the requests that point summarises.
    """
    series = _series(rolling)
    if series is None:
        return []
    unit = " s" if rolling.unit == "seconds" else f" {rolling.unit}"
    minutes = format_number(rolling.length / 60, 3)
    out = []
    for s in latency_spikes(series, rolling.every):
        phrase = (
            f"the rolling P{format_number(100 * series.quantile)} of {_words(rolling.family)} "
            f"({minutes}-minute windows) rose to {_bucket(s, unit)} at "
            f"{clock(s.peak_at, zone)}, against a window median of "
            f"{format_number(s.median, 3)}{unit}"
        )
        out.append(
            Piece(
                EventKind.LATENCY_SPIKE,
                "",
                s.first,
                s.last,
                phrase,
                promql=(series.promql,),
                reach=rolling.length,
                held_s=s.lower if rolling.unit == "seconds" else 0.0,
            )
        )
    return out
