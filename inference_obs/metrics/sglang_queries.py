"""Standard queries over SGLang families: the counterparts of the core vLLM ones.

Each answers the question its ``vllm_`` namesake answers, where SGLang exports
a metric for it, with the same builders: request-weighted means, percentiles
from buckets merged across replicas, counter increases per series then summed.
Three things of SGLang's shape are handled here, not left to the reader:

- ``is_streaming`` and ``cache_source`` split one count into parts: grouping
  by ``model_name`` sums them back, so both sides of a ratio pair up;
- counters that every TP rank increments for the same events
  (:data:`~inference_obs.metrics.sglang.PER_RANK_COPIES`) are collapsed with
  ``max without`` the rank labels before they are summed;
- scheduler gauges are per DP rank, so their maxima are of one rank.
"""

from __future__ import annotations

from functools import partial

from inference_obs.metrics import builders as b, sglang
from inference_obs.metrics.family import Family
from inference_obs.metrics.standard_query import By, Matchers, StandardQuery, ratio
from inference_obs.query import Expr, Matcher, increase

__all__ = ["SGLANG_QUERIES"]

_SGLANG_BY: By = ("model_name",)

_LATENCY = (
    (
        "ttft",
        sglang.TIME_TO_FIRST_TOKEN,
        "time to first token",
        "Measured in the tokenizer manager from request arrival; buckets start at 0.1 s, so "
        "fast first tokens are only known to be under 100 ms.",
    ),
    (
        "itl",
        sglang.INTER_TOKEN_LATENCY,
        "inter-token latency (per token)",
        "One observation per output token (a streamed chunk's gap split over its tokens): "
        "token-weighted, where vLLM observes once per engine step.",
    ),
    (
        "e2e",
        sglang.E2E_REQUEST_LATENCY,
        "end-to-end request latency",
        "Server-side, finished requests only: aborted ones are missing, which biases it low "
        "when the service is slow.",
    ),
    (
        "queue",
        sglang.QUEUE_TIME,
        "queue time",
        "Time in the scheduler's waiting queue before the first prefill; exported from "
        "SGLang 0.5.3.",
    ),
)
_QUANTILES = (0.5, 0.95, 0.99)
_STREAM = "Summed over is_streaming: streamed and non-streamed requests together."
_AT_FINISH = "Counted when a request finishes, not as its tokens are processed."


def _latency_queries() -> list[StandardQuery]:
    queries = []
    for short, family, name, caveat in _LATENCY:
        queries.append(
            StandardQuery(
                key=f"sglang_{short}_mean_seconds",
                title=f"SGLang request-weighted mean {name}",
                unit="seconds",
                description="Increase of the histogram's _sum divided by the increase of its "
                "_count over the window: each observation counts once.",
                caveats=(caveat,),
                families=(family,),
                builder=partial(b.histogram_mean, family),
                default_by=_SGLANG_BY,
            )
        )
        for q in _QUANTILES:
            pct = round(q * 100)
            queries.append(
                StandardQuery(
                    key=f"sglang_{short}_p{pct}_seconds",
                    title=f"SGLang P{pct} {name}, buckets merged across replicas",
                    unit="seconds",
                    description="Bucket increases summed by le across every replica (and "
                    "is_streaming), then histogram_quantile: never an average of quantiles.",
                    caveats=(
                        caveat,
                        "Linear interpolation inside one bucket: the true value "
                        "lies between that bucket's bounds.",
                        "A quantile in the +Inf bucket is reported as the highest finite bound.",
                    ),
                    families=(family,),
                    builder=partial(b.histogram_quantile_merged, family, q),
                    default_by=_SGLANG_BY,
                )
            )
    return queries


def _throughput_queries() -> list[StandardQuery]:
    """Token rates and finished requests, from the tokenizer manager's counters."""
    return [
        StandardQuery(
            "sglang_prompt_tokens_per_second",
            "SGLang wall-clock prompt-token rate",
            "tokens/s",
            "Counter rate of prompt_tokens_total over the whole window, summed over series.",
            (
                "Includes prompt tokens served from cache: not prefill work.",
                _AT_FINISH,
                _STREAM,
            ),
            (sglang.PROMPT_TOKENS,),
            partial(b.per_second, sglang.PROMPT_TOKENS),
            _SGLANG_BY,
        ),
        StandardQuery(
            "sglang_generation_tokens_per_second",
            "SGLang wall-clock output-token rate",
            "tokens/s",
            "Counter rate of generation_tokens_total over the whole window, summed over "
            "series; never the precomputed gen_throughput gauge.",
            (
                "The traffic's rate, not a capacity: a demand-limited service shows its floor.",
                _AT_FINISH,
                _STREAM,
            ),
            (sglang.GENERATION_TOKENS,),
            partial(b.per_second, sglang.GENERATION_TOKENS),
            _SGLANG_BY,
        ),
        StandardQuery(
            "sglang_finished_requests_increase",
            "SGLang finished requests in the window",
            "requests",
            "Counter increase of num_requests_total per series, then summed.",
            (
                "No finish reason: a finished request is not a successful one.",
                "Extrapolated to the window edges: fractional.",
                _STREAM,
            ),
            (sglang.NUM_REQUESTS,),
            partial(b.increase_total, sglang.NUM_REQUESTS),
            _SGLANG_BY,
        ),
    ]


def _cache_queries() -> list[StandardQuery]:
    """Prefix-cache hit shares: every cache tier, and the GPU radix cache alone."""
    # SGLang reports its GPU radix cache as "device"; 0.4.6 had no cache_source label, and
    # the empty alternative matches a missing label.
    device = (Matcher.regex("cache_source", "device|"),)

    def device_hits(matchers: Matchers, window: float, by: By) -> Expr:
        return b.increase_total(sglang.CACHED_TOKENS, [*matchers, *device], window, by)

    prompt = partial(b.increase_total, sglang.PROMPT_TOKENS)
    both = "Both counted when a request finishes; summed over cache_source and is_streaming."
    return [
        StandardQuery(
            "sglang_prefix_cache_hit_ratio",
            "SGLang share of prompt tokens served from cache (every tier)",
            "ratio",
            "Increase of cached_tokens_total (device, host and storage) over the increase of "
            "prompt_tokens_total.",
            (
                "With a hierarchical cache, host and storage hits count too: not comparable "
                "with vLLM's local prefix-cache rate; see sglang_device_prefix_cache_hit_ratio.",
                both,
                "Not the precomputed cache_hit_rate gauge, which is a last-interval ratio.",
            ),
            (sglang.CACHED_TOKENS, sglang.PROMPT_TOKENS),
            ratio(partial(b.increase_total, sglang.CACHED_TOKENS), prompt),
            _SGLANG_BY,
        ),
        StandardQuery(
            "sglang_device_prefix_cache_hit_ratio",
            "SGLang share of prompt tokens found in the GPU radix cache",
            "ratio",
            'Increase of cached_tokens_total{cache_source="device"} over the increase of '
            "prompt_tokens_total: SGLang looks every prompt token up in its radix cache, so "
            "this is vLLM's local prefix-cache hit rate.",
            (both,),
            (sglang.CACHED_TOKENS, sglang.PROMPT_TOKENS),
            ratio(device_hits, prompt),
            _SGLANG_BY,
        ),
    ]


def _increase_once_per_server(family: Family, matchers: Matchers, window: float, by: By) -> Expr:
    """Increase of a counter every rank of a server counts, each event once.

    ``sum(max without (rank labels) (increase(c[w])))``: every TP (and PP, EP,
    CP) rank of one server increments its own copy of the count, so the ranks'
    series are collapsed with ``max`` before the DP ranks and servers, which
    count different requests, are summed. Unit: the family's.
    """
    per_series = increase(family.select(matchers).over(window))
    return b.summed(per_series.max(without=sglang.RANK_LABELS), by)


def _scheduler_queries() -> list[StandardQuery]:
    """Running and waiting requests, KV-cache pressure and retractions."""
    rank = "The largest of one DP rank's values: with data parallelism, not the server's total."
    return [
        StandardQuery(
            "sglang_running_requests_max",
            "SGLang largest sampled running batch",
            "requests",
            "Maximum of num_running_reqs over the window's scrapes.",
            ("Set at each scheduler report: peaks between reports are not seen.", rank),
            (sglang.NUM_RUNNING_REQS,),
            partial(b.maximum, sglang.NUM_RUNNING_REQS),
            _SGLANG_BY,
        ),
        StandardQuery(
            "sglang_waiting_requests_max",
            "SGLang largest sampled queue (waiting requests)",
            "requests",
            "Maximum of num_queue_reqs over the window's scrapes.",
            (
                "Grammar and disaggregation queues are separate gauges, not included.",
                "Set at each scheduler report: peaks between reports are not seen.",
                rank,
            ),
            (sglang.NUM_QUEUE_REQS,),
            partial(b.maximum, sglang.NUM_QUEUE_REQS),
            _SGLANG_BY,
        ),
        StandardQuery(
            "sglang_kv_cache_usage_max",
            "SGLang largest sampled KV-cache usage",
            "ratio",
            "Maximum of token_usage (0-1, the fullest KV pool) over the window's scrapes.",
            (
                "Tokens, where vLLM counts blocks; evictable radix-cache tokens are not "
                "counted as used.",
                rank,
            ),
            (sglang.TOKEN_USAGE,),
            partial(b.maximum, sglang.TOKEN_USAGE),
            _SGLANG_BY,
        ),
        StandardQuery(
            "sglang_retractions_increase",
            "SGLang retracted requests (preemptions) in the window",
            "requests",
            "Increase of num_retracted_requests_total per series, collapsed over the TP/PP/EP "
            "ranks with max (each rank counts every retraction), then summed.",
            (
                "Exported from SGLang 0.5.7; older servers show no data, not zero.",
                "Extrapolated to the window edges: fractional.",
            ),
            (sglang.NUM_RETRACTED_REQUESTS,),
            partial(_increase_once_per_server, sglang.NUM_RETRACTED_REQUESTS),
            _SGLANG_BY,
        ),
    ]


SGLANG_QUERIES: tuple[StandardQuery, ...] = (
    *_latency_queries(),
    *_throughput_queries(),
    *_cache_queries(),
    *_scheduler_queries(),
)
"""The SGLang standard queries, in the order of their vLLM counterparts."""
