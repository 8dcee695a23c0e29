"""Measurement: a number that carries its unit, window, status, provenance and caveats.

Every analysis returns Measurements. ``status`` keeps "no series matched"
(``no_data``) apart from zero; ``provenance`` is the PromQL (or local
computation) that produced the value, so a report can list every query for
rechecking; ``bounds`` holds the interval that must contain the true value
where the value is an estimate inside it (histogram quantiles).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from functools import partial

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from inference_obs.deployment import Deployment
from inference_obs.errors import Annotation
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, Matcher, Selector, to_promql
from inference_obs.samples import Instant, Labels, Vector, Window
from inference_obs.source.base import Source

__all__ = [
    "Bounds",
    "Measurement",
    "Provenance",
    "Status",
    "derive",
    "json_number",
    "local_measurement",
    "measure",
    "measure_by",
    "number_from_json",
]


class Status(StrEnum):
    """Whether a value can be read as is."""

    OK = "ok"
    #: No series matched, or no observation fell in the window: never 0.
    NO_DATA = "no_data"
    #: Some of the series or samples it needs are missing; the annotations say which.
    PARTIAL = "partial"
    #: The computation does not apply (e.g. different definitions compared).
    INVALID = "invalid"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


class Bounds(_Model):
    """The interval that must contain the true value, in the measurement's unit."""

    lower: float
    upper: float


class Provenance(_Model):
    """What produced a value: the PromQL sent (or evaluated locally) and by which engine."""

    promql: tuple[str, ...] = Field(description="Every query behind the value, ready to paste.")
    engine: str = Field(description="Engine kind that answered (prometheus, dataset, ...).")
    rules: str = Field(description="Rule set of the numbers (prometheus-2, ...).")
    computation: str | None = Field(None, description="Local arithmetic on the query results.")


class Measurement(_Model):
    """One number of an analysis, with everything needed to trust or recheck it."""

    key: str = Field(description="Stable key: deployment/analysis/statistic.")
    deployment: str
    analysis: str
    statistic: str
    value: float | None = Field(description="None unless status is ok or partial.")
    unit: str = Field(description="'seconds', 'tokens', 'ratio' (0-1), 'percent' (0-100), ...")
    window_start: AwareDatetime
    window_end: AwareDatetime
    status: Status
    bounds: Bounds | None = None
    provenance: Provenance
    annotations: tuple[Annotation, ...] = ()
    caveats: tuple[str, ...] = Field(default=(), description="What the number does not mean.")

    @property
    def ok(self) -> bool:
        """Whether the value can be read (``ok`` or ``partial``)."""
        return self.status in (Status.OK, Status.PARTIAL)


def _missing_families(
    source: Source, families: Sequence[Family], matchers: Sequence[Matcher], window: Window
) -> list[str]:
    return [f.name for f in families if not source.series(_counted(f, matchers), window)]


def measure(
    source: Source,
    deployment: Deployment,
    window: Window,
    *,
    analysis: str,
    statistic: str,
    expr: Expr,
    unit: str,
    families: Sequence[Family],
    matchers: Sequence[Matcher],
    caveats: Sequence[str] = (),
    bounds: Bounds | None = None,
    answer: Instant | None = None,
) -> Measurement:
    """Run ``expr`` at the window's end and wrap the single value it returns.

    No series, or a NaN (no observation in the window), gives ``no_data``
    with the missing families named in an annotation; several series where
    one is expected is a programming error in the analysis (ValueError).
    ``answer`` is ``expr``'s answer at the window's end when it was asked
    already (with other questions: :func:`~inference_obs.reading.joined.instants`).
    """
    if answer is None:
        answer = source.instant(expr, window.end_s)
    value: float | None
    if isinstance(answer.value, Vector):
        if len(answer.value) > 1:
            raise ValueError(f"{to_promql(expr)} returned {len(answer.value)} series, expected 1")
        value = float(answer.value.values[0]) if len(answer.value) else None
    else:
        value = float(answer.value)

    def missing() -> list[str]:
        return _missing_families(source, families, matchers, window)

    return _wrapped(
        source, deployment, window, analysis, statistic, value, unit, expr,
        answer.annotations, missing, caveats, bounds,
    )  # fmt: skip


def measure_by(
    source: Source,
    deployment: Deployment,
    window: Window,
    *,
    analysis: str,
    statistics: Mapping[Labels, str],
    expr: Expr,
    by: Sequence[str],
    unit: str,
    families: Sequence[Family],
    matchers: Sequence[Matcher],
    caveats: Sequence[str] = (),
    answer: Instant | None = None,
) -> dict[Labels, Measurement]:
    """Run ``expr``, aggregated ``by`` labels, once, and wrap each group's value.

    One request however many groups there are (a fleet's replicas, say).
    ``statistics`` maps each wanted group (its ``by`` labels) to its
    statistic's name; a group the answer lacks, or whose value is NaN, is
    ``no_data``, with the families that have no series in that group named.
    ``answer`` is ``expr``'s answer when it was asked already
    (:func:`~inference_obs.reading.joined.instants`).
    """
    if answer is None:
        answer = source.instant(expr, window.end_s)
    found = answer.value.as_dict() if isinstance(answer.value, Vector) else {}
    keys = tuple(by)
    present: dict[str, set[Labels]] | None = None

    def missing_in(group: Labels) -> list[str]:
        nonlocal present
        if present is None:  # asked once, only if some group has no value
            present = {
                f.name: {
                    _group(labels, keys) for labels in source.series(_counted(f, matchers), window)
                }
                for f in families
            }
        return [name for name, groups in present.items() if group not in groups]

    return {
        group: _wrapped(
            source, deployment, window, analysis, statistic, found.get(group), unit, expr,
            answer.annotations, partial(missing_in, group), caveats, None,
        )
        for group, statistic in statistics.items()
    }  # fmt: skip


def _group(labels: Labels, by: tuple[str, ...]) -> Labels:
    return Labels((k, v) for k, v in labels.items() if k in by)


def _counted(family: Family, matchers: Sequence[Matcher]) -> Selector:
    """The series that show whether ``family`` exists: ``_count`` for a histogram."""
    name = f"{family.name}_count" if family.type.value == "histogram" else family.name
    return Selector(name, tuple(matchers))


def _no_data(deployment: Deployment, missing: Sequence[str]) -> Annotation:
    """Why there is no value: the families without series, or no observation in the window."""
    if missing:
        return Annotation("no_data", f"no series of {', '.join(missing)} for {deployment.name}")
    return Annotation("no_data", "no observation in the window")


def _wrapped(
    source: Source,
    deployment: Deployment,
    window: Window,
    analysis: str,
    statistic: str,
    value: float | None,
    unit: str,
    expr: Expr,
    annotations: Sequence[Annotation],
    missing: Callable[[], list[str]],
    caveats: Sequence[str],
    bounds: Bounds | None,
) -> Measurement:
    info = source.info()
    notes = list(annotations)
    status = Status.OK
    if value is None or math.isnan(value):
        status, value = Status.NO_DATA, None
        notes.append(_no_data(deployment, missing()))
    return Measurement(
        key=f"{deployment.name}/{analysis}/{statistic}",
        deployment=deployment.name,
        analysis=analysis,
        statistic=statistic,
        value=value,
        unit=unit,
        window_start=window.start,
        window_end=window.end,
        status=status,
        bounds=bounds if status is Status.OK else None,
        provenance=Provenance(promql=(to_promql(expr),), engine=info.kind, rules=info.rules.value),
        annotations=tuple(notes),
        caveats=tuple(caveats),
    )


def local_measurement(
    source: Source,
    deployment: Deployment,
    window: Window,
    *,
    analysis: str,
    statistic: str,
    value: float | None,
    unit: str,
    selectors: Sequence[Expr],
    computation: str,
    caveats: Sequence[str] = (),
    missing: Sequence[str] = (),
) -> Measurement:
    """A Measurement computed locally from raw samples of ``selectors`` (selectors or ranges).

    ``value`` None (or not finite) gives ``no_data``; ``missing`` names the
    families without series, in an annotation.
    """
    info = source.info()
    ok = value is not None and math.isfinite(value)
    notes: tuple[Annotation, ...] = ()
    if not ok:
        notes = (_no_data(deployment, missing),)
    return Measurement(
        key=f"{deployment.name}/{analysis}/{statistic}",
        deployment=deployment.name,
        analysis=analysis,
        statistic=statistic,
        value=value if ok else None,
        unit=unit,
        window_start=window.start,
        window_end=window.end,
        status=Status.OK if ok else Status.NO_DATA,
        provenance=Provenance(
            promql=tuple(to_promql(s) for s in selectors),
            engine=info.kind,
            rules=info.rules.value,
            computation=computation,
        ),
        annotations=notes,
        caveats=tuple(caveats),
    )


def derive(
    statistic: str,
    value: float | None,
    unit: str,
    inputs: Sequence[Measurement],
    computation: str,
    caveats: Sequence[str] = (),
) -> Measurement:
    """A Measurement computed locally from ``inputs``; ``no_data`` if any input has none.

    Parameters
    ----------
    statistic
        Name of the derived number.
    value
        The computed value in ``unit``; ignored when an input has no data.
    unit
        Unit of the value.
    inputs
        The Measurements it was computed from (at least one); their PromQL,
        annotations and window carry over.
    computation
        The arithmetic, in words or symbols, for the provenance.
    caveats
        What the number does not mean.
    """
    first = inputs[0]
    missing = [m for m in inputs if not m.ok]
    status = Status.NO_DATA if missing else Status.OK
    if not missing and any(m.status is Status.PARTIAL for m in inputs):
        status = Status.PARTIAL
    if status is not Status.NO_DATA and (value is None or not math.isfinite(value)):
        status = Status.INVALID
    notes = [a for m in inputs for a in m.annotations]
    promql = tuple(dict.fromkeys(q for m in inputs for q in m.provenance.promql))
    return Measurement(
        key=f"{first.deployment}/{first.analysis}/{statistic}",
        deployment=first.deployment,
        analysis=first.analysis,
        statistic=statistic,
        value=value if status in (Status.OK, Status.PARTIAL) else None,
        unit=unit,
        window_start=first.window_start,
        window_end=first.window_end,
        status=status,
        provenance=Provenance(
            promql=promql,
            engine=first.provenance.engine,
            rules=first.provenance.rules,
            computation=computation,
        ),
        annotations=tuple(dict.fromkeys(notes)),
        caveats=tuple(caveats),
    )


def json_number(value: float | None) -> float | str | None:
    """A number for JSON, which has no infinity or NaN: ``"+Inf"``/``"-Inf"`` as Prometheus
    writes them, NaN and None as null.

    Examples
    --------
    >>> json_number(float("inf")), json_number(float("nan")), json_number(2.5)
    ('+Inf', None, 2.5)
    """
    if value is None or math.isnan(value):
        return None
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return value


def number_from_json(value: object) -> float | None:
    """The inverse of :func:`json_number`; anything else (text, booleans) is None."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if value in ("+Inf", "-Inf"):
        return math.inf if value == "+Inf" else -math.inf
    return None
