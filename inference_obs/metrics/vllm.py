"""vLLM metric families: the ``vllm:`` series of the V1 engine, with their history.

The data here (names, types, labels, default buckets, first versions, renames)
was read from the released vLLM sources, mainly vLLM 0.33.0 (``vllm/v1/metrics``),
with older wheels back to 0.6.6 for the history. Feature-gated families live in
:mod:`.vllm_optional` (speculative decoding, LoRA, MFU estimates, HTTP, ...) and
:mod:`.vllm_connectors` (NIXL, Mooncake, KV offloading); the main ones are
re-exported here and :data:`FAMILIES` holds all three modules' families.

Conventions worth knowing before reading any constant:

- counters are exposed with ``_total`` whatever their name in code, and
  histograms as ``_bucket``/``_sum``/``_count`` (plus ``_created`` in
  single-process mode, which is not a family);
- every engine family carries ``model_name`` and ``engine`` (the data-parallel
  rank, added between vLLM 0.7.3 and 0.8.5). Sum over ``engine`` and the scrape labels to get a
  deployment;
- ``--disable-log-stats`` removes every engine family, and Ray Serve renames them
  (``ray_vllm_...``), so the names below do not apply there.
"""

from __future__ import annotations

from functools import partial

from inference_obs.metrics import vllm_connectors as _connectors, vllm_optional as _optional
from inference_obs.metrics.family import Alias, Family, MetricType

# Re-exported: the bucket families are part of this catalogue's public names.
from inference_obs.metrics.vllm_buckets import (
    INTER_TOKEN_LATENCY_BUCKETS as INTER_TOKEN_LATENCY_BUCKETS,
    ITERATION_TOKENS_BUCKETS as ITERATION_TOKENS_BUCKETS,
    REQUEST_LATENCY_BUCKETS as REQUEST_LATENCY_BUCKETS,
    REQUEST_NUM_PREEMPTIONS_BUCKETS as REQUEST_NUM_PREEMPTIONS_BUCKETS,
    REQUEST_PARAMS_N_BUCKETS as REQUEST_PARAMS_N_BUCKETS,
    REQUEST_TOKENS_BUCKETS as REQUEST_TOKENS_BUCKETS,
    TTFT_BUCKETS as TTFT_BUCKETS,
    request_tokens_buckets as request_tokens_buckets,
)

STANDARD_LABELS: tuple[str, ...] = ("model_name", "engine")
"""Labels of every engine family (before vLLM 0.8.5 possibly only ``model_name``)."""

# ---------------------------------------------------------------------------
# Traps shared by several families.
# ---------------------------------------------------------------------------

_RESETS = (
    "Counters restart at zero when a server or one DP engine restarts: rate() or increase() "
    "each series, then sum."
)
_GAUGE_STEP = (
    "The value is the scheduler state at the last engine step the API server handled; a "
    "scrape is a sample, not an average."
)
_OVERRIDABLE = (
    "Deployments can replace the default buckets (vLLM 0.33+): read le from the data and never "
    "merge histograms with different le sets."
)
_LE_FLOAT = 'le values are float strings ("1.0", "1e+06"); le="1" matches nothing.'
_ABORTS = (
    "Requests abandoned by their client are dropped without finished-request stats, so they "
    "are missing here and the numbers read low exactly when the service is slow."
)
_COARSE = (
    "The lowest bound is 0.3 s, so shorter times are unresolved: prefer _sum/_count means and "
    "report values below it as '<= first bucket'."
)
_SUM_ALONE = (
    "rate() of _sum alone is seconds accrued per second and grows with traffic; divide by "
    "rate() of _count for a per-request mean."
)
_TOKEN_BUCKETS = (
    "The default bounds are 1-2-5 steps capped at max_model_len; the tuple here is the set "
    "for max_model_len 131072, other deployments have other le sets."
)
_SATURATE = (
    "Lengths between the top finite bound and max_model_len only reach +Inf, so high "
    "quantiles saturate at the top bound."
)
_MULTI_API = (
    "The vLLM code flags this family as possibly wrong with several API servers "
    "(--api-server-count > 1)."
)

_V0 = "vLLM V0 (<= 0.6.6)"

_vllm = partial(Family, exporter="vllm", labels=STANDARD_LABELS)
_counter = partial(_vllm, type=MetricType.COUNTER)
_gauge = partial(_vllm, type=MetricType.GAUGE)
_histogram = partial(_vllm, type=MetricType.HISTOGRAM)

# ---------------------------------------------------------------------------
# Scheduler and capacity gauges.
# ---------------------------------------------------------------------------

NUM_REQUESTS_RUNNING = _gauge(
    name="vllm:num_requests_running",
    unit="requests",
    help="Requests in the engine's running batch after the last scheduler step.",
    since=_V0,
    traps=(_GAUGE_STEP,),
)
NUM_REQUESTS_WAITING = _gauge(
    name="vllm:num_requests_waiting",
    unit="requests",
    help="Requests waiting to be scheduled (from 0.20: capacity plus deferred).",
    since=_V0,
    traps=(
        _GAUGE_STEP,
        "avg_over_time() of it estimates the mean queue from scrape samples only.",
    ),
)
NUM_REQUESTS_WAITING_BY_REASON = _gauge(
    name="vllm:num_requests_waiting_by_reason",
    unit="requests",
    help=(
        "Waiting requests by reason: capacity (no KV blocks or batch room) or deferred "
        "(a transient hold such as LoRA budget or a pending KV transfer)."
    ),
    labels=(*STANDARD_LABELS, "reason"),
    since="vLLM 0.20.0",
    traps=(_GAUGE_STEP,),
)
KV_CACHE_USAGE = _gauge(
    name="vllm:kv_cache_usage_perc",
    unit="ratio",
    help="Fraction of the GPU KV block pool held by live requests.",
    value_range=(0, 1),
    aliases=(
        Alias(
            "vllm:gpu_cache_usage_perc",
            "vLLM <= 0.11.0 (hidden in 0.11, removed in 0.12)",
            "The same 0-1 fraction; both names are exported from 0.9.2 to 0.10.",
            hidden_in="0.11.0",
            removed_in="0.12.0",
        ),
    ),
    since="vLLM 0.9.2",
    traps=(
        "A 0-1 fraction despite the _perc suffix; multiply by 100 only for display.",
        "Evictable prefix-cache blocks count as free: this is pressure from live requests, "
        "not prefix-cache fill.",
        "Near 1.0 new requests wait for capacity or running ones are preempted.",
        "Averaging it across engines is only meaningful when their block pools are equal.",
        _GAUGE_STEP,
    ),
)
ENGINE_SLEEP_STATE = _gauge(
    name="vllm:engine_sleep_state",
    unit="boolean",
    help="1 on the current sleep state (awake, weights_offloaded, discard_all), else 0.",
    labels=(*STANDARD_LABELS, "sleep_state"),
    value_range=(0, 1),
    since="vLLM 0.12.0",
)
CACHE_CONFIG_INFO = _vllm(
    name="vllm:cache_config_info",
    type=MetricType.INFO,
    declared_type="gauge",
    unit="info",
    help="Always 1; the KV-cache configuration is carried in the labels.",
    labels=(
        "engine",
        "block_size",
        "cache_dtype",
        "gpu_memory_utilization",
        "num_gpu_blocks",
        "enable_prefix_caching",
    ),
    value_range=(1, 1),
    since=_V0,
    traps=(
        "Has one label per cache-config field, and the set changes between versions; there "
        "is no model_name label.",
        "num_gpu_blocks is the size of the pool that kv_cache_usage_perc is a fraction of.",
        "KV capacity in tokens is num_gpu_blocks x block_size per engine (the pool spans its TP "
        "ranks: never multiply by TP); add engines and replicas for a deployment.",
        "Hybrid models (KV groups of different block sizes in one pool) report the smallest "
        "block_size, so that product is wrong: read the kv_cache_size_tokens label "
        "(vLLM >= 0.33).",
        "Unset fields read as the text None, not as a number.",
        "The sample is always 1: sum() of it counts engines; the configuration is in the labels.",
    ),
)

# ---------------------------------------------------------------------------
# Counters.
# ---------------------------------------------------------------------------

PROMPT_TOKENS = _counter(
    name="vllm:prompt_tokens_total",
    unit="tokens",
    help="Prompt tokens of requests whose prefill completed, cached or transferred ones included.",
    since=_V0,
    traps=(
        "Includes tokens served from the prefix cache or by KV transfer; real prefill work "
        'is prompt_tokens_by_source_total{source="local_compute"}.',
        "Credited when a request's prefill completes, not per chunk.",
        _RESETS,
    ),
)
# Added together by vllm-project/vllm#33290 (reviewed 2026-02), first released in 0.16.0.
_PROMPT_SOURCES = "vLLM 0.16.0"
PROMPT_TOKENS_BY_SOURCE = _counter(
    name="vllm:prompt_tokens_by_source_total",
    unit="tokens",
    help=(
        "Prompt tokens by origin: local_compute (prefilled), local_cache_hit, "
        "external_kv_transfer; the three add up to prompt_tokens_total."
    ),
    labels=(*STANDARD_LABELS, "source"),
    since=_PROMPT_SOURCES,
    traps=(
        "Credited when prefill completes, while prefix_cache_hits_total counts at admission: "
        "local_cache_hit and the hits differ over short windows.",
        _RESETS,
    ),
)
PROMPT_TOKENS_CACHED = _counter(
    name="vllm:prompt_tokens_cached_total",
    unit="tokens",
    help="Prompt tokens not computed locally: local cache hits plus external KV transfer.",
    since=_PROMPT_SOURCES,
    traps=(_RESETS,),
)
PROMPT_TOKENS_CACHED_BY_SOURCE = _counter(
    name="vllm:prompt_tokens_cached_by_source_total",
    unit="tokens",
    help=(
        "Prefix-hit tokens by the cache tier that supplied them (device, host, p2p, disk, "
        "external_unspecified), counted at admission."
    ),
    labels=(*STANDARD_LABELS, "source"),
    since="vLLM 0.33.0",
    traps=(
        "Counted at admission, unlike prompt_tokens_total; it should match "
        "prefix_cache_hits plus external_prefix_cache_hits.",
        _RESETS,
    ),
)
PROMPT_TOKENS_RECOMPUTED = _counter(
    name="vllm:prompt_tokens_recomputed_total",
    unit="tokens",
    help="Prompt tokens computed again (short-lived).",
    since=_PROMPT_SOURCES,
    condition="only vLLM 0.16.0 to 0.19.x; removed in 0.20.0 (vllm-project/vllm#38709)",
    traps=(_RESETS,),
)
GENERATION_TOKENS = _counter(
    name="vllm:generation_tokens_total",
    unit="tokens",
    help="Output tokens produced.",
    since=_V0,
    traps=(_RESETS,),
)
REQUEST_SUCCESS = _counter(
    name="vllm:request_success_total",
    unit="requests",
    help="Finished requests by finished_reason (stop, length, abort, error, repetition).",
    labels=(*STANDARD_LABELS, "finished_reason"),
    since=_V0,
    traps=(
        "Counts every finished request whatever the reason, despite its name: filter "
        'finished_reason=~"stop|length" for a success ratio.',
        "Aborts by the client are not counted at all; only engine-side aborts reach "
        'finished_reason="abort".',
        "finished_reason error exists from 0.13.0 and repetition from 0.19.0.",
        _RESETS,
    ),
)
NUM_PREEMPTIONS = _counter(
    name="vllm:num_preemptions_total",
    unit="events",
    help="Running requests evicted to free KV blocks, to be recomputed later.",
    since=_V0,
    traps=(_RESETS,),
)
_PREFIX_TRAPS = (
    "The denominator is every prompt token of requests that looked the cache up, and the "
    "last prompt token can never hit, so even identical prompts stay below 100 %.",
    "Before vLLM 0.28 a request blocked at the head of the queue was looked up again on every "
    "step, inflating queries and hits under saturation.",
    "Not a prompt-token count: use prompt_tokens_total for that.",
    _RESETS,
)
_BLOCKS_NOTE = "Counted KV blocks, not tokens, up to vLLM 0.8.x; tokens (same values) from 0.9.2."
PREFIX_CACHE_QUERIES = _counter(
    name="vllm:prefix_cache_queries_total",
    unit="tokens",
    help="Prompt tokens looked up in the local (GPU) prefix cache.",
    aliases=(
        Alias(
            "vllm:gpu_prefix_cache_queries_total",
            "vLLM 0.7 to 0.11.0 (hidden in 0.11, removed in 0.12)",
            _BLOCKS_NOTE,
            hidden_in="0.11.0",
            removed_in="0.12.0",
        ),
    ),
    since="vLLM 0.9.2",
    traps=_PREFIX_TRAPS,
)
PREFIX_CACHE_HITS = _counter(
    name="vllm:prefix_cache_hits_total",
    unit="tokens",
    help="Tokens of local prefix-cache lookups that were found in the cache.",
    aliases=(
        Alias(
            "vllm:gpu_prefix_cache_hits_total",
            "vLLM 0.7 to 0.11.0 (hidden in 0.11, removed in 0.12)",
            _BLOCKS_NOTE,
            hidden_in="0.11.0",
            removed_in="0.12.0",
        ),
    ),
    since="vLLM 0.9.2",
    traps=_PREFIX_TRAPS,
)
_CONNECTOR = "a KV connector is configured (--kv-transfer-config)"
MM_CACHE_QUERIES = _counter(
    name="vllm:mm_cache_queries_total",
    unit="items",
    help="Lookups in the multimodal processor cache.",
    since="vLLM 0.12.0",
    traps=("Counts multimodal items, not tokens.", _RESETS),
)
MM_CACHE_HITS = _counter(
    name="vllm:mm_cache_hits_total",
    unit="items",
    help="Hits in the multimodal processor cache.",
    since="vLLM 0.12.0",
    traps=("Counts multimodal items, not tokens.", _RESETS),
)
ADMISSION_REJECTIONS = _counter(
    name="vllm:admission_rejections_total",
    unit="requests",
    help="Admission attempts the API server refused because a queue limit was reached.",
    labels=("model_name", "reason"),
    since="vLLM 0.33.0",
    traps=("No engine label: it is counted in the API server.", _RESETS),
)

# ---------------------------------------------------------------------------
# Histograms.
# ---------------------------------------------------------------------------

TIME_TO_FIRST_TOKEN = _histogram(
    name="vllm:time_to_first_token_seconds",
    unit="seconds",
    help="Per request: from arrival at the API server to its first output token.",
    buckets=TTFT_BUCKETS,
    since=_V0,
    traps=(
        "Includes tokenisation, queueing and prefill but not the network to the client; "
        "queue plus prefill time (engine clock) only approximately add up to it.",
        "vLLM <= 0.7.3 stopped the default buckets at 10 s.",
        _OVERRIDABLE,
    ),
)
INTER_TOKEN_LATENCY = _histogram(
    name="vllm:inter_token_latency_seconds",
    unit="seconds",
    help="Time between consecutive outputs of a request, observed once per engine step.",
    buckets=INTER_TOKEN_LATENCY_BUCKETS,
    aliases=(
        Alias(
            "vllm:time_per_output_token_seconds",
            "vLLM <= 0.14.0 (hidden 0.12 to 0.14, removed in 0.15)",
            "Same per-step meaning; unrelated to the per-request "
            "vllm:request_time_per_output_token_seconds.",
            hidden_in="0.12.0",
            removed_in="0.15.0",
        ),
    ),
    since="vLLM 0.10.2",
    traps=(
        "Per engine step, not per token: long requests weigh more, and a step emitting "
        "several tokens (speculative decoding) counts once.",
        "Nothing below 10 ms: fast decoding all lands in le=0.01 and quantiles are "
        "interpolated inside [0, 0.01].",
        "vLLM <= 0.7.3 stopped the default buckets at 2.5 s.",
        _OVERRIDABLE,
    ),
)
REQUEST_TIME_PER_OUTPUT_TOKEN = _histogram(
    name="vllm:request_time_per_output_token_seconds",
    unit="seconds",
    help="Per finished request: decode time divided by (output tokens - 1).",
    buckets=INTER_TOKEN_LATENCY_BUCKETS,
    since="vLLM 0.11.0",
    traps=(
        "Requests with at most one output token record 0, pulling means and low quantiles "
        "down and inflating TPOT-under-SLO shares.",
        _ABORTS,
        _OVERRIDABLE,
    ),
)
E2E_REQUEST_LATENCY = _histogram(
    name="vllm:e2e_request_latency_seconds",
    unit="seconds",
    help="Per finished request: from arrival at the API server to the step that finished it.",
    buckets=REQUEST_LATENCY_BUCKETS,
    since=_V0,
    traps=(_ABORTS, _COARSE, "vLLM <= 0.7.3 stopped the default buckets at 60 s.", _OVERRIDABLE),
)
REQUEST_QUEUE_TIME = _histogram(
    name="vllm:request_queue_time_seconds",
    unit="seconds",
    help="Per finished request: from entering the engine queue to its first scheduling.",
    buckets=REQUEST_LATENCY_BUCKETS,
    aliases=(
        Alias(
            "vllm:time_in_queue_requests",
            "vLLM V0 (<= 0.9.0)",
            "A V0 duplicate of the same quantity with its own buckets.",
            removed_in="0.9.1",
        ),
    ),
    since=_V0,
    traps=(
        "Only the first wait is recorded: re-queueing after a preemption is not added.",
        _COARSE,
        _SUM_ALONE,
        _ABORTS,
        _OVERRIDABLE,
    ),
)
REQUEST_PREFILL_TIME = _histogram(
    name="vllm:request_prefill_time_seconds",
    unit="seconds",
    help="Per finished request: from first scheduling to the first token.",
    buckets=REQUEST_LATENCY_BUCKETS,
    traps=("Includes preemptions during prefill.", _COARSE, _SUM_ALONE, _ABORTS, _OVERRIDABLE),
)
REQUEST_DECODE_TIME = _histogram(
    name="vllm:request_decode_time_seconds",
    unit="seconds",
    help="Per finished request: from the first token to the last.",
    buckets=REQUEST_LATENCY_BUCKETS,
    traps=("Includes preemptions during decode.", _COARSE, _SUM_ALONE, _ABORTS, _OVERRIDABLE),
)
REQUEST_INFERENCE_TIME = _histogram(
    name="vllm:request_inference_time_seconds",
    unit="seconds",
    help="Per finished request: from first scheduling to the last token (prefill + decode).",
    buckets=REQUEST_LATENCY_BUCKETS,
    traps=(_COARSE, _SUM_ALONE, _ABORTS, _OVERRIDABLE),
)
_TOKEN_TRAPS = (_TOKEN_BUCKETS, _SATURATE, _LE_FLOAT, _OVERRIDABLE)
REQUEST_PROMPT_TOKENS = _histogram(
    name="vllm:request_prompt_tokens",
    unit="tokens",
    help="Prompt length of each finished request.",
    buckets=REQUEST_TOKENS_BUCKETS,
    traps=_TOKEN_TRAPS,
)
REQUEST_GENERATION_TOKENS = _histogram(
    name="vllm:request_generation_tokens",
    unit="tokens",
    help="Output length of each finished request.",
    buckets=REQUEST_TOKENS_BUCKETS,
    traps=_TOKEN_TRAPS,
)
REQUEST_MAX_NUM_GENERATION_TOKENS = _histogram(
    name="vllm:request_max_num_generation_tokens",
    unit="tokens",
    help="Longest output among the n sequences of each finished request.",
    buckets=REQUEST_TOKENS_BUCKETS,
    traps=(
        "rate() of _sum is tokens per second over requests, not a per-request length.",
        *_TOKEN_TRAPS,
    ),
)
REQUEST_PARAMS_MAX_TOKENS = _histogram(
    name="vllm:request_params_max_tokens",
    unit="tokens",
    help="The max_tokens parameter of finished requests that set it.",
    buckets=REQUEST_TOKENS_BUCKETS,
    traps=("Requests without max_tokens are not observed.", *_TOKEN_TRAPS),
)
REQUEST_PARAMS_N = _histogram(
    name="vllm:request_params_n",
    unit="count",
    help="The n parameter (sequences per request) of finished requests.",
    buckets=REQUEST_PARAMS_N_BUCKETS,
    traps=(_LE_FLOAT, _OVERRIDABLE),
)
REQUEST_PREFILL_KV_COMPUTED_TOKENS = _histogram(
    name="vllm:request_prefill_kv_computed_tokens",
    unit="tokens",
    help="Per finished request: prompt tokens minus cached tokens, i.e. KV actually computed.",
    buckets=REQUEST_TOKENS_BUCKETS,
    since="vLLM 0.13.0",
    traps=_TOKEN_TRAPS,
)
REQUEST_NUM_PREEMPTIONS = _histogram(
    name="vllm:request_num_preemptions",
    unit="count",
    help="Times each finished request was preempted.",
    buckets=REQUEST_NUM_PREEMPTIONS_BUCKETS,
    since="vLLM 0.30.0",
    traps=('Zero preemptions fall in the first bucket, le="1.0".', _LE_FLOAT, _OVERRIDABLE),
)
ITERATION_TOKENS = _histogram(
    name="vllm:iteration_tokens_total",
    unit="tokens",
    help="Per engine step: prompt tokens computed in the step plus tokens generated.",
    buckets=ITERATION_TOKENS_BUCKETS,
    since=_V0,
    traps=(
        "A histogram despite the _total suffix: rate(_count) is engine steps per second, "
        "rate(_sum) tokens per second.",
        "Prompt tokens are credited to the step that completes the prefill, so chunked "
        "prefills look lumped: a rough batch-size proxy only.",
        "Cached prompt tokens are not in _sum.",
        "vLLM <= 0.7.x used CUDA-graph capture sizes as buckets.",
        _MULTI_API,
        _LE_FLOAT,
        _OVERRIDABLE,
    ),
)

# ---------------------------------------------------------------------------
# Feature-gated families, defined in vllm_optional / vllm_connectors, re-exported.
# ---------------------------------------------------------------------------

KV_CACHE_RESIDENCY_BUCKETS = _optional.KV_CACHE_RESIDENCY_BUCKETS
NUM_REQUESTS_KV_FETCH_BY_STAGE = _optional.NUM_REQUESTS_KV_FETCH_BY_STAGE
LORA_REQUESTS_INFO = _optional.LORA_REQUESTS_INFO
EXTERNAL_PREFIX_CACHE_QUERIES = _optional.EXTERNAL_PREFIX_CACHE_QUERIES
EXTERNAL_PREFIX_CACHE_HITS = _optional.EXTERNAL_PREFIX_CACHE_HITS
CORRUPTED_REQUESTS = _optional.CORRUPTED_REQUESTS
WATERMARK_REQUESTS = _optional.WATERMARK_REQUESTS
KV_BLOCK_LIFETIME = _optional.KV_BLOCK_LIFETIME
KV_BLOCK_IDLE_BEFORE_EVICT = _optional.KV_BLOCK_IDLE_BEFORE_EVICT
KV_BLOCK_REUSE_GAP = _optional.KV_BLOCK_REUSE_GAP
SPEC_DECODE_NUM_DRAFTS = _optional.SPEC_DECODE_NUM_DRAFTS
SPEC_DECODE_NUM_DRAFT_TOKENS = _optional.SPEC_DECODE_NUM_DRAFT_TOKENS
SPEC_DECODE_NUM_ACCEPTED_TOKENS = _optional.SPEC_DECODE_NUM_ACCEPTED_TOKENS
SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS = _optional.SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS
NIXL_XFER_TIME = _connectors.NIXL_XFER_TIME
NIXL_NUM_FAILED_TRANSFERS = _connectors.NIXL_NUM_FAILED_TRANSFERS
MOONCAKE_STORE_OPERATION_TIME = _connectors.MOONCAKE_STORE_OPERATION_TIME
MOONCAKE_STORE_OPERATION = _connectors.MOONCAKE_STORE_OPERATION
MOONCAKE_STORE_OPERATION_KEYS = _connectors.MOONCAKE_STORE_OPERATION_KEYS
MOONCAKE_STORE_OPERATION_BYTES = _connectors.MOONCAKE_STORE_OPERATION_BYTES
MOONCAKE_STORE_OPERATION_FAILED_KEYS = _connectors.MOONCAKE_STORE_OPERATION_FAILED_KEYS
KV_OFFLOAD_LOAD_BYTES = _connectors.KV_OFFLOAD_LOAD_BYTES
KV_OFFLOAD_LOAD_TIME = _connectors.KV_OFFLOAD_LOAD_TIME
KV_OFFLOAD_STORE_BYTES = _connectors.KV_OFFLOAD_STORE_BYTES
KV_OFFLOAD_STORE_TIME = _connectors.KV_OFFLOAD_STORE_TIME
ESTIMATED_FLOPS_PER_GPU = _optional.ESTIMATED_FLOPS_PER_GPU
ESTIMATED_READ_BYTES_PER_GPU = _optional.ESTIMATED_READ_BYTES_PER_GPU
ESTIMATED_WRITE_BYTES_PER_GPU = _optional.ESTIMATED_WRITE_BYTES_PER_GPU

CORE_FAMILIES: tuple[Family, ...] = (
    NUM_REQUESTS_RUNNING,
    NUM_REQUESTS_WAITING,
    NUM_REQUESTS_WAITING_BY_REASON,
    KV_CACHE_USAGE,
    ENGINE_SLEEP_STATE,
    CACHE_CONFIG_INFO,
    PROMPT_TOKENS,
    PROMPT_TOKENS_BY_SOURCE,
    PROMPT_TOKENS_CACHED,
    PROMPT_TOKENS_CACHED_BY_SOURCE,
    PROMPT_TOKENS_RECOMPUTED,
    GENERATION_TOKENS,
    REQUEST_SUCCESS,
    NUM_PREEMPTIONS,
    PREFIX_CACHE_QUERIES,
    PREFIX_CACHE_HITS,
    MM_CACHE_QUERIES,
    MM_CACHE_HITS,
    ADMISSION_REJECTIONS,
    TIME_TO_FIRST_TOKEN,
    INTER_TOKEN_LATENCY,
    REQUEST_TIME_PER_OUTPUT_TOKEN,
    E2E_REQUEST_LATENCY,
    REQUEST_QUEUE_TIME,
    REQUEST_PREFILL_TIME,
    REQUEST_DECODE_TIME,
    REQUEST_INFERENCE_TIME,
    REQUEST_PROMPT_TOKENS,
    REQUEST_GENERATION_TOKENS,
    REQUEST_MAX_NUM_GENERATION_TOKENS,
    REQUEST_PARAMS_MAX_TOKENS,
    REQUEST_PARAMS_N,
    REQUEST_PREFILL_KV_COMPUTED_TOKENS,
    REQUEST_NUM_PREEMPTIONS,
    ITERATION_TOKENS,
)
"""The V1 engine families defined in this module (scheduler gauges, counters, histograms)."""

FAMILIES: tuple[Family, ...] = (*CORE_FAMILIES, *_optional.FAMILIES, *_connectors.FAMILIES)
"""Every vLLM family of the catalogue, optional ones included."""
