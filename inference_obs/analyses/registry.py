"""Every analysis a run executes, in report order: the one list to add an analysis to.

Each entry is an :class:`~inference_obs.analyses.unit.Analysis` declared in
its own module. A run (:mod:`~inference_obs.analyses.run`) executes each once
per deployment; settings are addressed by an analysis's name
(``queueing.busy_threshold``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from inference_obs.analyses.activity import activity
from inference_obs.analyses.bottleneck import bottleneck
from inference_obs.analyses.boundaries import boundaries
from inference_obs.analyses.cache import cache
from inference_obs.analyses.collection import collection
from inference_obs.analyses.configuration import configuration
from inference_obs.analyses.cost import cost
from inference_obs.analyses.error_signals import errors
from inference_obs.analyses.gpu import gpu
from inference_obs.analyses.latency import latency
from inference_obs.analyses.memory import memory
from inference_obs.analyses.queueing import queueing
from inference_obs.analyses.replicas import replicas
from inference_obs.analyses.rolling import rolling_itl, rolling_quantiles
from inference_obs.analyses.shapes import shapes
from inference_obs.analyses.slo import slo
from inference_obs.analyses.throughput import throughput
from inference_obs.analyses.unit import Analysis, Settings
from inference_obs.errors import ConfigurationError

__all__ = ["ANALYSES", "analysis", "parse_settings", "settings_for"]

#: Every registered analysis, in report order.
ANALYSES: tuple[Analysis[Any, Any], ...] = (
    collection,
    shapes,
    latency,
    slo,
    replicas,
    throughput,
    cache,
    gpu,
    queueing,
    memory,
    errors,
    bottleneck,
    configuration,
    boundaries,
    cost,
    rolling_quantiles,
    rolling_itl,
    activity,
)


def analysis(name: str) -> Analysis[Any, Any]:
    """The registered analysis called ``name``.

    Raises
    ------
    ConfigurationError
        When no analysis has that name (the message lists them).
    """
    for one in ANALYSES:
        if one.name == name:
            return one
    known = ", ".join(a.name for a in ANALYSES)
    raise ConfigurationError(f"no analysis is called {name!r}; the analyses: {known}")


def settings_for(overrides: Mapping[str, Mapping[str, Any]]) -> dict[str, Settings]:
    """Each registered analysis's settings: its defaults with ``overrides[name]`` applied.

    Raises
    ------
    ConfigurationError
        For an unknown analysis name, or a setting its model refuses.
    """
    for name in overrides:
        analysis(name)  # an unknown name is an error, not a setting silently ignored
    return {a.name: a.configure(overrides.get(a.name, {})) for a in ANALYSES}


def parse_settings(assignments: Iterable[str]) -> dict[str, dict[str, str]]:
    """``analysis.setting=value`` texts (the CLI's ``--set``) as overrides by analysis.

    Values stay text: each analysis's settings model converts and checks them.

    Examples
    --------
    >>> parse_settings(["queueing.busy_threshold=60", "throughput.kv_full=0.95"])
    {'queueing': {'busy_threshold': '60'}, 'throughput': {'kv_full': '0.95'}}

    Raises
    ------
    ConfigurationError
        When a text is not ``analysis.setting=value``.
    """
    out: dict[str, dict[str, str]] = {}
    for text in assignments:
        target, sep, value = text.partition("=")
        name, dot, field = target.strip().partition(".")
        if not sep or not dot or not name or not field:
            raise ConfigurationError(
                f"--set {text!r}: write analysis.setting=value, e.g. queueing.busy_threshold=60"
            )
        out.setdefault(name, {})[field] = value.strip()
    return out
