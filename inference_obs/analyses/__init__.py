"""The questions users ask, one module per question, each answering with Measurements.

Every entry function takes a :class:`~inference_obs.source.base.Source`, a
:class:`~inference_obs.deployment.Deployment` (or several) and a window, and
returns a result whose numbers are :class:`Measurement`\\ s: value, unit,
window, status (``no_data`` is never 0), bounds and the PromQL behind them.
"""

from __future__ import annotations

from inference_obs.analyses.bottleneck import BottleneckResult, bottleneck
from inference_obs.analyses.boundaries.stages import BoundariesResult, boundaries
from inference_obs.analyses.cache import CacheResult, cache
from inference_obs.analyses.configuration import ConfigurationResult, configuration
from inference_obs.analyses.cost import CostResult, TokenPrices, cost
from inference_obs.analyses.gpu import GpuResult, gpu
from inference_obs.analyses.latency import LatencyResult, latency
from inference_obs.analyses.queueing import QueueingResult, queueing
from inference_obs.analyses.rolling import RollingQuantiles, rolling_quantiles
from inference_obs.analyses.shapes import ShapesResult, shapes
from inference_obs.analyses.throughput import ThroughputResult, throughput
from inference_obs.analyses.validity.verdicts import ValidityResult, Verdict, validity
from inference_obs.analyses.verify import VerifyResult, verify_dataset
from inference_obs.reading.measurement import Bounds, Measurement, Provenance, Status

__all__ = [
    "BottleneckResult",
    "BoundariesResult",
    "Bounds",
    "CacheResult",
    "ConfigurationResult",
    "CostResult",
    "GpuResult",
    "LatencyResult",
    "Measurement",
    "Provenance",
    "QueueingResult",
    "RollingQuantiles",
    "ShapesResult",
    "Status",
    "ThroughputResult",
    "TokenPrices",
    "ValidityResult",
    "Verdict",
    "VerifyResult",
    "bottleneck",
    "boundaries",
    "cache",
    "configuration",
    "cost",
    "gpu",
    "latency",
    "queueing",
    "rolling_quantiles",
    "shapes",
    "throughput",
    "validity",
    "verify_dataset",
]
