"""What a report holds: scope, each deployment's run, time line, verdicts, judgement, baseline.

Built by :func:`~inference_obs.report.build.build_report`; rendered by
:mod:`~.sections` (Markdown and HTML), :mod:`~.report_json` and the figures
(:mod:`~.figures`), none of which reads a source.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.conclusions import Cautions, Conclusions, cited
from inference_obs.analyses.outliers import Fleet
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.timeline import Timeline
from inference_obs.analyses.validity.verdicts import ValidityResult
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.result import measurements_frame
from inference_obs.reading.wording import when
from inference_obs.report.baseline import Baseline
from inference_obs.report.shown import ReportFigure, ReportSection, renderers
from inference_obs.samples import Window

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Renderers", "Report", "Scope"]


class Scope(BaseModel):
    """What a report read: the source, its engine and rules, and the windows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(description="Where the samples came from (no credentials).")
    engine: str
    rules: str
    windows: dict[str, Window] = Field(description="Deployment name -> window.")
    scrape_interval_seconds: float | None = None


class Report(BaseModel):
    """A whole observation report: scope, each deployment's run, verdicts and baseline.

    In Jupyter a report shows its summary (headline numbers, verdicts,
    conclusions) and the names of its figures and sections, tens of
    kilobytes whatever the fleet; ``repr()`` is a few lines. The rest is
    shown when asked:

    - :attr:`figures` lists the figures' names (``<deployment>-<figure>``);
      :meth:`figure` draws one, as the PNG ``write_report`` writes to
      ``figures/<name>.png`` (Jupyter shows it; ``.figure`` is the
      matplotlib figure).
    - :attr:`sections` lists the sections' titles; :meth:`section` renders
      one (HTML in Jupyter, Markdown with ``str()``).
    - :meth:`to_frame` and :attr:`replicas`: every number as rows.
    - :func:`~inference_obs.report.write.write_report` writes the whole
      report, figures embedded in report.html.
    """

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
        import pandas as pd  # here, not at the top: `import inference_obs` stays free of pandas

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

    @property
    def figures(self) -> tuple[str, ...]:
        """The names of the report's figures (``<deployment>-<figure>``), each deployment's in
        turn; none is drawn: :meth:`figure` draws one."""
        return _renderers().figure_names(self)

    def figure(self, name: str) -> ReportFigure:
        """Draw the figure ``name`` (one of :attr:`figures`).

        Returns
        -------
        ReportFigure
            Its name, caption, PNG bytes (those ``write_report`` writes to
            ``figures/<name>.png``; Jupyter shows them) and matplotlib figure.

        Raises
        ------
        ConfigurationError
            When the report has no such figure; the message lists those it has.
        """
        return _renderers().figure(self, name)

    @property
    def sections(self) -> tuple[str, ...]:
        """The titles of the report's sections, in order: :meth:`section` shows one."""
        return _renderers().section_titles(self)

    def section(self, title: str) -> ReportSection:
        """The section titled ``title`` (one of :attr:`sections`): HTML in Jupyter, its
        figures named by the call that draws them; Markdown with ``str()``.

        Raises
        ------
        ConfigurationError
            When the report has no such section; the message lists those it has.
        """
        return _renderers().section(self, title)

    def write(self, out: Path | str, formats: Collection[str] | None = None) -> dict[str, Path]:
        """Write the whole report under the directory ``out``, all files or none.

        report.md, report.html (figures embedded), report.json, replicas.csv and
        ``figures/*.png``, as :func:`~inference_obs.report.write.write_report`
        writes them; ``formats`` is any of ``md``, ``html``, ``json`` (None: all).

        Returns
        -------
        dict
            Format (``figure:<name>``, ``replicas``) -> the path written.
        """
        return _renderers().write(self, Path(out), formats)

    def __repr__(self) -> str:
        """A few lines: title, deployments, window, source, findings, where to look."""
        names = [d.deployment.name for d in self.deployments]
        shown = ", ".join(names[:_NAMED]) + (
            f" and {len(names) - _NAMED} more" * (len(names) > _NAMED)
        )
        spans = set(self.scope.windows.values())
        window = "none"
        if spans:
            window = f"{when(min(w.start for w in spans))} to {when(max(w.end for w in spans))}"
        if len(spans) > 1:
            window += f" ({len(spans)} windows)"
        return (
            f"<Report {_cut(self.title)!r}\n"
            f"  deployments: {shown}\n"
            f"  window: {window}\n"
            f"  source: {_cut(self.scope.source)} ({self.scope.engine})\n"
            f"  findings: {len(self.conclusions.entries)} in the Summary (.conclusions), "
            f"{len(self.cautions.entries)} cautions (.cautions)\n"
            "  look: .figures and .figure(name), .sections and .section(title), .to_frame()\n"
            "  whole report: .write(path)>"
        )

    def __str__(self) -> str:
        return self.__repr__()

    def _repr_html_(self) -> str:
        return _renderers().summary_html(self)


@dataclass(frozen=True)
class Renderers:
    """What a :class:`Report` shows itself with: figures, sections, summary, files.

    Each renderer reads the report model, so this module cannot import them;
    the package (``inference_obs.report``) gives the model a way to load them
    (:func:`~inference_obs.report.shown.render_with`) when it is imported.
    """

    figure_names: Callable[[Report], tuple[str, ...]]
    figure: Callable[[Report, str], ReportFigure]
    section_titles: Callable[[Report], tuple[str, ...]]
    section: Callable[[Report, str], ReportSection]
    summary_html: Callable[[Report], str]
    write: Callable[[Report, Path, Collection[str] | None], dict[str, Path]]


def _renderers() -> Renderers:
    return cast("Renderers", renderers())


#: Deployments a report's ``repr()`` names; it counts the others.
_NAMED = 6
#: Characters of a title or source a report's ``repr()`` shows.
_LONGEST = 100


def _cut(text: str) -> str:
    """``text`` cut to :data:`_LONGEST` characters, an ellipsis marking the cut."""
    return text if len(text) <= _LONGEST else text[: _LONGEST - 1] + "…"
