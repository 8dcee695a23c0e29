"""Queues against GPU activity, per deployment: the classes, how queues and idle GPUs went
together, the waiting reasons, the intervals worth reading, and the figure."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.analyses.naming import MANY
from inference_obs.analyses.queueing import QueueClass, QueueingResult
from inference_obs.analyses.regime import judge
from inference_obs.analyses.waiting_idle import WaitingIdle
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.wording import cell, number, p_cell, p_is, when
from inference_obs.report.document import Block, Heading, Paragraph, Table
from inference_obs.report.figure_plan import QUEUE_VS_GPU, cite, queue_stalls

if TYPE_CHECKING:
    from inference_obs.analyses.run import DeploymentResults
    from inference_obs.report.model import Report

__all__ = ["queues"]

#: A p-value below this reads as "more (or less) than chance": the conventional 5 % level,
#: taken as a guide only, as consecutive rows are not independent draws.
SURPRISING = 0.05
#: Each class in plain words, in the order an SRE acts on them.
LEGEND = (
    "capacity: requests waited while the replica's GPUs were busy (mean utilisation at or "
    "above the busy threshold): more GPU capacity would shorten the queue.",
    "starved: requests waited while the GPUs were idle (below the threshold): look at the "
    "host, transfers or scheduling, not at GPU capacity.",
    "inconsistent: requests were running while every GPU read 0 %: investigate; the "
    "independent app and GPU scrapes may simply be misaligned.",
    "busy: no queue, and requests running or the GPUs busy; not listed below, only counted.",
    "idle: no queue, nothing running and the GPUs idle; not listed below, only counted.",
    "unknown: no GPU reading aligned with the row.",
)


def queues(report: Report) -> Iterator[Block]:
    yield Heading(2, "Queues and GPU activity")
    # One paragraph, as the verdicts' legend: the body's lines are counted.
    yield Paragraph(
        "Each app scrape of a replica (or each tile, for a large scope) is one row, read "
        "against the mean utilisation of the replica's GPUs at their scrape nearest it in time "
        "(within the scrape interval, whatever the report's window) and put in one class. "
        "Correlation is not causation: rows where queues and idle GPUs went together say "
        "where to look (host, transfers, scheduling), not what caused the queue. The classes: "
        + "; ".join(line.rstrip(".") for line in LEGEND)
        + "."
    )
    for d in report.deployments:
        yield from _deployment(d)


def _deployment(d: DeploymentResults) -> Iterator[Block]:
    q = d.of(analyses.queueing)
    name = d.deployment.name
    yield Heading(3, name)
    if d.step_seconds is not None:
        yield Paragraph(f"Rows are {d.step_seconds:g} s tiles: samples counts tiles.")
    peak = (
        f"Peak waiting {cell(q.peak_waiting)} at "
        f"{when(q.peak_time) if q.peak_time else '—'} on {q.peak_replica or '—'}."
    )
    found = judge(d)
    # The deployment's one reading, and what it overrules, after the counts it rests on.
    against = f" Against it: {found.against[0].text}" if found.against else ""
    reading = f"Reading: {found.label}.{against}"
    yield Paragraph(f"{_reading(name, q)} {peak} {_reasons(q)} {reading}")
    yield from _tables(q)
    yield from _intervals(q)
    stalls = len(queue_stalls(d))
    marked = f", and the stall{'s' if stalls > 1 else ''} named in What happened hatched"
    marked = marked if stalls else ""
    yield cite(
        d,
        QUEUE_VS_GPU,
        f"{name}: per replica, each row's requests waiting and running against its GPUs' mean "
        f"utilisation; capacity, starved and inconsistent rows shaded{marked}.",
    )


def _reasons(q: QueueingResult) -> str:
    """The waiting reasons' peaks in a sentence, or that the engine exports none."""
    if not q.peak_waiting_by_reason:
        return "The engine exports no waiting reasons (num_requests_waiting_by_reason)."
    peaks = ", ".join(f"{r} {cell(m)}" for r, m in q.peak_waiting_by_reason.items())
    return (
        f"Largest sampled queue by waiting reason: {peaks} (a scheduler's classification, "
        "not a diagnosis: 'capacity' is not 'GPU memory full')."
    )


def _rows(q: QueueingResult, count: float | None) -> str:
    word = "scrape" if q.step_seconds is None else "tile"
    if count is None:
        return f"an unknown number of {word}s (no data)"
    n = round(count)
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _reading(name: str, q: QueueingResult) -> str:
    """The pooled waiting-vs-idle table and the lag in plain words."""
    t = q.waiting_idle
    total = _sum(t.waiting_idle, t.waiting_busy, t.not_waiting_idle, t.not_waiting_busy)
    if not total:
        return f"{name}: no row had both a queue and a GPU reading: nothing to correlate."
    waiting = _sum(t.waiting_idle, t.waiting_busy)
    idle = f"idle (mean utilisation below {q.busy_threshold:g} %)"
    if not waiting:
        return (
            f"{name}: requests never waited in the {_rows(q, total)} with a GPU reading; the "
            f"GPUs were {idle} in {_rows(q, t.not_waiting_idle.value)}."
        )
    calm = total - waiting
    counts = (
        f"{name}: requests waited in {number(waiting)} of {_rows(q, total)}; in "
        f"{number(t.waiting_idle.value)} of them the GPUs were {idle}, against "
        f"{number(t.not_waiting_idle.value)} of the {_rows(q, calm)} without a queue."
    )
    stats = (
        f"Odds ratio {_statistic(t.odds_ratio)}, phi {_statistic(t.phi)}, Fisher's exact "
        f"{p_is(t.p_value)}: {_verdict(t)}."
    )
    if (t.waiting_idle.value or 0) > 0 and (t.phi.value or 0) < 0:
        stats += (
            f" Still, {_rows(q, t.waiting_idle.value)} with a queue had idle GPUs: read the "
            "starved and inconsistent intervals below."
        )
    lag = (
        f"The strongest Pearson correlation of queue depth against GPU idle (100 - util) is "
        f"r = {cell(q.best_lag_correlation)} at a lag of {cell(q.best_lag)} rows (positive: "
        "the idle GPUs follow the queue)."
    )
    return f"{counts} {stats} {lag}"


def _sum(*counts: Measurement) -> float:
    return sum(m.value or 0.0 for m in counts)


def _statistic(m: Measurement) -> str:
    """A statistic's value, or why it has none (its annotation)."""
    if m.value is not None or not m.annotations:
        return cell(m)
    return f"undefined ({m.annotations[0].message.split(': ', 1)[-1]})"


def _verdict(t: WaitingIdle) -> str:
    """Whether waiting and idle GPUs went together more (or less) than chance, in words."""
    p, phi = t.p_value.value, t.phi.value
    if p is None or phi is None or p >= SURPRISING:
        return (
            "waiting and idle GPUs did not co-occur more, nor less, than chance would give "
            f"(p ≥ {SURPRISING:g})"
        )
    # Only what the table says: the reading of the deployment weighs it with the rest.
    more = "more" if phi > 0 else "less"
    return f"waiting and idle GPUs co-occurred {more} than chance would give"


def _tables(q: QueueingResult) -> Iterator[Block]:
    """The waiting-vs-idle table of the deployment and of each replica, one row each, and
    what an ``invalid`` statistic means; none with one replica, whose pooled counts the
    reading above already gives."""
    if len(q.waiting_idle_by_replica) <= 1:
        return
    scopes = [q.waiting_idle]
    by_replica = [q.waiting_idle_by_replica[r] for r in sorted(q.waiting_idle_by_replica)]
    left = 0
    if len(by_replica) > MANY:
        # A fleet: the pooled row alone, every replica's in report.json.
        left, by_replica = len(by_replica), []
    scopes += by_replica
    pooled = (
        f"all (pooled; each of the {left} replicas' in report.json, "
        "queueing/waiting_idle_*[replica])"
        if left
        else "all (pooled)"
    )
    yield Table(
        (
            "replica",
            "waiting, GPUs idle",
            "waiting, GPUs busy",
            "no queue, GPUs idle",
            "no queue, GPUs busy",
            "odds ratio",
            "phi",
            "Fisher p",
        ),
        tuple(
            (
                (pooled if t.scope is None else t.scope),
                cell(t.waiting_idle),
                cell(t.waiting_busy),
                cell(t.not_waiting_idle),
                cell(t.not_waiting_busy),
                cell(t.odds_ratio),
                cell(t.phi),
                p_cell(t.p_value),
            )
            for t in scopes
        ),
    )
    if any(t.odds_ratio.value is None or t.phi.value is None for t in scopes if t.p_value.ok):
        yield Paragraph(
            "invalid: with no row waiting, or GPUs never (or always) idle, a zero cell leaves "
            "the odds ratio or phi undefined; Fisher's p still holds."
        )


#: Intervals listed at most for a deployment of more than MANY replicas (the longest; the
#: rest in report.json): a fleet's section stays the length of a few replicas'.
ROWS = 3
#: Intervals a deployment of a few replicas lists in full, up to this many; an hour of
#: bursts on four replicas is dozens, and then it lists the ROWS longest as a fleet does:
#: the body's length must not grow with the activity.
FEW_ROWS = 10


def listed_at_most(replicas: int, intervals: int) -> int:
    """How many of a deployment's ``intervals`` its table lists: every one of a few
    replicas' up to :data:`FEW_ROWS`, else the :data:`ROWS` longest."""
    return intervals if replicas <= MANY and intervals <= FEW_ROWS else ROWS


#: Classes without a queue or a contradiction: counted in a sentence, not listed.
FOLDED = (QueueClass.BUSY, QueueClass.IDLE)


def _intervals(q: QueueingResult) -> Iterator[Block]:
    """The intervals with a queue or a contradiction, grouped by replica, then a sentence
    counting the busy and idle ones."""
    listed = [i for i in q.intervals if i.classification not in FOLDED]
    # A fleet's intervals: the longest ones, every one in report.json (queue_intervals).
    limit = listed_at_most(len(q.rows), len(listed))
    longest = sorted(listed, key=lambda i: (-i.samples, i.start))[:limit]
    shown = sorted(longest, key=lambda i: (i.replica, i.start))
    if shown:
        yield Table(
            (
                "replica",
                "class",
                "start",
                "end",
                "samples",
                "max waiting",
                "max running",
                "mean GPU util %",
            ),
            tuple(
                (
                    i.replica,
                    i.classification.value,
                    when(i.start),
                    when(i.end),
                    str(i.samples),
                    number(i.max_waiting),
                    number(i.max_running),
                    number(i.mean_gpu_util),
                )
                for i in shown
            ),
        )
    # What the table leaves out, in one paragraph under it.
    said = []
    if len(listed) > limit:
        said.append(
            f"The {limit} longest of {len(listed):,} such intervals, on "
            f"{len({i.replica for i in listed}):,} replicas; every one in report.json "
            "(queue_intervals)."
        )
    elif not shown:
        said.append("No interval with a queue or with work running on GPUs reading 0 %.")
    counted = []
    for kind in FOLDED:
        found = [i for i in q.intervals if i.classification is kind]
        if found:
            rows = _rows(q, sum(i.samples for i in found))
            counted.append(
                f"{len(found):,} {kind.value} interval{'' if len(found) == 1 else 's'} ({rows})"
            )
    if counted:
        said.append(
            f"Not listed (no queue; busy or idle against the {q.busy_threshold:g} % line): "
            f"{' and '.join(counted)}."
        )
    if said:
        yield Paragraph(" ".join(said))
