"""Memory: the largest sampled KV-cache usage and host working set, per replica and overall.

``vllm:kv_cache_usage_perc`` is the fraction (0-1, despite its name) of
logical KV blocks held by live requests: memory near the device's capacity
does not mean the KV cache was full (the engine reserves the pool up front;
weights and workspaces use the rest). ``container_memory_working_set_bytes``
(cAdvisor) is the host memory of the deployment's containers (``container!=""``:
the pod-level cgroup repeats its containers), CPU offload included. Both are
sampled maxima: a peak between two scrapes is not seen. A family without
series is ``no_data`` naming it, never 0: no series is not evidence that
memory was low.
"""

from __future__ import annotations

from inference_obs.analyses.unit import Analysis, NoSettings
from inference_obs.errors import NoDataError
from inference_obs.metrics import builders as b, dcgm, host, vllm
from inference_obs.metrics.family import Family, resolve_label
from inference_obs.metrics.host_queries import container_matchers
from inference_obs.query import Matcher
from inference_obs.reading.context import Reading
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Labels

__all__ = ["NO_SERIES", "MemoryResult", "memory", "per_replica_maximum"]

NO_SERIES = "No series is not evidence of absence: nothing was collected to say either way."
SAMPLED = "A sampled maximum: a peak between two scrapes is not seen."
KV_IN_USE = (
    "Fraction (0-1) of logical KV blocks held by live requests; the pool is reserved up "
    "front, so GPU memory near capacity does not mean a full KV cache."
)
WORKING_SET = (
    "Host memory (cAdvisor working set) of one container, CPU offload and active page "
    "cache included; GPU memory is DCGM_FI_DEV_FB_USED."
)


class MemoryResult(AnalysisResult):
    """Largest sampled memory use of one deployment over one window.

    Attributes
    ----------
    kv_cache_usage_max
        Largest sampled ``kv_cache_usage_perc`` of any engine (ratio 0-1).
    kv_cache_usage_max_per_replica
        The same per replica (its pod label).
    working_set_max
        Largest sampled working set of any one of the deployment's containers, bytes.
    working_set_max_per_replica
        The same per replica.
    """

    kv_cache_usage_max: Measurement
    kv_cache_usage_max_per_replica: dict[str, Measurement]
    working_set_max: Measurement
    working_set_max_per_replica: dict[str, Measurement]


def per_replica_maximum(
    r: Reading,
    statistic: str,
    family: Family,
    matchers: tuple[Matcher, ...],
    unit: str,
    caveats: tuple[str, ...],
) -> tuple[Measurement, dict[str, Measurement]]:
    """``max(max_over_time(x[w]))`` overall and per replica (``statistic[<replica>]``).

    The replica label is the first of the pod labels (then ``instance``) the
    series carry; no series gives an overall ``no_data`` and no replica.
    """
    w = r.seconds
    found = r.series(family.select(matchers))
    overall = b.maximum(family, matchers, w)
    if not found:
        return r.measure(statistic, overall, unit, caveats=(*caveats, NO_SERIES)), {}
    available = {name for labels in found for name in labels}
    try:
        pod = resolve_label((*dcgm.POD_LABELS, "instance"), available)
    except NoDataError:
        pod = "instance"
    by_replica = b.maximum(family, matchers, w, by=(pod,))
    every, grouped = r.ask([overall, by_replica])
    names = sorted({labels.get(pod, "") for labels in found})
    wanted = {Labels({pod: n}): f"{statistic}[{n}]" for n in names}
    measured = r.measure_by(wanted, by_replica, (pod,), unit, caveats=caveats, answer=grouped)
    total = r.measure(statistic, overall, unit, caveats=caveats, answer=every)
    return total, {labels[pod]: m for labels, m in measured.items()}


def _memory(r: Reading, settings: NoSettings) -> MemoryResult:
    """KV-cache usage (ratio 0-1) and container working set (bytes): the largest sample of
    the window, overall and per replica, each query evaluated at the window's end."""
    kv, kv_by = per_replica_maximum(
        r, "kv_cache_usage_max", vllm.KV_CACHE_USAGE, r.matchers, "ratio", (KV_IN_USE, SAMPLED)
    )
    ws, ws_by = per_replica_maximum(
        r,
        "working_set_max",
        host.CONTAINER_MEMORY_WORKING_SET,
        container_matchers(r.matchers),
        "bytes",
        (WORKING_SET, SAMPLED),
    )
    return MemoryResult(
        kv_cache_usage_max=kv,
        kv_cache_usage_max_per_replica=kv_by,
        working_set_max=ws,
        working_set_max_per_replica=ws_by,
    )


memory = Analysis(
    name="memory",
    title="Memory",
    entry=_memory,
    result=MemoryResult,
    settings=NoSettings,
    summary="Largest sampled KV-cache usage and container working set, per replica.",
)
