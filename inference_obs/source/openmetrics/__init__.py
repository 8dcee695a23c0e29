"""The exposition text formats: OpenMetrics as a dataset keeps it, and ``/metrics`` answers.

Text in, arrays out (and back); no I/O but the streams handed in, and no
HTTP. Modules:

``writer``
    series -> OpenMetrics text that promtool backfills exactly.
``reader``
    a strict, vectorised, streaming reader of that text; ``scan`` is its
    fast path and ``tokens`` its converters.
``grammar``
    what writer and reader share: types, escaping, a series' name and labels,
    metric families.
``exposition``
    one scrape's answer (Prometheus text format 0.0.4 or OpenMetrics) read as
    Prometheus reads it.
"""

from __future__ import annotations

from inference_obs.source.openmetrics.exposition import (
    Exposition,
    ExpositionFormat,
    parse_exposition,
)
from inference_obs.source.openmetrics.reader import OpenMetricsReader, read_openmetrics
from inference_obs.source.openmetrics.writer import write_openmetrics

__all__ = [
    "Exposition",
    "ExpositionFormat",
    "OpenMetricsReader",
    "parse_exposition",
    "read_openmetrics",
    "write_openmetrics",
]
