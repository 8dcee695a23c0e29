"""The measurements layout of ``aggregates.json``: every published analysis number, by key.

What :func:`published_aggregates` writes, and
:func:`~inference_obs.report.verify.verify_dataset` recomputes::

    {"schema": "inference-obs-aggregates/2",
     "rules": "prometheus-2",                      # the local engine's rule set
     "window": {"start": ISO 8601, "end": ISO 8601},
     "analyses": ["latency", "shapes", "cache", "throughput", "gpu"],
     "measurements": {"PRO/latency/ttft_p95": {"value": 0.91, "unit": "seconds",
                                               "status": "ok",
                                               "bounds": {"lower": 0.5, "upper": 1.0}},
                      ...}}

Each entry is the Measurement as ``report.json`` writes it
(:func:`~inference_obs.reading.measurement.measurement_json`), its value,
unit, status and bounds kept: ``value`` is ``null`` unless the status is
``ok`` or ``partial`` (no data is never 0); ``bounds`` is the interval that
must hold the true value (the bucket of a quantile) or ``null``, an infinite
edge (the ``+Inf`` bucket) as ``"+Inf"``, as Prometheus writes it. Keys are
Measurement keys, ``deployment/analysis/statistic``. The first layout
(``inference-obs-aggregates/1``) wrote bounds as ``[lower, upper]``; it is
still read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from inference_obs.analyses.cache import cache
from inference_obs.analyses.gpu import gpu
from inference_obs.analyses.latency import latency
from inference_obs.analyses.run import DeploymentResults, run
from inference_obs.analyses.shapes import shapes
from inference_obs.analyses.throughput import throughput
from inference_obs.analyses.unit import Analysis
from inference_obs.deployment import Deployment
from inference_obs.reading.context import Source
from inference_obs.reading.measurement import measurement_json
from inference_obs.samples import Window

__all__ = ["ANALYSES", "FIRST_SCHEMA", "SCHEMA", "aggregates_of", "published_aggregates"]

#: The ``schema`` of the measurements layout.
SCHEMA: Final = "inference-obs-aggregates/2"
#: The first layout's ``schema``: bounds as ``[lower, upper]``.
FIRST_SCHEMA: Final = "inference-obs-aggregates/1"
#: The analyses whose Measurements are published.
ANALYSES: tuple[Analysis[Any, Any], ...] = (latency, shapes, cache, throughput, gpu)
#: What each published entry keeps of the Measurement's JSON.
KEPT = ("value", "unit", "status", "bounds")


def aggregates_of(runs: Sequence[DeploymentResults], window: Window, rules: str) -> dict[str, Any]:
    """The measurements layout (module docs) of runs over ``window``, under engine ``rules``."""
    entries = {
        m.key: {k: v for k, v in measurement_json(m).items() if k in KEPT}
        for one in runs
        for analysis in ANALYSES
        for m in one.results[analysis.name].measurements()
    }
    return {
        "schema": SCHEMA,
        "rules": rules,
        "window": {"start": window.start.isoformat(), "end": window.end.isoformat()},
        "analyses": [a.name for a in ANALYSES],
        "measurements": entries,
    }


def published_aggregates(
    source: Source, deployments: Sequence[Deployment], window: Window
) -> dict[str, Any]:
    """Run the published analyses on ``deployments`` and lay their numbers out (module docs).

    Parameters
    ----------
    source
        Where the samples come from (for an export, the sanitised samples).
    deployments
        Whose numbers.
    window
        The window every analysis covers.
    """
    windows = {d.name: window for d in deployments}
    runs = run(source, deployments, windows, resolution="scrape", analyses=ANALYSES)
    return aggregates_of(runs, window, source.info().rules.value)
