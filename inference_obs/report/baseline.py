"""This report against an earlier one: each headline number then and now, and the real regressions.

A scheduled report is for noticing what got worse. :func:`compare_reports`
reads two ``report.json`` documents (the previous one and this run's, each a
:class:`~inference_obs.report.report_json_model.ReportDocument`) and,
for each deployment present in both and each :data:`HEADLINES` number,
classifies the change:

- a **quantile** (it has bounds: the bucket that must hold the true value)
  changed only when the two intervals do not overlap. Quantiles in
  overlapping buckets are ``within_bucket`` however far the interpolated
  point moved: the buckets cannot tell them apart;
- an **exact number** (a mean of exact counter changes, a sampled share)
  changed when it moved by at least :attr:`Tolerances.relative` of the
  previous value and by at least the unit's absolute floor
  (:attr:`Tolerances.absolute`), so noise around zero is not a regression;
- an **SLO attainment** (``slo/<target>_attainment``, worse lower) and, with an
  objective, its error budget spent (worse higher) are compared for every
  target either report has: bounded ones by their intervals, exact ones (their
  bounds a point) as exact numbers;
- a number that is not ``ok`` on both sides is ``not_comparable``; context
  numbers (throughput, utilisation: their direction depends on demand) are
  shown and never regress.

A change in the worse direction is a **regression**. The comparison-validity
rules of :mod:`~inference_obs.analyses.validity.checks` (same thresholds,
same finding codes) then ask whether then and now are comparable: different
prompt or output lengths, request rates per replica, window lengths, a
changed declared deployment or rule set make every regression of the
deployment ``caveated``, with the findings named; a quantile resting on too
few requests (``too_few_observations``) or a partial value
(``partial_data``) caveats that one. Caveated regressions still count: a
caveat says the change may not be the service's fault, not that it did not
happen.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.validity.checks import Thresholds
from inference_obs.reading.measurement import LOWEST_BUCKET
from inference_obs.report.baseline_file import check_in_common, read_report_json
from inference_obs.report.baseline_rules import comparability, observation_findings
from inference_obs.report.report_json_model import JsonNumber, MeasurementEntry, ReportDocument

__all__ = [
    "HEADLINES",
    "Baseline",
    "BaselineFinding",
    "Compared",
    "Regression",
    "Side",
    "Tolerances",
    "check_in_common",
    "compare_reports",
    "headlines",
    "read_report_json",
]

Worse = Literal["higher", "lower"] | None
Change = Literal[
    "regression",
    "improvement",
    "within_bucket",
    "within_tolerance",
    "unchanged",
    "not_comparable",
    "context",
]
_LATENCY = ("ttft", "tpot", "itl", "e2e", "queue")
#: ``analysis/statistic`` of each headline number, and which direction is worse (None:
#: context, shown but never a regression: throughput and utilisation follow demand).
HEADLINES: dict[str, Worse] = {
    **{f"latency/{m}_{s}": "higher" for m in _LATENCY for s in ("mean", "p50", "p95", "p99")},
    "throughput/waiting_sample_share": "higher",
    "cache/prefix_cache_hit_rate": "lower",
    "cache/spec_acceptance_rate": "lower",
    "shapes/finished_error_share": "higher",
    "throughput/output_tokens_per_second_per_replica": None,
    "throughput/output_tokens_per_gpu_hour": None,
    "gpu/utilization_mean": None,
    "shapes/prompt_tokens_mean": None,
    "shapes/output_tokens_mean": None,
}


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Tolerances(_Model):
    """How far an exact number (no bounds) must move to count as a change."""

    relative: float = Field(0.1, gt=0, description="Share of the previous value (0.1: 10%).")
    absolute: dict[str, float] = Field(
        default_factory=lambda: {"seconds": 0.001, "ratio": 0.01, "percent": 1.0},
        description="Floor per unit: 1 ms, 0.01 of a ratio, 1 percentage point.",
    )


class Side(_Model):
    """One report's value of a number: value, the interval holding the true value, status."""

    value: float | None
    lower: float | None = None
    upper: float | None = None
    status: str
    lowest_bucket: bool = Field(
        False, description="A quantile in its histogram's lowest bucket: known as <= upper."
    )


class Compared(_Model):
    """One headline number of one deployment, then and now."""

    deployment: str
    statistic: str = Field(description="analysis/statistic, e.g. latency/ttft_p95.")
    unit: str
    worse: Worse = Field(description="Which direction is worse; None for context numbers.")
    previous: Side | None
    current: Side | None
    change: Change
    ratio: float | None = Field(description="current / previous, when both are above 0.")
    reason: str


class Regression(_Model):
    """A headline number that got worse by more than its bounds or tolerance allow."""

    deployment: str
    statistic: str
    unit: str
    previous: Side
    current: Side
    verdict: Literal["regression", "caveated"]
    findings: tuple[str, ...] = Field(description="Codes that caveat it (empty: none).")
    reason: str


class BaselineFinding(_Model):
    """Why then and now may not be comparable for a deployment (a comparison-findings code)."""

    deployment: str
    code: str
    message: str


class Baseline(_Model):
    """This report against a previous one (see the module docstring)."""

    source: str = Field(description="The previous report.json, as given.")
    previous_title: str
    previous_windows: dict[str, dict[str, str]]
    compared: tuple[Compared, ...]
    regressions: tuple[Regression, ...]
    findings: tuple[BaselineFinding, ...]
    unmatched: tuple[str, ...] = Field(
        description="Deployments in only one of the two reports, each said as such."
    )


def _number(value: JsonNumber) -> float | None:
    if value is None:
        return None
    if value in ("+Inf", "-Inf"):
        return math.inf if value == "+Inf" else -math.inf
    return float(value)


def _side(m: MeasurementEntry | None) -> Side | None:
    if m is None:
        return None
    return Side(
        value=_number(m.value),
        lower=_number(m.bounds.lower) if m.bounds else None,
        upper=_number(m.bounds.upper) if m.bounds else None,
        status=m.status,
        lowest_bucket=any(a.kind == LOWEST_BUCKET for a in m.annotations),
    )


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a <= 0 or b <= 0 or not math.isfinite(a * b):
        return None
    return b / a


def _interval(s: Side) -> tuple[float, float] | None:
    """The (lower, upper] interval holding the true value, when the number has one.

    None also for a point (an exact share's bounds): it is compared as an exact number.
    """
    if s.lower is None or s.upper is None or s.lower == s.upper:
        return None
    return s.lower, s.upper


def headlines(*reports: ReportDocument) -> dict[str, Worse]:
    """:data:`HEADLINES`, and every SLO target's attainment and budget spent in ``reports``.

    SLO targets are the run's settings, so the statistics are read from the
    measurements: the deployment-wide ``slo/<target>_attainment`` (worse:
    lower) and ``slo/<target>_budget_spent`` (worse: higher), never per replica.
    """
    found: dict[str, Worse] = {}
    for report in reports:
        for m in report.measurements:
            statistic = f"{m.analysis}/{m.statistic}"
            if m.analysis != "slo" or "[" in statistic:
                continue
            if statistic.endswith("_attainment"):
                found[statistic] = "lower"
            elif statistic.endswith("_budget_spent"):
                found[statistic] = "higher"
    return {**HEADLINES, **dict(sorted(found.items()))}


def _classify(
    worse: Worse, unit: str, then: Side | None, now: Side | None, t: Tolerances
) -> tuple[Change, str]:
    """The change from ``then`` to ``now`` and why (see the module docstring)."""
    if then is None or now is None:
        return "not_comparable", "missing from " + ("the baseline" if then is None else "this run")
    if then.value is None or now.value is None:
        return "not_comparable", f"status {then.status} then, {now.status} now"
    if worse is None:
        return "context", "follows demand and workload: shown, never a regression"
    if (now.value, now.lower, now.upper) == (then.value, then.lower, then.upper):
        return "unchanged", "equal"
    up = now.value > then.value
    was, is_ = _interval(then), _interval(now)
    if was is not None and is_ is not None:
        if is_[0] >= was[1] or is_[1] <= was[0]:
            moved_up = is_[0] >= was[1]
            return (
                "regression" if moved_up == (worse == "higher") else "improvement",
                f"bucket ({was[0]:g}, {was[1]:g}] then, ({is_[0]:g}, {is_[1]:g}] now",
            )
        return "within_bucket", "the buckets holding the two values overlap: not resolved"
    step = abs(now.value - then.value)
    floor = t.absolute.get(unit, 0.0)
    relative = step / abs(then.value) if then.value else math.inf
    if step < floor or relative < t.relative:
        return "within_tolerance", (
            f"moved {step:.4g} {unit} ({relative:.1%}): under {t.relative:.0%} or {floor:g} {unit}"
        )
    worse_now = up == (worse == "higher")
    return ("regression" if worse_now else "improvement"), (
        f"{then.value:.4g} then, {now.value:.4g} now ({relative:+.0%})"
        if math.isfinite(relative)
        else f"{then.value:.4g} then, {now.value:.4g} now"
    )


def _compared(
    name: str,
    statistic: str,
    worse: Worse,
    then: ReportDocument,
    now: ReportDocument,
    tol: Tolerances,
) -> Compared | None:
    """One headline number of one deployment then and now; None when neither report has it."""
    key = f"{name}/{statistic}"
    was, is_ = then.measurement(key), now.measurement(key)
    a, b = _side(was), _side(is_)
    if a is None and b is None:
        return None
    shown = is_ if is_ is not None else was
    unit = shown.unit if shown is not None else ""
    change, reason = _classify(worse, unit, a, b, tol)
    return Compared(
        deployment=name,
        statistic=statistic,
        unit=unit,
        worse=worse,
        previous=a,
        current=b,
        change=change,
        ratio=_ratio(a.value if a else None, b.value if b else None),
        reason=reason,
    )


def _regression(
    c: Compared,
    found: list[tuple[str, str]],
    previous: ReportDocument,
    current: ReportDocument,
    t: Thresholds,
) -> Regression:
    """The regression ``c`` is, caveated by the deployment's findings and its own."""
    assert c.previous is not None
    assert c.current is not None  # a regression has both sides
    statuses = (c.previous.status, c.current.status)
    own = observation_findings(c.deployment, c.statistic, previous, current, statuses, t)
    codes = tuple(dict.fromkeys([code for code, _ in found] + [code for code, _ in own]))
    notes = "; ".join(m for _, m in own)
    return Regression(
        deployment=c.deployment,
        statistic=c.statistic,
        unit=c.unit,
        previous=c.previous,
        current=c.current,
        verdict="caveated" if codes else "regression",
        findings=codes,
        reason=c.reason + (f"; {notes}" if notes else ""),
    )


def compare_reports(
    previous: ReportDocument,
    current: ReportDocument,
    *,
    source: str,
    thresholds: Thresholds | None = None,
    tolerances: Tolerances | None = None,
) -> Baseline:
    """Compare ``current`` with ``previous`` (both ``report.json`` data) number by number.

    Parameters
    ----------
    previous, current
        report.json documents (:func:`read_report_json` of a file, or
        :func:`~inference_obs.report.report_json.report_document` of a report);
        each indexes its measurements by key.
    source
        How to name the previous report (its path).
    thresholds
        The comparison-validity thresholds (default: the validity checks' own).
    tolerances
        When an exact number has changed (see :class:`Tolerances`).

    Returns
    -------
    Baseline
        Every headline number per deployment, the regressions among them, and
        the findings that caveat them.

    Raises
    ------
    DatasetError
        When the two share no deployment: there would be nothing to compare.
    """
    names_then = [d.name for d in previous.deployments]
    names_now = [d.name for d in current.deployments]
    check_in_common(previous, names_now, source)
    t = thresholds or Thresholds()
    tol = tolerances or Tolerances()
    unmatched = [f"{n}: not in the baseline" for n in names_now if n not in names_then]
    unmatched += [f"{n}: in the baseline only" for n in names_then if n not in names_now]
    chosen = headlines(previous, current)
    compared: list[Compared] = []
    regressions: list[Regression] = []
    findings: list[BaselineFinding] = []
    for name in (n for n in names_now if n in names_then):
        found = comparability(name, previous, current, t)
        findings += [BaselineFinding(deployment=name, code=c, message=m) for c, m in found]
        for statistic, worse in chosen.items():
            entry = _compared(name, statistic, worse, previous, current, tol)
            if entry is None:
                continue
            compared.append(entry)
            if entry.change == "regression":
                regressions.append(_regression(entry, found, previous, current, t))
    return Baseline(
        source=source,
        previous_title=previous.title,
        previous_windows={
            d.name: {"start": d.window.start, "end": d.window.end} for d in previous.deployments
        },
        compared=tuple(compared),
        regressions=tuple(regressions),
        findings=tuple(findings),
        unmatched=tuple(unmatched),
    )
