"""The vLLM production-stack router's families: ``vllm:`` names that are not the engine's.

The router of vllm-project/production-stack (``src/vllm_router``,
``services/metrics_service/__init__.py`` and ``routers/metrics_router.py`` @
67307bd23b159cf66bb157f3d1f33bbcdde4076a) exports its own families under the
engine's ``vllm:`` prefix, with a ``server`` label (the backend URL) instead
of ``model_name``/``engine``. Some carry the engine's names
(``vllm:num_requests_running``) with another meaning; some end in ``_total``
and are gauges (``vllm:healthy_pods_total``); the request statistics are
averages over the router's sliding window (``--request-stats-window``), not
counters.

They are kept apart from :data:`inference_obs.metrics.FAMILIES`, whose names
are unique, so that an engine name always finds the engine's family; a
selector with a ``server`` matcher, or a name only the router exports, reads
them.
"""

from __future__ import annotations

from functools import partial

from inference_obs.metrics.family import Family, MetricType

__all__ = ["ROUTER_FAMILIES", "ROUTER_LABEL", "router_family"]

ROUTER_LABEL = "server"
"""The label the router puts on every per-backend family: the backend's URL."""

_WINDOW = (
    "Computed by the router over its sliding window (--request-stats-window), from requests "
    "it routed: not the engine's own statistics."
)
_COPY = (
    "The router copies the engine's value at its last scrape into a gauge: rate() of it is "
    "wrong across router restarts; read the engine's counter instead."
)
_NOT_ENGINE = "The router's view, not the engine's family of the same name."

_router = partial(Family, exporter="vllm-router", labels=(ROUTER_LABEL,))
_gauge = partial(_router, type=MetricType.GAUGE)

NUM_REQUESTS_RUNNING = _gauge(
    name="vllm:num_requests_running",
    unit="requests",
    help="Requests the router has in prefill or decode on a backend.",
    traps=(_NOT_ENGINE, _WINDOW),
)
NUM_REQUESTS_WAITING = _gauge(
    name="vllm:num_requests_waiting",
    unit="requests",
    help="Requests waiting on a backend, as the router last scraped it.",
    traps=(_NOT_ENGINE,),
)
NUM_REQUESTS_SWAPPED = _gauge(
    name="vllm:num_requests_swapped",
    unit="requests",
    help="Swapped requests as the router last scraped them (always 0 on V1 engines).",
    traps=(_NOT_ENGINE,),
)
NUM_PREFILL_REQUESTS = _gauge(
    name="vllm:num_prefill_requests",
    unit="requests",
    help="Requests the router sent that have no first token yet.",
    traps=(_WINDOW,),
)
NUM_DECODING_REQUESTS = _gauge(
    name="vllm:num_decoding_requests",
    unit="requests",
    help="Requests the router sent that are streaming tokens.",
    traps=(_WINDOW,),
)
CURRENT_QPS = _gauge(
    name="vllm:current_qps",
    unit="requests_per_second",
    help="Requests per second the router sent to a backend over its sliding window.",
    already_rate=True,
    traps=(_WINDOW,),
)
AVG_DECODING_LENGTH = _gauge(
    name="vllm:avg_decoding_length",
    unit="tokens",
    help="Mean output length of requests in the router's sliding window.",
    traps=(_WINDOW,),
)
AVG_LATENCY = _gauge(
    name="vllm:avg_latency",
    unit="seconds",
    help="Mean end-to-end latency of requests in the router's sliding window.",
    traps=(
        _WINDOW,
        "A mean over the window: averaging it again over time weighs windows, not requests.",
    ),
)
AVG_ITL = _gauge(
    name="vllm:avg_itl",
    unit="seconds",
    help="Mean inter-token latency of requests in the router's sliding window.",
    traps=(_WINDOW,),
)
HEALTHY_PODS_TOTAL = _gauge(
    name="vllm:healthy_pods_total",
    unit="pods",
    help="1 for each backend the router's service discovery sees as healthy, else 0.",
    value_range=(0, 1),
    traps=("A gauge despite the _total suffix: sum() of it counts healthy backends.",),
)
GPU_PREFIX_CACHE_HIT_RATE = _gauge(
    name="vllm:gpu_prefix_cache_hit_rate",
    unit="ratio",
    help="The backend's prefix-cache hit rate as the router computed it at its last scrape.",
    value_range=(0, 1),
    traps=("A precomputed ratio: averaging it across backends ignores their traffic.",),
)
GPU_PREFIX_CACHE_HITS_TOTAL = _gauge(
    name="vllm:gpu_prefix_cache_hits_total",
    unit="tokens",
    help="The backend's prefix-cache hit counter, copied into a gauge.",
    traps=(_COPY,),
)
GPU_PREFIX_CACHE_QUERIES_TOTAL = _gauge(
    name="vllm:gpu_prefix_cache_queries_total",
    unit="tokens",
    help="The backend's prefix-cache query counter, copied into a gauge.",
    traps=(_COPY,),
)
NUM_INCOMING_REQUESTS = _router(
    name="vllm:num_incoming_requests_total",
    type=MetricType.COUNTER,
    unit="requests",
    help="Valid requests the router received, including those it could not place.",
    labels=("model",),
)
INPUT_TOKENS = _router(
    name="vllm:input_tokens_total",
    type=MetricType.COUNTER,
    unit="tokens",
    help="Prompt tokens of requests the router forwarded.",
    labels=(ROUTER_LABEL, "model"),
)
OUTPUT_TOKENS = _router(
    name="vllm:output_tokens_total",
    type=MetricType.COUNTER,
    unit="tokens",
    help="Output tokens of requests the router forwarded.",
    labels=(ROUTER_LABEL, "model"),
)
REQUEST_ERRORS = _router(
    name="vllm:request_errors_total",
    type=MetricType.COUNTER,
    unit="requests",
    help="Requests the router saw fail, by error_type.",
    labels=(ROUTER_LABEL, "model", "error_type"),
)
REQUEST_LATENCY = _router(
    name="vllm:request_latency_seconds",
    type=MetricType.HISTOGRAM,
    unit="seconds",
    help="End-to-end latency of each request, measured at the router.",
    labels=(ROUTER_LABEL, "model", "status"),
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
    traps=("Includes the network between router and engine; the engine's e2e does not.",),
)

ROUTER_FAMILIES: tuple[Family, ...] = (
    NUM_REQUESTS_RUNNING,
    NUM_REQUESTS_WAITING,
    NUM_REQUESTS_SWAPPED,
    NUM_PREFILL_REQUESTS,
    NUM_DECODING_REQUESTS,
    CURRENT_QPS,
    AVG_DECODING_LENGTH,
    AVG_LATENCY,
    AVG_ITL,
    HEALTHY_PODS_TOTAL,
    GPU_PREFIX_CACHE_HIT_RATE,
    GPU_PREFIX_CACHE_HITS_TOTAL,
    GPU_PREFIX_CACHE_QUERIES_TOTAL,
    NUM_INCOMING_REQUESTS,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    REQUEST_ERRORS,
    REQUEST_LATENCY,
)
"""Every family of the production-stack router."""

_BY_NAME = {family.name: family for family in ROUTER_FAMILIES}


def router_family(name: str) -> Family | None:
    """The router's family exposed as ``name`` (histogram parts included), or None."""
    for candidate in (name, *(name.removesuffix(s) for s in ("_bucket", "_sum", "_count"))):
        if candidate in _BY_NAME:
            return _BY_NAME[candidate]
    return None
