"""What a report holds: scope, each deployment's run, time line, verdicts, judgement, baseline.

Built by :func:`~inference_obs.report.build.build_report`; rendered by
:mod:`~.sections` (Markdown and HTML), :mod:`~.report_json` and the figures
(:mod:`~.figures`), none of which reads a source.
"""

from __future__ import annotations

import math

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.conclusions import Cautions, Conclusions, cited
from inference_obs.analyses.outliers import Fleet
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
    fleet: dict[str, Fleet] = Field(
        default_factory=dict,
        description="Per deployment: its replicas' distributions and outliers.",
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

    @property
    def replicas(self) -> pd.DataFrame:
        """One row per replica and per-replica statistic, every deployment.

        Columns: ``deployment``, ``replica``, ``statistic``, ``value`` (in
        ``unit``; NaN: no data), ``unit``, ``lower``/``upper`` (a quantile's
        bucket; NaN otherwise), ``outlier`` (whether it is named an outlier
        of its deployment on that statistic) and ``key`` (the Measurement's;
        empty for an event count). What ``replicas.csv`` holds.
        """
        rows = []
        for name, one in self.fleet.items():
            flagged = {(o.replica, o.statistic) for o in one.outliers}
            for v in one.values:
                rows.append(
                    {
                        "deployment": name,
                        "replica": v.replica,
                        "statistic": v.statistic,
                        "value": math.nan if v.value is None else v.value,
                        "unit": v.unit,
                        "lower": v.bounds.lower if v.bounds else math.nan,
                        "upper": v.bounds.upper if v.bounds else math.nan,
                        "outlier": (v.replica, v.statistic) in flagged,
                        "key": v.key or "",
                    }
                )
        columns = ["deployment", "replica", "statistic", "value", "unit", "lower", "upper"]
        return pd.DataFrame(rows, columns=[*columns, "outlier", "key"])

    def measurements(self) -> tuple[Measurement, ...]:
        """Every Measurement of the report (latency at matched load included).

        A deployment's cost appears only where its GPU-hour price was given.
        """
        return cited(self.deployments, self.validity)

    def _repr_html_(self) -> str:
        from inference_obs.report.summary import summary_html

        return summary_html(self)
