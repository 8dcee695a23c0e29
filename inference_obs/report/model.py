"""What a report holds: scope, each deployment's run, time line, verdicts, judgement, baseline.

Built by :func:`~inference_obs.report.build.build_report`; rendered by
:mod:`~.sections` (Markdown and HTML), :mod:`~.report_json` and the figures
(:mod:`~.figures`), none of which reads a source.
"""

from __future__ import annotations

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.conclusions import Cautions, Conclusions, cited
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.timeline import Timeline
from inference_obs.analyses.validity.verdicts import ValidityResult
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.result import measurements_frame
from inference_obs.report.baseline import Baseline
from inference_obs.samples import Window

__all__ = ["Report", "Scope"]


class Scope(BaseModel):
    """What a report read: the source, its engine and rules, and the windows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(description="Where the samples came from (no credentials).")
    engine: str
    rules: str
    windows: dict[str, Window] = Field(description="Deployment name -> window.")
    scrape_interval_seconds: float | None = None


class Report(BaseModel):
    """A whole observation report: scope, each deployment's run, verdicts and baseline."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    title: str
    scope: Scope
    deployments: tuple[DeploymentResults, ...]
    timeline: Timeline = Field(
        description="What happened, from every deployment's results: stalls, restarts, gaps."
    )
    validity: ValidityResult | None = Field(None, description="With two or more deployments.")
    conclusions: Conclusions = Field(
        description="The Summary's findings, ranked (:mod:`~inference_obs.analyses.conclusions`)."
    )
    cautions: Cautions = Field(description="What not to conclude from the report.")
    methodology: tuple[str, ...] = ()
    baseline: Baseline | None = Field(None, description="Against an earlier report.json.")

    def to_frame(self) -> pd.DataFrame:
        """Every Measurement of the report, one row each (see ``measurements_frame``)."""
        return measurements_frame(self.measurements())

    def measurements(self) -> tuple[Measurement, ...]:
        """Every Measurement of the report (latency at matched load included).

        A deployment's cost appears only where its GPU-hour price was given.
        """
        return cited(self.deployments, self.validity)

    def _repr_html_(self) -> str:
        from inference_obs.report.summary import summary_html

        return summary_html(self)
