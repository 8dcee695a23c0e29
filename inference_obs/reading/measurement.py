"""Measurement: a number that carries its unit, window, status, provenance and caveats.

Every analysis returns Measurements. ``status`` keeps "no series matched"
(``no_data``) apart from zero; ``provenance`` is the PromQL (or local
computation) that produced the value, so a report can list every query for
rechecking; ``bounds`` holds the interval that must contain the true value
where the value is an estimate inside it (histogram quantiles).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from inference_obs.errors import Annotation

__all__ = [
    "Bounds",
    "Measurement",
    "Provenance",
    "Status",
    "derive",
    "json_number",
    "measurement_json",
    "no_data_note",
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


def no_data_note(deployment: str, missing: Sequence[str]) -> Annotation:
    """Why there is no value: the families without series, or no observation in the window."""
    if missing:
        return Annotation("no_data", f"no series of {', '.join(missing)} for {deployment}")
    return Annotation("no_data", "no observation in the window")


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


def measurement_json(m: Measurement) -> dict[str, Any]:
    """One Measurement as a JSON object: the one way a Measurement is written.

    ``report.json`` and the published aggregates write it so; infinite values
    and bounds (a quantile in the ``+Inf`` bucket) are the strings ``"+Inf"``
    and ``"-Inf"`` (JSON has no infinity), NaN and None are null.
    """
    return {
        "key": m.key,
        "deployment": m.deployment,
        "analysis": m.analysis,
        "statistic": m.statistic,
        "value": json_number(m.value),
        "unit": m.unit,
        "status": m.status.value,
        "bounds": None
        if m.bounds is None
        else {
            "lower": json_number(m.bounds.lower),
            "upper": json_number(m.bounds.upper),
        },
        "window": {"start": m.window_start.isoformat(), "end": m.window_end.isoformat()},
        "provenance": {
            "promql": list(m.provenance.promql),
            "engine": m.provenance.engine,
            "rules": m.provenance.rules,
            "computation": m.provenance.computation,
        },
        "annotations": [{"kind": a.kind, "message": a.message} for a in m.annotations],
        "caveats": list(m.caveats),
    }


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
