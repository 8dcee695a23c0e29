"""Aligning application samples with GPU samples: replicas, timestamps and tolerance.

vLLM and dcgm-exporter are scraped independently, so a vLLM sample and the
GPU samples of the same replica are matched by the labels they share and by
the nearest timestamp within a tolerance. Used by the queueing and boundary
analyses.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from inference_obs.deployment import Deployment
from inference_obs.metrics import dcgm
from inference_obs.samples import Labels, SampleSet, is_stale

__all__ = ["interval_ms", "nearest", "replica_keys", "replica_of", "sum_by_replica"]


def replica_keys(deployment: Deployment, app: SampleSet, gpu: SampleSet) -> tuple[str, ...]:
    """Label names identifying a replica on both app and GPU series."""
    common = {k for labels in app.labels for k in labels} & {k for l_ in gpu.labels for k in l_}
    wanted = [m.label for m in deployment.gpu_matchers] + list(dcgm.POD_LABELS)
    return tuple(dict.fromkeys(k for k in wanted if k in common))


def replica_of(labels: Labels, keys: tuple[str, ...]) -> str:
    """The replica a series belongs to: its values of ``keys`` joined (``all`` when none)."""
    return "/".join(labels[k] for k in keys if k in labels) or "all"


def sum_by_replica(samples: SampleSet, keys: tuple[str, ...]) -> dict[str, dict[int, float]]:
    """Per replica: timestamp (ms) -> value summed over its series; stale and NaN dropped."""
    out: dict[str, dict[int, float]] = {}
    for i, labels in enumerate(samples.labels):
        lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
        values = samples.values[lo:hi]
        keep = ~is_stale(values) & ~np.isnan(values)
        target = out.setdefault(replica_of(labels, keys), {})
        for t, v in zip(samples.t_ms[lo:hi][keep].tolist(), values[keep].tolist(), strict=True):
            target[t] = target.get(t, 0.0) + v
    return out


def interval_ms(samples: SampleSet) -> float:
    """Median spacing of raw samples over every series, ms (0 when unknown)."""
    gaps = [
        np.diff(samples.t_ms[int(samples.offsets[i]) : int(samples.offsets[i + 1])])
        for i in range(len(samples))
    ]
    joined = np.concatenate(gaps) if gaps else np.zeros(0)
    return float(np.median(joined)) if joined.size else 0.0


def nearest(
    times: npt.NDArray[np.int64], values: npt.NDArray[np.float64], at: int, tolerance: float
) -> float | None:
    """The value of the sample nearest ``at`` (ms) within ``tolerance`` (ms), else None."""
    if not times.size:
        return None
    i = int(np.searchsorted(times, at))
    best: float | None = None
    gap = math.inf
    for j in (i - 1, i):
        if 0 <= j < times.size and abs(int(times[j]) - at) < gap:
            gap, best = abs(int(times[j]) - at), float(values[j])
    return best if gap <= tolerance else None
