"""WHERE samples come from; the only I/O.

:class:`PrometheusSource` reads a live Prometheus-compatible HTTP API
(Prometheus, Thanos, Mimir, VictoriaMetrics), read-only by construction;
:class:`DatasetSource` answers the same questions from an observation
dataset with the local engine. Both implement :class:`Source`.

The names that load numpy (the samples, the Source protocol, the two sources and
the dataset functions, with the local engine and the HTTP client) load their
modules when first read, not with the package: every module of the package loads
this one first, and a command that reads no samples (``lint``) needs none of them.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from inference_obs.source.auth import BasicAuth, BearerToken
from inference_obs.source.tls import TLS

if TYPE_CHECKING:
    from inference_obs.samples import Instant, Matrix
    from inference_obs.source.base import EngineInfo, Metadata, Source
    from inference_obs.source.dataset.reader import Dataset, read_dataset
    from inference_obs.source.dataset.source import DatasetSource
    from inference_obs.source.dataset.writer import write_dataset
    from inference_obs.source.prometheus import PrometheusSource

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


def __getattr__(name: str) -> object:
    # PEP 562: a name of the docstring's last paragraph, read for the first time.
    module: ModuleType
    if name in {"Instant", "Matrix"}:
        from inference_obs import samples as module
    elif name in {"EngineInfo", "Metadata", "Source"}:
        from inference_obs.source import base as module
    elif name in {"Dataset", "read_dataset"}:
        from inference_obs.source.dataset import reader as module
    elif name == "DatasetSource":
        from inference_obs.source.dataset import source as module
    elif name == "write_dataset":
        from inference_obs.source.dataset import writer as module
    elif name == "PrometheusSource":
        from inference_obs.source import prometheus as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value: object = getattr(module, name)
    globals()[name] = value  # found directly from now on
    return value
