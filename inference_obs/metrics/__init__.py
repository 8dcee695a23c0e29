"""The metric catalogue: vLLM, SGLang, DCGM and host families, and typed builders over them.

``FAMILIES`` holds every family; :func:`family` finds one by any of its names
(current or historical). Builders return expressions, never PromQL text.
"""

from __future__ import annotations

from inference_obs.errors import ConfigurationError
from inference_obs.metrics import builders, dcgm, host, retired, sglang, vllm, vllm_router
from inference_obs.metrics.family import Alias, Family, MetricType, resolve_label
from inference_obs.metrics.standard import STANDARD_QUERIES, StandardQuery, standard_query

__all__ = [
    "FAMILIES",
    "STANDARD_QUERIES",
    "Alias",
    "Family",
    "MetricType",
    "StandardQuery",
    "builders",
    "dcgm",
    "family",
    "host",
    "resolve_label",
    "retired",
    "sglang",
    "standard_query",
    "vllm",
    "vllm_router",
]

FAMILIES: tuple[Family, ...] = (
    *vllm.FAMILIES,
    *sglang.FAMILIES,
    *dcgm.FAMILIES,
    *host.FAMILIES,
)
_BY_NAME: dict[str, Family] = {name: f for f in FAMILIES for name in f.names}


def family(name: str) -> Family:
    """The family exposed as ``name`` now or in an earlier version.

    Histogram series names (``_bucket``, ``_sum``, ``_count``) find their family.

    Raises
    ------
    ConfigurationError
        When no family is exposed as ``name``; ``inference-obs catalogue``
        lists them.
    """
    for candidate in (
        name,
        name.removesuffix("_bucket"),
        name.removesuffix("_sum"),
        name.removesuffix("_count"),
    ):
        if candidate in _BY_NAME:
            return _BY_NAME[candidate]
    raise ConfigurationError(
        f"{name!r} is not a family of the catalogue; see `inference-obs catalogue` for the names"
    )
