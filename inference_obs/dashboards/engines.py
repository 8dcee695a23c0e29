"""vLLM and SGLang dashboards: latency, throughput, queue against engine activity, caches.

Every query comes from the builders (:mod:`inference_obs.metrics.builders`) or
the standard queries, so a panel computes what the report computes: quantiles
from buckets merged across replicas, request-weighted means, rates summed
per deployment, pool pressure as the fullest engine, hit rates as ratios of
counters.
"""

from __future__ import annotations

from collections.abc import Sequence

from inference_obs.dashboards.model import WINDOW, Dashboard, Panel, Row, Target, titled
from inference_obs.metrics import builders, sglang, vllm
from inference_obs.metrics.family import Family
from inference_obs.metrics.standard import standard_query
from inference_obs.query import Expr, Matcher, avg_over_time, rate

__all__ = ["QUANTILES", "bucket_note", "sglang_dashboard", "vllm_dashboard"]

QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99)
"""Quantiles drawn on every latency panel."""

_BY = ("model_name",)
_MATCHERS = (Matcher.regex("model_name", "$model_name"),)
_PER_MODEL = " {{model_name}}"


def bucket_note(family: Family) -> str:
    """What the family's buckets let a quantile say: resolution, floor and ceiling."""
    unit = "s" if family.unit == "seconds" else f" {family.unit}"
    if not family.buckets:
        return (
            "Quantiles are interpolated inside the bucket that holds them. The catalogue does "
            "not record this histogram's default bounds: read le from the data."
        )
    low, high = family.buckets[0], family.buckets[-1]
    return (
        "Quantiles come from the buckets of every replica added by le, interpolated linearly "
        f"inside the bucket that holds them. Default bounds: {len(family.buckets)} from "
        f"{low:g}{unit} to {high:g}{unit}. A quantile in the lowest bucket only says "
        f"'at most {low:g}{unit}'; above {high:g}{unit} the line stays at {high:g}{unit}. Two "
        "quantiles in one bucket cannot be told apart. Deployments may set other bounds."
    )


def _latency(title: str, family: Family, matchers: Sequence[Matcher], extra: str) -> Panel:
    targets = [
        Target(
            builders.histogram_quantile_merged(family, q, matchers, WINDOW, _BY),
            f"p{round(q * 100)}{_PER_MODEL}",
        )
        for q in QUANTILES
    ]
    targets.append(
        Target(builders.histogram_mean(family, matchers, WINDOW, _BY), f"mean{_PER_MODEL}")
    )
    description = titled(
        (
            f"{family.help} Reads {family.name}.",
            bucket_note(family),
            "The mean is request-weighted: the increase of _sum over the increase of _count.",
            extra,
        )
    )
    return Panel(title, "s", description, tuple(targets))


def _summed_gauge(family: Family, matchers: Sequence[Matcher]) -> Expr:
    """Deployment total of a gauge: each series' mean over the window, summed."""
    return avg_over_time(family.select(matchers).over(WINDOW)).sum(by=_BY)


def _once_per_server(family: Family, matchers: Sequence[Matcher]) -> Expr:
    """Per-second rate of a counter every rank of a server repeats, summed per model.

    Each series is rated, then the ranks of one server (:data:`~inference_obs.metrics.
    sglang.RANK_LABELS`) collapse to their largest rate, so a TP=8 server counts an
    event once, not eight times; DP ranks and replicas are then summed.
    """
    per_series = rate(family.select(matchers).over(WINDOW))
    return per_series.max(without=sglang.RANK_LABELS).sum(by=_BY)


def _vllm_latency(m: Sequence[Matcher]) -> Row:
    """Quantiles and request-weighted means of each latency, and the request phases."""
    return Row(
        "Latency (quantiles from merged buckets, request-weighted means)",
        (
            _latency("Time to first token", vllm.TIME_TO_FIRST_TOKEN, m, ""),
            _latency("End-to-end request latency", vllm.E2E_REQUEST_LATENCY, m, ""),
            _latency(
                "Inter-token latency (per engine step)",
                vllm.INTER_TOKEN_LATENCY,
                m,
                "One observation per engine step, not per request: not per-request TPOT.",
            ),
            _latency(
                "Time per output token (per request)",
                vllm.REQUEST_TIME_PER_OUTPUT_TOKEN,
                m,
                "Requests with one output token or fewer record 0.",
            ),
            _latency("Queue time", vllm.REQUEST_QUEUE_TIME, m, ""),
            Panel(
                "Mean time per request phase",
                "s",
                "Request-weighted means of queue, prefill and decode time. Prefill and decode "
                "include preemptions; queue time is the first wait only.",
                tuple(
                    Target(builders.histogram_mean(f, m, WINDOW, _BY), f"{name}{_PER_MODEL}")
                    for name, f in (
                        ("queue", vllm.REQUEST_QUEUE_TIME),
                        ("prefill", vllm.REQUEST_PREFILL_TIME),
                        ("decode", vllm.REQUEST_DECODE_TIME),
                    )
                ),
            ),
        ),
    )


def _vllm_throughput(m: Sequence[Matcher]) -> Row:
    """Token rates, prompt tokens by source, and finished requests by reason."""
    return Row(
        "Throughput",
        (
            Panel(
                "Tokens per second",
                "short",
                "Counter rates per series, summed per model. Prompt tokens by source: only "
                "local_compute is prefill work; cache hits and KV transfers are not.",
                (
                    Target(
                        builders.per_second(vllm.GENERATION_TOKENS, m, WINDOW, _BY),
                        f"output{_PER_MODEL}",
                    ),
                    Target(
                        builders.per_second(
                            vllm.PROMPT_TOKENS_BY_SOURCE, m, WINDOW, (*_BY, "source")
                        ),
                        "prompt {{source}}" + _PER_MODEL,
                    ),
                ),
            ),
            Panel(
                "Finished requests per second by finish reason",
                "reqps",
                "Every finished request, whatever its reason: stop and length are normal "
                "ends, abort and error are not. Requests whose client disconnected are missing.",
                (
                    Target(
                        builders.per_second(
                            vllm.REQUEST_SUCCESS, m, WINDOW, (*_BY, "finished_reason")
                        ),
                        "{{finished_reason}}" + _PER_MODEL,
                    ),
                ),
            ),
        ),
    )


def _vllm_activity(m: Sequence[Matcher]) -> Row:
    """The queue against running requests and engine steps per second."""
    return Row(
        "Queue against engine activity",
        (
            Panel(
                "Waiting and running requests, and engine steps per second",
                "short",
                "Waiting and running requests: each engine's mean over the window, summed per "
                "model. Engine steps per second: the rate of iteration_tokens_total's _count "
                "(steps, not tokens). A queue that grows while steps per second stay flat is "
                "waiting for capacity.",
                (
                    Target(_summed_gauge(vllm.NUM_REQUESTS_WAITING, m), f"waiting{_PER_MODEL}"),
                    Target(_summed_gauge(vllm.NUM_REQUESTS_RUNNING, m), f"running{_PER_MODEL}"),
                    Target(
                        rate(vllm.ITERATION_TOKENS.select(m, "count").over(WINDOW)).sum(by=_BY),
                        f"engine steps per second{_PER_MODEL}",
                    ),
                ),
            ),
            Panel(
                "Mean tokens per engine step",
                "short",
                "Increase of iteration_tokens_total's _sum over its _count: a rough batch-size "
                "proxy (chunked prefill credits tokens to the step where prefill completes).",
                (
                    Target(
                        builders.histogram_mean(vllm.ITERATION_TOKENS, m, WINDOW, _BY),
                        f"mean per step{_PER_MODEL}",
                    ),
                ),
            ),
        ),
    )


def _vllm_caches(m: Sequence[Matcher]) -> Row:
    """KV-cache pressure, prefix-cache hits and preemptions."""
    return Row(
        "Caches",
        (
            Panel(
                "KV-cache usage of the fullest engine",
                "percentunit",
                "Largest sampled kv_cache_usage_perc (a 0-1 fraction) of any engine of the "
                "model: pressure, not prefix-cache fill; evictable blocks count as free. "
                "Engines' pools differ in size, so they are not averaged.",
                (
                    Target(
                        builders.maximum(vllm.KV_CACHE_USAGE, m, WINDOW, _BY),
                        f"fullest engine{_PER_MODEL}",
                    ),
                ),
            ),
            Panel(
                "Prefix-cache hit rate (tokens)",
                "percentunit",
                "Summed hit tokens over summed queried tokens. "
                + " ".join(standard_query("vllm_prefix_cache_hit_ratio").caveats),
                (
                    Target(
                        standard_query("vllm_prefix_cache_hit_ratio").expr(m, WINDOW, _BY),
                        f"hit rate{_PER_MODEL}",
                    ),
                ),
            ),
            Panel(
                "Preemptions per second",
                "short",
                "Running requests evicted to free KV blocks, to be recomputed later.",
                (
                    Target(
                        builders.per_second(vllm.NUM_PREEMPTIONS, m, WINDOW, _BY),
                        f"preemptions{_PER_MODEL}",
                    ),
                ),
            ),
        ),
    )


def vllm_dashboard() -> Dashboard:
    """The vLLM dashboard, filtered by ``$model_name``."""
    m = _MATCHERS
    return Dashboard(
        uid="inference-obs-vllm",
        title="vLLM (inference-obs)",
        variable="model_name",
        variable_query="label_values(vllm:num_requests_running, model_name)",
        rows=(_vllm_latency(m), _vllm_throughput(m), _vllm_activity(m), _vllm_caches(m)),
        description="vLLM V1 engine metrics computed the way inference-obs computes them.",
    )


def _sglang_latency(m: Sequence[Matcher]) -> Row:
    """Quantiles and request-weighted means of each latency."""
    return Row(
        "Latency (quantiles from merged buckets, request-weighted means)",
        (
            _latency("Time to first token", sglang.TIME_TO_FIRST_TOKEN, m, ""),
            _latency("End-to-end request latency", sglang.E2E_REQUEST_LATENCY, m, ""),
            _latency(
                "Inter-token latency (per token)",
                sglang.INTER_TOKEN_LATENCY,
                m,
                "SGLang observes once per token, vLLM once per engine step.",
            ),
            _latency(
                "Time per output token (per request)",
                sglang.REQUEST_TIME_PER_OUTPUT_TOKEN,
                m,
                "Requests with one output token or fewer, and aborted ones, are skipped.",
            ),
            _latency("Queue time", sglang.QUEUE_TIME, m, ""),
        ),
    )


def _sglang_throughput(m: Sequence[Matcher]) -> Row:
    """Token rates, and finished and aborted requests."""
    return Row(
        "Throughput",
        (
            Panel(
                "Tokens per second",
                "short",
                "Counter rates per series, summed per model; counted when a request finishes. "
                "Prompt tokens include cached ones.",
                (
                    Target(
                        builders.per_second(sglang.GENERATION_TOKENS, m, WINDOW, _BY),
                        f"output{_PER_MODEL}",
                    ),
                    Target(
                        builders.per_second(sglang.PROMPT_TOKENS, m, WINDOW, _BY),
                        f"prompt{_PER_MODEL}",
                    ),
                ),
            ),
            Panel(
                "Finished and aborted requests per second",
                "reqps",
                "Finished requests have no finish-reason label in SGLang; aborts are counted "
                "apart.",
                (
                    Target(
                        builders.per_second(sglang.NUM_REQUESTS, m, WINDOW, _BY),
                        f"finished{_PER_MODEL}",
                    ),
                    Target(
                        builders.per_second(sglang.NUM_ABORTED_REQUESTS, m, WINDOW, _BY),
                        f"aborted{_PER_MODEL}",
                    ),
                ),
            ),
        ),
    )


def _sglang_activity(m: Sequence[Matcher]) -> Row:
    """Queued against running requests."""
    return Row(
        "Queue against engine activity",
        (
            Panel(
                "Queued and running requests",
                "short",
                "Each scheduler's mean over the window (values set at each scheduler report), "
                "summed per model.",
                (
                    Target(_summed_gauge(sglang.NUM_QUEUE_REQS, m), f"queued{_PER_MODEL}"),
                    Target(_summed_gauge(sglang.NUM_RUNNING_REQS, m), f"running{_PER_MODEL}"),
                ),
            ),
        ),
    )


def _sglang_caches(m: Sequence[Matcher]) -> Row:
    """KV pool pressure, the cached share of prompt tokens and retractions."""
    return Row(
        "Caches",
        (
            Panel(
                "KV pool usage of the fullest scheduler",
                "percentunit",
                "Largest sampled token_usage (0-1) of any scheduler of the model. Pools differ "
                "in size, so they are not averaged; evictable radix-cache tokens are apart.",
                (
                    Target(
                        builders.maximum(sglang.TOKEN_USAGE, m, WINDOW, _BY),
                        f"fullest scheduler{_PER_MODEL}",
                    ),
                ),
            ),
            Panel(
                "Cached share of prompt tokens",
                "percentunit",
                "Summed cached tokens over summed prompt tokens (both counted at finish), "
                "instead of the per-report cache_hit_rate gauge, which cannot be averaged.",
                (
                    Target(
                        builders.per_second(sglang.CACHED_TOKENS, m, WINDOW, _BY)
                        / builders.per_second(sglang.PROMPT_TOKENS, m, WINDOW, _BY),
                        f"cached share{_PER_MODEL}",
                    ),
                ),
            ),
            Panel(
                "Retractions per second",
                "short",
                "Running requests retracted to free KV (SGLang's preemption), from "
                "num_retracted_requests_total (SGLang 0.5.7+). Every TP rank counts each "
                "retraction, so ranks of one server are collapsed by max, never summed.",
                (
                    Target(
                        _once_per_server(sglang.NUM_RETRACTED_REQUESTS, m),
                        f"retractions{_PER_MODEL}",
                    ),
                ),
            ),
        ),
    )


def sglang_dashboard() -> Dashboard:
    """The SGLang dashboard, filtered by ``$model_name`` (needs ``--enable-metrics``)."""
    m = _MATCHERS
    return Dashboard(
        uid="inference-obs-sglang",
        title="SGLang (inference-obs)",
        variable="model_name",
        variable_query="label_values(sglang:num_running_reqs, model_name)",
        rows=(_sglang_latency(m), _sglang_throughput(m), _sglang_activity(m), _sglang_caches(m)),
        description="SGLang metrics computed the way inference-obs computes them.",
    )
