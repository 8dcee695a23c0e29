"""The documented format of ``report.json`` (docs/report-json.md) as pydantic models.

:class:`ReportDocument` validates a whole ``report.json``; a field the
document does not describe fails validation (``extra="forbid"`` on every
object whose fields are fixed), so the format and its documentation cannot
drift apart unnoticed. Objects that carry a deployment as declared, or a
stage boundary's evidence, are open (their fields follow the deployment
file and the evidence exported).

JSON has no infinity: numbers that may be infinite (a quantile's bound in
the ``+Inf`` bucket) are :data:`JsonNumber`, a finite number or
``"+Inf"``/``"-Inf"``; never a boolean, never text that looks like a number.
Windows are ISO 8601 times with their offset.

Beyond the shapes, :class:`ReportDocument` checks that deployment names and
measurement keys are unique, that each deployment's window ends after it
starts, and that every key a summary entry, caution or event names is among
the measurements, which it indexes by key (:meth:`ReportDocument.measurement`).

The report writes its ``report.json`` from this model
(:func:`~inference_obs.report.report_json.report_document`) and reads a
``--baseline`` back into it (:func:`~inference_obs.report.baseline_file.read_report_json`,
with ``strict=True``: text is not a number, a number is not text).

Examples
--------
>>> sorted(ReportDocument.model_fields)[:4]
['baseline', 'cautions', 'comparisons', 'deployments']
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    ValidationInfo,
    model_validator,
)

__all__ = [
    "FORMAT",
    "MEASURED_APART",
    "Caution",
    "Comparison",
    "DeploymentEntry",
    "EventEntry",
    "JsonNumber",
    "MeasurementEntry",
    "ReportDocument",
    "RollingEntry",
    "RollingPointEntry",
    "SummaryEntry",
]

#: The format this module describes (report.json's ``format``).
FORMAT = "inference-obs-report/1"


def _json_number(value: object) -> float | str | None:
    """A report.json number: finite, ``"+Inf"``/``"-Inf"``, or null; kept as written (an
    integer stays one, so a document read back writes the same text)."""
    if value is None or value in ("+Inf", "-Inf"):
        return value  # None, "+Inf" or "-Inf"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError('expected a number, "+Inf", "-Inf" or null')
    if not math.isfinite(value):
        raise ValueError("expected a finite number")
    return value


def _aware_time(text: str) -> str:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("expected an ISO 8601 time such as 2026-01-01T00:00:00+00:00") from None
    if moment.tzinfo is None:
        raise ValueError("expected a time with its offset (+00:00)")
    return text


#: A number, or an infinity as Prometheus writes it; null where there is none. (``int``
#: too: a number written without a fraction is kept, and written back, as it was.)
JsonNumber = Annotated[
    float | int | Literal["+Inf", "-Inf"] | None,
    PlainValidator(_json_number, json_schema_input_type=float | Literal["+Inf", "-Inf"] | None),
]
#: An ISO 8601 time with its offset, as written (``2026-01-01T00:00:00+00:00``).
Time = Annotated[str, AfterValidator(_aware_time)]
Status = Literal["ok", "no_data", "partial", "invalid"]
VerdictName = Literal["valid", "caveated", "invalid"]


# allow_inf_nan=False: JSON has no infinity or NaN; a float field holding one fails here,
# never written as null (numbers that may be infinite are JsonNumber, "+Inf").
class _Closed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class _Open(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow", allow_inf_nan=False)


class WindowEntry(_Closed):
    start: Time = Field(description="ISO 8601, timezone-aware.")
    end: Time = Field(description="ISO 8601, timezone-aware.")


class ScopeEntry(_Closed):
    source: str = Field(description="URL (no credentials) or dataset path.")
    engine: str
    rules: str
    windows: dict[str, WindowEntry]
    scrape_interval_seconds: float | None
    read_only: Literal[True]


class SummaryEntry(_Closed):
    """One conclusion of the summary, ranked from 1 (the most important)."""

    rank: int = Field(ge=1)
    kind: str = Field(description="Stable code of the kind of finding.")
    text: str = Field(description="One sentence with its numbers, bounds and units.")
    keys: list[str] = Field(description="Measurement keys it rests on (all in measurements).")
    section: str = Field(description="Heading of the section that shows the numbers.")
    anchor: str = Field(description="That heading's id in report.md and report.html.")
    caveat: str | None = Field(description="What not to conclude from it.")
    verdict: VerdictName | None = Field(description="Verdict of the comparison it rests on.")
    deployments: list[str] = Field(description="Deployments it is about (the lower one first).")
    comparison: str | None = Field(description="Comparison key it rests on, if any.")


class Caution(_Closed):
    """One thing not to conclude from the report."""

    kind: str
    text: str
    keys: list[str]


class EventEntry(_Closed):
    """One event of the time line, ranked from 1 (the most severe, then the earliest)."""

    rank: int = Field(ge=1)
    deployment: str
    replicas: list[str] = Field(description="Replicas, targets or GPUs; empty: the deployment.")
    start: str = Field(description="ISO 8601, timezone-aware: first seen.")
    end: str = Field(description="ISO 8601, timezone-aware: last seen.")
    kind: Literal[
        "stall",
        "restart",
        "xid_error",
        "gpus_waiting",
        "scrape_gap",
        "counter_reset",
        "gpu_stopped",
        "gpu_silent",
        "latency_spike",
        "queue_burst",
        "gpu_scrape_gap",
    ]
    severity: Literal["critical", "major", "minor"]
    pieces: list[str] = Field(description="Kinds of the evidence merged into it, in time order.")
    text: str = Field(description="One sentence with its evidence.")
    keys: list[str] = Field(description="Measurement keys it rests on (all in measurements).")
    promql: list[str] = Field(description="Queries of evidence that is not a Measurement.")


class QueueIntervalEntry(_Closed):
    classification: Literal["capacity", "starved", "inconsistent", "busy", "idle", "unknown"]
    replica: str
    start: str
    end: str
    samples: int = Field(description="App scrapes, or tiles with step_seconds.")
    max_waiting: float
    max_running: float
    mean_gpu_util: float | None = Field(description="Percent 0-100.")


class BoundaryIntervalEntry(_Open):
    """A boundary interval; its evidence fields (cores, throttled share, PCIe) are open."""

    replica: str
    cause: Literal["host", "transfer", "unexplained"]
    reason: str
    start: str
    end: str
    samples: int
    max_waiting: float = Field(description="Largest sampled queue, requests.")
    max_running: float = Field(description="Largest sampled batch, requests.")
    duty: float = Field(description="Share of time the GPUs computed, ratio 0-1.")


class BoundariesEntry(_Closed):
    reading: Literal["starved", "saturated", "healthy", "insufficient_data"]
    reason: str
    intervals: list[BoundaryIntervalEntry]


class ProvenanceEntry(_Closed):
    promql: list[str]
    engine: str
    rules: str
    computation: str | None
    promql_value: JsonNumber = Field(
        None, description="What the first query returns, where the value is computed otherwise."
    )


class ConfigurationEntry(_Closed):
    field: str
    declared: str | None
    observed: str | None
    status: Literal["verified", "consistent", "contradicted", "unverifiable", "not_declared"]
    reason: str
    provenance: ProvenanceEntry | None


class StoppedGpuEntry(_Closed):
    name: str = Field(description="The GPU: host or pod, then its index.")
    last_sample: str = Field(description="ISO 8601 time of its last utilisation sample.")


class ScrapeGapEntry(_Closed):
    target: str = Field(description="'app <instance>' or 'gpu <instance>'.")
    start: str = Field(description="ISO 8601 time of the last sample before the gap.")
    end: str = Field(description="ISO 8601 time of the first sample after it.")
    seconds: float


class TopologyGroupEntry(_Closed):
    """The declared parallel group a topology finding is about."""

    parallelism: str = Field(description="tensor, pipeline, data or expert.")
    gpus: int = Field(ge=1, description="GPUs in the group.")
    path: str = Field(description="What its collective travels over (nvlink, pcie, ...).")
    text: str = Field(description="The same in plain words.")


class TopologyFindingEntry(_Closed):
    group: TopologyGroupEntry
    finding: str = Field(description="What the group's collective travels over.")
    consequence: str = Field(description="What follows for serving, and what to do.")


class RollingPointEntry(_Closed):
    """One evaluation of a rolling quantile, with the bucket that must hold the true value."""

    t: str = Field(description="ISO 8601 evaluation time: the end of the trailing interval.")
    value: JsonNumber = Field(description="The interpolated quantile, in the unit: an estimate.")
    lower: JsonNumber = Field(description="Lower edge of the bucket holding the true quantile.")
    upper: JsonNumber = Field(description="Upper edge of that bucket; +Inf beyond the last bound.")
    lowest_bucket: bool = Field(description="In the lowest bucket: known only as <= upper.")

    @model_validator(mode="after")
    def _inside(self) -> RollingPointEntry:
        value, lower, upper = (_number(x) for x in (self.value, self.lower, self.upper))
        if value is None or lower is None or upper is None:
            return self  # a gap in the buckets: nothing to hold the value to
        if not lower <= value <= upper:
            raise ValueError(f"rolling point at {self.t}: {value} outside [{lower}, {upper}]")
        return self


class RollingQuantileEntry(_Closed):
    quantile: float = Field(ge=0, le=1)
    promql: str = Field(description="The query behind the values.")
    points: list[RollingPointEntry] = Field(description="In time order; gaps have no point.")


class RollingEntry(_Closed):
    """One rolling analysis (rolling_quantiles, rolling_itl) of a deployment."""

    family: str = Field(description="The histogram family.")
    unit: str
    every_seconds: float = Field(description="Seconds between evaluations.")
    length_seconds: float = Field(description="Trailing interval each evaluation covers, s.")
    buckets_promql: str = Field(description="The merged bucket rates the bounds come from.")
    quantiles: list[RollingQuantileEntry]


class RegimeEvidenceEntry(_Closed):
    text: str = Field(description="One sentence with its numbers.")
    keys: list[str] = Field(description="Keys of the measurements it rests on.")


class RegimeEntry(_Closed):
    reading: Literal[
        "capacity_limited",
        "burst_limited",
        "demand_limited",
        "host_starved",
        "transfer_starved",
        "starved",
        "stalled",
        "mixed",
        "unknown",
    ] = Field(description="The deployment's one reading; every section quotes it.")
    evidence: list[RegimeEvidenceEntry] = Field(description="What supports the reading.")
    against: list[RegimeEvidenceEntry] = Field(description="What weighs against it.")
    action: str = Field(description="The step the reading suggests.")
    advice: str = Field(description="The step and why, as one sentence with its numbers.")


class OutlierEntry(_Closed):
    replica: str
    statistic: str = Field(description="Per-replica statistic (ttft_p50, gpu_utilization, ...).")
    value: JsonNumber = Field(description="The replica's value, in ``unit``.")
    unit: str
    bounds: BoundsEntry | None = Field(description="Its bucket, for a quantile; else null.")
    fleet_median: JsonNumber = Field(description="The other replicas' median, in ``unit``.")
    reason: str = Field(description="The rule it broke, with the numbers.")
    key: str | None = Field(description="The Measurement's key; null for an event count.")


class DeploymentEntry(_Closed):
    name: str
    window: WindowEntry
    declared: dict[str, Any] = Field(description="The deployment as given.")
    step_seconds: float | None
    throughput_regime: Literal["demand_limited", "capacity_limited", "unknown"]
    regime: RegimeEntry
    bottleneck: Literal["bandwidth_bound_decode", "compute_bound", "starved", "mixed", "unknown"]
    bottleneck_action: Literal[
        "profile before adding GPUs", "batch more", "reclaim KV memory to batch more", "add compute"
    ] = Field(description="What the bottleneck reading suggests doing.")
    bottleneck_advice: str = Field(description="The reading and its action, as one sentence.")
    queue_intervals: list[QueueIntervalEntry]
    gpus_without_samples: list[str]
    gpus_stopped: list[StoppedGpuEntry] = Field(description="GPUs that stopped part-way.")
    scrape_gaps: list[ScrapeGapEntry]
    boundaries: BoundariesEntry
    configuration: list[ConfigurationEntry]
    topology_findings: list[TopologyFindingEntry]
    rolling: list[RollingEntry] = Field(
        description="Rolling quantiles, per point with the bucket holding the true value."
    )
    outliers: list[OutlierEntry] = Field(
        description="Replicas far from the deployment's others, one entry per statistic."
    )

    @model_validator(mode="after")
    def _ordered(self) -> DeploymentEntry:
        start, end = (datetime.fromisoformat(t) for t in (self.window.start, self.window.end))
        if end <= start:
            raise ValueError("the window ends before it starts")
        return self


def _number(x: JsonNumber) -> float | None:
    """A JSON number as a float (``"+Inf"`` as infinity); None for null."""
    if x is None:
        return None
    return float("inf") if x == "+Inf" else float("-inf") if x == "-Inf" else float(x)


class BoundsEntry(_Closed):
    lower: JsonNumber
    upper: JsonNumber


class AnnotationEntry(_Closed):
    kind: str
    message: str


class MeasurementEntry(_Closed):
    key: str = Field(description="deployment/analysis/statistic; unique in the file.")
    deployment: str
    analysis: str
    statistic: str
    value: JsonNumber = Field(description="Null unless status is ok or partial.")
    unit: str
    status: Status
    bounds: BoundsEntry | None = Field(description="Interval holding the true value.")
    window: WindowEntry
    provenance: ProvenanceEntry
    annotations: list[AnnotationEntry]
    caveats: list[str]


class VerdictEntry(_Closed):
    comparison: str
    description: str
    verdict: VerdictName
    values: dict[str, JsonNumber]
    unit: str | None
    findings: list[str]
    notes: list[str]
    bounds: dict[str, BoundsEntry | None] = Field(description="Each side's bucket, if a quantile.")
    lowest_bucket: list[str] = Field(description="Sides whose quantile is in the lowest bucket.")


class EvidenceEntry(_Closed):
    statistic: str
    unit: str
    values: dict[str, float | str | None]


class FindingEntry(_Closed):
    code: str
    message: str
    evidence: list[EvidenceEntry]
    affects: dict[str, Literal["info", "caveat", "invalid"]]
    how_to_compare: str | None


class MatchedEntry(_Closed):
    family: str
    band: list[float] | None = Field(description="[low, high] requests in flight, or null.")
    step_seconds: float
    intervals: dict[str, int]
    reason: str
    measurements: list[str]


class Comparison(_Closed):
    a: str
    b: str
    verdicts: list[VerdictEntry]
    findings: list[FindingEntry]
    matched_concurrency: list[MatchedEntry]


class SideEntry(_Closed):
    value: JsonNumber
    lower: JsonNumber = None
    upper: JsonNumber = None
    status: str
    lowest_bucket: bool = Field(False, description="In the lowest bucket: known as <= upper.")


class ComparedEntry(_Closed):
    deployment: str
    statistic: str
    unit: str
    worse: Literal["higher", "lower"] | None
    previous: SideEntry | None
    current: SideEntry | None
    change: Literal[
        "regression",
        "improvement",
        "within_bucket",
        "within_tolerance",
        "unchanged",
        "not_comparable",
        "context",
    ]
    ratio: JsonNumber
    reason: str


class RegressionEntry(_Closed):
    deployment: str
    statistic: str
    unit: str
    previous: SideEntry
    current: SideEntry
    verdict: Literal["regression", "caveated"]
    findings: list[str]
    reason: str


class BaselineFindingEntry(_Closed):
    deployment: str
    code: str
    message: str


class BaselineEntry(_Closed):
    source: str
    previous_title: str
    previous_windows: dict[str, WindowEntry]
    compared: list[ComparedEntry]
    regressions: list[RegressionEntry]
    findings: list[BaselineFindingEntry]
    unmatched: list[str]


#: The validation context's key for the keys of measurements written apart from their
#: document (:func:`~inference_obs.report.report_json.to_json_bytes`).
MEASURED_APART = "measurements_written_apart"


class ReportDocument(_Closed):
    """A whole ``report.json`` (format ``inference-obs-report/1``)."""

    format: Literal["inference-obs-report/1"]
    title: str
    scope: ScopeEntry
    methodology: list[str]
    summary: list[SummaryEntry] = Field(description="The conclusions, ranked.")
    cautions: list[Caution] = Field(description="What not to conclude.")
    timeline: list[EventEntry] = Field(description="What happened, the most severe first.")
    deployments: list[DeploymentEntry]
    measurements: list[MeasurementEntry]
    comparisons: list[Comparison]
    baseline: BaselineEntry | None

    # Measurements by key, built once by the validation (each key is unique).
    _by_key: dict[str, MeasurementEntry] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _keys_known(self, info: ValidationInfo) -> ReportDocument:
        # A document validated without its measurements, to be written with them one at a
        # time, checks the keys of those measurements, given in the context.
        apart = (info.context or {}).get(MEASURED_APART)
        keys = [m.key for m in self.measurements] if apart is None else list(apart)
        for what, names in (
            ("deployment names", [d.name for d in self.deployments]),
            ("measurement keys", keys),
        ):
            repeated = sorted(n for n, count in Counter(names).items() if count > 1)
            if repeated:
                raise ValueError(f"{what} repeat: {', '.join(map(ascii, repeated[:3]))}")
        self._by_key = {m.key: m for m in self.measurements}
        known = self._by_key.keys() if apart is None else set(keys)
        entries: list[SummaryEntry | Caution | EventEntry] = [
            *self.summary,
            *self.cautions,
            *self.timeline,
        ]
        for entry in entries:
            unknown = sorted(set(entry.keys) - known)
            if unknown:
                more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
                raise ValueError(
                    f"{entry.kind!r} names keys not in measurements: {unknown[:3]}{more}"
                )
        return self

    def measurement(self, key: str) -> MeasurementEntry | None:
        """The measurement of ``key`` (``deployment/analysis/statistic``), or None."""
        if len(self._by_key) != len(self.measurements):  # made without validation
            self._by_key = {m.key: m for m in self.measurements}
        return self._by_key.get(key)

    def deployment(self, name: str) -> DeploymentEntry | None:
        """The deployment named ``name``, or None."""
        return next((d for d in self.deployments if d.name == name), None)
