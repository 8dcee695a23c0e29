"""Requests arriving at a deployment: when, where they are routed, and their shape.

Arrivals of each traffic class are a Poisson process whose rate is the
class's base rate times the multipliers of the bursts covering the time
(a piecewise-constant rate, drawn piece by piece), plus scripted clusters.
Each request is routed to a replica and a data-parallel engine uniformly at
random (a cluster may name its replica). Its shape is drawn up front:

- ``output_tokens`` is where it would stop by itself; with ``max_tokens``
  set and reached first it ends by ``length`` instead, and an engine error
  cuts it at a uniform fraction;
- cache hits are whole KV blocks, and the last prompt token never hits
  (vLLM always computes it);
- with speculative decoding a request needs ``ceil((L - 1) / (1 + a k))``
  verification steps for ``L`` output tokens at acceptance rate ``a`` with
  ``k`` draft tokens per step; without it, ``L - 1`` steps.

Times are seconds from the window start. Every stream draws from its own
generator keyed by (seed, deployment, class, stream), so changing one class
leaves the draws of the others alone.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from inference_obs.samples import Floats, Ints
from inference_obs.simulate.distributions import draw
from inference_obs.simulate.scenario import DeploymentSpec
from inference_obs.simulate.workload import TrafficClass

__all__ = ["PlannedEnd", "Requests", "generate_requests"]


class PlannedEnd(IntEnum):
    """How a request would end if nothing cut it short."""

    STOP = 0
    LENGTH = 1
    ERROR = 2


# Independent random streams of one traffic class.
_ARRIVALS, _ROUTING, _SHAPE, _CACHE, _SPEC, _ENDS = range(6)


@dataclass(frozen=True, slots=True)
class Requests:
    """One deployment's requests in arrival order, as columns (one entry per request)."""

    traffic_class: Ints
    replica: Ints
    engine: Ints
    arrival: Floats
    engine_arrival: Floats
    prompt_tokens: Ints
    max_tokens: Ints
    output_tokens: Ints
    planned_end: Ints
    local_hit_tokens: Ints
    external_hit_tokens: Ints
    decode_steps: Ints
    abort_at: Floats

    def __len__(self) -> int:
        return int(self.arrival.size)

    @property
    def computed_prompt_tokens(self) -> Ints:
        """Prompt tokens prefilled locally: neither a local nor an external cache hit."""
        out: Ints = self.prompt_tokens - self.local_hit_tokens - self.external_hit_tokens
        return out

    def tokens_after(self, index: Ints, steps: Ints) -> Ints:
        """Output tokens of requests ``index`` once ``steps`` decode steps are done.

        The first token comes from the prefill; the ``L - 1`` others are spread
        evenly over the decode steps (``1 + floor(steps * (L - 1) / n)``).
        """
        total = self.output_tokens[index] - 1
        n = np.maximum(self.decode_steps[index], 1)
        out: Ints = 1 + (steps * total) // n
        return out


def _arrival_times(
    traffic: TrafficClass, begin: float, end: float, rng: np.random.Generator
) -> Floats:
    edges = {begin, end}
    for burst in traffic.bursts:
        edges.update(t for t in (burst.start, burst.end) if begin < t < end)
    cuts = sorted(edges)
    pieces: list[Floats] = []
    for lo, hi in itertools.pairwise(cuts):
        rate = traffic.rate_per_second
        for burst in traffic.bursts:
            if burst.start <= lo and hi <= burst.end:
                rate *= burst.multiplier
        count = int(rng.poisson(rate * (hi - lo)))
        pieces.append(rng.uniform(lo, hi, count))
    return np.sort(np.concatenate(pieces)) if pieces else np.zeros(0)


def _block_floor(tokens: Floats, block: int) -> Ints:
    out: Ints = (np.floor(tokens / block) * block).astype(np.int64)
    return out


def _one_class(
    spec: DeploymentSpec,
    traffic: TrafficClass,
    keys: tuple[int, int, int],
    begin: float,
    end: float,
) -> dict[str, npt.NDArray[np.generic]]:
    def rng(stream: int) -> np.random.Generator:
        return np.random.default_rng((*keys, stream))

    poisson = _arrival_times(traffic, begin, end, rng(_ARRIVALS))
    scripted = [
        c.at + c.spread * np.arange(c.count) / c.count
        for c in traffic.clusters
        if begin <= c.at < end
    ]
    pinned = [
        np.full(c.count, spec.replicas.index(c.replica) if c.replica else -1)
        for c in traffic.clusters
        if begin <= c.at < end
    ]
    arrival = np.concatenate([poisson, *scripted])
    replica = np.concatenate([np.full(poisson.size, -1), *pinned]).astype(np.int64)
    n = arrival.size

    routing = rng(_ROUTING)
    free = replica < 0
    replica[free] = routing.integers(0, len(spec.replicas), int(free.sum()))
    engine = routing.integers(0, spec.engines_per_replica, n)

    shape = rng(_SHAPE)
    prompt = np.maximum(np.rint(draw(traffic.prompt_tokens, shape, n)), 1).astype(np.int64)
    natural = np.maximum(np.rint(draw(traffic.output_tokens, shape, n)), 1).astype(np.int64)
    max_tokens = np.full(n, -1, dtype=np.int64)
    if traffic.max_tokens is not None:
        limits = np.maximum(np.rint(draw(traffic.max_tokens, shape, n)), 1).astype(np.int64)
        unset = shape.random(n) < traffic.max_tokens_unset_share
        max_tokens = np.where(unset, -1, limits)
    limited = (max_tokens > 0) & (natural > max_tokens)
    output = np.where(limited, max_tokens, natural)
    planned = np.where(limited, PlannedEnd.LENGTH, PlannedEnd.STOP).astype(np.int64)

    ends = rng(_ENDS)
    error = ends.random(n) < traffic.error_share
    cut = np.maximum(np.floor(ends.random(n) * output), 1).astype(np.int64)
    output = np.where(error, cut, output)
    planned = np.where(error, PlannedEnd.ERROR, planned)
    aborts = ends.random(n) < traffic.abort_share
    patience = np.maximum(draw(traffic.abort_after, ends, n), 0.0)
    abort_at = np.where(aborts, arrival + patience, np.inf)

    cache = rng(_CACHE)
    block = spec.kv_cache.block_size
    hittable = _block_floor((prompt - 1).astype(np.float64), block)
    local_ratio = np.clip(draw(traffic.prefix_hit_ratio, cache, n), 0, 1)
    local = np.minimum(_block_floor(local_ratio * prompt, block), hittable)
    external_ratio = np.clip(draw(traffic.external_hit_ratio, cache, n), 0, 1)
    external = np.minimum(_block_floor(external_ratio * (prompt - local), block), hittable - local)

    k = spec.speculative_tokens
    acceptance = np.clip(draw(traffic.acceptance_rate, rng(_SPEC), n), 0, 1)
    per_step = 1.0 + acceptance * k if k else np.ones(n)
    steps = np.ceil((output - 1) / per_step).astype(np.int64)

    overhead_ms = spec.step.frontend_ms + spec.step.tokenize_ms_per_kilo_token * prompt / 1000.0
    return {
        "arrival": arrival,
        "replica": replica,
        "engine": engine,
        "engine_arrival": arrival + overhead_ms / 1000.0,
        "prompt_tokens": prompt,
        "max_tokens": max_tokens,
        "output_tokens": output,
        "planned_end": planned,
        "local_hit_tokens": local,
        "external_hit_tokens": np.maximum(external, 0),
        "decode_steps": steps,
        "abort_at": abort_at,
    }


def generate_requests(
    spec: DeploymentSpec, seed: int, deployment_index: int, begin: float, end: float
) -> Requests:
    """Every request of a deployment arriving in ``[begin, end)`` (seconds from the window start).

    Parameters
    ----------
    spec
        The deployment, with its traffic classes.
    seed
        Scenario seed.
    deployment_index
        Position of the deployment in the scenario (keys its random streams).
    begin, end
        Arrival span, seconds relative to the window start.
    """
    columns: dict[str, list[npt.NDArray[np.generic]]] = {}
    for index, traffic in enumerate(spec.workload):
        drawn = _one_class(spec, traffic, (seed, deployment_index, index), begin, end)
        drawn["traffic_class"] = np.full(drawn["arrival"].size, index, dtype=np.int64)
        for name, values in drawn.items():
            columns.setdefault(name, []).append(values)
    merged = {name: np.concatenate(parts) for name, parts in columns.items()}
    order = np.argsort(merged["arrival"], kind="stable")
    return Requests(**{name: values[order] for name, values in merged.items()})
