"""A run: every registered analysis, once per deployment, its results kept for every reader.

:func:`run` reads each deployment's tile width (:mod:`~inference_obs.reading.resolution`),
then starts every analysis of the registry for it; the comparison checks,
the published aggregates, the figures and the report all read the
:class:`DeploymentResults` it returns instead of asking the source again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from inference_obs.analyses.registry import ANALYSES, settings_for
from inference_obs.analyses.unit import Analysis, Settings
from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError
from inference_obs.query import Expr
from inference_obs.reading.context import Ahead, Reading, Source
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.resolution import Resolution, step_for
from inference_obs.reading.result import AnalysisResult
from inference_obs.reading.schedule import Pending, soon
from inference_obs.samples import Window

__all__ = ["DeploymentResults", "Start", "run", "run_one"]

T = TypeVar("T")
R = TypeVar("R", bound=AnalysisResult)
#: How a run starts a piece of work: a name for progress, and the work.
Start = Callable[[str, Callable[[], Any]], Pending[Any]]


class DeploymentResults(BaseModel):
    """Every analysis's result for one deployment over its window.

    Attributes
    ----------
    deployment, window
        Whose, and when.
    step_seconds
        Tile width the per-scrape analyses read at, seconds; None: every app scrape.
    results
        Analysis name -> its result, in registry order.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    deployment: Deployment
    window: Window
    step_seconds: float | None
    results: dict[str, AnalysisResult]

    def of(self, analysis: Analysis[Any, R]) -> R:
        """The result of ``analysis``, typed as its result model.

        Raises
        ------
        ConfigurationError
            When the run did not include it.
        """
        found = self.results.get(analysis.name)
        if not isinstance(found, analysis.result):
            ran = ", ".join(self.results)
            raise ConfigurationError(
                f"the run of {self.deployment.name} has no {analysis.name} result (ran: {ran})"
            )
        return found

    def __getitem__(self, name: str) -> AnalysisResult:
        """The result of the analysis called ``name`` (``run["latency"]``, as in a notebook).

        Raises
        ------
        ConfigurationError
            When the run has no result of that name (the message lists them).
        """
        if name not in self.results:
            ran = ", ".join(self.results)
            raise ConfigurationError(f"no {name!r} result for {self.deployment.name}; ran: {ran}")
        return self.results[name]

    def measurements(self) -> tuple[Measurement, ...]:
        """Every Measurement of every result, in registry order."""
        return tuple(m for result in self.results.values() for m in result.measurements())


def _plain(_what: str, work: Callable[[], T]) -> Pending[T]:
    return soon(work)


def _asking_ahead(
    reading: Reading,
    analyses: Sequence[Analysis[Any, Any]],
    settings: Mapping[str, Settings],
    begin: Start,
) -> Reading:
    """``reading`` with every analysis's first questions (:attr:`Analysis.questions`) started
    as one batch (:class:`~inference_obs.reading.context.Ahead`), in as few requests as the
    source allows; ``reading`` itself where no analysis declares any."""
    exprs: dict[Expr, None] = {}
    for a in analyses:
        if a.questions is not None:
            exprs.update(dict.fromkeys(a.questions(reading.of(a.name), settings[a.name])))
    if not exprs:
        return reading
    asked = list(exprs)
    batch = begin(f"{reading.deployment.name}: first questions", partial(reading.ask, asked))
    return replace(reading, ahead=Ahead(asked, batch))


def run_one(
    source: Source,
    deployment: Deployment,
    window: Window,
    *,
    step: float | None = None,
    settings: Mapping[str, Settings] | None = None,
    analyses: Sequence[Analysis[Any, Any]] = ANALYSES,
    start: Start | None = None,
) -> DeploymentResults:
    """Run ``analyses`` (default: all registered) once each on ``deployment``.

    ``settings`` are by analysis name (default: each one's defaults);
    ``start`` runs each analysis (default: alongside, in the entered
    :class:`~inference_obs.reading.schedule.Pool`'s threads).
    """
    chosen = dict(settings or {})
    begin = start or _plain
    reading = Reading(source, deployment, window, "", step=step)
    settings_of = {a.name: chosen.get(a.name) or a.settings() for a in analyses}
    reading = _asking_ahead(reading, analyses, settings_of, begin)
    started = {
        a.name: begin(
            f"{deployment.name}: {a.title.lower()}",
            partial(a.entry, reading.of(a.name), settings_of[a.name]),
        )
        for a in analyses
    }
    return DeploymentResults(
        deployment=deployment,
        window=window,
        step_seconds=step,
        results={name: pending.result() for name, pending in started.items()},
    )


def run(
    source: Source,
    deployments: Sequence[Deployment],
    windows: Mapping[str, Window],
    *,
    resolution: Resolution = "auto",
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    analyses: Sequence[Analysis[Any, Any]] = ANALYSES,
    start: Start | None = None,
) -> list[DeploymentResults]:
    """Every analysis once per deployment, each deployment over ``windows[name]``.

    Parameters
    ----------
    source
        Where the series come from (read-only).
    deployments
        Whose (with what is known of each besides its series: its GPU-hour
        price, its topology).
    windows
        Deployment name -> its window.
    resolution
        How the per-scrape analyses read each deployment (``auto``,
        ``scrape``, or a tile width in seconds; see
        :mod:`~inference_obs.reading.resolution`).
    settings
        Overrides by analysis name, then setting (``{"queueing":
        {"busy_threshold": 60}}``); checked before anything is read.
    analyses
        What to run (default: every registered analysis).
    start
        Runs each piece of work, given a short name for progress (default:
        alongside, in the entered :class:`~inference_obs.reading.schedule.Pool`'s
        threads; in order without one).
    """
    chosen = settings_for(settings or {})
    begin = start or _plain
    steps = {
        d.name: begin(
            f"{d.name}: resolution", partial(step_for, source, d, windows[d.name], resolution)
        )
        for d in deployments
    }

    def one(d: Deployment) -> DeploymentResults:
        return run_one(
            source,
            d,
            windows[d.name],
            step=steps[d.name].result(),
            settings=chosen,
            analyses=analyses,
            start=begin,
        )

    ran = [begin(f"{d.name}: analyses", partial(one, d)) for d in deployments]
    return [pending.result() for pending in ran]
