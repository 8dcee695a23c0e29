"""One vLLM engine's scheduler, simulated event by event with fluid engine steps.

Between two events (an arrival, an admission, a first token, a finish, an
abort, a scrape, a fault edge) the batch is fixed, so every step takes the
same time ``s`` (:class:`~inference_obs.simulate.scenario.StepModel`) and
progress is linear: a decoding request completes one step every ``s``
seconds, a prefilling one computes its chunk per step. The simulation jumps
from event to event, which keeps an hour of traffic to seconds of work while
keeping the per-step quantities exact:

- each decoding request's step completions are tracked (its next completion
  and the time of its last token), so its inter-token latencies are the gaps
  between its outputs and add up to its decode time (:mod:`.steps`);
- the schedule follows vLLM V1: running requests first (one verification
  token per decoding request plus its draft tokens), then prefill chunks in
  admission order out of ``max_num_batched_tokens``, then waiting requests
  in arrival order while a sequence slot, token budget and KV blocks for the
  whole prompt are free;
- a request with external KV hits first fetches them (waiting, reason
  ``deferred``, holding its blocks), then is scheduled;
- when growing contexts overflow the KV pool, the newest running request is
  preempted and later recomputed (its cached prefix still hits).

A ``host_starved`` or ``transfer_bound`` fault adds a wait to every step
(the host preparing the batch, or host-device copies), during which the
GPUs are idle: steps take longer and the busy share of the time drops.

Simplifications: the step time is taken at the start of a stretch (contexts
grow within it); prompt tokens are credited to iteration steps chunk by chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inference_obs.samples import Floats, Ints
from inference_obs.simulate.arrivals import Requests
from inference_obs.simulate.engine_state import (
    DECODE,
    DONE,
    LOADING,
    PREFILL,
    READY,
    WAITING,
    EngineFaults,
    EngineState,
)
from inference_obs.simulate.scenario import DeploymentSpec
from inference_obs.simulate.steps import decode_stretch, engine_steps, step_time
from inference_obs.simulate.trace import Activity, EngineRun, Outcome

__all__ = ["EngineFaults", "simulate_engine"]

# Prefill remainders below this many tokens are float noise: the chunk is done.
_TOKEN_EPS = 1e-6


@dataclass(slots=True)
class _Plan:
    step: float  # seconds per step; inf when nothing progresses
    decoders: Ints
    prefills: Ints
    chunks: Floats
    compute_share: float
    busy: float = 1.0  # share of the step the GPUs compute (the rest waits on the host)
    transfer: float = 0.0  # share of the step spent on host-device copies


class _Engine(EngineState):
    """vLLM V1's scheduling policy over an :class:`EngineState`."""

    # -- instantaneous events ------------------------------------------------------------

    def _faults(self, t: float) -> None:
        self.stalled, self.deferred = False, False
        for start, stop, deferred in self.faults.stalls:
            if start <= t < stop:
                self.stalled, self.deferred = True, deferred
        self.down = any(dies <= t < serves for dies, serves in self.faults.restarts)
        self.host_ms, self.transfer_ms = 0.0, 0.0
        for start, stop, host_ms, transfer_ms in self.faults.slowdowns:
            if start <= t < stop:
                self.host_ms += host_ms
                self.transfer_ms += transfer_ms
        for dies, _ in self.faults.restarts:
            if dies == t:
                for i in [*self.running, *self.loading, *self.waiting]:
                    self._end(i, t, Outcome.LOST)
                self.engine_frac = 1.0

    def _arrivals(self, t: float) -> None:
        n = self.arrive.size
        while self.next_arrival < n and self.arrive[self.next_arrival] <= t:
            i = self.next_arrival
            self.next_arrival += 1
            if self.down:
                self._end(i, self.arrive[i], Outcome.REJECTED)
            else:
                self.status[i] = WAITING
                self.waiting.append(i)

    def _aborts(self, t: float) -> None:
        order = self.abort_order
        while self.next_abort < order.size and self.abort_at[order[self.next_abort]] <= t:
            i = int(order[self.next_abort])
            self.next_abort += 1
            if self.status[i] not in (DONE, -1):
                self._end(i, self.abort_at[i], Outcome.ABORTED)

    def _loaded(self, t: float) -> None:
        for i in [i for i in self.loading if self.load_done[i] <= t]:
            self._unload(i)
            self.status[i] = READY
            self.waiting.appendleft(i)

    def _prefilled(self, t: float) -> None:
        run = self.run_array
        ready = run[(self.status[run] == PREFILL) & (self.remaining[run] <= _TOKEN_EPS)]
        for i in ready.tolist():
            self.remaining[i] = 0.0
            self.status[i] = DECODE
            self.frac_left[i] = 1.0
            if np.isnan(self.first_token[i]):
                self.first_token[i] = t
                self.last_token[i] = t
                self.generated.add(t, 1.0)
            if self.steps_total[i] == 0:
                self._end(i, t, Outcome.FINISHED)

    def _preempt(self, t: float) -> None:
        if self.worst <= self.blocks:
            return
        while len(self.running) > 1 and self._used_blocks() > self.blocks:
            i = self.running[-1]
            self._unrun(i)
            produced = int(self._produced(np.array([i]))[0])
            self.remaining[i] = self.prompt[i] + produced - self.local_hit[i]
            self.status[i] = READY
            self.waiting.appendleft(i)
            self.preempted[i] += 1
            self.preemption_events.add(t, 1.0)

    # -- scheduling ----------------------------------------------------------------------

    def _allocate(self) -> tuple[Ints, Ints, Floats, int]:
        run = self.run_array
        status = self.status[run]
        decoders, prefills = run[status == DECODE], run[status == PREFILL]
        left = self.budget - decoders.size * (1 + self.k)
        chunks = np.zeros(prefills.size)
        for j, i in enumerate(prefills.tolist()):
            chunks[j] = min(self.remaining[i], max(left, 0))
            left -= int(np.ceil(chunks[j]))
        return decoders, prefills, chunks, left

    def _admit(self, t: float) -> None:
        if not self.waiting or self.stalled or self.down:
            return
        *_, left = self._allocate()
        free = self.blocks - self._used_blocks()
        while self.waiting and len(self.running) < self.max_seqs and left > 0:
            i = self.waiting[0]
            need = self._blocks(self.prompt[i : i + 1] + self._produced(np.array([i])) + 1)
            if need > free:
                break
            self.waiting.popleft()
            free -= need
            if np.isnan(self.admitted[i]):
                self.admitted[i] = t
            if self.status[i] == WAITING:
                self.remaining[i] = self.compute[i]
                if self.external[i] > 0:
                    step = self.spec.step
                    fetch_ms = step.external_load_base_ms + (
                        step.external_load_ms_per_kilo_token * self.external[i] / 1000.0
                    )
                    self.status[i] = LOADING
                    self.load_done[i] = t + fetch_ms / 1000.0
                    self._load(i)
                    continue
            if np.isnan(self.scheduled[i]):
                self.scheduled[i] = t
            self.status[i] = PREFILL
            self._run(i)
            left -= int(np.ceil(min(self.remaining[i], left)))

    def _plan(self) -> _Plan:
        if not self.running or self.stalled or self.down:
            idle = np.zeros(0, dtype=np.int64)
            return _Plan(np.inf, idle, idle, np.zeros(0), 0.0)
        decoders, prefills, chunks, _ = self._allocate()
        context = float((self.prompt[decoders] + self._tokens(decoders)).sum())
        seconds, compute_share = step_time(
            self.spec.step, float(chunks.sum()), decoders.size, self.k, context
        )
        plan = _Plan(seconds, decoders, prefills, chunks, compute_share)
        wait = (self.host_ms + self.transfer_ms) / 1000.0
        if wait > 0:
            # The GPUs idle while each step waits on the host or on its copies.
            plan.step = seconds + wait
            plan.busy = seconds / plan.step
            plan.transfer = self.transfer_ms / 1000.0 / plan.step
        return plan

    def _next_event(self, t: float, plan: _Plan) -> float:
        times = [float(self.edges[np.searchsorted(self.edges, t, side="right")])]
        if self.next_arrival < self.arrive.size:
            times.append(float(self.arrive[self.next_arrival]))
        order = self.abort_order
        while self.next_abort < order.size and self.status[order[self.next_abort]] == DONE:
            self.next_abort += 1
        if self.next_abort < order.size:
            times.append(float(self.abort_at[order[self.next_abort]]))
        if self.loading:
            times.append(float(self.load_done[self.loading].min()))
        if np.isfinite(plan.step):
            busy = plan.chunks > 0
            if busy.any():
                left = self.remaining[plan.prefills[busy]] / plan.chunks[busy]
                times.append(t + float(left.min()) * plan.step)
            if plan.decoders.size:
                d = plan.decoders
                steps_left = self.steps_total[d] - self.steps_done[d]
                times.append(t + float((self.frac_left[d] + steps_left - 1).min()) * plan.step)
        return min(times)

    # -- progress between events ---------------------------------------------------------

    def _advance(self, t0: float, t1: float, plan: _Plan) -> None:
        s = plan.step
        if not np.isfinite(s):
            self.activity.append((t0, t1, 0.0, 0.0, 0.0))
            return
        self.activity.append((t0, t1, plan.busy, plan.compute_share, plan.transfer))
        if plan.prefills.size:
            self.remaining[plan.prefills] -= plan.chunks * (t1 - t0) / s
        d = plan.decoders
        per_step = float(self.per_step[d].sum())
        if d.size:
            self._decode(d, t0, t1, s)
        steps, self.engine_frac = engine_steps(self.engine_frac, t0, t1, s)
        self.iteration.add(t1, max(1.0, round(float(plan.chunks.sum()) + per_step)), float(steps))

    def _decode(self, d: Ints, t0: float, t1: float, s: float) -> None:
        done = decode_stretch(
            self.frac_left[d],
            self.last_token[d],
            self.steps_done[d],
            self.steps_total[d],
            self.after_first[d],
            t0,
            t1,
            s,
        )
        self.itl.extend(t1, done.itl_values, done.itl_weights)
        self.generated.add(t1, float(done.tokens.sum()))
        if self.k:
            self.drafts.add(t1, float(done.steps.sum()))
            self.accepted.add(t1, float((done.tokens - done.steps).sum()))
        self.steps_done[d] += done.steps
        self.last_token[d] = done.last_token
        self.frac_left[d] = done.frac_left
        for i, finish in zip(
            d[done.finished].tolist(), done.last_token[done.finished], strict=True
        ):
            self._end(i, min(float(finish), t1), Outcome.FINISHED)

    def run(self) -> None:
        t = self.begin
        # Snapshots before the simulation starts see an idle engine.
        self.next_snapshot = int(np.searchsorted(self.snapshots, t))
        while True:
            self._faults(t)
            self._arrivals(t)
            self._aborts(t)
            self._loaded(t)
            self._prefilled(t)
            self._preempt(t)
            self._admit(t)
            self._snapshot(t)
            idle = not (self.running or self.loading or self.waiting)
            if t >= self.end and idle and self.next_arrival == self.arrive.size:
                break
            plan = self._plan()
            t_next = self._next_event(t, plan)
            if not np.isfinite(t_next):
                break
            self._advance(t, t_next, plan)
            t = t_next


def simulate_engine(
    spec: DeploymentSpec,
    requests: Requests,
    replica: int,
    engine: int,
    snapshots: Floats,
    faults: EngineFaults,
    begin: float,
    end: float,
) -> EngineRun:
    """Simulate one engine of one replica from ``begin`` until its work is done.

    Parameters
    ----------
    spec
        The deployment (limits, KV pool, step model).
    requests
        All of the deployment's requests; those routed to this engine are simulated.
    replica, engine
        Which replica (index in ``spec.replicas``) and data-parallel engine.
    snapshots
        The replica's scrape times: the gauges are recorded there.
    faults
        Stalls and restarts of the replica.
    begin, end
        Simulation start, and the time after which it stops once idle (arrivals
        stop before it), seconds from the window start.
    """
    ids = np.flatnonzero((requests.replica == replica) & (requests.engine == engine))
    sim = _Engine(spec, requests, ids.astype(np.int64), snapshots, faults, begin, end)
    sim.run()
    segments = np.asarray(sim.activity, dtype=np.float64).reshape(-1, 5)
    return EngineRun(
        replica=replica,
        engine=engine,
        ids=sim.ids,
        admitted=sim.admitted,
        scheduled=sim.scheduled,
        first_token=sim.first_token,
        finish=sim.finish,
        produced_tokens=np.where(
            np.isnan(sim.first_token), 0, requests.tokens_after(sim.ids, sim.steps_done)
        ),
        decode_steps_done=sim.steps_done,
        outcome=sim.outcome,
        preemptions=sim.preempted,
        snapshot_times=snapshots,
        running=sim.gauges[:, 0],
        waiting_capacity=sim.gauges[:, 1],
        waiting_deferred=sim.gauges[:, 2],
        kv_usage=sim.gauges[:, 3],
        inter_token_latency=sim.itl.freeze(),
        iteration_tokens=sim.iteration.freeze(),
        generation_tokens=sim.generated.freeze(),
        spec_drafts=sim.drafts.freeze(),
        spec_accepted=sim.accepted.freeze(),
        preemption_events=sim.preemption_events.freeze(),
        activity=Activity(*(segments[:, c].copy() for c in range(5))),
    )
