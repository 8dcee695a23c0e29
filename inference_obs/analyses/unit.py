"""An analysis as one unit: its name, entry, result, settings and report section.

Each analysis module declares one :class:`Analysis`; the registry
(:mod:`~inference_obs.analyses.registry`) lists them, and a run
(:mod:`~inference_obs.analyses.run`) executes each once per deployment and
hands the results to everything that reads them (comparison checks,
published aggregates, figures, the report). Calling an Analysis runs it
alone::

    result = latency(source, deployment, window)
    result = queueing(source, deployment, window, busy_threshold=60.0)

Keyword arguments other than the reading's own (``step``) are its settings,
checked by its settings model. What is known of the deployment besides its
series (its GPU-hour price, its topology) is the deployment's
(:meth:`~inference_obs.deployment.Deployment.with_facts`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError
from inference_obs.query import Expr
from inference_obs.reading.context import Reading, Source
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Window

__all__ = ["Analysis", "NoSettings", "Settings"]


class Settings(BaseModel):
    """Base of an analysis's settings: its thresholds, each with its unit and meaning.

    Every field has the default the report uses; a field's description says
    its unit and what it decides.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")


class NoSettings(Settings):
    """An analysis with nothing to set."""


S = TypeVar("S", bound=Settings)
R = TypeVar("R", bound=AnalysisResult)


@dataclass(frozen=True)
class Analysis(Generic[S, R]):
    """One registered analysis.

    Attributes
    ----------
    name
        Its name: the middle part of its Measurement keys, its settings' prefix
        (``--set name.field=value``) and its results' key.
    title
        The heading of its report section.
    entry
        The function that answers it from one :class:`~inference_obs.reading.context.Reading`
        and its settings.
    result
        The model of what it returns.
    settings
        The model of its settings (defaults: what the report uses).
    summary
        One line saying what it answers, for listings.
    questions
        The instant questions at the window's end its first round asks, known
        before anything is read (None: none declared). A run asks every
        analysis's in one batch alongside the analyses, and the analysis's
        :meth:`~inference_obs.reading.context.Reading.ask` of them takes the
        answers from it: fewer requests, the same answers.
    """

    name: str
    title: str
    entry: Callable[[Reading, S], R]
    result: type[R]
    settings: type[S]
    summary: str
    questions: Callable[[Reading, S], Sequence[Expr]] | None = None

    def __call__(
        self,
        source: Source,
        deployment: Deployment,
        window: Window,
        *,
        step: float | None = None,
        settings: S | None = None,
        **overrides: Any,
    ) -> R:
        """Run the analysis alone on ``deployment`` over ``window``.

        ``overrides`` are fields of its settings (over ``settings``, or the
        defaults).

        Raises
        ------
        ConfigurationError
            When an override is not a field of its settings, or not a valid value.
        """
        chosen = self.configure(overrides, settings)
        reading = Reading(source, deployment, window, self.name, step=step)
        return self.entry(reading, chosen)

    def configure(self, overrides: Mapping[str, Any], base: S | None = None) -> S:
        """Its settings: ``base`` (or the defaults) with ``overrides``, checked.

        Raises
        ------
        ConfigurationError
            Naming the setting and the analysis when one is unknown or invalid.
        """
        start = base if base is not None else self.settings()
        if not overrides:
            return start
        try:
            return self.settings.model_validate({**start.model_dump(), **overrides})
        except ValidationError as exc:
            problems = "; ".join(
                f"{self.name}.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                for e in exc.errors()
            )
            known = ", ".join(f"{self.name}.{f}" for f in self.settings.model_fields) or "none"
            raise ConfigurationError(
                f"invalid settings for the {self.name} analysis: {problems} (its settings: {known})"
            ) from None
