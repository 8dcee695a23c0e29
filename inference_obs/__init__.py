"""inference_obs: defensible numbers about LLM serving fleets from Prometheus data.

The package tree is the data flow: :mod:`~inference_obs.query` (what to ask),
:mod:`~inference_obs.metrics` (the vLLM, SGLang and DCGM catalogue and its
builders), :mod:`~inference_obs.source` (where samples come from), then the
maths, the analyses and the report built on them.
"""

from __future__ import annotations

from inference_obs.errors import (
    Annotation,
    DatasetError,
    InferenceObsError,
    NoDataError,
    NotSupportedOffline,
    QueryError,
    QueryFailed,
    SourceError,
    SourceUnavailable,
)
from inference_obs.metrics import FAMILIES, STANDARD_QUERIES, Family, MetricType, StandardQuery
from inference_obs.query import Expr, Matcher, Selector, to_promql

__version__ = "0.1.0"

__all__ = [
    "FAMILIES",
    "STANDARD_QUERIES",
    "Annotation",
    "DatasetError",
    "Expr",
    "Family",
    "InferenceObsError",
    "Matcher",
    "MetricType",
    "NoDataError",
    "NotSupportedOffline",
    "QueryError",
    "QueryFailed",
    "Selector",
    "SourceError",
    "SourceUnavailable",
    "StandardQuery",
    "__version__",
    "to_promql",
]
