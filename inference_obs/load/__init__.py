"""Datasets larger than one machine: written into a store built for them, then read live.

``inference-obs dataset load DATASET --into URL`` streams a dataset's
``samples.om`` into a Prometheus-compatible store (VictoriaMetrics through its
import API; Prometheus, Mimir, Thanos Receive or Cortex through remote write);
``report --prometheus URL`` then reads it there, through the same read-only
client as any live report, so the store does the work the offline engine
could not hold in memory.

Why a package of its own, here: this is the only code that writes to a
server. ``source/`` stays read-only by construction (its client knows only
query and metadata endpoints, and ``tests/integration/test_read_only.py``
proves it), so the writer is not in it. It sits above ``source/`` (it reads
datasets with the one OpenMetrics reader, checks URLs and credentials as the
live client does, and asks the store one read-only question before writing)
and below ``cli/``, beside ``analyses``, ``discover`` and the simulator,
importing none of them.

Modules:

``client``
    :class:`~inference_obs.load.client.WriteClient`, POSTs to exactly the
    write endpoints, with bounded retries.
``wire``
    the remote-write protobuf and snappy block, and VictoriaMetrics JSON lines.
``loader``
    :func:`~inference_obs.load.loader.load_dataset`: streaming, batches,
    order per store, progress, the already-loaded check.
"""

from __future__ import annotations

from inference_obs.load.client import WireProtocol, WriteClient, parse_write_url
from inference_obs.load.loader import Existing, LoadResult, Progress, load_dataset

__all__ = [
    "Existing",
    "LoadResult",
    "Progress",
    "WireProtocol",
    "WriteClient",
    "load_dataset",
    "parse_write_url",
]
