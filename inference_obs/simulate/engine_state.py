"""The state of one simulated engine: its requests, queues, KV blocks and records.

:class:`EngineState` holds per-request arrays (indexed by the engine's own
request positions) and the queues vLLM's scheduler keeps (waiting, fetching
external KV, running), and keeps the bookkeeping consistent when a request
moves between them; :mod:`~inference_obs.simulate.scheduler` decides the moves.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from inference_obs.samples import Floats, Ints
from inference_obs.simulate.arrivals import Requests
from inference_obs.simulate.scenario import DeploymentSpec
from inference_obs.simulate.trace import Outcome, RecordBuffer

__all__ = ["DONE", "EngineFaults", "EngineState"]

# Request status codes (-1: not arrived yet).
WAITING, LOADING, READY, PREFILL, DECODE, DONE = range(6)


@dataclass(frozen=True, slots=True)
class EngineFaults:
    """Fault times affecting one engine, seconds from the window start."""

    stalls: tuple[tuple[float, float, bool], ...] = ()
    """(start, end, arrivals wait as deferred) of each stall."""
    restarts: tuple[tuple[float, float], ...] = ()
    """(process dies, new process serves) of each restart."""
    slowdowns: tuple[tuple[float, float, float, float], ...] = ()
    """(start, end, host ms, transfer ms) of each stretch in which every step also waits
    that long on the host and on host-device copies, GPUs idle meanwhile."""


class EngineState:
    """Requests, queues and records of one engine; the scheduler subclasses it."""

    def __init__(
        self,
        spec: DeploymentSpec,
        requests: Requests,
        ids: Ints,
        snapshots: Floats,
        faults: EngineFaults,
        begin: float,
        end: float,
    ) -> None:
        self.spec, self.ids = spec, ids
        self.k = spec.speculative_tokens
        self.max_seqs = spec.config.max_num_seqs or 0
        self.budget = spec.config.max_num_batched_tokens or 0
        self.block = spec.kv_cache.block_size
        self.blocks = spec.kv_cache.num_gpu_blocks
        n = ids.size
        self.arrive = requests.engine_arrival[ids]
        self.prompt = requests.prompt_tokens[ids]
        self.local_hit = requests.local_hit_tokens[ids]
        self.compute = requests.computed_prompt_tokens[ids]
        self.external = requests.external_hit_tokens[ids]
        self.steps_total = requests.decode_steps[ids]
        self.after_first = requests.output_tokens[ids] - 1
        self.step_divisor = np.maximum(self.steps_total, 1)
        self.per_step = self.after_first / self.step_divisor
        # The most blocks a request can hold: while all live requests fit this
        # bound, no context can outgrow the pool and no preemption is needed.
        self.most_blocks = -(-(self.prompt + self.after_first + 1) // self.block)
        self.status = np.full(n, -1, dtype=np.int64)
        self.remaining = np.zeros(n)
        self.steps_done = np.zeros(n, dtype=np.int64)
        self.frac_left = np.ones(n)
        self.last_token = np.full(n, np.nan)
        self.load_done = np.full(n, np.inf)
        self.admitted = np.full(n, np.nan)
        self.scheduled = np.full(n, np.nan)
        self.first_token = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.outcome = np.full(n, int(Outcome.UNFINISHED), dtype=np.int64)
        self.preempted = np.zeros(n, dtype=np.int64)
        self.waiting: deque[int] = deque()
        self.loading: list[int] = []
        self.running: list[int] = []
        self.run_array = np.zeros(0, dtype=np.int64)
        self.worst = 0
        self.next_arrival = 0
        # A client cannot give up on a request before it reaches the engine.
        abort_at = np.maximum(requests.abort_at[ids], self.arrive)
        self.abort_order = np.argsort(abort_at, kind="stable")[: int(np.isfinite(abort_at).sum())]
        self.abort_at = abort_at
        self.next_abort = 0
        self.faults = faults
        self.snapshots = snapshots
        self.next_snapshot = 0
        edges = [snapshots, [end, np.inf]]
        edges += [[a, b] for a, b, _ in faults.stalls] + [[a, b] for a, b in faults.restarts]
        edges += [[a, b] for a, b, _, _ in faults.slowdowns]
        self.edges = np.unique(np.concatenate([np.asarray(e, dtype=np.float64) for e in edges]))
        self.begin, self.end = begin, end
        self.stalled, self.deferred, self.down = False, False, False
        self.host_ms, self.transfer_ms = 0.0, 0.0
        self.engine_frac = 1.0
        self.gauges = np.zeros((snapshots.size, 4))
        self.itl, self.iteration = RecordBuffer(), RecordBuffer()
        self.generated, self.drafts, self.accepted = RecordBuffer(), RecordBuffer(), RecordBuffer()
        self.preemption_events = RecordBuffer()
        self.activity: list[tuple[float, float, float, float, float]] = []

    # -- membership ----------------------------------------------------------------------

    def _run(self, i: int) -> None:
        self.running.append(i)
        self.run_array = np.asarray(self.running, dtype=np.int64)
        self.worst += int(self.most_blocks[i])

    def _unrun(self, i: int) -> None:
        self.running.remove(i)
        self.run_array = np.asarray(self.running, dtype=np.int64)
        self.worst -= int(self.most_blocks[i])

    def _load(self, i: int) -> None:
        self.loading.append(i)
        self.worst += int(self.most_blocks[i])

    def _unload(self, i: int) -> None:
        self.loading.remove(i)
        self.worst -= int(self.most_blocks[i])

    def _end(self, i: int, t: float, outcome: Outcome) -> None:
        if i in self.running:
            self._unrun(i)
        elif i in self.loading:
            self._unload(i)
        elif i in self.waiting:
            self.waiting.remove(i)
        self.status[i] = DONE
        self.finish[i] = t
        self.outcome[i] = int(outcome)

    def _tokens(self, index: Ints) -> Ints:
        """Output tokens after the decode steps done (as :meth:`Requests.tokens_after`)."""
        out: Ints = (
            1 + (self.steps_done[index] * self.after_first[index]) // self.step_divisor[index]
        )
        return out

    def _produced(self, index: Ints) -> Ints:
        """Output tokens so far (0 before the first token)."""
        out: Ints = np.where(np.isnan(self.first_token[index]), 0, self._tokens(index))
        return out

    def _blocks(self, tokens: Ints) -> int:
        return int((-(-tokens // self.block)).sum())

    def _used_blocks(self) -> int:
        run = self.run_array
        held = np.asarray(self.loading, dtype=np.int64)
        return self._blocks(self.prompt[run] + self._produced(run)) + self._blocks(
            self.prompt[held]
        )

    def _snapshot(self, t: float) -> None:
        j = self.next_snapshot
        if j >= self.snapshots.size or self.snapshots[j] != t:
            return
        self.next_snapshot += 1
        queued = len(self.waiting)
        waiting_deferred = len(self.loading) + (queued if self.stalled and self.deferred else 0)
        capacity = queued + len(self.loading) - waiting_deferred
        usage = min(self._used_blocks() / self.blocks, 1.0)
        self.gauges[j] = (len(self.running), capacity, waiting_deferred, usage)
