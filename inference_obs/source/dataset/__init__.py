"""Observation datasets: a manifest, raw samples as OpenMetrics text, and extras, on disk.

Modules:

``manifest``
    what was observed, where, how, and by what rules (the pydantic model).
``reader``, ``writer``
    a dataset directory read and checked, or written byte for byte the same;
    ``samples_file`` streams ``samples.om`` and keeps the parsed columns of a
    large one.
``memory``
    whether a dataset fits this machine, estimated before it is read; past
    it, a refusal naming ``dataset load`` and a live report.
``source``
    :class:`DatasetSource`, the Source protocol answered offline by the local engine.
``export``
    a dataset exported from any source, read-only, with ``sanitise`` renaming
    identifying labels by the ``redaction`` rules.

Nothing here speaks HTTP: an export reads through the Source protocol.
:class:`DatasetSource` and :func:`export_dataset` load their modules (the local
engine) when first read: reading a manifest, as ``inference-obs dataset load``
does, needs no engine.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from inference_obs.source.dataset.manifest import Manifest
from inference_obs.source.dataset.reader import Dataset, read_dataset, read_manifest
from inference_obs.source.dataset.writer import write_dataset

if TYPE_CHECKING:
    from inference_obs.source.dataset.export import export_dataset
    from inference_obs.source.dataset.source import DatasetSource

__all__ = [
    "Dataset",
    "DatasetSource",
    "Manifest",
    "export_dataset",
    "read_dataset",
    "read_manifest",
    "write_dataset",
]


def __getattr__(name: str) -> object:
    # PEP 562: a name whose module loads the local engine, read for the first time.
    module: ModuleType
    if name == "export_dataset":
        from inference_obs.source.dataset import export as module
    elif name == "DatasetSource":
        from inference_obs.source.dataset import source as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value: object = getattr(module, name)
    globals()[name] = value  # found directly from now on
    return value
