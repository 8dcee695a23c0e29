"""What one simulated engine leaves behind: per-request times, step records, gauges, activity.

Times are seconds from the window start. A :class:`Records` holds weighted
observations (``weight`` identical observations of ``value`` recorded at
``time``): histogram observations made per engine step (inter-token latency,
iteration tokens) and per-step counter increments (generated tokens, drafts).
Quantities recorded per request (TTFT, E2E, prompt tokens, ...) are derived
from the request times instead, see :mod:`~inference_obs.simulate.ground_truth`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from inference_obs.samples import Floats, Ints

__all__ = ["Activity", "EngineRun", "Outcome", "RecordBuffer", "Records"]


class Outcome(IntEnum):
    """How a request's life ended in the simulation."""

    FINISHED = 0
    """Ended by stop, length or an engine error; vLLM recorded its finished-request stats."""
    ABORTED = 1
    """The client gave up; vLLM drops such requests without finished-request stats."""
    LOST = 2
    """In flight when its server restarted."""
    REJECTED = 3
    """Arrived while its server was down."""
    UNFINISHED = 4
    """Still in flight when the simulation stopped."""


@dataclass(frozen=True, slots=True)
class Records:
    """Weighted observations: ``weight[i]`` observations of ``value[i]`` made at ``time[i]``."""

    time: Floats
    value: Floats
    weight: Floats

    def total(self) -> float:
        """Sum of value times weight (a histogram's ``_sum``, or a counter's increase)."""
        return float(np.sum(self.value * self.weight))


class RecordBuffer:
    """Collects :class:`Records` piece by piece during a simulation."""

    __slots__ = ("_arrays", "_scalars")

    def __init__(self) -> None:
        self._scalars: list[tuple[float, float, float]] = []
        self._arrays: list[tuple[Floats, Floats, Floats]] = []

    def add(self, time: float, value: float, weight: float = 1.0) -> None:
        """Record ``weight`` observations of ``value`` at ``time``."""
        if weight > 0:
            self._scalars.append((time, value, weight))

    def extend(self, time: float, values: Floats, weights: Floats) -> None:
        """Record ``weights[i]`` observations of ``values[i]`` at ``time``, for each ``i``."""
        keep = weights > 0
        if keep.any():
            kept = values[keep].astype(np.float64)
            self._arrays.append((np.full(kept.size, time), kept, weights[keep].astype(np.float64)))

    def freeze(self) -> Records:
        """Everything recorded, in time order (stable)."""
        scalars = np.asarray(self._scalars, dtype=np.float64).reshape(-1, 3)
        parts = [(scalars[:, 0], scalars[:, 1], scalars[:, 2]), *self._arrays]
        time, value, weight = (np.concatenate([p[c] for p in parts]) for c in range(3))
        order = np.argsort(time, kind="stable")
        return Records(time[order], value[order], weight[order])


@dataclass(frozen=True, slots=True)
class Activity:
    """Piecewise-constant engine activity over ``[start[i], end[i])``.

    ``busy`` is the share of the segment the GPUs compute: 1 while the engine
    steps, 0 when it has nothing to run or is stalled, and between when each
    step also waits on the host or on host-device copies (``host_starved``,
    ``transfer_bound`` faults). ``compute_share`` is the part of the
    computing time spent on computed tokens (tensor work) rather than weight
    and KV reads (memory traffic). ``transfer`` is the share of the segment
    the PCIe link copies host-to-device at its full rate.
    """

    start: Floats
    end: Floats
    busy: Floats
    compute_share: Floats
    transfer: Floats

    def integral(self, quantity: Floats, at: Floats) -> Floats:
        """The integral of a per-segment ``quantity`` from the first segment to each time ``at``."""
        widths = self.end - self.start
        cumulative = np.concatenate(([0.0], np.cumsum(quantity * widths)))
        index = np.clip(np.searchsorted(self.start, at, side="right") - 1, 0, None)
        if self.start.size == 0:
            return np.zeros_like(at)
        inside = np.clip(at - self.start[index], 0.0, widths[index])
        out: Floats = np.where(
            at < self.start[0], 0.0, cumulative[index] + quantity[index] * inside
        )
        return out


@dataclass(frozen=True, slots=True)
class EngineRun:
    """The result of simulating one engine (one data-parallel rank of one replica).

    Per-request columns are aligned with ``ids`` (indices into the
    deployment's :class:`~inference_obs.simulate.arrivals.Requests`): when
    the scheduler first took it from the queue (``admitted``: its cache
    lookup), first ran it (``scheduled``), its first token and its end.
    Gauge columns are aligned with ``snapshot_times`` (the replica's scrape
    times).
    """

    replica: int
    engine: int
    ids: Ints
    admitted: Floats
    scheduled: Floats
    first_token: Floats
    finish: Floats
    produced_tokens: Ints
    decode_steps_done: Ints
    outcome: Ints
    preemptions: Ints
    snapshot_times: Floats
    running: Floats
    waiting_capacity: Floats
    waiting_deferred: Floats
    kv_usage: Floats
    inter_token_latency: Records
    iteration_tokens: Records
    generation_tokens: Records
    spec_drafts: Records
    spec_accepted: Records
    preemption_events: Records
    activity: Activity
