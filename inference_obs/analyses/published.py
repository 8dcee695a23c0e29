"""The measurements layout of ``aggregates.json``: every analysis number, by key.

What :func:`published_aggregates` writes, and
:func:`~inference_obs.analyses.verify.verify_dataset` recomputes::

    {"schema": "inference-obs-aggregates/1",
     "rules": "prometheus-2",                      # the local engine's rule set
     "window": {"start": ISO 8601, "end": ISO 8601},
     "analyses": ["latency", "shapes", "cache", "throughput", "gpu"],
     "measurements": {"PRO/latency/ttft_p95": {"value": 0.91, "unit": "seconds",
                                               "status": "ok", "bounds": [0.5, 1.0]},
                      ...}}

``value`` is ``null`` unless the status is ``ok`` or ``partial`` (no data is
never 0); ``bounds`` is the interval that must hold the true value (the
bucket of a quantile) or ``null``, an infinite edge (the ``+Inf`` bucket) as
``"+Inf"``, as Prometheus writes it. Keys are Measurement keys,
``deployment/analysis/statistic``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from inference_obs.analyses.cache import cache
from inference_obs.analyses.gpu import gpu
from inference_obs.analyses.latency import latency
from inference_obs.analyses.shapes import shapes
from inference_obs.analyses.throughput import throughput
from inference_obs.deployment import Deployment
from inference_obs.reading.measurement import Measurement, json_number
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Window
from inference_obs.source.base import Source

__all__ = ["ANALYSES", "SCHEMA", "measurements", "published_aggregates"]

#: The ``schema`` of the measurements layout.
SCHEMA: Final = "inference-obs-aggregates/1"
#: The analyses whose Measurements are published, by name.
ANALYSES: dict[str, Callable[[Source, Deployment, Window], AnalysisResult]] = {
    "latency": latency,
    "shapes": shapes,
    "cache": cache,
    "throughput": throughput,
    "gpu": gpu,
}


def published_aggregates(
    source: Source, deployments: Sequence[Deployment], window: Window
) -> dict[str, Any]:
    """The measurements layout of ``aggregates.json`` (module docs) for these deployments.

    Parameters
    ----------
    source
        Where the samples come from (for an export, the sanitised samples).
    deployments
        Whose numbers.
    window
        The window every analysis covers.

    Returns
    -------
    dict
        JSON data: every Measurement of latency, shapes, cache, throughput
        and gpu per deployment, by key, with its value (``None`` unless ok
        or partial), unit, status and bounds.
    """
    entries = {}
    for deployment in deployments:
        for key, m in measurements(source, deployment, window).items():
            bounds = (
                None
                if m.bounds is None
                else [json_number(m.bounds.lower), json_number(m.bounds.upper)]
            )
            entry = {"value": json_number(m.value), "unit": m.unit, "status": m.status.value}
            entries[key] = {**entry, "bounds": bounds}
    return {
        "schema": SCHEMA,
        "rules": source.info().rules.value,
        "window": {"start": window.start.isoformat(), "end": window.end.isoformat()},
        "analyses": list(ANALYSES),
        "measurements": entries,
    }


def measurements(source: Source, deployment: Deployment, window: Window) -> dict[str, Measurement]:
    """Every Measurement of :data:`ANALYSES` for ``deployment``, by key."""
    out: dict[str, Measurement] = {}
    for analysis in ANALYSES.values():
        result: AnalysisResult = analysis(source, deployment, window)
        out.update((m.key, m) for m in result.measurements())
    return out
