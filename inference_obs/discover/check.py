"""Selectors that match nothing, named where a report reads "no data".

A deployment whose selector matches no series gives a report in which every
number reads "no data". :func:`unmatched_selectors` asks, per deployment,
whether its selector finds any series of its engine and whether its GPU
selector finds any DCGM series in the window, and names the selector (as
PromQL) and the families it tried when one does not.
"""

from __future__ import annotations

from collections.abc import Sequence

from inference_obs.deployment import Deployment
from inference_obs.discover.inventory import ENGINE_FAMILIES, GPU_FAMILIES
from inference_obs.metrics import vllm
from inference_obs.metrics.family import Family
from inference_obs.metrics.renames import exposed_names
from inference_obs.query import Matcher, Selector, to_promql
from inference_obs.samples import Window
from inference_obs.source.base import Source

__all__ = ["unmatched_selectors"]

# Families one of which each engine process exports whatever its version and flags.
_APP: dict[str, tuple[Family, ...]] = {
    "vllm": (ENGINE_FAMILIES["vllm"][0], vllm.CACHE_CONFIG_INFO, vllm.GENERATION_TOKENS),
    "sglang": (ENGINE_FAMILIES["sglang"][0],),
}


def _matches(
    source: Source, families: Sequence[Family], matchers: tuple[Matcher, ...], window: Window
) -> bool:
    return any(
        source.series(Selector(name, matchers), window)
        for family in families
        for name in exposed_names(family)
    )


def _shown(matchers: tuple[Matcher, ...]) -> str:
    """``{namespace="llm",pod=~"pro-.*"}``: the matchers as PromQL."""
    return to_promql(Selector("x", matchers))[1:]


def unmatched_selectors(
    source: Source, deployments: Sequence[Deployment], window: Window
) -> list[str]:
    """One line per selector that matches no series in ``window``; empty when all match.

    Parameters
    ----------
    source
        Where the report will read.
    deployments
        Their ``selector`` is checked against the engine's families
        (``vllm:num_requests_running``, ``vllm:cache_config_info``, ...), the
        GPU selector (the selector when none is given) against DCGM's.
    window
        The window the report reads.

    Returns
    -------
    list of str
        ``PRO: selector {pod=~"pro-modle-.*"} matches no vllm series (...) from
        ... to ...``: the deployment, the selector and the families tried.
    """
    span = f"from {window.start.isoformat()} to {window.end.isoformat()}"
    out = []
    for d in deployments:
        app = _APP[d.engine.name]
        if not _matches(source, app, d.matchers, window):
            families = ", ".join(f.name for f in app)
            out.append(
                f"{d.name}: selector {_shown(d.matchers)} matches no {d.engine.name} series "
                f"({families}) {span}; its numbers read no data"
            )
        if not _matches(source, GPU_FAMILIES, d.gpu_matchers, window):
            which = "GPU selector" if d.gpu_selector is not None else "selector"
            families = ", ".join(f.name for f in GPU_FAMILIES)
            out.append(
                f"{d.name}: {which} {_shown(d.gpu_matchers)} matches no DCGM series "
                f"({families}) {span}; its GPU numbers read no data"
            )
    return out
