"""Default vLLM histogram bucket bounds (``+Inf`` implied), from vLLM 0.33.0's
``vllm/v1/metrics/buckets.py``. Deployments may override them
(``--custom-histogram-buckets``): read ``le`` from the data, never assume these.
"""

from __future__ import annotations

__all__ = [
    "INTER_TOKEN_LATENCY_BUCKETS",
    "ITERATION_TOKENS_BUCKETS",
    "REQUEST_LATENCY_BUCKETS",
    "REQUEST_NUM_PREEMPTIONS_BUCKETS",
    "REQUEST_PARAMS_N_BUCKETS",
    "REQUEST_TOKENS_BUCKETS",
    "TTFT_BUCKETS",
    "request_tokens_buckets",
]

# ---------------------------------------------------------------------------
# Default bucket upper bounds (+Inf implied), vLLM 0.33.0 ``vllm/v1/metrics/buckets.py``.
# ---------------------------------------------------------------------------

TTFT_BUCKETS: tuple[float, ...] = (
    *(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75),
    *(1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
)
INTER_TOKEN_LATENCY_BUCKETS: tuple[float, ...] = (
    *(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75),
    *(1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0),
)
REQUEST_LATENCY_BUCKETS: tuple[float, ...] = (
    *(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0),
    *(120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0),
)
ITERATION_TOKENS_BUCKETS: tuple[float, ...] = (
    *(1, 8, 16, 32, 64, 128, 256, 512),
    *(1024, 2048, 4096, 8192, 16384),
)
REQUEST_TOKENS_BUCKETS: tuple[float, ...] = (
    *(1, 2, 5, 10, 20, 50, 100, 200, 500),
    *(1000, 2000, 5000, 10000, 20000, 50000, 100000),
)
"""Default ``request_tokens`` bounds for max_model_len 131072 (:func:`request_tokens_buckets`)."""
REQUEST_PARAMS_N_BUCKETS: tuple[float, ...] = (1, 2, 5, 10, 20)
REQUEST_NUM_PREEMPTIONS_BUCKETS: tuple[float, ...] = (1, 2, 3, 4, 5, 10, 20)


def request_tokens_buckets(max_model_len: int) -> tuple[float, ...]:
    """The default ``request_tokens`` bounds of a server: 1, 2, 5 x 10^k up to ``max_model_len``."""
    bounds: list[float] = []
    scale = 1
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * scale
            if value > max_model_len:
                return tuple(bounds)
            bounds.append(value)
        scale *= 10
