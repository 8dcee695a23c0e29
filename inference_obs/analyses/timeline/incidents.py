"""Events from pieces: what overlaps on one replica is one incident, with all its evidence.

:func:`timeline` reads each deployment's results (a run's
:class:`~inference_obs.analyses.run.DeploymentResults`), gathers the pieces
of :mod:`~inference_obs.analyses.timeline.pieces`, and merges them:

1. pieces of one replica that overlap or touch (within one scrape interval,
   the resolution of every per-scrape piece) are one incident, as a stall
   and the queue it leaves, or a scrape gap and the counter reset of the
   restart it was;
2. incidents of the same kind on several replicas that overlap in time are
   one event naming the replicas (a whole fleet's scrape gap is one event);
3. a latency spike of the deployment's merged buckets is a consequence, not
   a cause: it joins the most severe incident that began before its first
   point and was still on within the trailing window that point summarises
   (of equals, the one covering most of that window), as evidence only: a
   rolling window cannot date an incident to better than its length, so the
   incident keeps its own times. Alone, it is an event of the deployment as
   a whole;
4. a stall seen in one row only is a possible stall (major, said so) unless a
   latency spike followed it that shows requests held at least half a row, or
   half a GPU scrape interval when longer (the bucket of the spike's peak
   starts there): the GPU reading beside a scrape is the sample nearest it,
   up to that far away, and requests that
   arrived after that sample meet a reading taken before them. Held requests
   delay their first tokens, so a real stall shows in the rolling quantiles
   too, as long as it held them; a burst between two GPU samples shows a
   shorter rise;
5. a queue that a latency spike followed held requests, whatever the GPUs
   read beside it: it is critical, as a stall is. The GPU reading may predate
   the queue by up to a scrape interval and an exporter's collect interval, so
   it cannot clear the queue; the spike (a rolling quantile at least ten times
   its window's median) is what the users met;
6. requests seen running, none waiting, beside idle GPU readings are an event
   only alone and when a latency spike followed them (then a stall), however
   many rows show them; beside other evidence they neither name nor date it.
   An engine that hangs just after admitting requests shows no queue, but a
   light load looks the same (a GPU_UTIL sample is an instant's, and at 15 %
   busy most instants are idle) and is common.

Nothing is read from the source, nor from what a dataset says about itself
(its methodology or a fault list): only from the series, through the results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo

from inference_obs.analyses.boundaries import boundaries
from inference_obs.analyses.collection import collection
from inference_obs.analyses.error_signals import errors
from inference_obs.analyses.naming import NAMED, named
from inference_obs.analyses.queueing import queueing
from inference_obs.analyses.rolling import rolling_itl, rolling_quantiles
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.timeline.events import Event, EventKind, Severity, Timeline
from inference_obs.analyses.timeline.pieces import (
    Piece,
    boundary_pieces,
    collection_pieces,
    queue_pieces,
    spike_pieces,
    xid_pieces,
)
from inference_obs.reading.result import format_number

__all__ = ["NAMED", "deployment_events", "named", "timeline"]

_ORDER = {kind: k for k, kind in enumerate(EventKind)}


def _weight(kind: EventKind) -> tuple[int, int]:
    """Sort key of a kind: the most severe, then the earlier in :class:`EventKind`, first."""
    return (-kind.severity.rank, _ORDER[kind])


def _order(e: Event) -> tuple[int, int, datetime]:
    """Sort key of an event: the most severe, then by kind, then the earliest."""
    return (-e.severity.rank, _ORDER[e.kind], e.start)


def _spiked(pieces: Sequence[Piece], spikes: Sequence[Piece]) -> bool:
    """Whether one of ``spikes`` confirms a stall among ``pieces`` (rules 4 and 6): the GPUs
    still idle at the next row, and requests held as long as the stall needs (seconds)."""
    stalls = [p for p in pieces if p.kind is EventKind.STALL and p.idle_after]
    return any(s.held_s >= p.needs_held_s for s in spikes for p in stalls)


@dataclass(slots=True)
class _Incident:
    """Pieces merged so far; ``after`` holds the latency spikes it explains."""

    pieces: list[Piece]
    start: float
    end: float
    after: list[Piece] = field(default_factory=list)

    @property
    def strong(self) -> list[Piece]:
        """Its pieces that show something beside others (rules 4 and 6): all of them where
        none does. A one-row stall whose GPUs read busy at the next row is not one."""
        weak = [
            p
            for p in self.pieces
            if p.needs_spike or (p.kind is EventKind.STALL and not p.confirmed and not p.idle_after)
        ]
        return [p for p in self.pieces if p not in weak] or self.pieces

    @property
    def kind(self) -> EventKind:
        return min((p.kind for p in self.strong), key=_weight)

    @property
    def unconfirmed(self) -> bool:
        """Rule 4 of the module: a stall whose only evidence is one row, with no spike after."""
        stalls = [p for p in self.pieces if p.kind is EventKind.STALL]
        return (
            bool(stalls)
            and not _spiked(self.pieces, self.after)
            and not any(p.confirmed for p in stalls)
        )

    @property
    def severity(self) -> Severity:
        """The most severe of its pieces'; a possible stall (rule 4) is major, a queue that a
        latency spike followed (rule 5) critical."""
        if self.after and any(p.kind is EventKind.QUEUE_BURST for p in self.pieces):
            return Severity.CRITICAL
        pieces = (*self.strong, *self.after)
        found = max((p.kind.severity for p in pieces), key=lambda s: s.rank)
        return Severity.MAJOR if self.unconfirmed and found is Severity.CRITICAL else found

    @property
    def spikes_only(self) -> bool:
        """Whether it is a latency spike standing alone, with no cause of its own."""
        return all(p.kind is EventKind.LATENCY_SPIKE for p in self.pieces)

    @property
    def replicas(self) -> list[str]:
        return list(dict.fromkeys(p.replica for p in self.pieces if p.replica))

    def take(self, other: _Incident) -> None:
        self.pieces += other.pieces
        self.after += other.after
        self.start, self.end = min(self.start, other.start), max(self.end, other.end)


def _sweep(incidents: list[_Incident], touch: float) -> list[_Incident]:
    """Merge incidents (already of one group) whose times overlap or lie ``touch`` apart."""
    merged: list[_Incident] = []
    for one in sorted(incidents, key=lambda i: (i.start, i.end)):
        if merged and one.start <= merged[-1].end + touch:
            merged[-1].take(one)
        else:
            merged.append(one)
    return merged


def _merge(pieces: Sequence[Piece], touch: float) -> list[_Incident]:
    """Rules 1 and 2 of the module: per replica, then the same kind across replicas."""
    by_replica: dict[str, list[_Incident]] = {}
    for p in pieces:
        by_replica.setdefault(p.replica, []).append(_Incident([p], p.start, p.end))
    incidents = [i for group in by_replica.values() for i in _sweep(group, touch)]
    by_kind: dict[EventKind, list[_Incident]] = {}
    for i in incidents:
        by_kind.setdefault(i.kind, []).append(i)
    return [i for group in by_kind.values() for i in _sweep(group, 0.0)]


def _attach(spikes: Sequence[Piece], incidents: list[_Incident]) -> None:
    """Rule 3 of the module: each spike joins the incident it follows, or stands alone.

    Of the incidents that began by the spike's first point and were on within
    the trailing window it summarises (an earlier spike standing alone only
    where nothing else was), the most severe; then the one that covers most of
    that window; then the latest.
    """
    for spike in spikes:
        since = spike.start - spike.reach
        during = [i for i in incidents if i.start <= spike.start and i.end >= since]
        # A cause before another consequence: an earlier spike takes it only alone.
        causes = [i for i in during if not i.spikes_only] or during
        if not causes:
            incidents.append(_Incident([spike], spike.start, spike.end))
            continue
        weights = [
            (i.severity.rank, min(i.end, spike.start) - max(i.start, since), i.start)
            for i in causes
        ]
        causes[weights.index(max(weights))].after.append(spike)


def _kept(incidents: list[_Incident]) -> list[_Incident]:
    """Rule 6 of the module: evidence that needs a spike after it is an incident only
    alone and with one; beside other evidence it is dropped, so that a restart whose gap
    touched requests seen running on idle GPUs stays a restart, with its own times."""
    out = []
    for i in incidents:
        pieces = i.strong
        if pieces[0].needs_spike and not _spiked(pieces, i.after):
            continue
        start, end = min(p.start for p in pieces), max(p.end for p in pieces)
        out.append(_Incident(pieces, start, end, i.after))
    return out


def _text(incident: _Incident) -> str:
    """One sentence: each replica's evidence (the first few), then the spikes after it."""
    replicas = incident.replicas
    parts = []
    for replica in replicas[:3] or [""]:
        said = [p.phrase for p in sorted(incident.pieces, key=lambda p: p.start)]
        if len(replicas) > 1:
            said = [p.phrase for p in incident.pieces if p.replica == replica]
            said[0] = f"on {replica}, {said[0]}"
        parts += list(dict.fromkeys(said))
    if len(replicas) > 3:
        parts.append(f"alike on {len(replicas) - 3} more")
    parts += list(dict.fromkeys(p.phrase for p in sorted(incident.after, key=lambda p: p.start)))
    if incident.unconfirmed:
        stalls = [p for p in incident.pieces if p.kind is EventKind.STALL]
        if not incident.after:
            why = "no latency rise followed"
        elif not any(p.idle_after for p in stalls):
            why = "the GPUs read busy at the next scrape"
        else:
            held = max(s.held_s for s in incident.after)
            reach = max(p.needs_held_s for p in stalls)
            why = (
                f"the latency rise after it shows requests held {format_number(held)} s at "
                f"least, not the {format_number(reach)} s the GPU reading beside the row may "
                "lie from it"
            )
        parts.append(
            f"a possible stall: one row, and {why} (requests that arrived after the GPU "
            "sample meet a reading taken before them)"
        )
    return "; ".join(parts) + "."


def _event(deployment: str, incident: _Incident, zone: tzinfo | None) -> Event:
    every = [*incident.pieces, *incident.after]
    in_order = sorted(every, key=lambda p: p.start)
    return Event(
        deployment=deployment,
        replicas=tuple(incident.replicas),
        start=datetime.fromtimestamp(incident.start, zone),
        end=datetime.fromtimestamp(incident.end, zone),
        kind=incident.kind,
        severity=incident.severity,
        pieces=tuple(p.kind for p in in_order),
        text=_text(incident),
        keys=tuple(dict.fromkeys(k for p in every for k in p.keys)),
        promql=tuple(dict.fromkeys(q for p in every for q in p.promql)),
    )


def deployment_events(run: DeploymentResults) -> tuple[Event, ...]:
    """The events of one deployment's results, the most severe first, then by start."""
    zone = run.window.start.tzinfo
    q, c = run.of(queueing), run.of(collection)
    pieces = [
        *queue_pieces(q, zone),
        *boundary_pieces(run.of(boundaries)),
        *collection_pieces(c, q, run.window),
        *xid_pieces(run.of(errors), run.window),
    ]
    # Per-scrape pieces are known to a scrape interval: nearer than that, they touch.
    touch = max(q.row_seconds, c.scrape_interval.value or 0.0)
    incidents = _merge(pieces, touch)
    spikes = [
        *spike_pieces(run.of(rolling_quantiles), zone),
        *spike_pieces(run.of(rolling_itl), zone),
    ]
    _attach(spikes, incidents)
    found = (_event(run.deployment.name, i, zone) for i in _kept(incidents))
    return tuple(sorted(found, key=_order))


def timeline(runs: Sequence[DeploymentResults]) -> Timeline:
    """Every deployment's events (see the module), the most severe first, then by start.

    Parameters
    ----------
    runs
        Each deployment's results, as :func:`~inference_obs.analyses.run.run`
        returns them; the queueing, boundaries, collection, errors and both
        rolling-quantile results are read.

    Returns
    -------
    Timeline
        Events with times in each deployment's window timezone.
    """
    found = [e for run in runs for e in deployment_events(run)]
    return Timeline(events=tuple(sorted(found, key=_order)))
