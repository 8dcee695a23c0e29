"""What a time line holds: events, each a kind, a severity, replicas, times and evidence."""

from __future__ import annotations

from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from inference_obs.analyses.naming import named

__all__ = ["Event", "EventKind", "Severity", "Timeline"]


class Severity(StrEnum):
    """How much an event matters to the people the deployment serves."""

    CRITICAL = "critical"  # requests held or lost: a stall, a restart, a queue and its spike
    MAJOR = "major"  # capacity or sight lost: GPUs waiting, gaps, stopped GPUs, spikes
    MINOR = "minor"  # a queue that drained on busy GPUs, a gap in one GPU exporter

    @property
    def rank(self) -> int:
        """3 for critical, 2 for major, 1 for minor: larger is more severe."""
        return {Severity.CRITICAL: 3, Severity.MAJOR: 2, Severity.MINOR: 1}[self]


class EventKind(StrEnum):
    """What happened, most severe first: a merged event takes its most severe piece's kind."""

    STALL = "stall"
    RESTART = "restart"
    XID_ERROR = "xid_error"
    GPUS_WAITING = "gpus_waiting"
    SCRAPE_GAP = "scrape_gap"
    COUNTER_RESET = "counter_reset"
    GPU_STOPPED = "gpu_stopped"
    GPU_SILENT = "gpu_silent"
    LATENCY_SPIKE = "latency_spike"
    QUEUE_BURST = "queue_burst"
    GPU_SCRAPE_GAP = "gpu_scrape_gap"

    @property
    def severity(self) -> Severity:
        """The severity of an event of this kind."""
        return SEVERITY[self]

    @property
    def words(self) -> str:
        """The kind as a reader says it (``scrape gap``)."""
        return self.value.replace("_", " ").replace("xid", "Xid").replace("gpu", "GPU")


SEVERITY: dict[EventKind, Severity] = {
    EventKind.STALL: Severity.CRITICAL,
    EventKind.RESTART: Severity.CRITICAL,
    EventKind.XID_ERROR: Severity.MAJOR,
    EventKind.GPUS_WAITING: Severity.MAJOR,
    EventKind.SCRAPE_GAP: Severity.MAJOR,
    EventKind.COUNTER_RESET: Severity.MAJOR,
    EventKind.GPU_STOPPED: Severity.MAJOR,
    EventKind.GPU_SILENT: Severity.MAJOR,
    EventKind.LATENCY_SPIKE: Severity.MAJOR,
    EventKind.QUEUE_BURST: Severity.MINOR,
    EventKind.GPU_SCRAPE_GAP: Severity.MINOR,
}


class Event(BaseModel):
    """One thing that happened to a deployment, with the evidence the series hold for it.

    Attributes
    ----------
    deployment
        Whose.
    replicas
        The replicas (pods) or targets it concerns, by name: an app or GPU
        exporter's ``instance`` where no replica could be matched, a GPU by
        its name; empty for the deployment as a whole (a latency spike of its
        merged buckets).
    start, end
        When it was first and last seen (the window's timezone): the first and
        last scrape (or tile) that showed it; for a gap the samples either
        side; the whole window where the series do not say when (a last Xid
        code, counters reset without a gap, GPUs that never reported).
    kind, severity
        Its most severe cause's kind; the most severe of all its pieces'
        severities (a queue that drained on busy GPUs is minor, but with the
        latency spike it caused it is critical: requests were held).
    pieces
        The kind of every piece of evidence merged into it, in time order
        (a stall and the latency spike after it are one event).
    text
        One sentence with its evidence, numbers drawn from the results.
    keys
        Keys of the Measurements it rests on (``PRO/queueing/peak_waiting``).
    promql
        Queries behind evidence that is not a Measurement (a rolling quantile).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    deployment: str
    replicas: tuple[str, ...]
    start: AwareDatetime
    end: AwareDatetime
    kind: EventKind
    severity: Severity
    pieces: tuple[EventKind, ...]
    text: str
    keys: tuple[str, ...]
    promql: tuple[str, ...] = ()

    def replicas_named(self) -> str:
        """Its replicas in a sentence: at most :data:`~inference_obs.analyses.naming.NAMED`
        named, then how many more (:func:`~inference_obs.analyses.naming.named`)."""
        return named(self.replicas)


class Timeline(BaseModel):
    """Every event of every deployment, the most severe first, then by kind, then the earliest.

    Built by :func:`~inference_obs.analyses.timeline.timeline` from the
    deployments' results, never from a dataset's description of itself.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    events: tuple[Event, ...] = Field(description="Most severe first, then by kind and start.")

    def of(self, deployment: str) -> tuple[Event, ...]:
        """The events of one deployment, in the time line's order."""
        return tuple(e for e in self.events if e.deployment == deployment)

    @property
    def stalls(self) -> tuple[Event, ...]:
        """Events whose most severe piece is a stall: requests held while the GPUs idled."""
        return tuple(e for e in self.events if e.kind is EventKind.STALL)

    def in_time_order(self) -> tuple[Event, ...]:
        """The events by start, then deployment."""
        return tuple(sorted(self.events, key=lambda e: (e.start, e.deployment)))
