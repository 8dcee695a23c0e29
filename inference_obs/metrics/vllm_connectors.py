"""vLLM KV-connector families: NIXL, Mooncake (peer-to-peer and store), KV offloading.

They exist only when ``--kv-transfer-config`` selects the matching connector.
Names, types, labels and default buckets were read from the released vLLM 0.33.0
sources (``vllm/distributed/kv_transfer/kv_connector/v1``). LMCache publishes its
own ``lmcache:`` series instead; its hits show up in vLLM as external prefix-cache
hits. :mod:`inference_obs.metrics.vllm` re-exports the main families and lists
them all in its ``FAMILIES``.
"""

from __future__ import annotations

from functools import partial

from inference_obs.metrics.family import Family, MetricType

_STANDARD_LABELS: tuple[str, ...] = ("model_name", "engine")

# Default bucket upper bounds (+Inf implied).
NIXL_XFER_TIME_BUCKETS: tuple[float, ...] = (
    *(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75),
    *(1.0, 5.0),
)
NIXL_POST_TIME_BUCKETS: tuple[float, ...] = (0.001, *NIXL_XFER_TIME_BUCKETS)
KV_TRANSFER_BYTES_BUCKETS: tuple[float, ...] = tuple(float(2**k) for k in range(11, 34, 2))
"""Bytes per transfer: 2^11 to 2^33 in steps of x4 (NIXL and Mooncake)."""
NIXL_NUM_DESCRIPTORS_BUCKETS: tuple[float, ...] = (
    *(10, 20, 30, 50, 75, 100, 200, 400),
    *(1000, 2000, 4000, 10000, 20000, 50000),
)
MOONCAKE_STORE_OPERATION_TIME_BUCKETS: tuple[float, ...] = (
    *(0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75),
    *(1.0, 1.5, 2.0, 3.0, 4.0),
)
KV_OFFLOAD_SIZE_BUCKETS: tuple[float, ...] = (
    *(1e6, 5e6, 10e6, 20e6, 40e6, 60e6, 80e6),
    *(100e6, 150e6, 200e6),
)

_RESETS = (
    "Counters restart at zero when a server or one DP engine restarts: rate() or increase() "
    "each series, then sum."
)
_OVERRIDABLE = "Read le from the data rather than assume these default bounds."
_BIG_LE = 'le strings switch to exponent form from 1e6 ("2.097152e+06").'

_vllm = partial(Family, exporter="vllm", labels=_STANDARD_LABELS)
_counter = partial(_vllm, type=MetricType.COUNTER)
_histogram = partial(_vllm, type=MetricType.HISTOGRAM)

# ---------------------------------------------------------------------------
# NIXL connector.
# ---------------------------------------------------------------------------

_NIXL = "--kv-transfer-config uses NixlConnector"
NIXL_XFER_TIME = _histogram(
    name="vllm:nixl_xfer_time_seconds",
    unit="seconds",
    help="Duration of each NIXL KV transfer.",
    buckets=NIXL_XFER_TIME_BUCKETS,
    since="vLLM 0.12.0",
    condition=_NIXL,
    traps=(_OVERRIDABLE,),
)
NIXL_POST_TIME = _histogram(
    name="vllm:nixl_post_time_seconds",
    unit="seconds",
    help="Time to post each NIXL transfer request.",
    buckets=NIXL_POST_TIME_BUCKETS,
    since="vLLM 0.12.0",
    condition=_NIXL,
    traps=(_OVERRIDABLE,),
)
NIXL_BYTES_TRANSFERRED = _histogram(
    name="vllm:nixl_bytes_transferred",
    unit="bytes",
    help="Bytes moved by each NIXL transfer.",
    buckets=KV_TRANSFER_BYTES_BUCKETS,
    since="vLLM 0.12.0",
    condition=_NIXL,
    traps=(_BIG_LE, _OVERRIDABLE),
)
NIXL_NUM_DESCRIPTORS = _histogram(
    name="vllm:nixl_num_descriptors",
    unit="count",
    help="Descriptors per NIXL transfer.",
    buckets=NIXL_NUM_DESCRIPTORS_BUCKETS,
    since="vLLM 0.12.0",
    condition=_NIXL,
    traps=(_OVERRIDABLE,),
)
NIXL_NUM_FAILED_TRANSFERS = _counter(
    name="vllm:nixl_num_failed_transfers_total",
    unit="events",
    help="Failed NIXL transfers, handshake and notification failures included.",
    since="vLLM 0.12.0",
    condition=_NIXL,
    traps=(
        "Already includes failed notifications: do not add nixl_num_failed_notifications.",
        _RESETS,
    ),
)
NIXL_NUM_FAILED_NOTIFICATIONS = _counter(
    name="vllm:nixl_num_failed_notifications_total",
    unit="events",
    help="Failed NIXL notifications (kept for compatibility; also in failed transfers).",
    since="vLLM 0.12.0",
    condition=_NIXL,
    traps=(_RESETS,),
)
NIXL_NUM_KV_EXPIRED_REQS = _counter(
    name="vllm:nixl_num_kv_expired_reqs_total",
    unit="requests",
    help="Requests whose KV expired on the prefill side before being fetched.",
    since="vLLM 0.15.0",
    condition=_NIXL,
    traps=(_RESETS,),
)
NIXL_NUM_NOTIFICATIONS_AFTER_EXPIRY = _counter(
    name="vllm:nixl_num_notifications_after_expiry_total",
    unit="events",
    help="NIXL notifications that arrived after the request's KV had expired.",
    since="vLLM 0.33.0",
    condition=_NIXL,
    traps=(_RESETS,),
)

# ---------------------------------------------------------------------------
# Mooncake peer-to-peer connector and Mooncake store.
# ---------------------------------------------------------------------------

_MOONCAKE = "--kv-transfer-config uses the Mooncake connector"
MOONCAKE_XFER_TIME = _histogram(
    name="vllm:mooncake_xfer_time_seconds",
    unit="seconds",
    help="Duration of each Mooncake KV transfer.",
    buckets=NIXL_XFER_TIME_BUCKETS,
    since="vLLM 0.33.0",
    condition=_MOONCAKE,
    traps=(_OVERRIDABLE,),
)
MOONCAKE_BYTES_TRANSFERRED = _histogram(
    name="vllm:mooncake_bytes_transferred",
    unit="bytes",
    help="Bytes moved by each Mooncake transfer.",
    buckets=KV_TRANSFER_BYTES_BUCKETS,
    since="vLLM 0.33.0",
    condition=_MOONCAKE,
    traps=(_BIG_LE, _OVERRIDABLE),
)
MOONCAKE_NUM_FAILED_TRANSFERS = _counter(
    name="vllm:mooncake_num_failed_transfers_total",
    unit="events",
    help="Failed Mooncake transfers.",
    since="vLLM 0.33.0",
    condition=_MOONCAKE,
    traps=(_RESETS,),
)
MOONCAKE_NUM_FAILED_RECVS = _counter(
    name="vllm:mooncake_num_failed_recvs_total",
    unit="events",
    help="Failed Mooncake receives.",
    since="vLLM 0.33.0",
    condition=_MOONCAKE,
    traps=(_RESETS,),
)
MOONCAKE_NUM_KV_EXPIRED_REQS = _counter(
    name="vllm:mooncake_num_kv_expired_reqs_total",
    unit="requests",
    help="Requests whose KV expired before the Mooncake transfer.",
    since="vLLM 0.33.0",
    condition=_MOONCAKE,
    traps=(_RESETS,),
)

_STORE = "--kv-transfer-config uses the Mooncake store connector"
_STORE_LABELS = (*_STANDARD_LABELS, "operation", "status")
_STORE_SINCE = "vLLM 0.20 to 0.24 (first seen in 0.24.0)"
MOONCAKE_STORE_OPERATION_TIME = _histogram(
    name="vllm:mooncake_store_operation_time_seconds",
    unit="seconds",
    help="Duration of each Mooncake store operation, by operation and status.",
    labels=_STORE_LABELS,
    buckets=MOONCAKE_STORE_OPERATION_TIME_BUCKETS,
    since=_STORE_SINCE,
    condition=_STORE,
    traps=(
        "The top finite bound is 4 s: slower operations only reach +Inf.",
        _OVERRIDABLE,
    ),
)
MOONCAKE_STORE_OPERATION = _counter(
    name="vllm:mooncake_store_operation_total",
    unit="events",
    help="Mooncake store operations, by operation and status.",
    labels=_STORE_LABELS,
    since=_STORE_SINCE,
    condition=_STORE,
    traps=(_RESETS,),
)
MOONCAKE_STORE_OPERATION_KEYS = _counter(
    name="vllm:mooncake_store_operation_keys_total",
    unit="keys",
    help="Keys touched by Mooncake store operations.",
    labels=_STORE_LABELS,
    since=_STORE_SINCE,
    condition=_STORE,
    traps=(_RESETS,),
)
MOONCAKE_STORE_OPERATION_BYTES = _counter(
    name="vllm:mooncake_store_operation_bytes_total",
    unit="bytes",
    help="Bytes moved by Mooncake store operations.",
    labels=_STORE_LABELS,
    since=_STORE_SINCE,
    condition=_STORE,
    traps=(_RESETS,),
)
MOONCAKE_STORE_OPERATION_FAILED_KEYS = _counter(
    name="vllm:mooncake_store_operation_failed_keys_total",
    unit="keys",
    help="Keys of Mooncake store operations that failed.",
    labels=_STORE_LABELS,
    since=_STORE_SINCE,
    condition=_STORE,
    traps=(_RESETS,),
)

# ---------------------------------------------------------------------------
# CPU/disk offloading (OffloadingConnector).
# ---------------------------------------------------------------------------

_OFFLOAD = "--kv-transfer-config uses OffloadingConnector"
_FLAT_SINCE = "vLLM 0.24.0"
_SPEC_LABELS = "Some offloading specs add labels of their own."
KV_OFFLOAD_LOAD_BYTES = _counter(
    name="vllm:kv_offload_load_bytes_total",
    unit="bytes",
    help="Bytes loaded from the offload tier back to the GPU.",
    since=_FLAT_SINCE,
    condition=_OFFLOAD,
    traps=(_SPEC_LABELS, _RESETS),
)
KV_OFFLOAD_LOAD_TIME = _counter(
    name="vllm:kv_offload_load_time_total",
    unit="seconds",
    help="Seconds spent loading KV from the offload tier.",
    since=_FLAT_SINCE,
    condition=_OFFLOAD,
    traps=(
        "Divide the increase of bytes by the increase of time for a load bandwidth.",
        _RESETS,
    ),
)
KV_OFFLOAD_STORE_BYTES = _counter(
    name="vllm:kv_offload_store_bytes_total",
    unit="bytes",
    help="Bytes stored from the GPU to the offload tier.",
    since=_FLAT_SINCE,
    condition=_OFFLOAD,
    traps=(_SPEC_LABELS, _RESETS),
)
KV_OFFLOAD_STORE_TIME = _counter(
    name="vllm:kv_offload_store_time_total",
    unit="seconds",
    help="Seconds spent storing KV to the offload tier.",
    since=_FLAT_SINCE,
    condition=_OFFLOAD,
    traps=(_RESETS,),
)
KV_OFFLOAD_LOAD_SIZE = _histogram(
    name="vllm:kv_offload_load_size",
    unit="bytes",
    help="Bytes of each load from the offload tier.",
    buckets=KV_OFFLOAD_SIZE_BUCKETS,
    since=_FLAT_SINCE,
    condition=_OFFLOAD,
    traps=(_BIG_LE, _OVERRIDABLE),
)
KV_OFFLOAD_STORE_SIZE = _histogram(
    name="vllm:kv_offload_store_size",
    unit="bytes",
    help="Bytes of each store to the offload tier.",
    buckets=KV_OFFLOAD_SIZE_BUCKETS,
    since=_FLAT_SINCE,
    condition=_OFFLOAD,
    traps=(_BIG_LE, _OVERRIDABLE),
)
KV_OFFLOAD_ALLOCATION_FAILURE = _counter(
    name="vllm:kv_offload_allocation_failure_total",
    unit="events",
    help="Failed allocations in the offload tier.",
    condition=_OFFLOAD,
    traps=(_RESETS,),
)
_DEPRECATED_OFFLOAD = (
    "Deprecated since 0.24 yet still exported: never add it to the load/store families, "
    "which count the same transfers."
)
KV_OFFLOAD_TOTAL_BYTES = _counter(
    name="vllm:kv_offload_total_bytes_total",
    unit="bytes",
    help="Offloaded KV bytes by direction (transfer_type CPU_to_GPU or GPU_to_CPU).",
    labels=(*_STANDARD_LABELS, "transfer_type"),
    since="vLLM 0.16.0",
    condition=_OFFLOAD,
    traps=(_DEPRECATED_OFFLOAD, _RESETS),
)
KV_OFFLOAD_TOTAL_TIME = _counter(
    name="vllm:kv_offload_total_time_total",
    unit="seconds",
    help="Seconds of offload transfers by direction (transfer_type).",
    labels=(*_STANDARD_LABELS, "transfer_type"),
    since="vLLM 0.16.0",
    condition=_OFFLOAD,
    traps=(_DEPRECATED_OFFLOAD, _RESETS),
)

FAMILIES: tuple[Family, ...] = (
    NIXL_XFER_TIME,
    NIXL_POST_TIME,
    NIXL_BYTES_TRANSFERRED,
    NIXL_NUM_DESCRIPTORS,
    NIXL_NUM_FAILED_TRANSFERS,
    NIXL_NUM_FAILED_NOTIFICATIONS,
    NIXL_NUM_KV_EXPIRED_REQS,
    NIXL_NUM_NOTIFICATIONS_AFTER_EXPIRY,
    MOONCAKE_XFER_TIME,
    MOONCAKE_BYTES_TRANSFERRED,
    MOONCAKE_NUM_FAILED_TRANSFERS,
    MOONCAKE_NUM_FAILED_RECVS,
    MOONCAKE_NUM_KV_EXPIRED_REQS,
    MOONCAKE_STORE_OPERATION_TIME,
    MOONCAKE_STORE_OPERATION,
    MOONCAKE_STORE_OPERATION_KEYS,
    MOONCAKE_STORE_OPERATION_BYTES,
    MOONCAKE_STORE_OPERATION_FAILED_KEYS,
    KV_OFFLOAD_LOAD_BYTES,
    KV_OFFLOAD_LOAD_TIME,
    KV_OFFLOAD_STORE_BYTES,
    KV_OFFLOAD_STORE_TIME,
    KV_OFFLOAD_LOAD_SIZE,
    KV_OFFLOAD_STORE_SIZE,
    KV_OFFLOAD_ALLOCATION_FAILURE,
    KV_OFFLOAD_TOTAL_BYTES,
    KV_OFFLOAD_TOTAL_TIME,
)
"""Every KV-connector family defined here."""
