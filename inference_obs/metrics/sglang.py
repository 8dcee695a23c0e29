"""SGLang metric families (``sglang:`` prefix) and how each compares with vLLM.

Names, types, labels and default buckets were read from the released SGLang
0.5.23 sources (``python/sglang/srt/observability/metrics_collector.py`` and the
scheduler metrics reporter), with SGLang 0.4.6 for older names. Each ``since``
is the first of the released wheels 0.5.1 to 0.5.23 that exports the name
(0.5.13 to 0.5.15 unchecked); families already in 0.5.1 have none.

Conventions:

- every family needs ``--enable-metrics`` (metrics are off by default);
- scheduler gauges carry :data:`SCHEDULER_LABELS`; only rank 0 of a TP group
  sets them, but each DP rank exports its own series. Event counters of the
  scheduler are counted by every rank (:data:`PER_RANK_COPIES`). Gauges
  without a multiprocess mode gain a ``pid`` label. Request-level families,
  counted in the tokenizer manager, carry :data:`TOKENIZER_LABELS` and several
  add ``is_streaming``. A ``priority`` label (priority scheduling) and custom
  ``extra_metric_labels`` may be added to either;
- SGLang 0.4.6 labelled its families with ``model_name`` only;
- disaggregation and hierarchical-cache families are in :mod:`.sglang_kv`
  (re-exported here), with their own label sets.

:data:`inference_obs.metrics.sglang_vllm.VLLM_EQUIVALENTS` maps SGLang families
to the nearest vLLM family and says in one sentence what differs; families
absent from it have no vLLM counterpart worth comparing.
"""

from __future__ import annotations

from functools import partial

from inference_obs.metrics import sglang_kv as _kv
from inference_obs.metrics.family import Alias, Family, MetricType

SCHEDULER_LABELS: tuple[str, ...] = (
    "model_name",
    "engine_type",
    "tp_rank",
    "pp_rank",
    "moe_ep_rank",
    "dp_rank",
)
"""Labels of scheduler families (``dp_rank`` only when data parallelism is used)."""
TOKENIZER_LABELS: tuple[str, ...] = ("model_name", "engine_type", "name")
"""Labels of request-level families counted in the tokenizer manager (``name``: the model's
label in SGLang 0.3, before ``model_name``)."""
STREAMING_LABELS: tuple[str, ...] = (*TOKENIZER_LABELS, "is_streaming")
"""Tokenizer labels plus ``is_streaming`` ("true"/"false")."""

# ---------------------------------------------------------------------------
# Default bucket upper bounds (+Inf implied).
# ---------------------------------------------------------------------------

TTFT_BUCKETS: tuple[float, ...] = (
    *(0.1, 0.2, 0.4, 0.6, 0.8),
    *(1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400),
)
INTER_TOKEN_LATENCY_BUCKETS: tuple[float, ...] = (
    *(0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060),
    *(0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0),
)
E2E_REQUEST_LATENCY_BUCKETS: tuple[float, ...] = (
    *(0.1, 0.2, 0.4, 0.6, 0.8),
    *(1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600),
    *(1200, 1800, 2400),
)
QUEUE_TIME_BUCKETS: tuple[float, ...] = (
    *(0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5),
    *(1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90),
    *(100, 200, 300, 400, 500, 600, 700, 800, 900),
    *(1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000),
)
PER_STAGE_REQ_LATENCY_BUCKETS: tuple[float, ...] = tuple(0.001 * 1.62**i for i in range(30))
"""30 exponential bounds from 1 ms, factor 1.62."""
TOKEN_COUNT_BUCKETS: tuple[float, ...] = (
    *(100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000),
    *(10000, 12500, 15000, 17500, 20000, 22500, 25000, 27500, 30000, 35000, 40000),
    *(60000, 80000, 100000, 200000, 300000, 400000, 600000, 800000, 1000000, 1100000),
)
"""Default bounds of the prompt, uncached-prompt and generation length histograms."""

_ENABLE = "--enable-metrics"
_SPEC = "--enable-metrics with speculative decoding"
_PD = "--enable-metrics on a prefill/decode disaggregated server"

_RESETS = "Counters restart at zero on restart: rate() or increase() each series, then sum."
_DP = "Each DP rank exports its own series: aggregate over dp_rank for a server total."
_STREAM = "Split by is_streaming: sum over it for all requests."
_OLD = "SGLang 0.4.6 labelled it with model_name only."
_REPORT = (
    "Set at each scheduler report (log interval): a scrape sees the last report, not a "
    "time average."
)
_PRECOMPUTED = (
    "A ratio precomputed over the last report interval and not weighted by volume: do not "
    "average it across time or ranks."
)
_V046 = "SGLang <= 0.4.6"
_OVERRIDABLE = "Server arguments can replace the default buckets: read le from the data."
_EVERY_RANK = (
    "Every TP rank counts each event under its own tp_rank: never sum over ranks; take "
    "max without (tp_rank, pp_rank, moe_ep_rank)."
)

# Disaggregation and hierarchical cache (:mod:`.sglang_kv`), re-exported.
STORAGE_LABELS = _kv.STORAGE_LABELS
CACHE_LABELS = _kv.CACHE_LABELS
RANK_LABELS = _kv.RANK_LABELS
KV_TRANSFER_LATENCY_MS_BUCKETS = _kv.KV_TRANSFER_LATENCY_MS_BUCKETS
KV_TRANSFER_SPEED_GB_S_BUCKETS = _kv.KV_TRANSFER_SPEED_GB_S_BUCKETS
KV_TRANSFER_LATENCY_MS = _kv.KV_TRANSFER_LATENCY_MS
KV_TRANSFER_SPEED_GB_S = _kv.KV_TRANSFER_SPEED_GB_S
NUM_TRANSFER_FAILED_REQS = _kv.NUM_TRANSFER_FAILED_REQS
NUM_BOOTSTRAP_FAILED_REQS = _kv.NUM_BOOTSTRAP_FAILED_REQS
HICACHE_HOST_USED_TOKENS = _kv.HICACHE_HOST_USED_TOKENS
HICACHE_HOST_TOTAL_TOKENS = _kv.HICACHE_HOST_TOTAL_TOKENS
PREFETCHED_TOKENS = _kv.PREFETCHED_TOKENS
BACKUPED_TOKENS = _kv.BACKUPED_TOKENS
LOAD_BACK_TOKENS = _kv.LOAD_BACK_TOKENS

_sglang = partial(Family, exporter="sglang", condition=_ENABLE)
_sched_gauge = partial(
    _sglang, type=MetricType.GAUGE, labels=SCHEDULER_LABELS, traps=(_REPORT, _DP)
)
_sched_counter = partial(
    _sglang, type=MetricType.COUNTER, labels=SCHEDULER_LABELS, traps=(_RESETS, _DP)
)
_tok_counter = partial(_sglang, type=MetricType.COUNTER, labels=TOKENIZER_LABELS, traps=(_RESETS,))
_histogram = partial(_sglang, type=MetricType.HISTOGRAM, labels=TOKENIZER_LABELS)

# ---------------------------------------------------------------------------
# Request latency histograms.
# ---------------------------------------------------------------------------

TIME_TO_FIRST_TOKEN = _histogram(
    name="sglang:time_to_first_token_seconds",
    unit="seconds",
    help="Per request: time to its first output token.",
    labels=STREAMING_LABELS,
    buckets=TTFT_BUCKETS,
    since=_V046,
    traps=("Nothing below 100 ms: fast first tokens all land in le=0.1.", _STREAM, _OLD),
)
INTER_TOKEN_LATENCY = _histogram(
    name="sglang:inter_token_latency_seconds",
    unit="seconds",
    help="Gap between streamed outputs, split evenly over the tokens of each output.",
    buckets=INTER_TOKEN_LATENCY_BUCKETS,
    aliases=(
        Alias(
            "sglang:time_per_output_token_seconds",
            "SGLang 0.3 to 0.4",
            "The same gap between streamed outputs per output token, under its name before "
            "the rename (not the per-request sglang:request_time_per_output_token_seconds).",
        ),
    ),
    since=_V046,
    traps=(
        "One observation per token, so _count is tokens; vLLM observes once per engine step.",
        _OLD,
    ),
)
REQUEST_TIME_PER_OUTPUT_TOKEN = _histogram(
    name="sglang:request_time_per_output_token_seconds",
    unit="seconds",
    help="Per finished request: (finish - first token) / (completion tokens - 1).",
    labels=STREAMING_LABELS,
    buckets=INTER_TOKEN_LATENCY_BUCKETS,
    since="SGLang 0.5.22",
    traps=(
        "Skips requests with at most one output token, requests not finished by stop or "
        "length, and prefill workers of a disaggregated setup.",
        "Shares the inter-token latency buckets (and their server argument).",
        _STREAM,
    ),
)
E2E_REQUEST_LATENCY = _histogram(
    name="sglang:e2e_request_latency_seconds",
    unit="seconds",
    help="Per finished request: end-to-end latency.",
    labels=STREAMING_LABELS,
    buckets=E2E_REQUEST_LATENCY_BUCKETS,
    since=_V046,
    traps=(_STREAM, _OLD),
)
QUEUE_TIME = _histogram(
    name="sglang:queue_time_seconds",
    unit="seconds",
    help="Per request: time spent waiting in the scheduler queue before its first prefill.",
    labels=SCHEDULER_LABELS,
    buckets=QUEUE_TIME_BUCKETS,
    since="SGLang 0.5.3",
    traps=("SGLang 0.4.6 only had the gauge sglang:avg_request_queue_latency.", _DP),
)
PER_STAGE_REQ_LATENCY = _histogram(
    name="sglang:per_stage_req_latency_seconds",
    unit="seconds",
    help="Per request and stage (e.g. prefill_waiting, request_process): time in the stage.",
    labels=(*SCHEDULER_LABELS, "stage"),
    buckets=PER_STAGE_REQ_LATENCY_BUCKETS,
    since="SGLang 0.5.3",
    traps=(
        "Stages do not map one-to-one to vLLM's queue/prefill/decode phases.",
        "Exponential bounds print with many digits: match le by value, not by string.",
        _DP,
    ),
)

# ---------------------------------------------------------------------------
# Scheduler state.
# ---------------------------------------------------------------------------

NUM_RUNNING_REQS = _sched_gauge(
    name="sglang:num_running_reqs",
    unit="requests",
    help="Requests in the running batch.",
    since=_V046,
)
NUM_QUEUE_REQS = _sched_gauge(
    name="sglang:num_queue_reqs",
    unit="requests",
    help="Requests in the waiting queue.",
    since=_V046,
    traps=("Grammar and disaggregation queues are separate gauges.", _REPORT, _DP),
)
NUM_GRAMMAR_QUEUE_REQS = _sched_gauge(
    name="sglang:num_grammar_queue_reqs",
    unit="requests",
    help="Requests waiting for their grammar (structured output) to be ready.",
)
NUM_PREFILL_BOOTSTRAP_QUEUE_REQS = _sched_gauge(
    name="sglang:num_prefill_bootstrap_queue_reqs",
    unit="requests",
    help="Prefill-side requests waiting for the bootstrap with their decode peer.",
    aliases=(
        Alias(
            "sglang:num_prefill_prealloc_queue_reqs",
            "SGLang 0.5.1-0.5.11",
            note="The same bootstrap queue under its first name.",
            removed_in="0.5.12",
        ),
    ),
    since="SGLang 0.5.12",
    condition=_PD,
)
NUM_PREFILL_INFLIGHT_QUEUE_REQS = _sched_gauge(
    name="sglang:num_prefill_inflight_queue_reqs",
    unit="requests",
    help="Prefill-side requests whose KV is being sent.",
    aliases=(
        Alias(
            "sglang:num_prefill_infight_queue_reqs",
            "SGLang 0.5.1",
            note="The same queue, name misspelt.",
            removed_in="0.5.2",
        ),
    ),
    since="SGLang 0.5.2",
    condition=_PD,
)
NUM_DECODE_PREALLOC_QUEUE_REQS = _sched_gauge(
    name="sglang:num_decode_prealloc_queue_reqs",
    unit="requests",
    help="Decode-side requests waiting for KV memory to be preallocated.",
    condition=_PD,
)
NUM_DECODE_TRANSFER_QUEUE_REQS = _sched_gauge(
    name="sglang:num_decode_transfer_queue_reqs",
    unit="requests",
    help="Decode-side requests waiting for their KV transfer.",
    condition=_PD,
)
_PID = (
    "Exported without a multiprocess mode: each scheduler process's series also carries "
    "pid, which changes on restart."
)
NUM_RETRACTED_REQS = _sched_gauge(
    name="sglang:num_retracted_reqs",
    unit="requests",
    help="Requests retracted (SGLang's preemption) by the last retraction before a report.",
    labels=(*SCHEDULER_LABELS, "pid"),
    since="SGLang 0.5.2",
    traps=(
        "A per-report gauge that keeps only the last retraction: count with "
        "sglang:num_retracted_requests_total instead.",
        _PID,
        _DP,
    ),
)
NUM_PAUSED_REQS = _sched_gauge(
    name="sglang:num_paused_reqs",
    unit="requests",
    help="Requests paused by an asynchronous weight update in the last report interval.",
    labels=(*SCHEDULER_LABELS, "pid"),
    since="SGLang 0.5.3",
    traps=("Not retractions: weight updates pause requests without freeing KV.", _PID, _DP),
)
NUM_RETRACTED_REQUESTS = _sched_counter(
    name="sglang:num_retracted_requests_total",
    unit="requests",
    help="Requests retracted (SGLang's preemption: KV freed, recomputed later).",
    since="SGLang 0.5.7",
    traps=(_EVERY_RANK, _RESETS, _DP),
)
NUM_RETRACTED_INPUT_TOKENS = _sched_counter(
    name="sglang:num_retracted_input_tokens_total",
    unit="tokens",
    help="Prompt tokens of retracted requests.",
    since="SGLang 0.5.7",
    traps=(_EVERY_RANK, _RESETS, _DP),
)
NUM_RETRACTED_OUTPUT_TOKENS = _sched_counter(
    name="sglang:num_retracted_output_tokens_total",
    unit="tokens",
    help="Already generated tokens of retracted requests.",
    since="SGLang 0.5.7",
    traps=(_EVERY_RANK, _RESETS, _DP),
)
_TOKENS_NOT_BLOCKS = "Counted in tokens where vLLM counts KV blocks."
TOKEN_USAGE = _sched_gauge(
    name="sglang:token_usage",
    unit="ratio",
    help="Used share of the KV pools (the fullest pool for hybrid models).",
    value_range=(0, 1),
    since=_V046,
    traps=(
        "Evictable radix-cache tokens are reported apart (kv_evictable_tokens).",
        _TOKENS_NOT_BLOCKS,
        _REPORT,
    ),
)
NUM_USED_TOKENS = _sched_gauge(
    name="sglang:num_used_tokens",
    unit="tokens",
    help="KV slots in use (the larger of full and sliding-window pools).",
    since=_V046,
)
KV_USED_TOKENS = _sched_gauge(
    name="sglang:kv_used_tokens",
    since="SGLang 0.5.11",
    unit="tokens",
    help="KV slots held by running requests in the full-attention pool.",
)
KV_AVAILABLE_TOKENS = _sched_gauge(
    name="sglang:kv_available_tokens",
    since="SGLang 0.5.11",
    unit="tokens",
    help="Free KV slots in the full-attention pool.",
)
KV_EVICTABLE_TOKENS = _sched_gauge(
    name="sglang:kv_evictable_tokens",
    since="SGLang 0.5.11",
    unit="tokens",
    help="KV slots holding radix-cached data that can be evicted.",
)
MAX_TOTAL_NUM_TOKENS = _sched_gauge(
    name="sglang:max_total_num_tokens",
    since="SGLang 0.5.6",
    unit="tokens",
    help="Capacity of the KV pool in tokens (set once at start).",
    traps=(_DP,),
)
CACHE_HIT_RATE = _sched_gauge(
    name="sglang:cache_hit_rate",
    unit="ratio",
    help="Cached share of prompt tokens in the prefill batches of the last report interval.",
    value_range=(0, 1),
    since=_V046,
    traps=(
        _PRECOMPUTED,
        "Prefer sum(rate(sglang:cached_tokens_total)) / sum(rate(sglang:prompt_tokens_total)).",
    ),
)
GEN_THROUGHPUT = _sched_gauge(
    name="sglang:gen_throughput",
    unit="tokens_per_second",
    help="Generated tokens per second over the last log interval.",
    already_rate=True,
    since=_V046,
    traps=("Use rate(sglang:generation_tokens_total) instead.", _REPORT),
)
SPEC_ACCEPT_LENGTH = _sched_gauge(
    name="sglang:spec_accept_length",
    unit="tokens",
    help="Mean tokens accepted per verification step, over the last report interval.",
    since=_V046,
    condition=_SPEC,
    traps=(_PRECOMPUTED,),
)
SPEC_ACCEPT_RATE = _sched_gauge(
    name="sglang:spec_accept_rate",
    since="SGLang 0.5.4",
    unit="ratio",
    help="Share of draft tokens accepted, over the last report interval.",
    value_range=(0, 1),
    condition=_SPEC,
    traps=(_PRECOMPUTED,),
)
_ESTIMATE = "A model-based estimate, not a hardware counter."
ESTIMATED_FLOPS_PER_GPU = _sched_counter(
    name="sglang:estimated_flops_per_gpu_total",
    since="SGLang 0.5.10",
    unit="flop",
    help="Estimated floating-point operations per GPU.",
    traps=(_ESTIMATE, _RESETS),
)
ESTIMATED_READ_BYTES_PER_GPU = _sched_counter(
    name="sglang:estimated_read_bytes_per_gpu_total",
    since="SGLang 0.5.10",
    unit="bytes",
    help="Estimated bytes read from GPU memory per GPU.",
    traps=(_ESTIMATE, _RESETS),
)
ESTIMATED_WRITE_BYTES_PER_GPU = _sched_counter(
    name="sglang:estimated_write_bytes_per_gpu_total",
    since="SGLang 0.5.10",
    unit="bytes",
    help="Estimated bytes written to GPU memory per GPU.",
    traps=(_ESTIMATE, _RESETS),
)

# ---------------------------------------------------------------------------
# Request counters and length histograms (tokenizer manager).
# ---------------------------------------------------------------------------

_AT_FINISH = "Counted when the request finishes, not when its prefill completes."
PROMPT_TOKENS = _tok_counter(
    name="sglang:prompt_tokens_total",
    unit="tokens",
    help="Prompt tokens of finished requests, cached ones included.",
    labels=STREAMING_LABELS,
    since=_V046,
    traps=(_AT_FINISH, _STREAM, _RESETS),
)
GENERATION_TOKENS = _tok_counter(
    name="sglang:generation_tokens_total",
    unit="tokens",
    help="Output tokens of finished requests.",
    labels=STREAMING_LABELS,
    since=_V046,
    traps=(_AT_FINISH, _STREAM, _RESETS),
)
NUM_REQUESTS = _tok_counter(
    name="sglang:num_requests_total",
    unit="requests",
    help="Finished requests.",
    labels=STREAMING_LABELS,
    since=_V046,
    traps=("No finish-reason label.", _STREAM, _RESETS),
)
NUM_ABORTED_REQUESTS = _tok_counter(
    name="sglang:num_aborted_requests_total",
    unit="requests",
    help="Aborted requests.",
)
CACHED_TOKENS = _tok_counter(
    name="sglang:cached_tokens_total",
    unit="tokens",
    help="Prompt tokens served from cache, by cache_source (device, host, storage).",
    labels=(*TOKENIZER_LABELS, "cache_source"),
    since=_V046,
    traps=("SGLang 0.4.6 had no cache_source label.", _AT_FINISH, _RESETS),
)
SPEC_VERIFY_CALLS = _tok_counter(
    name="sglang:spec_verify_calls_total",
    unit="steps",
    help="Speculative-decoding verification steps.",
    condition=_SPEC,
)
PROMPT_TOKENS_HISTOGRAM = _histogram(
    name="sglang:prompt_tokens_histogram",
    unit="tokens",
    help="Prompt length of each finished request.",
    buckets=TOKEN_COUNT_BUCKETS,
    traps=("Nothing below 100 tokens: short prompts all land in le=100.", _OVERRIDABLE),
)
UNCACHED_PROMPT_TOKENS_HISTOGRAM = _histogram(
    name="sglang:uncached_prompt_tokens_histogram",
    unit="tokens",
    help="Prompt tokens computed (not served from cache) for each finished request.",
    buckets=TOKEN_COUNT_BUCKETS,
    since="SGLang 0.5.12",
    traps=(_OVERRIDABLE,),
)
GENERATION_TOKENS_HISTOGRAM = _histogram(
    name="sglang:generation_tokens_histogram",
    unit="tokens",
    help="Output length of each finished request.",
    buckets=TOKEN_COUNT_BUCKETS,
    traps=("Nothing below 100 tokens: short outputs all land in le=100.", _OVERRIDABLE),
)

FAMILIES: tuple[Family, ...] = (
    TIME_TO_FIRST_TOKEN,
    INTER_TOKEN_LATENCY,
    REQUEST_TIME_PER_OUTPUT_TOKEN,
    E2E_REQUEST_LATENCY,
    QUEUE_TIME,
    PER_STAGE_REQ_LATENCY,
    NUM_RUNNING_REQS,
    NUM_QUEUE_REQS,
    NUM_GRAMMAR_QUEUE_REQS,
    NUM_PREFILL_BOOTSTRAP_QUEUE_REQS,
    NUM_PREFILL_INFLIGHT_QUEUE_REQS,
    NUM_DECODE_PREALLOC_QUEUE_REQS,
    NUM_DECODE_TRANSFER_QUEUE_REQS,
    NUM_RETRACTED_REQS,
    NUM_PAUSED_REQS,
    NUM_RETRACTED_REQUESTS,
    NUM_RETRACTED_INPUT_TOKENS,
    NUM_RETRACTED_OUTPUT_TOKENS,
    TOKEN_USAGE,
    NUM_USED_TOKENS,
    KV_USED_TOKENS,
    KV_AVAILABLE_TOKENS,
    KV_EVICTABLE_TOKENS,
    MAX_TOTAL_NUM_TOKENS,
    CACHE_HIT_RATE,
    GEN_THROUGHPUT,
    SPEC_ACCEPT_LENGTH,
    SPEC_ACCEPT_RATE,
    ESTIMATED_FLOPS_PER_GPU,
    ESTIMATED_READ_BYTES_PER_GPU,
    ESTIMATED_WRITE_BYTES_PER_GPU,
    PROMPT_TOKENS,
    GENERATION_TOKENS,
    NUM_REQUESTS,
    NUM_ABORTED_REQUESTS,
    CACHED_TOKENS,
    SPEC_VERIFY_CALLS,
    PROMPT_TOKENS_HISTOGRAM,
    UNCACHED_PROMPT_TOKENS_HISTOGRAM,
    GENERATION_TOKENS_HISTOGRAM,
    *_kv.FAMILIES,
)
"""Every SGLang family of the catalogue."""

PER_RANK_COPIES: frozenset[str] = frozenset(
    {
        NUM_RETRACTED_REQUESTS.name,
        NUM_RETRACTED_INPUT_TOKENS.name,
        NUM_RETRACTED_OUTPUT_TOKENS.name,
        PREFETCHED_TOKENS.name,
        LOAD_BACK_TOKENS.name,
    }
)
"""Counters every rank of one server increments for the same events: summed over
:data:`RANK_LABELS` they count each event once per rank."""
