"""The report as JSON for scheduled jobs and other tools (schema in docs/report-json.md).

Every Measurement appears once under its stable key
(``deployment/analysis/statistic``), with value, unit, bounds, status,
window, provenance and annotations, followed by the comparison verdicts.
The ``summary`` comes first: the report's conclusions, ranked, each with the
keys of the Measurements it rests on (:mod:`~inference_obs.analyses.conclusions`);
``cautions`` lists what not to conclude (:mod:`~inference_obs.analyses.conclusions.cautions`);
``timeline`` what happened, the most severe event first
(:mod:`~inference_obs.analyses.timeline`).
The format is pinned by the pydantic models of
:mod:`~inference_obs.report.report_json_model`.
Infinite bounds (a quantile in the ``+Inf`` bucket) are written as the
strings ``"+Inf"`` and ``"-Inf"``, as Prometheus writes them; JSON has no
infinity. With ``--baseline`` the ``baseline`` object holds every headline
number then and now and the regressions (:mod:`~inference_obs.report.baseline`);
it is null otherwise. Each deployment's ``rolling`` list holds the rolling
quantiles (:mod:`~inference_obs.analyses.rolling`) point by point, each
point with the bucket that must hold the true quantile (``lower``, ``upper``).
"""

from __future__ import annotations

import json
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any

from inference_obs.reading.measurement import json_number, measurement_json
from inference_obs.report.document import anchor

if TYPE_CHECKING:
    from inference_obs.analyses.rolling import RollingQuantiles
    from inference_obs.report.model import Report

__all__ = ["FORMAT", "report_json", "to_json"]

#: Bumped on any change a reader must know about.
FORMAT = "inference-obs-report/1"


def report_json(report: Report) -> dict[str, Any]:
    """The report as JSON data (a dict of lists, strings, numbers and null)."""
    # Here, not at the top: `import inference_obs` loads this module (the package binds
    # `report_json` to the function) and must not load every analysis with it.
    from inference_obs import analyses
    from inference_obs.analyses.bottleneck import advise
    from inference_obs.analyses.regime import judge

    s = report.scope
    deployments = []
    for d in report.deployments:
        action, advice = advise(d.of(analyses.bottleneck), d.of(analyses.boundaries))
        deployments.append(
            {
                "name": d.deployment.name,
                "window": {"start": d.window.start.isoformat(), "end": d.window.end.isoformat()},
                "declared": d.deployment.model_dump(mode="json"),
                "step_seconds": d.step_seconds,
                "throughput_regime": d.of(analyses.throughput).regime.value,
                "regime": judge(d).model_dump(mode="json", exclude={"deployment"}),
                "bottleneck": d.of(analyses.bottleneck).classification.value,
                "bottleneck_action": action,
                "bottleneck_advice": advice,
                "queue_intervals": [
                    i.model_dump(mode="json") for i in d.of(analyses.queueing).intervals
                ],
                "gpus_without_samples": list(d.of(analyses.gpu).missing_gpus),
                "gpus_stopped": [
                    g.model_dump(mode="json") for g in d.of(analyses.gpu).stopped_gpus
                ],
                "scrape_gaps": [g.model_dump(mode="json") for g in d.of(analyses.collection).gaps],
                "boundaries": {
                    "reading": d.of(analyses.boundaries).reading.value,
                    "reason": d.of(analyses.boundaries).reason,
                    "intervals": [
                        i.model_dump(mode="json") for i in d.of(analyses.boundaries).intervals
                    ],
                },
                "configuration": [
                    c.model_dump(mode="json") for c in d.of(analyses.configuration).checks
                ],
                "topology_findings": [
                    f.model_dump(mode="json")
                    for f in d.of(analyses.configuration).topology_findings
                ],
                "rolling": [
                    _rolling(d.of(analyses.rolling_quantiles), d.window.start.tzinfo),
                    _rolling(d.of(analyses.rolling_itl), d.window.start.tzinfo),
                ],
                "outliers": _outliers(report, d.deployment.name),
            }
        )
    comparisons = _comparisons(report)
    return {
        "format": FORMAT,
        "title": report.title,
        "scope": {
            "source": s.source,
            "engine": s.engine,
            "rules": s.rules,
            "windows": {
                k: {"start": w.start.isoformat(), "end": w.end.isoformat()}
                for k, w in s.windows.items()
            },
            "scrape_interval_seconds": s.scrape_interval_seconds,
            "read_only": True,
        },
        "methodology": list(report.methodology),
        "summary": _summary(report),
        "cautions": [
            {"kind": c.kind, "text": c.text, "keys": list(c.keys)} for c in report.cautions.entries
        ],
        "timeline": [
            {"rank": rank, **e.model_dump(mode="json")}
            for rank, e in enumerate(report.timeline.events, 1)
        ],
        "deployments": deployments,
        "measurements": [measurement_json(m) for m in report.measurements()],
        "comparisons": comparisons,
        "baseline": None if report.baseline is None else _finite(report.baseline.model_dump()),
    }


def _comparisons(report: Report) -> list[dict[str, Any]]:
    """Each compared pair: its verdicts (values and bounds), findings and matched load."""
    comparisons: list[dict[str, Any]] = []
    if report.validity is None:
        return comparisons
    for pair in report.validity.pairs:
        comparisons.append(
            {
                "a": pair.a,
                "b": pair.b,
                "verdicts": [
                    {
                        **v.model_dump(mode="json"),
                        "values": {k: json_number(x) for k, x in v.values.items()},
                        "bounds": {k: _finite(b) for k, b in v.model_dump()["bounds"].items()},
                    }
                    for v in pair.verdicts.values()
                ],
                "findings": [f.model_dump(mode="json") for f in pair.findings],
                "matched_concurrency": [
                    {
                        "family": m.family,
                        "band": m.band,
                        "step_seconds": m.step_seconds,
                        "intervals": m.intervals,
                        "reason": m.reason,
                        "measurements": [
                            k for q in m.quantiles.values() for k in (x.key for x in q.values())
                        ],
                    }
                    for m in pair.matched
                ],
            }
        )
    return comparisons


def _rolling(result: RollingQuantiles, zone: tzinfo | None) -> dict[str, Any]:
    """One rolling analysis: its settings, and per quantile every point with its bucket."""
    return {
        "family": result.family,
        "unit": result.unit,
        "every_seconds": result.every,
        "length_seconds": result.length,
        "buckets_promql": result.buckets_promql,
        "quantiles": [
            {
                "quantile": s.quantile,
                "promql": s.promql,
                "points": [
                    {
                        "t": datetime.fromtimestamp(p.t, zone).isoformat(),
                        "value": json_number(p.value),
                        "lower": json_number(p.lower),
                        "upper": json_number(p.upper),
                        "lowest_bucket": p.lowest_bucket,
                    }
                    for p in s.points()
                ],
            }
            for s in result.series
        ],
    }


def _outliers(report: Report, name: str) -> list[dict[str, Any]]:
    """The deployment's outlying replicas, each statistic one entry (infinities as strings)."""
    fleet = report.fleet.get(name)
    return [
        {
            **o.model_dump(mode="json", exclude={"value", "fleet_median", "bounds"}),
            "value": json_number(o.value),
            "fleet_median": json_number(o.fleet_median),
            "bounds": _finite(o.bounds.model_dump()) if o.bounds else None,
        }
        for o in (fleet.outliers if fleet else ())
    ]


def _summary(report: Report) -> list[dict[str, Any]]:
    """The conclusions, ranked from 1, each with its section's anchor in report.md/html."""
    return [
        {
            "rank": rank,
            "kind": c.kind,
            "text": c.text,
            "keys": list(c.keys),
            "section": c.section,
            "anchor": anchor(c.section),
            "caveat": c.caveat,
            "verdict": c.verdict,
            "deployments": list(c.deployments),
            "comparison": c.comparison,
        }
        for rank, c in enumerate(report.conclusions.entries, 1)
    ]


def _finite(value: Any) -> Any:
    """JSON data with every float an allowed JSON number (infinities as ``"+Inf"``)."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, float):
        return json_number(value)
    return value


def to_json(report: Report) -> str:
    """:func:`report_json` as indented, key-ordered text ending with a newline."""
    return json.dumps(report_json(report), indent=2, allow_nan=False) + "\n"
