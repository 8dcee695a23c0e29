"""Measurement: a number that carries its unit, window, status, provenance and caveats.

Every analysis returns Measurements. ``status`` keeps "no series matched"
(``no_data``) apart from zero; ``provenance`` is the PromQL (or local
computation) that produced the value, so a report can list every query for
rechecking; ``bounds`` holds the interval that must contain the true value
where the value is an estimate inside it (histogram quantiles).

Two limits of a histogram are said, not hidden: a quantile in the lowest
bucket is known only as "at most the bucket's upper bound"
(:func:`note_lowest_bucket` adds the ``lowest_bucket`` annotation), and two
quantiles in one bucket cannot be ordered (:func:`same_bucket`).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Hashable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from inference_obs.errors import Annotation

__all__ = [
    "LOWEST_BUCKET",
    "OUT_OF_RANGE",
    "Bounds",
    "FrozenModel",
    "Measurement",
    "Provenance",
    "Status",
    "derive",
    "in_lowest_bucket",
    "is_lowest_bucket",
    "json_number",
    "measurement_json",
    "no_data_note",
    "note_lowest_bucket",
    "number_from_json",
    "same_bucket",
    "shared_provenance",
]

#: Annotation kind of a quantile whose bucket is its histogram's lowest (from 0): how its
#: observations spread from 0 to the bucket's upper bound is not recorded (latencies such as
#: queue time pile up at 0), so the value is an estimate; only "at most upper" is known.
LOWEST_BUCKET = "lowest_bucket"
#: Annotation kind of a value outside the range its family's definition fixes (a KV-cache
#: usage below 0): the exporter is wrong, so the value is kept out of every reading.
OUT_OF_RANGE = "out_of_range"


class Status(StrEnum):
    """Whether a value can be read as is."""

    OK = "ok"
    #: No series matched, or no observation fell in the window: never 0.
    NO_DATA = "no_data"
    #: Some of the series or samples it needs are missing; the annotations say which.
    PARTIAL = "partial"
    #: The computation does not apply (e.g. different definitions compared).
    INVALID = "invalid"


#: One set of given field names per distinct set, shared by every FrozenModel that has it.
_NAMES_GIVEN: dict[frozenset[str], set[str]] = {}


def _share_names_given(model: BaseModel) -> None:
    names = model.__pydantic_fields_set__
    shared = _NAMES_GIVEN.setdefault(frozenset(names), names)
    if shared is not names:
        object.__setattr__(model, "__pydantic_fields_set__", shared)


class FrozenModel(BaseModel):
    """A frozen model (extra fields refused) whose instances share their sets of given names.

    pydantic keeps, in each instance, the set of the field names it was given
    (what ``exclude_unset`` leaves out): 200 to 700 bytes, as much as the
    values of a small model. A fleet's report holds thousands of Measurements
    (per replica and per GPU), each with its Provenance and Bounds, and their
    sets are alike. A frozen model's set is never changed in place (pydantic
    gives a copy its own set before adding to it), so one set serves every
    instance given the same names: 45 % of a Measurement's memory.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    def model_post_init(self, context: Any, /) -> None:
        self._share()

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copied = super().model_copy(update=update, deep=deep)
        copied._share()
        return copied

    def _share(self) -> None:
        """Replace parts of this instance by equal ones other instances hold (once built)."""
        _share_names_given(self)


class Bounds(FrozenModel):
    """The interval that must contain the true value, in the measurement's unit."""

    lower: float
    upper: float


class Provenance(FrozenModel):
    """What produced a value: the PromQL sent (or evaluated locally) and by which engine."""

    promql: tuple[str, ...] = Field(description="Every query behind the value, ready to paste.")
    engine: str = Field(description="Engine kind that answered (prometheus, dataset, ...).")
    rules: str = Field(description="Rule set of the numbers (prometheus-2, ...).")
    computation: str | None = Field(None, description="Local arithmetic on the query results.")
    promql_value: float | None = Field(
        None,
        description="What the first query itself returns, where the value is computed "
        "otherwise (a quantile estimated with the exact mean): recheck against this.",
    )


#: Provenances in use, by :func:`_provenance_key`: a statistic's value per replica or per GPU
#: comes from the same queries, so its thousands of Measurements can hold one Provenance.
_PROVENANCES: weakref.WeakValueDictionary[Hashable, Provenance] = weakref.WeakValueDictionary()
_PROVENANCES_LOCK = threading.Lock()


def _provenance_key(p: Provenance) -> Hashable:
    # float.hex keeps -0.0 apart from 0.0 (equal as floats), and NaN equal to NaN.
    value = None if p.promql_value is None else p.promql_value.hex()
    return (p.promql, p.engine, p.rules, p.computation, value)


def shared_provenance(p: Provenance) -> Provenance:
    """An equal Provenance already in use, else ``p`` (kept while some Measurement holds it)."""
    with _PROVENANCES_LOCK:
        return _PROVENANCES.setdefault(_provenance_key(p), p)


class Measurement(FrozenModel):
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

    def _share(self) -> None:
        super()._share()
        # model_construct builds without checking: a part may be missing or of another type.
        provenance = self.__dict__.get("provenance")
        if isinstance(provenance, Provenance):
            # Frozen: the field is set as pydantic's own constructor sets it.
            self.__dict__["provenance"] = shared_provenance(provenance)


def is_lowest_bucket(bounds: Bounds | None) -> bool:
    """Whether a quantile's ``bounds`` are its histogram's lowest bucket.

    The lowest bucket starts at 0 (or at ``-Inf`` when its bound is not
    positive; see :func:`~inference_obs.engine.histograms.quantile_bounds`)
    and ends at a finite bound; an exact value (lower equal to upper) is not
    in a bucket.

    Examples
    --------
    >>> is_lowest_bucket(Bounds(lower=0, upper=1)), is_lowest_bucket(Bounds(lower=0.5, upper=1))
    (True, False)
    """
    return (
        bounds is not None
        and bounds.lower <= 0
        and math.isfinite(bounds.upper)
        and bounds.lower != bounds.upper
    )


def note_lowest_bucket(m: Measurement) -> Measurement:
    """``m``, a histogram quantile, with a ``lowest_bucket`` annotation when its bucket is the
    lowest (:func:`is_lowest_bucket`); unchanged otherwise. Value and bounds are kept: the
    annotation says how to read them (at most ``bounds.upper``, in ``m.unit``)."""
    if m.value is None or m.bounds is None or not is_lowest_bucket(m.bounds):
        return m
    upper = m.bounds.upper
    note = Annotation(
        LOWEST_BUCKET,
        f"{m.statistic} lies in the lowest bucket, [0, {upper:g}] {m.unit}: only that it is at "
        f"most {upper:g} is known; {m.value:.4g} is an estimate of where inside it, which the "
        "buckets alone cannot tell",
    )
    return m.model_copy(update={"annotations": (*m.annotations, note)})


def in_lowest_bucket(m: Measurement) -> bool:
    """Whether ``m`` carries the ``lowest_bucket`` annotation and its bounds: read it as
    "at most ``m.bounds.upper``", not as its interpolated value."""
    return m.bounds is not None and any(a.kind == LOWEST_BUCKET for a in m.annotations)


def same_bucket(a: Measurement | None, b: Measurement | None) -> Bounds | None:
    """The bucket two quantiles share, or None: both readable, with the same bounds, which
    are a bucket (lower below upper). Quantiles in one bucket are indistinguishable at the
    histogram's resolution; their interpolated values do not say which is lower.

    Examples
    --------
    >>> from datetime import datetime, timezone
    >>> at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    >>> def p50(name, value):
    ...     return Measurement(key=f"{name}/latency/ttft_p50", deployment=name,
    ...         analysis="latency", statistic="ttft_p50", value=value, unit="seconds",
    ...         window_start=at, window_end=at, status=Status.OK,
    ...         bounds=Bounds(lower=0.25, upper=0.5),
    ...         provenance=Provenance(promql=(), engine="dataset", rules="prometheus-3"))
    >>> same_bucket(p50("A", 0.47), p50("B", 0.46))
    Bounds(lower=0.25, upper=0.5)
    """
    if a is None or b is None or not a.ok or not b.ok or a.bounds is None:
        return None
    if a.bounds != b.bounds or a.bounds.lower == a.bounds.upper:
        return None
    return a.bounds


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
            "promql_value": json_number(m.provenance.promql_value),
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
