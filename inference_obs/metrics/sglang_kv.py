"""SGLang families of KV moved off the GPU: disaggregated transfers and the hierarchical cache.

Names, types, labels and default buckets were read from the released SGLang
wheels 0.5.1 to 0.5.23 (``observability/metrics_collector.py``, earlier
``metrics/collector.py``, and the caches that build the collectors); each
``since`` is the first release that exports the name as recorded here.
:mod:`inference_obs.metrics.sglang` re-exports every family and lists them in
its ``FAMILIES``.

Three label sets meet here:

- transfer families come from the scheduler and carry its labels;
- storage-tier (L3) counters carry :data:`STORAGE_LABELS`, set by the cache
  controller: no ``model_name``, no ``engine_type``;
- host-tier (L2) counters carry :data:`CACHE_LABELS`, set by the radix cache.

Unlike the scheduler's gauges, which only the first rank of a TP group sets,
these are written by every rank that does the work.
"""

from __future__ import annotations

from functools import partial

from inference_obs.metrics.family import Family, MetricType

# The scheduler's labels, as in :data:`inference_obs.metrics.sglang.SCHEDULER_LABELS`
# (kept here so that module can import this one).
_SCHEDULER_LABELS: tuple[str, ...] = (
    "model_name",
    "engine_type",
    "tp_rank",
    "pp_rank",
    "moe_ep_rank",
    "dp_rank",
)
STORAGE_LABELS: tuple[str, ...] = (
    "storage_backend",
    "tp_rank",
    "dp_rank",
    "pp_rank",
    "pp_size",
    "attn_cp_rank",
    "attn_cp_size",
)
"""Labels of storage-tier counters (SGLang 0.5.2-0.5.7: the first three; pp_* from
0.5.8; attn_cp_* from 0.5.11). ``extra_metric_labels`` may add more."""
CACHE_LABELS: tuple[str, ...] = ("cache_type", "tp_rank", "pp_rank", "dp_rank")
"""Labels of host-tier counters (``cache_type`` is the cache class, e.g.
``UnifiedRadixCache``); the rank labels exist from SGLang 0.5.21."""
RANK_LABELS: tuple[str, ...] = ("tp_rank", "pp_rank", "moe_ep_rank", "attn_cp_rank")
"""Labels that tell apart ranks of one server which repeat the same logical count.
Collapse them with ``max without (...)`` before summing a family of
:data:`inference_obs.metrics.sglang.PER_RANK_COPIES`; ``dp_rank`` is kept, since
data-parallel ranks serve different requests."""

# Defaults of SGLang 0.5.10+ (PR "Convert KV transfer metrics from Gauge to Histogram").
KV_TRANSFER_LATENCY_MS_BUCKETS: tuple[float, ...] = (
    *(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000),
)
KV_TRANSFER_SPEED_GB_S_BUCKETS: tuple[float, ...] = (0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400)

_PD = "--enable-metrics on a prefill/decode disaggregated server"
_HICACHE = "--enable-metrics with the hierarchical cache (HiCache)"
_STORAGE = "--enable-metrics with HiCache and a storage backend (--hicache-storage-backend)"
_RESETS = "Counters restart at zero on restart: rate() or increase() each series, then sum."
_REPORT = (
    "Set at each scheduler report (log interval): a scrape sees the last report, not a "
    "time average."
)
_WAS_GAUGE = "SGLang 0.5.2-0.5.9 exported a per-report gauge of this name (the last transfer)."
_LAST_CHUNK = (
    "Unless the transfer backend times the whole transfer, SGLang times only the last chunk "
    "while counting all bytes."
)
_EACH_RANK = (
    "Every TP rank of a prefill server observes its own shard's transfers: _count is "
    "transfers times ranks, not requests."
)
_NO_MODEL = "No model_name or engine_type label: select by storage_backend and the target."
_SAME_ON_EACH_RANK = (
    "Every TP rank counts the same tokens under its own tp_rank: never sum over tp_rank; "
    "take max without (tp_rank) or one rank."
)

_sglang = partial(Family, exporter="sglang")

KV_TRANSFER_LATENCY_MS = _sglang(
    name="sglang:kv_transfer_latency_ms",
    type=MetricType.HISTOGRAM,
    unit="milliseconds",
    help="Per request on the prefill server: time its KV took to send to the decode server.",
    labels=_SCHEDULER_LABELS,
    buckets=KV_TRANSFER_LATENCY_MS_BUCKETS,
    since="SGLang 0.5.10",
    condition=_PD,
    traps=(
        "Milliseconds, where vLLM's transfer metrics use seconds.",
        _LAST_CHUNK,
        _EACH_RANK,
        _WAS_GAUGE,
    ),
)
KV_TRANSFER_SPEED_GB_S = _sglang(
    name="sglang:kv_transfer_speed_gb_s",
    type=MetricType.HISTOGRAM,
    unit="gigabytes_per_second",
    help="Per request on the prefill server: KV bytes sent over the transfer time, in GB/s.",
    labels=_SCHEDULER_LABELS,
    buckets=KV_TRANSFER_SPEED_GB_S_BUCKETS,
    since="SGLang 0.5.10",
    condition=_PD,
    traps=(
        "A speed per observation: its quantiles are of requests, not of bytes; never rate() "
        "the buckets as throughput.",
        _LAST_CHUNK + " Speeds above the link rate come from that.",
        _EACH_RANK,
        _WAS_GAUGE,
    ),
)
NUM_TRANSFER_FAILED_REQS = _sglang(
    name="sglang:num_transfer_failed_reqs_total",
    type=MetricType.COUNTER,
    unit="requests",
    help="Requests whose KV transfer failed.",
    labels=_SCHEDULER_LABELS,
    condition=_PD,
    traps=(_RESETS,),
)
NUM_BOOTSTRAP_FAILED_REQS = _sglang(
    name="sglang:num_bootstrap_failed_reqs_total",
    type=MetricType.COUNTER,
    unit="requests",
    help="Requests whose prefill/decode bootstrap failed.",
    labels=_SCHEDULER_LABELS,
    condition=_PD,
    traps=(_RESETS,),
)
HICACHE_HOST_USED_TOKENS = _sglang(
    name="sglang:hicache_host_used_tokens",
    type=MetricType.GAUGE,
    unit="tokens",
    help="Tokens held in the host-memory cache tier.",
    labels=_SCHEDULER_LABELS,
    since="SGLang 0.5.10",
    condition=_HICACHE,
    traps=(_REPORT,),
)
HICACHE_HOST_TOTAL_TOKENS = _sglang(
    name="sglang:hicache_host_total_tokens",
    type=MetricType.GAUGE,
    unit="tokens",
    help="Capacity of the host-memory cache tier in tokens.",
    labels=_SCHEDULER_LABELS,
    since="SGLang 0.5.10",
    condition=_HICACHE,
)
PREFETCHED_TOKENS = _sglang(
    name="sglang:prefetched_tokens_total",
    type=MetricType.COUNTER,
    unit="tokens",
    help="Prompt tokens transferred from the storage tier (L3) into host memory.",
    labels=STORAGE_LABELS,
    since="SGLang 0.5.2",
    condition=_STORAGE,
    traps=(_NO_MODEL, _SAME_ON_EACH_RANK, _RESETS),
)
BACKUPED_TOKENS = _sglang(
    name="sglang:backuped_tokens_total",
    type=MetricType.COUNTER,
    unit="tokens",
    help="Tokens written from host memory to the storage tier (L3).",
    labels=STORAGE_LABELS,
    since="SGLang 0.5.2",
    condition=_STORAGE,
    traps=(
        "Storage (L3) writes; GPU-to-host (L2) backups are sglang:hicache_backup_tokens_total.",
        _NO_MODEL,
        _RESETS,
    ),
)
LOAD_BACK_TOKENS = _sglang(
    name="sglang:load_back_tokens_total",
    type=MetricType.COUNTER,
    unit="tokens",
    help="Tokens loaded back from the host tier (L2) to the GPU, by host pool (kv, swa, ...).",
    labels=(*CACHE_LABELS, "pool"),
    since="SGLang 0.5.6",
    condition=_HICACHE,
    traps=(
        _SAME_ON_EACH_RANK,
        "Before SGLang 0.5.21 one series (cache_type only) held the sum of all TP ranks: "
        "TP times the tokens.",
        'The pool label exists from SGLang 0.5.18: select pool="kv" for KV tokens.',
        _RESETS,
    ),
)

FAMILIES: tuple[Family, ...] = (
    KV_TRANSFER_LATENCY_MS,
    KV_TRANSFER_SPEED_GB_S,
    NUM_TRANSFER_FAILED_REQS,
    NUM_BOOTSTRAP_FAILED_REQS,
    HICACHE_HOST_USED_TOKENS,
    HICACHE_HOST_TOTAL_TOKENS,
    PREFETCHED_TOKENS,
    BACKUPED_TOKENS,
    LOAD_BACK_TOKENS,
)
"""The disaggregation and hierarchical-cache families."""
