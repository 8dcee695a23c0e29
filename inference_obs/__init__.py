"""inference_obs: defensible numbers about LLM serving fleets from Prometheus data.

The package tree is the data flow: :mod:`~inference_obs.query` (what to ask),
:mod:`~inference_obs.metrics` (the vLLM, SGLang and DCGM catalogue and its
builders), :mod:`~inference_obs.source` (where samples come from), then the
maths (:mod:`~inference_obs.engine`), the analyses and the report built on them.
"""

from __future__ import annotations

from inference_obs import analyses
from inference_obs.deployment import Deployment
from inference_obs.errors import (
    Annotation,
    AnswerTooLarge,
    ConfigurationError,
    DatasetError,
    InferenceObsError,
    NoDataError,
    NotSupportedOffline,
    QueryError,
    QueryFailed,
    ScenarioError,
    SourceError,
    SourceUnavailable,
    TimeBudgetExceeded,
)
from inference_obs.metrics import FAMILIES, STANDARD_QUERIES, Family, MetricType, StandardQuery
from inference_obs.query import Expr, Matcher, Selector, to_promql
from inference_obs.samples import Window
from inference_obs.source import (
    TLS,
    BasicAuth,
    BearerToken,
    DatasetSource,
    PrometheusSource,
    Source,
    read_dataset,
)
from inference_obs.version import __version__

__all__ = [
    "FAMILIES",
    "STANDARD_QUERIES",
    "TLS",
    "Annotation",
    "AnswerTooLarge",
    "BasicAuth",
    "BearerToken",
    "ConfigurationError",
    "DatasetError",
    "DatasetSource",
    "Deployment",
    "Expr",
    "Family",
    "InferenceObsError",
    "Matcher",
    "MetricType",
    "NoDataError",
    "NotSupportedOffline",
    "PrometheusSource",
    "QueryError",
    "QueryFailed",
    "ScenarioError",
    "Selector",
    "Source",
    "SourceError",
    "SourceUnavailable",
    "StandardQuery",
    "TimeBudgetExceeded",
    "Window",
    "__version__",
    "analyses",
    "read_dataset",
    "to_promql",
]
