"""What the judging of a report reads and returns: its typed inputs, conclusions and cautions.

The judging reads the analyses' results, never a source nor a report:
:class:`Judged` gathers them (each deployment's run, the comparison
verdicts, the time line, each deployment's one reading and the few scope
facts that matter, :class:`ScopeFacts`), built once by :func:`judged`.
It returns :class:`Conclusions` (the Summary's findings, ranked) and
:class:`Cautions` (what not to conclude), which the report renders as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.facts import shown
from inference_obs.analyses.outliers import Fleet, fleet
from inference_obs.analyses.regime import RegimeResult, judge
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.timeline import Timeline
from inference_obs.analyses.validity.verdicts import ValidityResult
from inference_obs.reading.measurement import Measurement

__all__ = [
    "NAMED",
    "SECTIONS",
    "Caution",
    "Cautions",
    "Conclusion",
    "Conclusions",
    "Judged",
    "ScopeFacts",
    "cited",
    "judged",
]


#: The sections a conclusion points to, by the text of their headings.
SECTIONS = {
    "deployments": "Deployments compared",
    "timeline": "What happened",
    "latency": "Latency",
    "replicas": "Replicas",
    "queues": "Queues and GPU activity",
    "gpus": "GPU activity and bottleneck",
    "boundaries": "Stage boundaries: what the GPUs wait on",
    "cost": "Cost",
    "verdicts": "Comparison verdicts",
}

#: Names (findings, GPUs) a sentence lists before "and N more".
NAMED = 3


class Conclusion(BaseModel):
    """One finding of the summary, in plain words, with what it rests on.

    Attributes
    ----------
    kind
        Stable code of the finder (``latency_lower``, ``throughput_ratio``, ...).
    text
        One sentence with its numbers, bounds and units.
    keys
        Measurement keys it rests on (each among :func:`cited`'s, as a report shows them).
    section
        Text of the heading of the section that shows the numbers.
    caveat
        What not to conclude from it; None when nothing needs saying.
    verdict
        The verdict (``valid``, ``caveated``, ``invalid``) of the comparison
        it rests on; None for a finding about one deployment.
    deployments
        The deployments it is about; for ``latency_lower``, the lower one first.
    comparison
        The comparison key it rests on (``ttft_p95``), if any.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    text: str
    keys: tuple[str, ...]
    section: str
    caveat: str | None = None
    verdict: str | None = None
    deployments: tuple[str, ...] = ()
    comparison: str | None = None


class Conclusions(BaseModel):
    """The Summary's findings, most important first (the finders' order)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entries: tuple[Conclusion, ...] = ()


class Caution(BaseModel):
    """One thing not to conclude from the report, in plain words.

    Attributes
    ----------
    kind
        Stable code of the caution (``different_workloads``, ``one_bucket``, ...).
    text
        The caution, naming the numbers it concerns.
    keys
        Measurement keys it concerns, where it concerns particular numbers.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    text: str
    keys: tuple[str, ...] = ()


class Cautions(BaseModel):
    """What not to conclude: every caution whose condition holds, in the order they are listed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entries: tuple[Caution, ...] = ()


class ScopeFacts(BaseModel):
    """What the judging needs of a report's scope beyond the results."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    synthetic: bool = Field(False, description="The samples came from a simulator.")

    @classmethod
    def of(cls, methodology: Iterable[str]) -> ScopeFacts:
        """The facts a report's methodology notes state.

        A simulated dataset says so in its methodology ("Synthetic: every sample was
        produced by the inference_obs simulator ...").
        """
        return cls(synthetic=any(line.lower().startswith("synthetic") for line in methodology))


class Judged(BaseModel):
    """What the judging reads: the analyses' results of every deployment, and the scope facts.

    Attributes
    ----------
    runs
        Each deployment's run, in the report's order.
    validity
        The comparison verdicts; None with one deployment.
    timeline
        What happened over the window.
    regimes
        Each deployment's one reading (:func:`~inference_obs.analyses.regime.judge`), by name.
    fleets
        Each deployment's replicas as distributions, and its outliers
        (:func:`~inference_obs.analyses.outliers.fleet`), by name.
    measurements
        Every Measurement a finding may cite (:func:`cited`).
    scope
        The scope facts the cautions need.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    runs: tuple[DeploymentResults, ...]
    validity: ValidityResult | None = None
    timeline: Timeline
    regimes: dict[str, RegimeResult]
    fleets: dict[str, Fleet] = Field(default_factory=dict)
    measurements: tuple[Measurement, ...]
    scope: ScopeFacts = ScopeFacts()

    def by_name(self) -> dict[str, DeploymentResults]:
        """The runs by deployment name."""
        return {d.deployment.name: d for d in self.runs}


def cited(
    runs: Iterable[DeploymentResults], validity: ValidityResult | None
) -> tuple[Measurement, ...]:
    """Every Measurement a report shows and its findings may cite: each run's (cost only
    where its GPU-hour price was given), then latency at matched load of each pair."""
    matched = (
        m
        for pair in (validity.pairs if validity else ())
        for found in pair.matched
        for quantiles in found.quantiles.values()
        for m in quantiles.values()
    )
    per_deployment = (
        m
        for d in runs
        for name, result in d.results.items()
        if shown(d, name)
        for m in result.measurements()
    )
    return (*per_deployment, *matched)


def judged(
    runs: Sequence[DeploymentResults],
    validity: ValidityResult | None,
    timeline: Timeline,
    scope: ScopeFacts | None = None,
) -> Judged:
    """The judging's inputs from the analyses' results: each regime and each fleet's outliers
    judged once, and the Measurements findings may cite gathered once."""
    return Judged(
        runs=tuple(runs),
        validity=validity,
        timeline=timeline,
        regimes={d.deployment.name: judge(d) for d in runs},
        fleets=fleet(runs, timeline),
        measurements=cited(runs, validity),
        scope=scope or ScopeFacts(),
    )
