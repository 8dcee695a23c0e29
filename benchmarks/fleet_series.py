"""The vLLM series of one replica of the generated fleet, and the load they follow.

Shapes, not a simulation: each replica has a smoothly varying request rate
(a daily swell plus AR(1) noise), requests finish per scrape interval as a
Poisson count, and every histogram spreads its observations over its buckets
by a log-normal law whose median grows with the replica's load. Counters are
cumulative from before the window (so they start above zero) and restart from
zero where a replica restarts; gauges follow the load (the GPUs too: see
:mod:`benchmarks.fleet_gpus`). Every name, label and default bucket set is the
catalogue's (:mod:`inference_obs.metrics.vllm`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from inference_obs.metrics import vllm
from inference_obs.metrics.builders import bucket_bound_spellings
from inference_obs.metrics.family import Family, MetricType
from inference_obs.samples import Floats, Series

__all__ = ["VLLM_FAMILIES", "Load", "Replica", "load_of", "stamps_of", "vllm_series"]

#: vLLM families of a V1 server with prefix caching and speculative decoding on:
#: the core ones still exported by 0.33, plus the speculative-decoding counters.
VLLM_FAMILIES: tuple[Family, ...] = (
    *(f for f in vllm.CORE_FAMILIES if f.condition is None),
    vllm.SPEC_DECODE_NUM_DRAFTS,
    vllm.SPEC_DECODE_NUM_DRAFT_TOKENS,
    vllm.SPEC_DECODE_NUM_ACCEPTED_TOKENS,
    vllm.SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS,
)
#: Values of the extra labels some families carry, as vLLM 0.33 exports them.
_EXTRA_LABELS: dict[str, tuple[str, ...]] = {
    "reason": ("capacity", "deferred"),
    "sleep_state": ("awake", "weights_offloaded", "discard_all"),
    "finished_reason": ("stop", "length", "abort", "error", "repetition"),
}
_PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
_CACHED_SOURCES = ("local_cache_hit", "external_kv_transfer")
_FINISH_SHARES = (0.9, 0.08, 0.015, 0.001, 0.004)
# Observation laws: (median at no load, log-normal sigma) in the family's unit.
_LAWS: dict[str, tuple[float, float]] = {
    "vllm:time_to_first_token_seconds": (0.35, 0.7),
    "vllm:inter_token_latency_seconds": (0.03, 0.35),
    "vllm:request_time_per_output_token_seconds": (0.032, 0.3),
    "vllm:e2e_request_latency_seconds": (9.0, 0.8),
    "vllm:request_queue_time_seconds": (0.02, 1.2),
    "vllm:request_prefill_time_seconds": (0.25, 0.7),
    "vllm:request_decode_time_seconds": (8.5, 0.8),
    "vllm:request_inference_time_seconds": (8.8, 0.8),
    "vllm:request_prompt_tokens": (1800.0, 1.0),
    "vllm:request_generation_tokens": (300.0, 0.9),
    "vllm:request_max_num_generation_tokens": (4096.0, 0.5),
    "vllm:request_params_max_tokens": (4096.0, 0.5),
    "vllm:request_prefill_kv_computed_tokens": (1100.0, 1.1),
    "vllm:iteration_tokens_total": (96.0, 1.0),
}
# Integer-valued histograms: probabilities of their buckets in order (the rest 0).
_DISCRETE: dict[str, tuple[float, ...]] = {
    "vllm:request_params_n": (1.0,),
    "vllm:request_num_preemptions": (0.97, 0.02, 0.01),
}
# Families whose observations are per token or per engine step, not per request.
_PER_TOKEN = "vllm:inter_token_latency_seconds"
_PER_STEP = "vllm:iteration_tokens_total"
# Histograms whose medians stretch with load (latencies); token counts do not.
_LOADED = frozenset(n for n in _LAWS if n.endswith("_seconds"))


@dataclass(frozen=True, slots=True)
class Replica:
    """One replica: its place in the fleet and how its samples are timed.

    ``steps`` scrapes at ``interval_s`` from ``start_ms``; ``warmup`` more
    steps are simulated before them (counters start above zero). ``restart``
    is the step at which the server restarts (counters from zero), if any,
    and ``gpu_gap`` a ``(first, stop)`` range of steps the GPU exporter missed.
    """

    deployment: int
    index: int
    pod: str
    node: str
    namespace: str
    model: str
    gpu_model: str
    gpu_memory_mib: int
    gpus: int
    max_num_seqs: int
    spec_tokens: int
    start_ms: int
    interval_s: float
    steps: int
    warmup: int
    seed: int
    restart: int | None = None
    gpu_gap: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class Load:
    rate: Floats  # requests per second, warm-up steps included
    pressure: Floats  # rate over the replica's capacity
    finished: Floats  # requests finished per step


def load_of(replica: Replica, rng: np.random.Generator) -> Load:
    """The replica's request rate, pressure and finished requests per step (warm-up included)."""
    n = replica.warmup + replica.steps
    k = np.arange(n, dtype=np.float64)
    day = 1.0 + 0.45 * np.sin(2 * math.pi * (k / max(n, 1)) + 0.7 * replica.index)
    noise = np.zeros(n)
    shocks = rng.normal(0.0, 0.06, n)
    for i in range(1, n):  # AR(1): bursts last a few minutes
        noise[i] = 0.97 * noise[i - 1] + shocks[i]
    capacity = replica.max_num_seqs / 12.0  # requests/s a replica serves without queueing
    rate = np.clip(0.8 * capacity * day * np.exp(noise), 0.05, None)
    finished = rng.poisson(rate * replica.interval_s).astype(np.float64)
    return Load(rate, rate / capacity, finished)


def stamps_of(replica: Replica, phase_ms: int, rng: np.random.Generator) -> Floats:
    """Scrape times (unix s) of one target: its phase, then a few ms of jitter."""
    step_ms = round(replica.interval_s * 1000)
    jitter = rng.integers(0, 6, replica.steps)
    millis = replica.start_ms + phase_ms + step_ms * np.arange(replica.steps) + jitter
    out: Floats = millis / 1000.0
    return out


def _cumulative(increments: Floats, replica: Replica) -> Floats:
    """Counter samples from per-step increments: totals since the last restart, in the window."""
    total = np.cumsum(increments)
    if replica.restart is not None:
        at = replica.warmup + replica.restart
        total[at:] -= total[at - 1]
    out: Floats = total[replica.warmup :]
    return out


def _bucket_counts(
    name: str,
    buckets: tuple[float, ...],
    observations: Floats,
    scale: Floats,
    rng: np.random.Generator,
) -> Floats:
    """Observations per bucket per step (steps x buckets incl. +Inf), by conditional binomials."""
    bounds = np.asarray(buckets, dtype=np.float64)
    if name in _DISCRETE:
        shares = np.zeros(bounds.size + 1)
        shares[: len(_DISCRETE[name])] = _DISCRETE[name]
        probs = np.broadcast_to(shares, (observations.size, shares.size))
    else:
        median, sigma = _LAWS[name]
        z = (np.log(bounds)[None, :] - np.log(median * scale)[:, None]) / sigma
        cdf = 0.5 * (1.0 + _erf(z / math.sqrt(2.0)))
        probs = np.diff(
            np.concatenate([np.zeros((z.shape[0], 1)), cdf, np.ones((z.shape[0], 1))], axis=1),
            axis=1,
        )
    counts = np.zeros(probs.shape)
    left = observations.astype(np.int64)
    mass = np.ones(observations.size)
    for j in range(probs.shape[1] - 1):
        p = np.clip(probs[:, j] / np.maximum(mass, 1e-300), 0.0, 1.0)
        got = rng.binomial(left, p)
        counts[:, j] = got
        left = left - got
        mass = mass - probs[:, j]
    counts[:, -1] = left
    return counts


def _erf(x: Floats) -> Floats:
    # Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7): enough for bucket shares, no scipy import.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    out: Floats = sign * (1.0 - poly * np.exp(-a * a))
    return out


def _representative(buckets: tuple[float, ...]) -> Floats:
    """A value inside each bucket (geometric middle; 1.5x the top bound for +Inf)."""
    upper = np.asarray((*buckets, 1.5 * buckets[-1]), dtype=np.float64)
    lower = np.concatenate(([upper[0] / 2], upper[:-1]))
    out: Floats = np.sqrt(lower * upper)
    return out


def vllm_series(replica: Replica, load: Load, rng: np.random.Generator) -> Iterator[Series]:
    """Every vLLM series of ``replica`` (one engine), and ``up`` of its scrape target."""
    d, i = replica.deployment, replica.index
    scrape = {
        "instance": f"10.{d}.{i // 250}.{i % 250 + 1}:8000",
        "job": "vllm",
        "namespace": replica.namespace,
        "pod": replica.pod,
    }
    engine = {"model_name": replica.model, "engine": "0", **scrape}
    stamps = stamps_of(replica, int(rng.integers(0, round(replica.interval_s * 1000))), rng)
    keep = np.ones(replica.steps, dtype=np.bool_)
    if replica.restart is not None:  # the scrapes while the server restarted failed
        keep[max(0, replica.restart - 2) : replica.restart] = False
    yield Series("up", scrape, stamps, keep.astype(np.float64))

    def counter(increments: Floats) -> Floats:
        return _cumulative(increments, replica)[keep]

    for family in VLLM_FAMILIES:
        if family.type is MetricType.HISTOGRAM:
            yield from _histogram(family, engine, replica, load, rng, stamps[keep], keep)
    per = load.finished
    prompt = np.rint(per * 2500.0 * np.exp(rng.normal(0, 0.1, per.size)))
    generated = np.rint(per * 300.0 * np.exp(rng.normal(0, 0.1, per.size)))
    hits = np.rint(prompt * np.clip(rng.normal(0.42, 0.05, per.size), 0, 0.9))
    zeros = np.zeros(per.size)
    reasons = rng.multinomial(per.astype(np.int64), _FINISH_SHARES).astype(np.float64)
    accept = 0.65
    drafts = np.rint(generated / (1 + replica.spec_tokens * accept))
    accepted = np.rint(drafts * replica.spec_tokens * accept)
    weights = accept ** np.arange(replica.spec_tokens)
    weights /= weights.sum()
    window = load.pressure[replica.warmup :][keep]
    running = np.clip(
        np.rint(replica.max_num_seqs * 0.75 * window * np.exp(rng.normal(0, 0.08, window.size))),
        0,
        replica.max_num_seqs,
    )
    waiting = rng.poisson(np.clip(window - 0.95, 0, None) * 60.0).astype(np.float64)
    deferred = rng.binomial(waiting.astype(np.int64), 0.1).astype(np.float64)
    usage: Floats = running / replica.max_num_seqs * 0.85 + rng.normal(0, 0.02, window.size)
    kv = np.round(np.clip(usage, 0.0, 1.0), 6).astype(np.float64)
    blocks = str(replica.gpu_memory_mib * replica.gpus // 40)
    config = {
        "block_size": "16",
        "cache_dtype": "auto",
        "enable_prefix_caching": "True",
        "engine": "0",
        "gpu_memory_utilization": "0.9",
        "num_gpu_blocks": blocks,
        **scrape,
    }
    one = np.ones(int(keep.sum()))
    plain: dict[str, list[tuple[dict[str, str], Floats]]] = {
        "vllm:num_requests_running": [({}, running.astype(np.float64))],
        "vllm:num_requests_waiting": [({}, waiting)],
        "vllm:num_requests_waiting_by_reason": [
            ({"reason": "capacity"}, waiting - deferred),
            ({"reason": "deferred"}, deferred),
        ],
        "vllm:kv_cache_usage_perc": [({}, kv)],
        "vllm:engine_sleep_state": [
            ({"sleep_state": s}, one * (s == "awake")) for s in _EXTRA_LABELS["sleep_state"]
        ],
        "vllm:prompt_tokens_total": [({}, counter(prompt))],
        "vllm:prompt_tokens_by_source_total": [
            ({"source": s}, counter(v))
            for s, v in zip(_PROMPT_SOURCES, (prompt - hits, hits, zeros), strict=True)
        ],
        "vllm:prompt_tokens_cached_total": [({}, counter(hits))],
        "vllm:prompt_tokens_cached_by_source_total": [
            ({"source": s}, counter(v)) for s, v in zip(_CACHED_SOURCES, (hits, zeros), strict=True)
        ],
        "vllm:generation_tokens_total": [({}, counter(generated))],
        "vllm:request_success_total": [
            ({"finished_reason": r}, counter(reasons[:, j]))
            for j, r in enumerate(_EXTRA_LABELS["finished_reason"])
        ],
        "vllm:num_preemptions_total": [
            ({}, counter(rng.poisson(0.02 * per * load.pressure).astype(np.float64)))
        ],
        "vllm:prefix_cache_queries_total": [({}, counter(prompt))],
        "vllm:prefix_cache_hits_total": [({}, counter(hits))],
        "vllm:mm_cache_queries_total": [({}, counter(zeros))],
        "vllm:mm_cache_hits_total": [({}, counter(zeros))],
        "vllm:spec_decode_num_drafts_total": [({}, counter(drafts))],
        "vllm:spec_decode_num_draft_tokens_total": [({}, counter(drafts * replica.spec_tokens))],
        "vllm:spec_decode_num_accepted_tokens_total": [({}, counter(accepted))],
        "vllm:spec_decode_num_accepted_tokens_per_pos_total": [
            ({"position": str(p)}, counter(np.rint(accepted * w))) for p, w in enumerate(weights)
        ],
    }
    for family in VLLM_FAMILIES:
        if family.type is MetricType.HISTOGRAM:
            continue
        if family is vllm.CACHE_CONFIG_INFO:
            yield Series(family.name, config, stamps[keep], one)
        elif family is vllm.ADMISSION_REJECTIONS:  # counted by the API server: no engine label
            labels = {"model_name": replica.model, "reason": "queue_full", **scrape}
            yield Series(family.name, labels, stamps[keep], counter(zeros))
        else:
            for extra, values in plain[family.name]:
                yield Series(family.name, {**engine, **extra}, stamps[keep], values)


def _histogram(
    family: Family,
    labels: dict[str, str],
    replica: Replica,
    load: Load,
    rng: np.random.Generator,
    stamps: Floats,
    keep: npt.NDArray[np.bool_],
) -> Iterator[Series]:
    assert family.buckets is not None
    if family.name == _PER_TOKEN:
        observations = np.rint(load.finished * 300.0)
    elif family.name == _PER_STEP:
        observations = np.rint(25.0 * replica.interval_s * np.clip(load.pressure, 0.05, 1.0))
    else:
        observations = load.finished
    scale = (
        1.0 + 3.0 * np.clip(load.pressure - 0.7, 0, None) ** 2
        if family.name in _LOADED
        else np.ones(observations.size)
    )
    counts = _bucket_counts(family.name, family.buckets, observations, scale, rng)
    sums = counts @ _representative(family.buckets) * np.exp(rng.normal(0, 0.02, observations.size))
    if family.unit == "tokens":
        sums = np.rint(sums)
    cumulative = np.cumsum(counts, axis=1)
    for j, bound in enumerate((*family.buckets, math.inf)):
        le = bucket_bound_spellings(bound)[0]
        values = _cumulative(cumulative[:, j], replica)[keep]
        yield Series(f"{family.name}_bucket", {**labels, "le": le}, stamps, values)
    yield Series(f"{family.name}_sum", labels, stamps, _cumulative(sums, replica)[keep])
    yield Series(f"{family.name}_count", labels, stamps, _cumulative(observations, replica)[keep])
