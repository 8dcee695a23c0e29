"""The questions users ask, one module per question, each answering with Measurements.

Each analysis is an :class:`~inference_obs.analyses.unit.Analysis` listed in
:data:`~inference_obs.analyses.registry.ANALYSES`; calling one runs it alone
(``latency(source, deployment, window)``), and :func:`run` runs them all once
per deployment. A result's numbers are :class:`Measurement`\\ s: value,
unit, window, status (``no_data`` is never 0), bounds and the PromQL behind them.
"""

from __future__ import annotations

from inference_obs.analyses.activity import ActivityResult, activity
from inference_obs.analyses.bottleneck import BottleneckResult, bottleneck
from inference_obs.analyses.boundaries.stages import BoundariesResult, boundaries
from inference_obs.analyses.cache import CacheResult, cache
from inference_obs.analyses.collection import CollectionResult, collection
from inference_obs.analyses.configuration import ConfigurationResult, configuration
from inference_obs.analyses.cost import CostResult, TokenPrices, cost
from inference_obs.analyses.error_signals import ErrorsResult, errors
from inference_obs.analyses.gpu import GpuResult, gpu
from inference_obs.analyses.latency import LatencyResult, latency
from inference_obs.analyses.memory import MemoryResult, memory
from inference_obs.analyses.queueing import QueueingResult, queueing
from inference_obs.analyses.registry import ANALYSES, analysis
from inference_obs.analyses.rolling import RollingQuantiles, rolling_itl, rolling_quantiles
from inference_obs.analyses.run import DeploymentResults, run
from inference_obs.analyses.shapes import ShapesResult, shapes
from inference_obs.analyses.slo import SloResult, slo
from inference_obs.analyses.throughput import ThroughputResult, throughput
from inference_obs.analyses.unit import Analysis, Settings
from inference_obs.analyses.validity.verdicts import ValidityResult, Verdict, validity
from inference_obs.analyses.verify import VerifyResult, verify_published
from inference_obs.reading.measurement import Bounds, Measurement, Provenance, Status

__all__ = [
    "ANALYSES",
    "ActivityResult",
    "Analysis",
    "BottleneckResult",
    "BoundariesResult",
    "Bounds",
    "CacheResult",
    "CollectionResult",
    "ConfigurationResult",
    "CostResult",
    "DeploymentResults",
    "ErrorsResult",
    "GpuResult",
    "LatencyResult",
    "Measurement",
    "MemoryResult",
    "Provenance",
    "QueueingResult",
    "RollingQuantiles",
    "Settings",
    "ShapesResult",
    "SloResult",
    "Status",
    "ThroughputResult",
    "TokenPrices",
    "ValidityResult",
    "Verdict",
    "VerifyResult",
    "activity",
    "analysis",
    "bottleneck",
    "boundaries",
    "cache",
    "collection",
    "configuration",
    "cost",
    "errors",
    "gpu",
    "latency",
    "memory",
    "queueing",
    "rolling_itl",
    "rolling_quantiles",
    "run",
    "shapes",
    "slo",
    "throughput",
    "validity",
    "verify_published",
]
