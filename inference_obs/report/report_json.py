"""The report as JSON for scheduled jobs and other tools (schema in docs/report-json.md).

Every Measurement appears once under its stable key
(``deployment/analysis/statistic``), with value, unit, bounds, status,
window, provenance and annotations, followed by the comparison verdicts.
The ``summary`` comes first: the report's conclusions, ranked, each with the
keys of the Measurements it rests on (:mod:`~inference_obs.analyses.conclusions`);
``cautions`` lists what not to conclude (:mod:`~inference_obs.analyses.conclusions.cautions`);
``timeline`` what happened, the most severe event first
(:mod:`~inference_obs.analyses.timeline`).
The document is built as the pydantic model of its format,
:class:`~inference_obs.report.report_json_model.ReportDocument`, and written
from it: a field the format does not describe, or a value of the wrong kind,
fails here rather than in a reader's hands.
Infinite bounds (a quantile in the ``+Inf`` bucket) are written as the
strings ``"+Inf"`` and ``"-Inf"``, as Prometheus writes them; JSON has no
infinity. With ``--baseline`` the ``baseline`` object holds every headline
number then and now and the regressions (:mod:`~inference_obs.report.baseline`);
it is null otherwise. Each deployment's ``rolling`` list holds the rolling
quantiles (:mod:`~inference_obs.analyses.rolling`) point by point, each
point with the bucket that must hold the true quantile (``lower``, ``upper``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any

from inference_obs.reading.measurement import Measurement, json_number, measurement_json
from inference_obs.report.document import anchor
from inference_obs.report.report_json_model import (
    FORMAT,
    MEASURED_APART,
    BaselineEntry,
    BoundariesEntry,
    BoundaryIntervalEntry,
    Caution,
    Comparison,
    ConfigurationEntry,
    DeploymentEntry,
    EventEntry,
    FindingEntry,
    MatchedEntry,
    MeasurementEntry,
    OutlierEntry,
    QueueIntervalEntry,
    RegimeEntry,
    ReportDocument,
    RollingEntry,
    RollingPointEntry,
    RollingQuantileEntry,
    ScopeEntry,
    ScrapeGapEntry,
    StoppedGpuEntry,
    SummaryEntry,
    TopologyFindingEntry,
    VerdictEntry,
    WindowEntry,
)

if TYPE_CHECKING:
    from inference_obs.analyses.rolling import RollingQuantiles
    from inference_obs.analyses.run import DeploymentResults
    from inference_obs.report.model import Report

__all__ = [
    "FORMAT",
    "document_bytes",
    "document_text",
    "json_parts",
    "report_document",
    "report_json",
    "to_json",
    "to_json_bytes",
]


def report_document(report: Report) -> ReportDocument:
    """The report as its ``report.json`` document, validated against the format."""
    return ReportDocument(
        **_fields(report), measurements=[_entry(m) for m in report.measurements()]
    )


def _entry(measurement: Measurement) -> MeasurementEntry:
    return MeasurementEntry.model_validate(measurement_json(measurement))


def _fields(report: Report) -> dict[str, Any]:
    """The document's fields but its measurements, each validated."""
    s = report.scope
    return {
        "format": FORMAT,
        "title": report.title,
        "scope": ScopeEntry(
            source=s.source,
            engine=s.engine,
            rules=s.rules,
            windows={k: _window(w.start, w.end) for k, w in s.windows.items()},
            scrape_interval_seconds=s.scrape_interval_seconds,
            read_only=True,
        ),
        "methodology": list(report.methodology),
        "summary": _summary(report),
        "cautions": [
            Caution(kind=c.kind, text=c.text, keys=list(c.keys)) for c in report.cautions.entries
        ],
        "timeline": [
            EventEntry.model_validate({"rank": rank, **e.model_dump(mode="json")})
            for rank, e in enumerate(report.timeline.events, 1)
        ],
        "deployments": [_deployment(report, d) for d in report.deployments],
        "comparisons": _comparisons(report),
        "baseline": None
        if report.baseline is None
        else BaselineEntry.model_validate(_finite(report.baseline.model_dump())),
    }


def report_json(report: Report) -> dict[str, Any]:
    """The report as JSON data (a dict of lists, strings, numbers and null), key-ordered as
    ``report.json`` writes it."""
    return report_document(report).model_dump(mode="json")


def _window(start: datetime, end: datetime) -> WindowEntry:
    return WindowEntry(start=start.isoformat(), end=end.isoformat())


def _deployment(report: Report, d: DeploymentResults) -> DeploymentEntry:
    """One deployment's readings: regime, bottleneck, intervals, checks, rolling, outliers."""
    # Here, not at the top: `import inference_obs` loads this module and no analysis.
    from inference_obs import analyses
    from inference_obs.analyses.bottleneck import advise
    from inference_obs.analyses.regime import judge

    action, advice = advise(d.of(analyses.bottleneck), d.of(analyses.boundaries))
    gpu, boundaries = d.of(analyses.gpu), d.of(analyses.boundaries)
    configuration = d.of(analyses.configuration)
    zone = d.window.start.tzinfo
    return DeploymentEntry(
        name=d.deployment.name,
        window=_window(d.window.start, d.window.end),
        declared=d.deployment.model_dump(mode="json"),
        step_seconds=d.step_seconds,
        throughput_regime=d.of(analyses.throughput).regime.value,
        regime=RegimeEntry.model_validate(judge(d).model_dump(mode="json", exclude={"deployment"})),
        bottleneck=d.of(analyses.bottleneck).classification.value,
        bottleneck_action=action,
        bottleneck_advice=advice,
        queue_intervals=[
            QueueIntervalEntry.model_validate(i.model_dump(mode="json"))
            for i in d.of(analyses.queueing).intervals
        ],
        gpus_without_samples=list(gpu.missing_gpus),
        gpus_stopped=[
            StoppedGpuEntry.model_validate(g.model_dump(mode="json")) for g in gpu.stopped_gpus
        ],
        scrape_gaps=[
            ScrapeGapEntry.model_validate(g.model_dump(mode="json"))
            for g in d.of(analyses.collection).gaps
        ],
        boundaries=BoundariesEntry(
            reading=boundaries.reading.value,
            reason=boundaries.reason,
            intervals=[
                BoundaryIntervalEntry.model_validate(i.model_dump(mode="json"))
                for i in boundaries.intervals
            ],
        ),
        configuration=[
            ConfigurationEntry.model_validate(c.model_dump(mode="json"))
            for c in configuration.checks
        ],
        topology_findings=[
            TopologyFindingEntry.model_validate(f.model_dump(mode="json"))
            for f in configuration.topology_findings
        ],
        rolling=[
            _rolling(d.of(analyses.rolling_quantiles), zone),
            _rolling(d.of(analyses.rolling_itl), zone),
        ],
        outliers=_outliers(report, d.deployment.name),
    )


def _comparisons(report: Report) -> list[Comparison]:
    """Each compared pair: its verdicts (values and bounds), findings and matched load."""
    if report.validity is None:
        return []
    return [
        Comparison(
            a=pair.a,
            b=pair.b,
            verdicts=[
                VerdictEntry.model_validate(
                    {
                        **v.model_dump(mode="json"),
                        "values": {k: json_number(x) for k, x in v.values.items()},
                        "bounds": {k: _finite(b) for k, b in v.model_dump()["bounds"].items()},
                    }
                )
                for v in pair.verdicts.values()
            ],
            findings=[
                FindingEntry.model_validate(f.model_dump(mode="json")) for f in pair.findings
            ],
            matched_concurrency=[
                MatchedEntry(
                    family=m.family,
                    band=None if m.band is None else list(m.band),
                    step_seconds=m.step_seconds,
                    intervals=m.intervals,
                    reason=m.reason,
                    measurements=[
                        k for q in m.quantiles.values() for k in (x.key for x in q.values())
                    ],
                )
                for m in pair.matched
            ],
        )
        for pair in report.validity.pairs
    ]


def _rolling(result: RollingQuantiles, zone: tzinfo | None) -> RollingEntry:
    """One rolling analysis: its settings, and per quantile every point with its bucket."""
    return RollingEntry(
        family=result.family,
        unit=result.unit,
        every_seconds=result.every,
        length_seconds=result.length,
        buckets_promql=result.buckets_promql,
        quantiles=[
            RollingQuantileEntry(
                quantile=s.quantile,
                promql=s.promql,
                points=[
                    RollingPointEntry(
                        t=datetime.fromtimestamp(p.t, zone).isoformat(),
                        value=json_number(p.value),
                        lower=json_number(p.lower),
                        upper=json_number(p.upper),
                        lowest_bucket=p.lowest_bucket,
                    )
                    for p in s.points()
                ],
            )
            for s in result.series
        ],
    )


def _outliers(report: Report, name: str) -> list[OutlierEntry]:
    """The deployment's outlying replicas, each statistic one entry (infinities as strings)."""
    fleet = report.fleet.get(name)
    return [
        OutlierEntry(
            replica=o.replica,
            statistic=o.statistic,
            value=json_number(o.value),
            unit=o.unit,
            bounds=_finite(o.bounds.model_dump()) if o.bounds else None,
            fleet_median=json_number(o.fleet_median),
            reason=o.reason,
            key=o.key,
        )
        for o in (fleet.outliers if fleet else ())
    ]


def _summary(report: Report) -> list[SummaryEntry]:
    """The conclusions, ranked from 1, each with its section's anchor in report.md/html."""
    return [
        SummaryEntry(
            rank=rank,
            kind=c.kind,
            text=c.text,
            keys=list(c.keys),
            section=c.section,
            anchor=anchor(c.section),
            caveat=c.caveat,
            verdict=c.verdict,
            deployments=list(c.deployments),
            comparison=c.comparison,
        )
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
    """:func:`report_document` as ``report.json`` text (:func:`document_text`)."""
    return document_text(report_document(report))


#: Where the measurements go in the bytes of a document written without them.
_NO_MEASUREMENTS = b'\n  "measurements": [],\n'


def to_json_bytes(report: Report) -> bytes:
    """:func:`report_document` as the bytes of ``report.json`` (:func:`json_parts` joined)."""
    return b"".join(json_parts(report))


def json_parts(report: Report) -> Iterator[bytes]:
    """The bytes of ``report.json`` in parts, each made as it is asked for.

    The bytes are the whole document's (:func:`document_bytes` of
    :func:`report_document`), but its measurements (a fleet's thousands, per
    replica and per GPU) are validated and written one at a time, so neither
    they nor their text are ever all held at once (30 MiB on a 128-replica
    fleet): the rest of the document is validated against their keys
    (:data:`~inference_obs.report.report_json_model.MEASURED_APART`) and
    written with an empty list, where their text goes.
    """
    measured = report.measurements()
    rest = ReportDocument.model_validate(
        {**_fields(report), "measurements": []},
        context={MEASURED_APART: [m.key for m in measured]},
    )
    whole = document_bytes(rest)
    if not measured:
        yield whole
        return
    head, tail = whole.split(_NO_MEASUREMENTS, 1)
    yield head + b'\n  "measurements": [\n    '
    for i, m in enumerate(measured):
        entry = _entry(m)
        # Two levels down (a list in the document): its own text, indented twice. A
        # newline in JSON text is always layout (one in a string is written \n).
        text = entry.__pydantic_serializer__.to_json(entry, indent=2, ensure_ascii=True)
        yield (b",\n    " if i else b"") + text.replace(b"\n", b"\n    ")
    yield b"\n  ],\n" + tail


def document_text(document: ReportDocument) -> str:
    """A document as ``report.json`` text: :func:`document_bytes`, decoded (ASCII)."""
    return document_bytes(document).decode("ascii")


def document_bytes(document: ReportDocument) -> bytes:
    """A document as the bytes of ``report.json``: indented two spaces, fields in the
    format's order, non-ASCII escaped (``\\u2264``), ending with a newline.

    Written straight to bytes, with no text between (a fleet's report.json is
    megabytes). Numbers are written as pydantic writes them: the shortest text
    that reads back as the same float (``0.00001`` and ``2.5e-7``, where Python's
    ``json`` wrote ``1e-05`` and ``2.5e-07``).
    """
    written = document.__pydantic_serializer__.to_json(document, indent=2, ensure_ascii=True)
    return written + b"\n"
