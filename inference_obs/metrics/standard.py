"""The catalogue's standard queries: every number an observation report rests on.

Each :class:`~inference_obs.metrics.standard_query.StandardQuery` is one
documented question (what it computes, its unit, its caveats) with a builder
that takes a deployment's matchers, a window and a grouping. They cover the
published method for comparing two deployments from read-only monitoring
(vLLM's and SGLang's request shapes, latency means and merged percentiles, queueing, caches,
speculative decoding, GPU activity, power), the GPU-side readings that
separate "busy" from "useful", and the host CPUs that feed the GPUs.

``inference-obs queries export`` writes them as ``.promql`` files and a
Prometheus recording-rules file.
"""

from __future__ import annotations

from inference_obs.errors import QueryError
from inference_obs.metrics.dcgm_queries import DCGM_QUERIES
from inference_obs.metrics.host_queries import HOST_QUERIES
from inference_obs.metrics.sglang_queries import SGLANG_QUERIES
from inference_obs.metrics.standard_query import StandardQuery
from inference_obs.metrics.vllm_queries import VLLM_QUERIES

__all__ = ["STANDARD_QUERIES", "StandardQuery", "standard_query"]

STANDARD_QUERIES: tuple[StandardQuery, ...] = (
    *VLLM_QUERIES,
    *SGLANG_QUERIES,
    *DCGM_QUERIES,
    *HOST_QUERIES,
)


def standard_query(key: str) -> StandardQuery:
    """The standard query named ``key``; QueryError lists the keys when unknown."""
    for query in STANDARD_QUERIES:
        if query.key == key:
            return query
    raise QueryError(
        f"no standard query {key!r}; known: {', '.join(q.key for q in STANDARD_QUERIES)}"
    )
