"""A time line of what happened: stalls, restarts, gaps, stopped GPUs, queues, spikes.

A judging analysis: it reads the other analyses' results of each deployment
(:class:`~inference_obs.analyses.run.DeploymentResults`), never a source, and
merges what they show at the same time on the same replica into one event
with all its evidence. :mod:`.pieces` holds the rules of each kind of
evidence, :mod:`.incidents` how pieces become events, :mod:`.events` the
typed result.
"""

from __future__ import annotations

from inference_obs.analyses.timeline.events import Event, EventKind, Severity, Timeline
from inference_obs.analyses.timeline.incidents import deployment_events, named, timeline

__all__ = [
    "Event",
    "EventKind",
    "Severity",
    "Timeline",
    "deployment_events",
    "named",
    "timeline",
]
