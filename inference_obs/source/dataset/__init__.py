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
"""

from __future__ import annotations

from inference_obs.source.dataset.export import export_dataset
from inference_obs.source.dataset.manifest import Manifest
from inference_obs.source.dataset.reader import Dataset, read_dataset, read_manifest
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset

__all__ = [
    "Dataset",
    "DatasetSource",
    "Manifest",
    "export_dataset",
    "read_dataset",
    "read_manifest",
    "write_dataset",
]
