"""WHERE samples come from; the only I/O.

:class:`PrometheusSource` reads a live Prometheus-compatible HTTP API
(Prometheus, Thanos, Mimir, VictoriaMetrics), read-only by construction;
:class:`DatasetSource` answers the same questions from an observation
dataset with the local engine. Both implement :class:`Source`.
"""

from __future__ import annotations

from inference_obs.samples import Instant, Matrix
from inference_obs.source.auth import BasicAuth, BearerToken
from inference_obs.source.base import EngineInfo, Metadata, Source
from inference_obs.source.dataset.reader import Dataset, read_dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset
from inference_obs.source.prometheus import PrometheusSource
from inference_obs.source.tls import TLS

__all__ = [
    "TLS",
    "BasicAuth",
    "BearerToken",
    "Dataset",
    "DatasetSource",
    "EngineInfo",
    "Instant",
    "Matrix",
    "Metadata",
    "PrometheusSource",
    "Source",
    "read_dataset",
    "write_dataset",
]
