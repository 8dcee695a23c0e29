"""What one deployment's data holds: family names, the DCGM label scheme, shared GPUs.

:func:`discover` asks a source, once per deployment and window, what a
:class:`~inference_obs.source.view.ViewSource` needs to read the data as it is:

1. the metric names with samples in the window (``label_values(__name__)``,
   one request a window, remembered by a
   :class:`~inference_obs.source.remembering.RememberingSource` for every
   deployment); a family with an older name present and the newest absent is
   read under the older one. Where both are present (vLLM 0.9.2 to 0.10 export
   both; a fleet may mix versions), the deployment's own series decide: the
   newest name it has a series of wins;
2. whose pod the DCGM series name (``group by`` the pod labels of the first GPU
   family present, across the fleet: the scheme is the scrape's, not the
   deployment's);
3. the deployment's GPUs whose series repeat once per pod (``group by`` GPU
   identity and pod);
4. whether the deployment's engine is SGLang: declared so, or found so (the
   fleet has ``sglang:`` names, and the deployment has ``sglang:`` series and no
   ``vllm:`` ones). Then the vLLM families the analyses ask for are read as
   their SGLang stand-ins (:data:`~inference_obs.metrics.sglang_reading.STAND_INS`).

:func:`view` wraps a source in that view; :class:`~inference_obs.reading.context.Reading`
does it for every analysis.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from inference_obs.deployment import Deployment
from inference_obs.errors import NoDataError
from inference_obs.metrics import FAMILIES, dcgm
from inference_obs.metrics.dcgm_labels import (
    GPU_IDENTITY,
    WORKLOAD_LABELS,
    GpuLabelScheme,
    in_workload_terms,
    scheme_of,
    shared_gpus,
    workload_labels,
)
from inference_obs.metrics.family import Family
from inference_obs.metrics.renames import exposed_names, probe_name, renames
from inference_obs.metrics.sglang_reading import STAND_INS
from inference_obs.query import Aggregate, Expr, Matcher, Selector, last_over_time
from inference_obs.samples import Labels, Vector, Window
from inference_obs.source.base import Source
from inference_obs.source.view import Found, ViewSource

__all__ = ["PRESENCE", "discover", "view"]

#: DCGM families whose series show which GPUs exist and whose pod they name, in order of
#: preference: the first the data has is read.
PRESENCE: tuple[Family, ...] = (
    dcgm.GPU_UTIL,
    dcgm.FB_USED,
    dcgm.POWER_USAGE,
    dcgm.GPU_TEMP,
    dcgm.PROF_GR_ENGINE_ACTIVE,
)


def view(source: Source, deployment: Deployment, window: Window) -> ViewSource:
    """``source`` read as ``deployment``'s data over ``window`` holds its series.

    A view of another deployment or window is unwrapped first: views never stack.
    """
    while isinstance(source, ViewSource):
        source = source.source
    return ViewSource(source, deployment.name, window, partial(_found, deployment, window))


def _found(deployment: Deployment, window: Window, source: Source) -> Found:
    return discover(source, deployment, window)


def discover(source: Source, deployment: Deployment, window: Window) -> Found:
    """What ``deployment``'s data holds over ``window`` (see the module)."""
    names = frozenset(source.label_values("__name__", window))
    chosen = _renames(source, deployment, window, names)
    stand_ins = STAND_INS if _runs_sglang(source, deployment, window, names) else {}
    gpu = _gpu_family(names)
    if gpu is None:
        return Found(chosen, stand_ins=stand_ins)
    scheme = scheme_of(_labels(source, _grouping(gpu, (), window, _POD_LABELS), window))
    asked = _grouping(gpu, deployment.gpu_matchers, window, (*GPU_IDENTITY, "pod"))
    sets = _labels(source, in_workload_terms(asked, scheme, dedupe=False), window)
    if scheme is GpuLabelScheme.EXPORTED:
        sets = tuple(workload_labels(one) for one in sets)
    return Found(chosen, scheme, tuple(shared_gpus(sets)), stand_ins)


def _runs_sglang(
    source: Source, deployment: Deployment, window: Window, names: frozenset[str]
) -> bool:
    """Whether ``deployment``'s engine is SGLang, declared or found (see the module)."""
    if deployment.engine.name == "sglang":
        return True
    if not any(name.startswith("sglang:") for name in names):
        return False
    return _exports(source, deployment, window, "sglang") and not _exports(
        source, deployment, window, "vllm"
    )


def _exports(source: Source, deployment: Deployment, window: Window, prefix: str) -> bool:
    """Whether ``deployment`` has a series named ``prefix:...`` in ``window``."""
    named = Matcher.regex("__name__", f"{prefix}:.+")
    return bool(source.series(Selector(None, (*deployment.matchers, named)), window))


#: The pod labels of either scheme.
_POD_LABELS = (*WORKLOAD_LABELS, *(f"exported_{label}" for label in WORKLOAD_LABELS))


def _renames(
    source: Source, deployment: Deployment, window: Window, names: frozenset[str]
) -> dict[str, str]:
    """Per family read under an older name: newest -> that name (see the module)."""
    chosen = renames(names)
    for family in FAMILIES:
        present = [n for n in exposed_names(family) if probe_name(family, n) in names or n in names]
        if len(present) < 2:
            continue
        matchers = deployment.gpu_matchers if family.exporter == "dcgm" else deployment.matchers
        for name in present:
            if source.series(Selector(probe_name(family, name), tuple(matchers)), window):
                if name != family.name:
                    chosen[family.name] = name
                else:
                    chosen.pop(family.name, None)
                break
    return chosen


def _gpu_family(names: frozenset[str]) -> Selector | None:
    """The selector of the first :data:`PRESENCE` family the data has, under the name it has."""
    for family in PRESENCE:
        try:
            return family.resolve(names).select()
        except NoDataError:
            continue
    return None


def _grouping(
    gpu: Selector, matchers: Sequence[Matcher], window: Window, by: tuple[str, ...]
) -> Expr:
    """``group by (by) (last_over_time(gpu{matchers}[window]))``: one label set per group."""
    return Aggregate("group", last_over_time(gpu.where(*matchers).over(window.seconds)), by=by)


def _labels(source: Source, expr: Expr, window: Window) -> tuple[Labels, ...]:
    answer = source.instant(expr, window.end_s).value
    return answer.labels if isinstance(answer, Vector) else ()
