"""vLLM's ``/metrics`` as Prometheus stored it: cumulative series at each successful scrape.

Each engine of a replica exposes its own series (labels ``model_name`` and
``engine``, plus the scrape labels ``instance``, ``job``, ``namespace``,
``pod``). A counter or histogram sample at scrape time ``t`` is the total of
everything recorded at times ``<= t`` since the server last (re)started, so a
``restart`` fault resets it to 0. Names, label sets and default bucket
bounds are the catalogue's (:mod:`inference_obs.metrics.vllm`); token-count
histograms use the bounds vLLM derives from ``max_model_len`` where the
deployment declares one; ``le`` is spelled as vLLM's prometheus_client
spells it (``"20.0"``, ``"1e+06"``, ``"+Inf"``).

What is recorded when (see :mod:`~inference_obs.simulate.ground_truth`):
TTFT and prompt tokens at the first token; finished-request histograms and
``request_success_total`` at the finish of recorded requests; cache lookups
when a request is first taken from the queue; inter-token latency,
iteration tokens, generated tokens and speculative-decoding counters per
stretch of engine steps; gauges are the scheduler state at the scrape.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from inference_obs.errors import ConfigurationError
from inference_obs.metrics import vllm
from inference_obs.metrics.builders import bucket_bound_spellings
from inference_obs.metrics.family import Family
from inference_obs.samples import Floats, Series
from inference_obs.simulate.engine_spec import BucketFamily
from inference_obs.simulate.labels import engine_labels
from inference_obs.simulate.scenario import DeploymentSpec
from inference_obs.simulate.trace import EngineRun, Records

__all__ = ["FINISHED_REASONS", "PROMPT_SOURCES", "Sampling", "engine_series", "histogram_buckets"]

FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
"""``finished_reason`` values vLLM 0.19+ exports (each series exists from start-up)."""
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
"""``source`` values of ``vllm:prompt_tokens_by_source_total``."""
# vLLM's bucket families (the keys of --custom-histogram-buckets) and their defaults.
_BUCKET_FAMILIES: dict[BucketFamily, tuple[float, ...]] = {
    "ttft": vllm.TTFT_BUCKETS,
    "inter_token_latency": vllm.INTER_TOKEN_LATENCY_BUCKETS,
    "request_latency": vllm.REQUEST_LATENCY_BUCKETS,
    "request_tokens": vllm.REQUEST_TOKENS_BUCKETS,
    "iteration_tokens": vllm.ITERATION_TOKENS_BUCKETS,
}


@dataclass(frozen=True, slots=True)
class Sampling:
    """The samples to write for one replica.

    ``at`` are the successful scrape times (seconds from the window start),
    ``stamps`` the same as unix seconds, and ``resets`` the times the server
    restarted (counters count from the latest reset before each sample).
    ``missing`` families are not exported; ``drop_buckets`` histograms keep
    only ``_sum`` and ``_count`` (dropped by metric relabelling).
    """

    at: Floats
    stamps: Floats
    resets: Floats
    missing: frozenset[str]
    drop_buckets: frozenset[str] = frozenset()


def histogram_buckets(spec: DeploymentSpec, family: Family) -> tuple[float, ...]:
    """The finite bucket bounds a deployment's server uses for ``family``.

    The deployment's ``custom_histogram_buckets`` for the family's bucket set
    where given; else, for token counts, vLLM's 1-2-5 bounds up to the
    declared ``max_model_len``; else the catalogue's default.
    """
    key = next((k for k, bounds in _BUCKET_FAMILIES.items() if bounds == family.buckets), None)
    if key is None or family.buckets is None:
        raise ConfigurationError(
            f"{family.name}: not a histogram with one of vLLM's bucket sets; give a vLLM "
            "histogram family of the catalogue"
        )
    if key in spec.custom_histogram_buckets:
        return spec.custom_histogram_buckets[key]
    if key == "request_tokens" and spec.config.max_model_len is not None:
        return vllm.request_tokens_buckets(spec.config.max_model_len)
    return family.buckets


class _Accumulator:
    """Cumulative sums of amounts recorded at ``times``, as sampled (from the last reset)."""

    def __init__(self, times: Floats, sampling: Sampling) -> None:
        self.order = np.argsort(times, kind="stable")
        ordered = times[self.order]
        self.at = np.searchsorted(ordered, sampling.at, side="right")
        resets = np.concatenate(([-np.inf], sampling.resets))
        since = resets[np.searchsorted(resets, sampling.at, side="right") - 1]
        self.since = np.searchsorted(ordered, since, side="right")

    def totals(self, amounts: Floats) -> Floats:
        running = np.concatenate(([0.0], np.cumsum(amounts[self.order])))
        out: Floats = running[self.at] - running[self.since]
        return out


def _histogram(
    name: str,
    labels: dict[str, str],
    bounds: tuple[float, ...],
    records: Records,
    sampling: Sampling,
) -> Iterator[Series]:
    bucket = np.searchsorted(np.asarray(bounds), records.value, side="left")
    accumulate = _Accumulator(records.time, sampling)
    kept = () if name in sampling.drop_buckets else (*bounds, np.inf)
    for j, bound in enumerate(kept):
        counts = accumulate.totals(np.where(bucket <= j, records.weight, 0.0))
        le = bucket_bound_spellings(bound)[0]
        yield Series(f"{name}_bucket", {**labels, "le": le}, sampling.stamps, counts)
    total = accumulate.totals(records.value * records.weight)
    yield Series(f"{name}_sum", labels, sampling.stamps, total)
    yield Series(f"{name}_count", labels, sampling.stamps, accumulate.totals(records.weight))


def _per_request(table: pd.DataFrame, time: str, value: str, where: pd.Series) -> Records:
    rows = table[where & table[time].notna()]
    values = rows[value].to_numpy(dtype=np.float64)
    return Records(rows[time].to_numpy(dtype=np.float64), values, np.ones(values.size))


def _histograms(table: pd.DataFrame, run: EngineRun) -> dict[Family, Records]:
    recorded = table["outcome"] == "finished"
    every = pd.Series(True, index=table.index)
    finished = {
        vllm.REQUEST_TIME_PER_OUTPUT_TOKEN: "tpot",
        vllm.E2E_REQUEST_LATENCY: "e2e",
        vllm.REQUEST_QUEUE_TIME: "queue_time",
        vllm.REQUEST_PREFILL_TIME: "prefill_time",
        vllm.REQUEST_DECODE_TIME: "decode_time",
        vllm.REQUEST_PROMPT_TOKENS: "prompt_tokens",
        vllm.REQUEST_GENERATION_TOKENS: "output_tokens",
    }
    out = {vllm.TIME_TO_FIRST_TOKEN: _per_request(table, "first_token", "ttft", every)}
    out |= {f: _per_request(table, "finish", column, recorded) for f, column in finished.items()}
    has_max = recorded & table["max_tokens"].notna()
    out[vllm.REQUEST_PARAMS_MAX_TOKENS] = _per_request(table, "finish", "max_tokens", has_max)
    out[vllm.INTER_TOKEN_LATENCY] = run.inter_token_latency
    out[vllm.ITERATION_TOKENS] = run.iteration_tokens
    return out


def _scaled(records: Records, factor: float) -> Records:
    return Records(records.time, records.value * factor, records.weight)


def _counters(
    spec: DeploymentSpec, table: pd.DataFrame, run: EngineRun
) -> list[tuple[Family, dict[str, str], Records]]:
    recorded = table["outcome"] == "finished"
    every = pd.Series(True, index=table.index)
    prompt = _per_request(table, "first_token", "prompt_tokens", every)
    table = table.assign(
        computed_prompt_tokens=table["prompt_tokens"]
        - table["local_hit_tokens"]
        - table["external_hit_tokens"]
    )
    by_source = ("computed_prompt_tokens", "local_hit_tokens", "external_hit_tokens")
    out: list[tuple[Family, dict[str, str], Records]] = [
        (vllm.PROMPT_TOKENS, {}, prompt),
        *(
            (
                vllm.PROMPT_TOKENS_BY_SOURCE,
                {"source": source},
                _per_request(table, "first_token", column, every),
            )
            for source, column in zip(PROMPT_SOURCES, by_source, strict=True)
        ),
        (vllm.GENERATION_TOKENS, {}, run.generation_tokens),
        *(
            (
                vllm.REQUEST_SUCCESS,
                {"finished_reason": reason},
                _per_request(
                    table.assign(one=1.0),
                    "finish",
                    "one",
                    recorded & (table["finish_reason"] == reason),
                ),
            )
            for reason in FINISHED_REASONS
        ),
        (vllm.NUM_PREEMPTIONS, {}, run.preemption_events),
    ]
    if spec.config.prefix_caching is not False:
        out.append(
            (vllm.PREFIX_CACHE_QUERIES, {}, _per_request(table, "admitted", "prompt_tokens", every))
        )
        out.append(
            (vllm.PREFIX_CACHE_HITS, {}, _per_request(table, "admitted", "local_hit_tokens", every))
        )
    if spec.config.external_kv_cache:
        external = table.assign(external_queries=table["prompt_tokens"] - table["local_hit_tokens"])
        queries = _per_request(external, "admitted", "external_queries", every)
        hits = _per_request(table, "admitted", "external_hit_tokens", every)
        out += [
            (vllm.EXTERNAL_PREFIX_CACHE_QUERIES, {}, queries),
            (vllm.EXTERNAL_PREFIX_CACHE_HITS, {}, hits),
        ]
    if spec.speculative_tokens:
        out += [
            (vllm.SPEC_DECODE_NUM_DRAFTS, {}, run.spec_drafts),
            (
                vllm.SPEC_DECODE_NUM_DRAFT_TOKENS,
                {},
                _scaled(run.spec_drafts, spec.speculative_tokens),
            ),
            (vllm.SPEC_DECODE_NUM_ACCEPTED_TOKENS, {}, run.spec_accepted),
        ]
    return out


def engine_series(
    spec: DeploymentSpec,
    deployment: int,
    table: pd.DataFrame,
    run: EngineRun,
    sampling: Sampling,
) -> Iterator[Series]:
    """Every vLLM series of one engine, sampled at the replica's successful scrapes.

    ``table`` is the engine's slice of the ground truth
    (:func:`~inference_obs.simulate.ground_truth.request_table`).
    """
    labels = engine_labels(spec, deployment, run.replica, run.engine)
    if not sampling.at.size:
        return
    scraped = np.searchsorted(run.snapshot_times, sampling.at)
    gauges = {
        vllm.NUM_REQUESTS_RUNNING: run.running,
        vllm.NUM_REQUESTS_WAITING: run.waiting_capacity + run.waiting_deferred,
        vllm.KV_CACHE_USAGE: run.kv_usage,
    }
    for family, values in gauges.items():
        if family.name not in sampling.missing:
            yield Series(family.name, labels, sampling.stamps, values[scraped])
    if vllm.NUM_REQUESTS_WAITING_BY_REASON.name not in sampling.missing:
        name = vllm.NUM_REQUESTS_WAITING_BY_REASON.name
        for reason, values in (
            ("capacity", run.waiting_capacity),
            ("deferred", run.waiting_deferred),
        ):
            yield Series(name, {**labels, "reason": reason}, sampling.stamps, values[scraped])
    if vllm.CACHE_CONFIG_INFO.name not in sampling.missing:
        yield Series(
            vllm.CACHE_CONFIG_INFO.name,
            _cache_config(spec, labels),
            sampling.stamps,
            np.ones(sampling.at.size),
        )
    for family, extra, records in _counters(spec, table, run):
        if family.name not in sampling.missing:
            totals = _Accumulator(records.time, sampling).totals(records.value * records.weight)
            yield Series(family.name, {**labels, **extra}, sampling.stamps, totals)
    for family, records in _histograms(table, run).items():
        if family.name not in sampling.missing:
            bounds = histogram_buckets(spec, family)
            yield from _histogram(family.name, labels, bounds, records, sampling)


def _cache_config(spec: DeploymentSpec, labels: dict[str, str]) -> dict[str, str]:
    kv = spec.kv_cache
    config = {
        "engine": labels["engine"],
        "block_size": str(kv.block_size),
        "cache_dtype": kv.cache_dtype,
        "gpu_memory_utilization": repr(kv.gpu_memory_utilization),
        "num_gpu_blocks": str(kv.num_gpu_blocks),
        "enable_prefix_caching": str(spec.config.prefix_caching is not False),
    }
    if set(config) != set(vllm.CACHE_CONFIG_INFO.labels):
        raise AssertionError("cache_config_info labels differ from the catalogue's")
    scrape = {k: v for k, v in labels.items() if k not in ("model_name", "engine")}
    return {**config, **scrape}
