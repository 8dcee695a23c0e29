"""Feature-gated vLLM families: speculative decoding, KV block sampling, LoRA, MFU
estimates, API-server extras (KV connectors are in :mod:`.vllm_connectors`).

These series exist only when a feature is configured (``condition`` says which),
except the HTTP ones, which every API server has. Names, types, labels and default
buckets were read from the released vLLM 0.33.0 sources (``vllm/v1/metrics``,
``vllm/v1/spec_decode``, ``vllm/v1/metrics/perf.py``) and the HTTP instrumentation
it uses (prometheus-fastapi-instrumentator 8.1.0). :mod:`inference_obs.metrics.vllm`
re-exports the main ones and lists them all in its ``FAMILIES``.
"""

from __future__ import annotations

from functools import partial

from inference_obs.metrics.family import Family, MetricType

_STANDARD_LABELS: tuple[str, ...] = ("model_name", "engine")

# ---------------------------------------------------------------------------
# Default bucket upper bounds (+Inf implied).
# ---------------------------------------------------------------------------

HTTP_REQUEST_DURATION_HIGHR_BUCKETS: tuple[float, ...] = (
    *(0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75),
    *(1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 7.5, 10, 30, 60),
)
HTTP_REQUEST_DURATION_BUCKETS: tuple[float, ...] = (0.1, 0.5, 1)
KV_CACHE_RESIDENCY_BUCKETS: tuple[float, ...] = (
    *(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5),
    *(1, 2, 5, 10, 20, 30, 60),
    *(120, 300, 600, 1200, 1800),
)

_RESETS = (
    "Counters restart at zero when a server or one DP engine restarts: rate() or increase() "
    "each series, then sum."
)
_OVERRIDABLE = "Deployments can replace default buckets (vLLM 0.33+): read le from the data."
_V0 = "vLLM V0 (<= 0.6.6)"
_GAUGE_STEP = (
    "The value is the scheduler state at the last engine step the API server handled; a "
    "scrape is a sample, not an average."
)
_MULTI_API = (
    "The vLLM code flags this family as possibly wrong with several API servers "
    "(--api-server-count > 1)."
)
_CONNECTOR = "a KV connector is configured (--kv-transfer-config)"
_KV_SAMPLED = "--kv-cache-metrics (sampled at --kv-cache-metrics-sample, default 1 % of blocks)"
_SPEC = "--speculative-config is set"

_vllm = partial(Family, exporter="vllm", labels=_STANDARD_LABELS)
_counter = partial(_vllm, type=MetricType.COUNTER)
_gauge = partial(_vllm, type=MetricType.GAUGE)
_histogram = partial(_vllm, type=MetricType.HISTOGRAM)

# ---------------------------------------------------------------------------
# KV block residency sampling (--kv-cache-metrics).
# ---------------------------------------------------------------------------

KV_BLOCK_LIFETIME = _histogram(
    name="vllm:kv_block_lifetime_seconds",
    unit="seconds",
    help="Sampled KV blocks: time from allocation to eviction.",
    buckets=KV_CACHE_RESIDENCY_BUCKETS,
    since="vLLM 0.12.0",
    condition=_KV_SAMPLED,
    traps=(_OVERRIDABLE,),
)
KV_BLOCK_IDLE_BEFORE_EVICT = _histogram(
    name="vllm:kv_block_idle_before_evict_seconds",
    unit="seconds",
    help="Sampled KV blocks: idle time before their eviction.",
    buckets=KV_CACHE_RESIDENCY_BUCKETS,
    since="vLLM 0.12.0",
    condition=_KV_SAMPLED,
    traps=(_OVERRIDABLE,),
)
KV_BLOCK_REUSE_GAP = _histogram(
    name="vllm:kv_block_reuse_gap_seconds",
    unit="seconds",
    help="Sampled KV blocks: gaps between consecutive accesses.",
    buckets=KV_CACHE_RESIDENCY_BUCKETS,
    since="vLLM 0.12.0",
    condition=_KV_SAMPLED,
    traps=(_OVERRIDABLE,),
)


# ---------------------------------------------------------------------------
# Speculative decoding (and its diffusion-LM counterpart).
# ---------------------------------------------------------------------------

SPEC_DECODE_NUM_DRAFTS = _counter(
    name="vllm:spec_decode_num_drafts_total",
    unit="steps",
    help="Verification steps that carried a draft proposal.",
    since="vLLM 0.8 (V1)",
    condition=_SPEC,
    traps=(
        "Mean acceptance length (bonus token included) is 1 + rate(accepted) / rate(drafts).",
        _RESETS,
    ),
)
SPEC_DECODE_NUM_DRAFT_TOKENS = _counter(
    name="vllm:spec_decode_num_draft_tokens_total",
    unit="tokens",
    help="Draft tokens proposed.",
    since=_V0,
    condition=_SPEC,
    traps=("Acceptance rate is rate(accepted tokens) / rate(draft tokens).", _RESETS),
)
SPEC_DECODE_NUM_ACCEPTED_TOKENS = _counter(
    name="vllm:spec_decode_num_accepted_tokens_total",
    unit="tokens",
    help="Draft tokens accepted by verification.",
    since=_V0,
    condition=_SPEC,
    traps=("Acceptance is progress per verification step, not an end-to-end speed-up.", _RESETS),
)
SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS = _counter(
    name="vllm:spec_decode_num_accepted_tokens_per_pos_total",
    unit="tokens",
    help="Accepted draft tokens at each draft position (0 to num_speculative_tokens - 1).",
    labels=(*_STANDARD_LABELS, "position"),
    since="vLLM 0.8 (V1)",
    condition=_SPEC,
    traps=(
        "Per-position acceptance divides by num_drafts with ignoring(position) group_left; "
        "dividing range vectors directly is not valid PromQL.",
        _RESETS,
    ),
)
_DIFFUSION = "a diffusion language model is served"
DIFFUSION_NUM_DENOISING_STEPS = _counter(
    name="vllm:diffusion_num_denoising_steps_total",
    unit="steps",
    help="Denoising steps of a diffusion LM (the counterpart of num_drafts).",
    since="vLLM 0.24.0",
    condition=_DIFFUSION,
    traps=(_RESETS,),
)
DIFFUSION_NUM_CANVAS_POSITIONS = _counter(
    name="vllm:diffusion_num_canvas_positions_total",
    unit="tokens",
    help="Canvas positions proposed by a diffusion LM (the counterpart of draft tokens).",
    since="vLLM 0.24.0",
    condition=_DIFFUSION,
    traps=(_RESETS,),
)
DIFFUSION_NUM_COMMITTED_TOKENS = _counter(
    name="vllm:diffusion_num_committed_tokens_total",
    unit="tokens",
    help="Tokens committed by a diffusion LM (the counterpart of accepted tokens).",
    since="vLLM 0.24.0",
    condition=_DIFFUSION,
    traps=(_RESETS,),
)

# ---------------------------------------------------------------------------
# Engine families behind a flag or a configuration.
# ---------------------------------------------------------------------------

NUM_REQUESTS_KV_FETCH_BY_STAGE = _gauge(
    name="vllm:num_requests_kv_fetch_by_stage",
    unit="requests",
    help="Waiting requests by stage of their asynchronous KV load.",
    labels=(*_STANDARD_LABELS, "stage"),
    since="vLLM 0.33.0",
    condition="the KV-transfer config makes this server a KV consumer (disaggregated decode)",
    traps=(_GAUGE_STEP,),
)
LORA_REQUESTS_INFO = _gauge(
    name="vllm:lora_requests_info",
    unit="unixtime",
    help="Unix time of the last update; adapter names are comma-separated in the labels.",
    labels=("max_lora", "running_lora_adapters", "waiting_lora_adapters"),
    since=_V0,
    condition="--enable-lora",
    traps=(
        "Adapter lists live in labels, so series churn: keep the series with the largest "
        "value (the latest).",
        "No model_name or engine label.",
        _MULTI_API,
    ),
)
EXTERNAL_PREFIX_CACHE_QUERIES = _counter(
    name="vllm:external_prefix_cache_queries_total",
    unit="tokens",
    help="Tokens looked up in the KV connector's external or cross-instance cache.",
    since="vLLM 0.12.0",
    condition=_CONNECTOR,
    traps=("Its own denominator: never add it to the local prefix-cache ratio.", _RESETS),
)
EXTERNAL_PREFIX_CACHE_HITS = _counter(
    name="vllm:external_prefix_cache_hits_total",
    unit="tokens",
    help="Tokens found in the KV connector's external cache.",
    since="vLLM 0.12.0",
    condition=_CONNECTOR,
    traps=(_RESETS,),
)
CORRUPTED_REQUESTS = _counter(
    name="vllm:corrupted_requests_total",
    unit="requests",
    help="Requests whose logits contained NaNs.",
    since="vLLM 0.12.0",
    condition="environment variable VLLM_COMPUTE_NANS_IN_LOGITS=1",
    traps=(_RESETS,),
)
WATERMARK_REQUESTS = _counter(
    name="vllm:watermark_requests_total",
    unit="requests",
    help="Requests by watermarking outcome (watermarked, skipped, not_watermarked).",
    labels=(*_STANDARD_LABELS, "status"),
    since="vLLM 0.33.0",
    condition="a watermark config is set",
    traps=(_RESETS,),
)

# ---------------------------------------------------------------------------
# Model FLOPs / bandwidth utilisation estimates.
# ---------------------------------------------------------------------------

_MFU = "--enable-mfu-metrics"
# The three Prometheus counters are first released in vLLM 0.17.0.
_MFU_SINCE = "vLLM 0.17.0"
_ESTIMATE = (
    "Model-based estimates, not hardware counters: divide rate() by the GPU's peak "
    "FLOP/s or memory bandwidth for MFU or MBU."
)
ESTIMATED_FLOPS_PER_GPU = _counter(
    name="vllm:estimated_flops_per_gpu_total",
    unit="flop",
    help="Estimated floating-point operations executed per GPU.",
    since=_MFU_SINCE,
    condition=_MFU,
    traps=(_ESTIMATE, _RESETS),
)
ESTIMATED_READ_BYTES_PER_GPU = _counter(
    name="vllm:estimated_read_bytes_per_gpu_total",
    unit="bytes",
    help="Estimated bytes read from GPU memory per GPU.",
    since=_MFU_SINCE,
    condition=_MFU,
    traps=(_ESTIMATE, _RESETS),
)
ESTIMATED_WRITE_BYTES_PER_GPU = _counter(
    name="vllm:estimated_write_bytes_per_gpu_total",
    unit="bytes",
    help="Estimated bytes written to GPU memory per GPU.",
    since=_MFU_SINCE,
    condition=_MFU,
    traps=(_ESTIMATE, _RESETS),
)

# ---------------------------------------------------------------------------
# API-server extras.
# ---------------------------------------------------------------------------

TOOL_CALL_PARSER_INVOCATIONS = _counter(
    name="vllm:tool_call_parser_invocations_total",
    unit="events",
    help="Tool-call parser runs by mode, outcome and request type.",
    labels=("model_name", "mode", "outcome", "request_type"),
    since="vLLM 0.20 to 0.24",
    condition="a tool-call parser is in use",
    traps=(_RESETS,),
)
_WEBSOCKET = "the realtime speech-to-text websocket API is served"
WEBSOCKET_CONNECTIONS_ACTIVE = _gauge(
    name="vllm:websocket_connections_active",
    unit="count",
    help="Open realtime websocket connections.",
    labels=(),
    since="vLLM 0.18.0",
    condition=_WEBSOCKET,
)
WEBSOCKET_CONNECTIONS = _counter(
    name="vllm:websocket_connections_total",
    unit="count",
    help="Realtime websocket connections opened.",
    labels=(),
    since="vLLM 0.18.0",
    condition=_WEBSOCKET,
    traps=(_RESETS,),
)
_HTTP_TRAPS = (
    "Set in the API server with no model label, and /metrics, /health, /load, /ping, "
    "/version and /server_info are not instrumented.",
)
HTTP_REQUESTS = _counter(
    name="http_requests_total",
    unit="requests",
    help="HTTP requests by handler, method and grouped status (2xx, 4xx, 5xx).",
    labels=("handler", "method", "status"),
    traps=('status holds classes such as "5xx", never exact codes.', *_HTTP_TRAPS, _RESETS),
)
HTTP_REQUEST_DURATION_HIGHR = _histogram(
    name="http_request_duration_highr_seconds",
    unit="seconds",
    help="HTTP request durations over all handlers, with fine buckets.",
    labels=(),
    buckets=HTTP_REQUEST_DURATION_HIGHR_BUCKETS,
    traps=("No labels: it cannot be split by endpoint.", *_HTTP_TRAPS),
)
HTTP_REQUEST_DURATION = _histogram(
    name="http_request_duration_seconds",
    unit="seconds",
    help="HTTP request durations by handler and method, with three coarse buckets.",
    labels=("handler", "method"),
    buckets=HTTP_REQUEST_DURATION_BUCKETS,
    traps=("Only 0.1, 0.5 and 1 s bounds: quantiles from it are crude.", *_HTTP_TRAPS),
)

FAMILIES: tuple[Family, ...] = (
    KV_BLOCK_LIFETIME,
    KV_BLOCK_IDLE_BEFORE_EVICT,
    KV_BLOCK_REUSE_GAP,
    SPEC_DECODE_NUM_DRAFTS,
    SPEC_DECODE_NUM_DRAFT_TOKENS,
    SPEC_DECODE_NUM_ACCEPTED_TOKENS,
    SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS,
    DIFFUSION_NUM_DENOISING_STEPS,
    DIFFUSION_NUM_CANVAS_POSITIONS,
    NUM_REQUESTS_KV_FETCH_BY_STAGE,
    LORA_REQUESTS_INFO,
    EXTERNAL_PREFIX_CACHE_QUERIES,
    EXTERNAL_PREFIX_CACHE_HITS,
    CORRUPTED_REQUESTS,
    WATERMARK_REQUESTS,
    DIFFUSION_NUM_COMMITTED_TOKENS,
    ESTIMATED_FLOPS_PER_GPU,
    ESTIMATED_READ_BYTES_PER_GPU,
    ESTIMATED_WRITE_BYTES_PER_GPU,
    TOOL_CALL_PARSER_INVOCATIONS,
    WEBSOCKET_CONNECTIONS_ACTIVE,
    WEBSOCKET_CONNECTIONS,
    HTTP_REQUESTS,
    HTTP_REQUEST_DURATION_HIGHR,
    HTTP_REQUEST_DURATION,
)
"""Every feature-gated vLLM family defined here (KV connectors excepted)."""
