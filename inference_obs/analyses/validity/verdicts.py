"""Comparison validity: which cross-deployment comparisons mean something, and why.

Teams divide one deployment's throughput by another's and buy hardware on
the ratio. :func:`validity` profiles each deployment (shapes, latency,
throughput, caches, GPUs, load), runs the checks of
:mod:`~inference_obs.analyses.validity.checks` on every pair, and returns
for each comparison a verdict:

- ``valid``: no finding weighs on it (informational notes may remain);
- ``caveated``: it stands only with its findings stated beside it;
- ``invalid``: it does not mean what it seems.

Every finding carries a stable code, its evidence from both sides and a
way to make the comparison fair where one exists. Where load differs, the
latency percentiles are also computed over intervals of matched requests in
flight (:mod:`~inference_obs.analyses.validity.matched_load`), when the data has any.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Mapping, Sequence
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.run import DeploymentResults, run
from inference_obs.analyses.validity import checks, checks_setup
from inference_obs.analyses.validity.checks import Thresholds, comparison_value
from inference_obs.analyses.validity.findings import COMPARISONS, Finding, Severity
from inference_obs.analyses.validity.matched_load import MatchedConcurrency, matched_concurrency
from inference_obs.analyses.validity.profile import NEEDED, Profile, profile
from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError
from inference_obs.metrics import vllm
from inference_obs.reading.context import Reading, Source
from inference_obs.reading.measurement import Bounds, Measurement, in_lowest_bucket
from inference_obs.reading.resolution import Resolution
from inference_obs.reading.result import format_number
from inference_obs.samples import Window

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ComparisonVerdict",
    "PairValidity",
    "ValidityResult",
    "Verdict",
    "compare",
    "compare_profiles",
    "validity",
    "windows_by_name",
]


class Verdict(StrEnum):
    """Whether a comparison means what it seems."""

    VALID = "valid"
    CAVEATED = "caveated"
    INVALID = "invalid"


_VERDICT = {
    Severity.INFO: Verdict.VALID,
    Severity.CAVEAT: Verdict.CAVEATED,
    Severity.INVALID: Verdict.INVALID,
}


class ComparisonVerdict(BaseModel):
    """The verdict on one comparison between two deployments, with both values."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    comparison: str = Field(description="Comparison key (see COMPARISONS).")
    description: str
    verdict: Verdict
    values: dict[str, float | None] = Field(description="Deployment name -> value (its unit).")
    unit: str | None
    findings: tuple[str, ...] = Field(description="Codes of the findings that weigh on it.")
    notes: tuple[str, ...] = Field(
        default=(),
        description="Codes of informational findings (same_bucket: both quantiles lie in one "
        "bucket, indistinguishable at the histograms' resolution).",
    )
    bounds: dict[str, Bounds | None] = Field(
        default_factory=dict,
        description="Deployment name -> interval holding the true value (a quantile's bucket, "
        "its unit), or None where the value has none.",
    )
    lowest_bucket: tuple[str, ...] = Field(
        default=(),
        description="Deployments whose quantile lies in its histogram's lowest bucket: known "
        "only as at most the bucket's upper bound, not as the interpolated value.",
    )


class PairValidity(BaseModel):
    """Findings and verdicts for one pair of deployments."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    a: str
    b: str
    findings: tuple[Finding, ...]
    verdicts: dict[str, ComparisonVerdict]
    matched: tuple[MatchedConcurrency, ...] = Field(
        default=(),
        description="With a concurrency finding: latency over intervals of matched load.",
    )

    def finding(self, code: str) -> Finding | None:
        """The finding with ``code``, or None."""
        return next((f for f in self.findings if f.code == code), None)


class ValidityResult(BaseModel):
    """Verdicts for every pair of the deployments compared."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pairs: tuple[PairValidity, ...]
    thresholds: Thresholds

    def pair(self, a: str, b: str) -> PairValidity:
        """The pair of deployments ``a`` and ``b`` (either order).

        Raises
        ------
        ConfigurationError
            If the pair was not compared.
        """
        for p in self.pairs:
            if {p.a, p.b} == {a, b}:
                return p
        compared = ", ".join(f"{p.a}/{p.b}" for p in self.pairs)
        raise ConfigurationError(f"{a} and {b} were not compared; pairs: {compared}")

    def verdict(self, comparison: str, a: str | None = None, b: str | None = None) -> Verdict:
        """The verdict on ``comparison`` (for the only pair, or for ``a`` and ``b``)."""
        if comparison not in COMPARISONS:
            known = list(COMPARISONS)
            raise ConfigurationError(f"unknown comparison {comparison!r}; use one of {known}")
        if a is None or b is None:
            if len(self.pairs) != 1:
                raise ConfigurationError("several pairs were compared: name the two deployments")
            pair = self.pairs[0]
        else:
            pair = self.pair(a, b)
        return pair.verdicts[comparison].verdict

    def measurements(self) -> tuple[Measurement, ...]:
        """None: verdicts are not Measurements (their values come from the analyses)."""
        return ()

    def to_frame(self) -> pd.DataFrame:
        """One row per pair and comparison: both values, the verdict, its findings and notes."""
        import pandas as pd  # here, not at the top: `import inference_obs` stays free of pandas

        rows = []
        for p in self.pairs:
            for v in p.verdicts.values():
                rows.append(
                    {
                        "a": p.a,
                        "b": p.b,
                        "comparison": v.comparison,
                        "verdict": v.verdict.value,
                        "value_a": v.values.get(p.a),
                        "value_b": v.values.get(p.b),
                        "unit": v.unit,
                        "findings": ", ".join(v.findings),
                        "notes": ", ".join(v.notes),
                    }
                )
        return pd.DataFrame(rows)

    def findings_frame(self) -> pd.DataFrame:
        """One row per finding: code, severity, message, evidence and what it affects."""
        import pandas as pd  # here, not at the top: `import inference_obs` stays free of pandas

        rows = []
        for p in self.pairs:
            for f in p.findings:
                evidence = "; ".join(
                    f"{e.statistic}: " + ", ".join(f"{k}={v}" for k, v in e.values.items())
                    for e in f.evidence
                )
                rows.append(
                    {
                        "a": p.a,
                        "b": p.b,
                        "code": f.code,
                        "severity": f.severity.value,
                        "message": f.message,
                        "evidence": evidence,
                        "affects": ", ".join(f"{k} ({s.value})" for k, s in f.affects.items()),
                        "how_to_compare": f.how_to_compare,
                    }
                )
        return pd.DataFrame(rows)

    def _repr_html_(self) -> str:
        parts = []
        for p in self.pairs:
            rows = "".join(
                "<tr>"
                + "".join(
                    f"<td>{html.escape(str(c))}</td>"
                    for c in (
                        v.comparison,
                        v.verdict.value,
                        format_number(v.values.get(p.a)),
                        format_number(v.values.get(p.b)),
                        v.unit or "",
                        ", ".join(v.findings),
                    )
                )
                + "</tr>"
                for v in p.verdicts.values()
            )
            head = (
                f"<tr><th>comparison</th><th>verdict</th><th>{html.escape(p.a)}</th>"
                f"<th>{html.escape(p.b)}</th><th>unit</th><th>findings</th></tr>"
            )
            parts.append(
                f"<h4>{html.escape(p.a)} vs {html.escape(p.b)}</h4><table>{head}{rows}</table>"
            )
        return "".join(parts)


def windows_by_name(
    deployments: Sequence[Deployment], window: Window | Mapping[str, Window]
) -> dict[str, Window]:
    """Each deployment's window by name: ``window`` for all, or its entry in the mapping.

    Raises
    ------
    ConfigurationError
        A deployment has no window in the mapping (named).
    """
    if isinstance(window, Window):
        return {d.name: window for d in deployments}
    absent = [d.name for d in deployments if d.name not in window]
    if absent:
        raise ConfigurationError(f"no window for deployment(s) {absent}: give one window per name")
    return {d.name: window[d.name] for d in deployments}


#: Every check, in report order.
CHECKS = (*checks.CHECKS, *checks_setup.CHECKS)


def compare_profiles(a: Profile, b: Profile, thresholds: Thresholds | None = None) -> PairValidity:
    """Findings and verdicts for two profiled deployments."""
    t = thresholds or Thresholds()
    findings = tuple(f for check in CHECKS for f in check(a, b, t))
    verdicts = {}
    for key, description in COMPARISONS.items():
        ma, mb = comparison_value(a, key), comparison_value(b, key)
        if key == "cost_per_token" and (ma is None or mb is None):
            continue
        weighing = [f for f in findings if f.affects.get(key, Severity.INFO) is not Severity.INFO]
        notes = [f.code for f in findings if f.affects.get(key) is Severity.INFO]
        worst = max((f.affects[key] for f in weighing), key=lambda s: s.rank, default=Severity.INFO)
        unit = ma.unit if ma is not None else mb.unit if mb is not None else None
        sides = {a.deployment.name: ma, b.deployment.name: mb}
        verdicts[key] = ComparisonVerdict(
            comparison=key,
            description=description,
            verdict=_VERDICT[worst],
            values={name: m.value if m else None for name, m in sides.items()},
            unit=unit,
            findings=tuple(f.code for f in weighing),
            notes=tuple(notes),
            bounds={name: m.bounds if m and m.ok else None for name, m in sides.items()},
            lowest_bucket=tuple(n for n, m in sides.items() if m and m.ok and in_lowest_bucket(m)),
        )
    return PairValidity(
        a=a.deployment.name, b=b.deployment.name, findings=findings, verdicts=verdicts
    )


def validity(
    source: Source,
    deployments: Sequence[Deployment],
    window: Window | Mapping[str, Window],
    *,
    thresholds: Thresholds | None = None,
    resolution: Resolution = "scrape",
    settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> ValidityResult:
    """Verdicts on every comparison between every pair of ``deployments``.

    Runs the analyses a comparison rests on (:data:`~.profile.NEEDED`) once
    per deployment, then :func:`compare`; a report compares the runs it made
    already instead.

    Parameters
    ----------
    source
        Where the series come from.
    deployments
        Two or more deployments, with distinct names. Cost per token is
        compared where they state a ``hardware.gpu_hour_price`` (else only
        tokens per GPU-hour), declared parallelism against the wiring where
        they have a ``topology``.
    window
        One window for all, or a window per deployment name.
    thresholds
        When differences become findings (defaults: :class:`Thresholds`).
    resolution
        How the sampled shares (requests running, waiting) are counted:
        ``scrape`` (every raw sample, the default), ``auto`` or a tile width
        in seconds (see :mod:`~inference_obs.reading.resolution`).
    settings
        Analysis settings by analysis name, then setting, as a report takes
        them (``{"cost": {"sla_ttft_s": 2}}``); checked before anything is read.

    Raises
    ------
    ConfigurationError
        Fewer than two deployments, repeated names, or a deployment without a window.
    """
    _comparable([d.name for d in deployments])
    windows = windows_by_name(deployments, window)
    runs = run(
        source,
        deployments,
        windows,
        resolution=resolution,
        settings=settings,
        analyses=NEEDED,
    )
    return compare(source, runs, thresholds)


def _comparable(names: Sequence[str]) -> None:
    if len(names) < 2:
        raise ConfigurationError(f"comparison needs at least two deployments, got {names}")
    if len(set(names)) != len(names):
        raise ConfigurationError(f"deployment names must be distinct: {names}")


def compare(
    source: Source, runs: Sequence[DeploymentResults], thresholds: Thresholds | None = None
) -> ValidityResult:
    """Verdicts on every comparison between every pair of deployments' runs.

    Each run must hold the analyses of :data:`~.profile.NEEDED`; ``source``
    answers the load figures they lack, and the latency at matched load
    where a pair's concurrency differs.

    Returns
    -------
    ValidityResult
        One :class:`PairValidity` per pair, in the order given.
    """
    _comparable([one.deployment.name for one in runs])
    profiles = Reading.together([partial(profile, source, one) for one in runs])
    windows = {one.deployment.name: one.window for one in runs}
    t = thresholds or Thresholds()
    pairs = []
    for a, b in itertools.combinations(profiles, 2):
        pair = compare_profiles(a, b, t)
        if pair.finding("concurrency_differs") is not None:
            both = (a.deployment, b.deployment)
            matched = Reading.together(
                [
                    partial(matched_concurrency, source, both, windows, family)
                    for family in (vllm.INTER_TOKEN_LATENCY, vllm.TIME_TO_FIRST_TOKEN)
                ],
            )
            pair = pair.model_copy(update={"matched": tuple(matched)})
        pairs.append(pair)
    return ValidityResult(pairs=tuple(pairs), thresholds=t)
