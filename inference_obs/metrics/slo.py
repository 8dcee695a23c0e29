"""Latency objectives as written on the command line: ``ttft<=2s``, ``e2e<=30s@99%``.

A target names a latency histogram (``ttft``, ``itl``, ``e2e``, ``tpot``,
``queue``, ``prefill``, ``decode``: the keys of the latency analysis), a
threshold in seconds, and optionally an objective: the share of
observations that must meet the threshold (``@99%`` or ``@0.99``). With
an objective, the error budget is ``1 - objective`` and the budget spent
over a window is ``(1 - attainment) / (1 - objective)``.
"""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, ConfigDict, Field

from inference_obs.errors import ConfigurationError
from inference_obs.metrics import vllm
from inference_obs.metrics.family import Family

__all__ = ["DEFAULT_SLOS", "DEFAULT_TARGETS", "FAMILIES", "SloTarget", "parse_target"]

#: Histograms a target may name, by the latency analysis's keys (all in seconds).
FAMILIES: dict[str, Family] = {
    "ttft": vllm.TIME_TO_FIRST_TOKEN,
    "itl": vllm.INTER_TOKEN_LATENCY,
    "tpot": vllm.REQUEST_TIME_PER_OUTPUT_TOKEN,
    "e2e": vllm.E2E_REQUEST_LATENCY,
    "queue": vllm.REQUEST_QUEUE_TIME,
    "prefill": vllm.REQUEST_PREFILL_TIME,
    "decode": vllm.REQUEST_DECODE_TIME,
}
#: Targets a report uses when none are given: interactive-serving latencies, each at 99%.
#: Two are vLLM bucket bounds (ITL 50 ms, E2E 30 s), so their attainment is exact; TTFT
#: 2 s falls between the 1 s and 2.5 s bounds, so its attainment is an interval.
DEFAULT_TARGETS = ("ttft<=2s@99%", "itl<=50ms@99%", "e2e<=30s@99%")

#: Seconds per unit as (multiply, divide): milliseconds are divided by 1000, which rounds
#: once, so "50ms" is the same float as an ``le="0.05"`` bound (50 * 1e-3 need not be).
_UNITS = {"ms": (1.0, 1000.0), "s": (1.0, 1.0), "m": (60.0, 1.0)}
_TEXT = re.compile(
    r"^\s*(?P<metric>[a-z0-9_]+)\s*<=\s*(?P<value>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
    r"\s*(?P<unit>ms|s|m)\s*(?:@\s*(?P<objective>[0-9]*\.?[0-9]+)\s*(?P<percent>%)?)?\s*$"
)


class SloTarget(BaseModel):
    """One latency objective.

    Attributes
    ----------
    metric
        The latency histogram's key (``ttft``, ``itl``, ``e2e``, ...).
    threshold_s
        The latency an observation must not exceed, seconds (``<=``).
    objective
        The share of observations (ratio, 0-1 exclusive) that must meet it; None: no
        objective, so no error budget.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: str = Field(description="Latency histogram key: ttft, itl, tpot, e2e, queue, ...")
    threshold_s: float = Field(gt=0, description="Threshold, seconds (observation <= it).")
    objective: float | None = Field(
        None, gt=0, lt=1, description="Share that must meet the threshold (ratio 0-1)."
    )

    @property
    def family(self) -> Family:
        """The histogram the target reads."""
        return FAMILIES[self.metric]

    @property
    def name(self) -> str:
        """The target in Measurement keys and rule names: ``ttft_le_2s``, ``itl_le_50ms``."""
        ms = self.threshold_s * 1000.0
        if self.threshold_s < 1 and math.isclose(ms, round(ms)):
            return f"{self.metric}_le_{round(ms)}ms"
        return f"{self.metric}_le_{self.threshold_s:g}s".replace(".", "_")

    def __str__(self) -> str:
        return self.text

    @property
    def text(self) -> str:
        """The target as a person writes it: ``ttft<=2s@99%``."""
        ms = self.threshold_s * 1000.0
        limit = (
            f"{ms:g}ms"
            if self.threshold_s < 1 and math.isclose(ms, round(ms))
            else f"{self.threshold_s:g}s"
        )
        goal = "" if self.objective is None else f"@{self.objective * 100:g}%"
        return f"{self.metric}<={limit}{goal}"


def parse_target(text: str) -> SloTarget:
    """``METRIC<=DURATION[@OBJECTIVE]`` as a :class:`SloTarget`.

    DURATION is a number with ``ms``, ``s`` or ``m``; OBJECTIVE a percentage
    (``99%``, ``99.9%``) or a ratio (``0.99``), strictly between 0 and 1.

    Examples
    --------
    >>> parse_target("ttft<=2s@99%")
    SloTarget(metric='ttft', threshold_s=2.0, objective=0.99)
    >>> parse_target("itl<=50ms").threshold_s
    0.05

    Raises
    ------
    ConfigurationError
        Naming the text and what was expected.
    """
    found = _TEXT.match(text) if isinstance(text, str) else None
    known = ", ".join(FAMILIES)
    if found is None:
        raise ConfigurationError(
            f"SLO {text!r}: expected METRIC<=DURATION[@OBJECTIVE], e.g. ttft<=2s@99% "
            f"(metrics: {known}; units ms, s, m)"
        )
    metric = found["metric"]
    if metric not in FAMILIES:
        raise ConfigurationError(f"SLO {text!r}: no latency metric {metric!r} (metrics: {known})")
    times, per = _UNITS[found["unit"]]
    threshold = float(found["value"]) * times / per
    objective = None
    if found["objective"] is not None:
        objective = float(found["objective"]) / (100.0 if found["percent"] else 1.0)
        if not 0 < objective < 1:
            raise ConfigurationError(
                f"SLO {text!r}: the objective must lie strictly between 0 and 100%"
            )
    if not math.isfinite(threshold) or threshold <= 0:
        raise ConfigurationError(f"SLO {text!r}: the threshold must be above 0")
    return SloTarget(metric=metric, threshold_s=threshold, objective=objective)


#: :data:`DEFAULT_TARGETS` parsed.
DEFAULT_SLOS: tuple[SloTarget, ...] = tuple(parse_target(text) for text in DEFAULT_TARGETS)
