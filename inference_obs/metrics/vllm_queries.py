"""Standard queries over vLLM families: latency, request shapes, engine state.

They follow the published method for comparing deployments from read-only
monitoring: request-weighted means, percentiles from buckets merged across
replicas, finish reasons that are not called success, cache rates with their
own denominators, and speculative-decoding rates that are not speed-ups.
"""

from __future__ import annotations

from functools import partial

from inference_obs.metrics import builders as b, vllm
from inference_obs.metrics.standard_query import By, Matchers, StandardQuery, ratio
from inference_obs.query import Expr

__all__ = ["VLLM_QUERIES"]

_VLLM_BY: By = ("model_name",)

_LATENCY = (
    (
        "ttft",
        vllm.TIME_TO_FIRST_TOKEN,
        "time to first token",
        "Measured by the server from request arrival: includes tokenisation, queueing and "
        "prefill, not the network path to the client.",
    ),
    (
        "tpot",
        vllm.REQUEST_TIME_PER_OUTPUT_TOKEN,
        "time per output token (per request)",
        "Requests with one output token or fewer record 0, pulling the mean and low "
        "percentiles down; not comparable with client benchmarks that exclude them.",
    ),
    (
        "itl",
        vllm.INTER_TOKEN_LATENCY,
        "inter-token latency (per engine step)",
        "One observation per engine step, not per token: speculative decoding bundles "
        "several tokens into one observation. Not the same quantity as per-request TPOT.",
    ),
    (
        "e2e",
        vllm.E2E_REQUEST_LATENCY,
        "end-to-end request latency",
        "Server-side; requests aborted by the client are missing, which biases it low "
        "exactly when the service is slow.",
    ),
    (
        "queue",
        vllm.REQUEST_QUEUE_TIME,
        "queue time",
        "First wait only: re-queueing after preemption is not included. Buckets start at "
        "0.3 s, so small values are indistinguishable.",
    ),
    (
        "prefill",
        vllm.REQUEST_PREFILL_TIME,
        "prefill time",
        "From first scheduling to first token, preemptions during prefill included.",
    ),
    (
        "decode",
        vllm.REQUEST_DECODE_TIME,
        "decode time",
        "From first to last token, preemptions during decode included.",
    ),
)
_QUANTILES = (0.5, 0.9, 0.95, 0.99)
_ABORT_CAVEAT = "Aborted requests whose client disconnected are not recorded."


def _latency_queries() -> list[StandardQuery]:
    queries = []
    for short, family, name, caveat in _LATENCY:
        queries.append(
            StandardQuery(
                key=f"vllm_{short}_mean_seconds",
                title=f"Request-weighted mean {name}",
                unit="seconds",
                description="Increase of the histogram's _sum divided by the increase of its "
                "_count over the window: each request counts once.",
                caveats=(caveat, _ABORT_CAVEAT),
                families=(family,),
                builder=partial(b.histogram_mean, family),
                default_by=_VLLM_BY,
            )
        )
        for q in _QUANTILES:
            pct = round(q * 100)
            queries.append(
                StandardQuery(
                    key=f"vllm_{short}_p{pct}_seconds",
                    title=f"P{pct} {name}, buckets merged across replicas",
                    unit="seconds",
                    description="Bucket increases summed by le across every replica, then "
                    "histogram_quantile: never an average of per-replica quantiles.",
                    caveats=(
                        caveat,
                        "Linear interpolation inside one bucket: the true value "
                        "lies between that bucket's bounds.",
                        "A quantile in the +Inf bucket is reported as the highest finite bound.",
                    ),
                    families=(family,),
                    builder=partial(b.histogram_quantile_merged, family, q),
                    default_by=_VLLM_BY,
                )
            )
    return queries


def _acceptance_length(matchers: Matchers, window: float, by: By) -> Expr:
    accepted = b.increase_total(vllm.SPEC_DECODE_NUM_ACCEPTED_TOKENS, matchers, window, by)
    drafts = b.increase_total(vllm.SPEC_DECODE_NUM_DRAFTS, matchers, window, by)
    return 1 + accepted / drafts


def _shape_queries() -> list[StandardQuery]:
    finish_by = ("finished_reason",)
    queries = [
        StandardQuery(
            "vllm_prompt_tokens_mean",
            "Request-weighted mean prompt length",
            "tokens",
            "Increase of request_prompt_tokens _sum over _count.",
            ("Includes tokens served from the prefix cache or external KV: not prefill work.",),
            (vllm.REQUEST_PROMPT_TOKENS,),
            partial(b.histogram_mean, vllm.REQUEST_PROMPT_TOKENS),
            _VLLM_BY,
        ),
        StandardQuery(
            "vllm_generation_tokens_mean",
            "Request-weighted mean output length",
            "tokens",
            "Increase of request_generation_tokens _sum over _count.",
            (_ABORT_CAVEAT,),
            (vllm.REQUEST_GENERATION_TOKENS,),
            partial(b.histogram_mean, vllm.REQUEST_GENERATION_TOKENS),
            _VLLM_BY,
        ),
        StandardQuery(
            "vllm_max_tokens_mean",
            "Mean requested output limit (max_tokens)",
            "tokens",
            "Increase of request_params_max_tokens _sum over _count.",
            ("Observed only for requests that set max_tokens.",),
            (vllm.REQUEST_PARAMS_MAX_TOKENS,),
            partial(b.histogram_mean, vllm.REQUEST_PARAMS_MAX_TOKENS),
            _VLLM_BY,
        ),
    ]
    for bound in (20, 50, 100, 500):
        queries.append(
            StandardQuery(
                f"vllm_max_tokens_share_le_{bound}",
                f"Share of requests with max_tokens <= {bound}",
                "ratio",
                "Increase of the le bucket over the +Inf bucket, summed across replicas; exact "
                "because the bound is a bucket edge.",
                ("Among requests that set max_tokens only.",),
                (vllm.REQUEST_PARAMS_MAX_TOKENS,),
                partial(b.share_at_or_below, vllm.REQUEST_PARAMS_MAX_TOKENS, bound),
                _VLLM_BY,
            )
        )
    queries += [
        StandardQuery(
            "vllm_finished_requests_by_reason",
            "Finished requests by finish reason",
            "requests",
            "Counter increase per finished_reason (stop, length, abort, error, repetition).",
            (
                "A finish reason is not success: 'stop' says nothing of answer quality or of "
                "the client's stream.",
                "Extrapolated to the window edges: fractional.",
                _ABORT_CAVEAT,
            ),
            (vllm.REQUEST_SUCCESS,),
            lambda m, w, by: b.increase_total(vllm.REQUEST_SUCCESS, m, w, (*by, *finish_by)),
            _VLLM_BY,
        ),
        StandardQuery(
            "vllm_generation_tokens_increase",
            "Output tokens generated in the window",
            "tokens",
            "Counter increase per series, then summed.",
            ("Extrapolated to the window edges: an estimate, not an audited count.",),
            (vllm.GENERATION_TOKENS,),
            partial(b.increase_total, vllm.GENERATION_TOKENS),
            _VLLM_BY,
        ),
        StandardQuery(
            "vllm_generation_tokens_per_second",
            "Wall-clock output rate",
            "tokens/s",
            "Counter rate over the whole window (increase divided by the window length).",
            ("The traffic's rate, not a capacity: a demand-limited service shows its floor.",),
            (vllm.GENERATION_TOKENS,),
            partial(b.per_second, vllm.GENERATION_TOKENS),
            _VLLM_BY,
        ),
        StandardQuery(
            "vllm_prompt_tokens_by_source",
            "Prompt tokens by source",
            "tokens",
            "Increase per source: local_compute (prefilled), local_cache_hit, "
            "external_kv_transfer.",
            ("Only local_compute is prefill work.",),
            (vllm.PROMPT_TOKENS_BY_SOURCE,),
            lambda m, w, by: b.increase_total(vllm.PROMPT_TOKENS_BY_SOURCE, m, w, (*by, "source")),
            _VLLM_BY,
        ),
    ]
    return queries


def _cache_queries() -> list[StandardQuery]:
    """Prefix-cache hit rates, local and external, each over its own queries."""
    return [
        StandardQuery(
            "vllm_prefix_cache_hit_ratio",
            "Prefix-cache hit rate (token based)",
            "ratio",
            "Increase of prefix_cache_hits over prefix_cache_queries.",
            (
                "Counts queried tokens, not requests fully served from cache.",
                "Before vLLM 0.28 a blocked request was looked up again every step, inflating "
                "both counters under saturation.",
            ),
            (vllm.PREFIX_CACHE_HITS, vllm.PREFIX_CACHE_QUERIES),
            ratio(
                partial(b.increase_total, vllm.PREFIX_CACHE_HITS),
                partial(b.increase_total, vllm.PREFIX_CACHE_QUERIES),
            ),
            _VLLM_BY,
        ),
        StandardQuery(
            "vllm_external_prefix_cache_hit_ratio",
            "External KV cache hit rate",
            "ratio",
            "Increase of external_prefix_cache_hits over external_prefix_cache_queries.",
            ("Has its own denominator: never add it to the local prefix-cache hit rate.",),
            (vllm.EXTERNAL_PREFIX_CACHE_HITS, vllm.EXTERNAL_PREFIX_CACHE_QUERIES),
            ratio(
                partial(b.increase_total, vllm.EXTERNAL_PREFIX_CACHE_HITS),
                partial(b.increase_total, vllm.EXTERNAL_PREFIX_CACHE_QUERIES),
            ),
            _VLLM_BY,
        ),
    ]


def _scheduler_queries() -> list[StandardQuery]:
    """Running and waiting requests, KV-cache pressure and preemptions."""
    return [
        StandardQuery(
            "vllm_running_requests_mean",
            "Mean running requests per engine (sampled)",
            "requests",
            "Sample-weighted mean of num_requests_running over every engine's scrapes.",
            ("A per-engine mean of scraped values, not a time average between scrapes.",),
            (vllm.NUM_REQUESTS_RUNNING,),
            partial(b.sample_mean, vllm.NUM_REQUESTS_RUNNING),
            _VLLM_BY,
        ),
        StandardQuery(
            "vllm_waiting_requests_max",
            "Largest sampled queue (waiting requests)",
            "requests",
            "Maximum of num_requests_waiting over the window's scrapes.",
            ("A sampled maximum: peaks between scrapes are not seen.",),
            (vllm.NUM_REQUESTS_WAITING,),
            partial(b.maximum, vllm.NUM_REQUESTS_WAITING),
            _VLLM_BY,
        ),
        StandardQuery(
            "vllm_waiting_requests_by_reason_max",
            "Largest sampled queue by waiting reason",
            "requests",
            "Maximum of num_requests_waiting_by_reason per reason.",
            ("Scheduler classes (capacity, deferred), not diagnoses such as 'memory full'.",),
            (vllm.NUM_REQUESTS_WAITING_BY_REASON,),
            lambda m, w, by: b.maximum(vllm.NUM_REQUESTS_WAITING_BY_REASON, m, w, (*by, "reason")),
            _VLLM_BY,
        ),
        StandardQuery(
            "vllm_kv_cache_usage_max",
            "Largest sampled KV-cache usage",
            "ratio",
            "Maximum of kv_cache_usage_perc (a 0-1 fraction despite its name).",
            ("Blocks held by live requests; evictable prefix-cache blocks count as free.",),
            (vllm.KV_CACHE_USAGE,),
            partial(b.maximum, vllm.KV_CACHE_USAGE),
            _VLLM_BY,
        ),
        StandardQuery(
            "vllm_preemptions_increase",
            "Preemptions in the window",
            "events",
            "Counter increase per series, then summed.",
            (),
            (vllm.NUM_PREEMPTIONS,),
            partial(b.increase_total, vllm.NUM_PREEMPTIONS),
            _VLLM_BY,
        ),
    ]


def _step_queries() -> list[StandardQuery]:
    """What one engine step does: draft tokens accepted, tokens processed."""
    return [
        StandardQuery(
            "vllm_spec_decode_acceptance_ratio",
            "Speculative-decoding draft acceptance rate",
            "ratio",
            "Accepted draft tokens over drafted tokens.",
            ("Progress per verification step, not an end-to-end speed-up.",),
            (vllm.SPEC_DECODE_NUM_ACCEPTED_TOKENS, vllm.SPEC_DECODE_NUM_DRAFT_TOKENS),
            ratio(
                partial(b.increase_total, vllm.SPEC_DECODE_NUM_ACCEPTED_TOKENS),
                partial(b.increase_total, vllm.SPEC_DECODE_NUM_DRAFT_TOKENS),
            ),
            _VLLM_BY,
        ),
        StandardQuery(
            "vllm_spec_decode_mean_acceptance_length",
            "Mean tokens per verification step (1 + accepted / drafts)",
            "tokens",
            "One bonus token plus the accepted draft tokens per draft proposal.",
            ("Not a service speed-up: verification steps cost more than plain steps.",),
            (vllm.SPEC_DECODE_NUM_ACCEPTED_TOKENS, vllm.SPEC_DECODE_NUM_DRAFTS),
            _acceptance_length,
            _VLLM_BY,
        ),
        StandardQuery(
            "vllm_iteration_tokens_mean",
            "Mean tokens per engine step",
            "tokens",
            "Increase of iteration_tokens_total _sum over its _count (engine steps).",
            (
                "A rough batch-size proxy: chunked prefill credits tokens to the step where "
                "prefill completes.",
            ),
            (vllm.ITERATION_TOKENS,),
            partial(b.histogram_mean, vllm.ITERATION_TOKENS),
            _VLLM_BY,
        ),
    ]


def _series_queries() -> list[StandardQuery]:
    """What the series themselves show: counter restarts and scrape gaps."""
    return [
        StandardQuery(
            "vllm_generation_tokens_resets",
            "Restarts seen on the output-token counter",
            "events",
            "resets() of generation_tokens_total per series, summed.",
            ("A new pod is a new series, not a reset.",),
            (vllm.GENERATION_TOKENS,),
            partial(b.resets_total, vllm.GENERATION_TOKENS),
            ("model_name", "instance"),
        ),
        StandardQuery(
            "vllm_app_samples",
            "Application samples per instance in the window",
            "samples",
            "count_over_time of num_requests_running per instance.",
            ("Fewer samples than window / scrape interval means scrape gaps.",),
            (vllm.NUM_REQUESTS_RUNNING,),
            partial(b.sample_count, vllm.NUM_REQUESTS_RUNNING),
            ("model_name", "instance"),
        ),
    ]


def _connector_queries() -> list[StandardQuery]:
    """KV connectors: the Mooncake store's operation latency."""
    return [
        StandardQuery(
            "vllm_mooncake_store_operation_mean_seconds",
            "Mean Mooncake store operation latency by operation",
            "seconds",
            "Increase of the operation-time histogram's _sum over its _count.",
            ("An operation mean, not added waiting per request.",),
            (vllm.MOONCAKE_STORE_OPERATION_TIME,),
            lambda m, w, by: b.histogram_mean(
                vllm.MOONCAKE_STORE_OPERATION_TIME, m, w, (*by, "operation")
            ),
            _VLLM_BY,
        ),
    ]


VLLM_QUERIES: tuple[StandardQuery, ...] = (
    *_latency_queries(),
    *_shape_queries(),
    *_cache_queries(),
    *_scheduler_queries(),
    *_step_queries(),
    *_series_queries(),
    *_connector_queries(),
)
