"""What the GPUs, the host CPUs and the PCIe links did at each app scrape of a replica.

Each scrape of a replica's vLLM server (``num_requests_waiting`` and
``num_requests_running``, summed over its engines, read raw) becomes one row
of a :class:`Track`. GPU gauges are aligned as :mod:`~inference_obs.analyses.queueing`
aligns them: reduced per replica by the server
(:func:`~inference_obs.analyses.alignment.gpu_per_replica`, ``avg by``
replica every GPU scrape interval, each GPU at its latest sample at or before
the step: the mean over the GPUs that reported), taken at the step aligned
with the scrape within the tolerance:

- ``duty``: the share of time the GPUs computed (ratio 0-1);
- ``pcie_rx``, ``pcie_tx``: host-to-device and device-to-host bytes/s.

Host counters give, at each scrape time, the rate (per second) of the
scrape-to-scrape segment that holds it, summed over the replica's series: a
drop between two samples is a restart, and the value after it is the
increase, as in Prometheus's ``rate()``; host series are read raw. Rows
outside every series' samples (beyond the tolerance) are NaN: no evidence,
never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from inference_obs.analyses.alignment import (
    gpu_per_replica,
    interval_ms,
    nearest,
    replica_keys,
    replica_of,
    sum_by_replica,
)
from inference_obs.deployment import Deployment
from inference_obs.metrics import dcgm, host, vllm
from inference_obs.metrics.family import Family
from inference_obs.metrics.host_queries import container_matchers
from inference_obs.query import Expr, Matcher, Selector
from inference_obs.samples import Labels, SampleSet, Window, is_stale
from inference_obs.source.base import Source

__all__ = [
    "Evidence",
    "Points",
    "Track",
    "by_label",
    "counter_rates",
    "gather",
    "labels_of",
    "median",
    "nearest_mean",
    "nearest_total",
    "pod_matchers",
    "ratio",
    "series_by_replica",
    "server_matchers",
]

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
PCIE = (dcgm.PROF_PCIE_RX_BYTES, dcgm.PROF_PCIE_TX_BYTES)
Points = list[tuple[Ints, Floats]]
"""Series of one replica: each one's sample times (ms) and values, stale and NaN dropped."""


def series_by_replica(samples: SampleSet, keys: tuple[str, ...]) -> dict[str, Points]:
    """The series of ``samples`` grouped by replica (``keys``' values, as queueing names them)."""
    out: dict[str, Points] = {}
    for i, labels in enumerate(samples.labels):
        out.setdefault(replica_of(labels, keys), []).append(_points(samples, i))
    return out


def by_label(samples: SampleSet, label: str) -> dict[str, Points]:
    """The series of ``samples`` grouped by the value of ``label`` (series without it dropped)."""
    out: dict[str, Points] = {}
    for i, labels in enumerate(samples.labels):
        if label in labels:
            out.setdefault(labels[label], []).append(_points(samples, i))
    return out


def _points(samples: SampleSet, i: int) -> tuple[Ints, Floats]:
    lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
    values = samples.values[lo:hi]
    keep = ~is_stale(values) & ~np.isnan(values)
    return samples.t_ms[lo:hi][keep], values[keep]


def _aligned(points: Points, at: Ints, tolerance_ms: float) -> list[list[float]]:
    """Per time in ``at``, the nearest sample of each series that has one within tolerance."""
    out = []
    for t in at.tolist():
        found = [nearest(times, values, t, tolerance_ms) for times, values in points]
        out.append([v for v in found if v is not None])
    return out


def nearest_mean(points: Points, at: Ints, tolerance_ms: float) -> Floats:
    """Per time in ``at``, the mean over series of each one's nearest sample within tolerance."""
    return np.array([sum(g) / len(g) if g else np.nan for g in _aligned(points, at, tolerance_ms)])


def nearest_total(points: Points, at: Ints, tolerance_ms: float) -> Floats:
    """Per time in ``at``, the sum over series of each one's nearest sample within tolerance."""
    return np.array([sum(g) if g else np.nan for g in _aligned(points, at, tolerance_ms)])


def counter_rates(points: Points, at: Ints, tolerance_ms: float) -> Floats:
    """Per time in ``at``, the per-second increase of the segment holding it, summed over series.

    A segment is the span between two neighbouring samples of one series;
    times within ``tolerance_ms`` before the first or after the last sample
    take the nearest segment. NaN where no series covers a time.
    """
    total = np.zeros(at.size)
    seen = np.zeros(at.size, dtype=bool)
    for times, values in points:
        if times.size < 2:
            continue
        steps = np.diff(values)
        grown = np.concatenate(([0.0], np.cumsum(np.where(steps < 0, values[1:], steps))))
        k = np.clip(np.searchsorted(times, at, side="right") - 1, 0, times.size - 2)
        rate = (grown[k + 1] - grown[k]) / ((times[k + 1] - times[k]) / 1000.0)
        inside = (at >= times[0] - tolerance_ms) & (at <= times[-1] + tolerance_ms)
        total += np.where(inside, rate, 0.0)
        seen |= inside
    out: Floats = np.where(seen, total, np.nan)
    return out


@dataclass(frozen=True, slots=True)
class Track:
    """One replica's app scrapes and what was aligned with each (arrays of equal length).

    Attributes
    ----------
    times_ms
        App scrape times, unix ms.
    waiting, running
        Requests, summed over the replica's engines.
    duty
        Share of time the GPUs computed, mean over GPUs (ratio 0-1).
    pcie_rx, pcie_tx
        PCIe rates, mean over GPUs (bytes/s).
    process, container
        Cores used by the server process and by its containers.
    throttled, periods
        CFS periods throttled and elapsed, per second.
    limit
        CPU limit of the containers (cores).
    node_busy, node_all
        Non-idle and all CPU-seconds per second of the replica's nodes.
    """

    times_ms: Ints
    waiting: Floats
    running: Floats
    duty: Floats
    pcie_rx: Floats
    pcie_tx: Floats
    process: Floats
    container: Floats
    throttled: Floats
    periods: Floats
    limit: Floats
    node_busy: Floats
    node_all: Floats

    def boundary(self, idle_below: float) -> npt.NDArray[np.bool_]:
        """Rows with work present (waiting + running > 0) while the GPUs computed less."""
        out: npt.NDArray[np.bool_] = (self.waiting + self.running > 0) & (self.duty < idle_below)
        return out


def ratio(top: Floats, bottom: Floats) -> Floats:
    """``top / bottom`` element-wise, NaN where ``bottom`` is not above 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out: Floats = np.where(bottom > 0, top / bottom, np.nan)
    return out


def median(values: Floats, rows: Sequence[int] | slice) -> float | None:
    """Median of ``values[rows]`` ignoring NaN; None when every one is NaN."""
    picked = values[rows]
    picked = picked[~np.isnan(picked)]
    return float(np.median(picked)) if picked.size else None


def labels_of(samples: SampleSet, keys: tuple[str, ...]) -> dict[str, Labels]:
    """Per replica, the ``keys`` labels that name it (from its first series)."""
    out: dict[str, Labels] = {}
    for labels in samples.labels:
        out.setdefault(
            replica_of(labels, keys), Labels({k: labels[k] for k in keys if k in labels})
        )
    return out


def server_matchers(matchers: Sequence[Matcher]) -> tuple[Matcher, ...]:
    """The deployment's matchers that the server process's own series can carry.

    ``process_cpu_seconds_total`` has the scrape labels of the vLLM target but
    not vLLM's engine labels (``model_name``, ``engine``).
    """
    return tuple(m for m in matchers if m.label not in vllm.STANDARD_LABELS)


def pod_matchers(matchers: Sequence[Matcher]) -> tuple[Matcher, ...]:
    """The deployment's matchers on labels cAdvisor series carry (pod, namespace, ...)."""
    return tuple(m for m in matchers if m.label in host.CADVISOR_LABELS)


@dataclass(frozen=True, slots=True)
class Evidence:
    """Every replica's :class:`Track`, and what it was read from.

    Attributes
    ----------
    tracks
        By replica name (the values of ``keys``, ``/``-joined).
    names
        By replica, the labels that name it: add them as matchers to select it.
    keys
        Label names identifying a replica on both app and GPU series.
    tolerance_ms
        Largest distance of an aligned GPU step (see
        :meth:`~inference_obs.analyses.alignment.GpuSteps.at`) or host
        sample from its app sample.
    selectors
        Every selector read (waiting, running and the duty family first),
        for the provenance; the GPU families' are read through ``queries``.
    queries
        The server-side reductions the GPU families were read with (``avg
        by`` replica per family), for rechecking.
    read_raw
        The selectors whose raw samples were read (all but the GPU families').
    missing
        Families (by name) without any series for the deployment.
    """

    tracks: dict[str, Track]
    names: dict[str, Labels]
    keys: tuple[str, ...]
    tolerance_ms: float
    selectors: tuple[Selector, ...]
    queries: tuple[Expr, ...]
    read_raw: tuple[Selector, ...]
    missing: tuple[str, ...]


def _hosts(gpu: Sequence[Labels], keys: tuple[str, ...]) -> dict[str, set[str]]:
    """Per replica, the host names its GPU series (their label sets) carry."""
    out: dict[str, set[str]] = {}
    for labels in gpu:
        name = next((labels[k] for k in dcgm.HOSTNAME_LABELS if k in labels), None)
        if name is not None:
            out.setdefault(replica_of(labels, keys), set()).add(name)
    return out


def _node_points(
    source: Source, window: Window, hosts: set[str]
) -> tuple[dict[str, Points], dict[str, Points], list[Selector]]:
    """node_exporter CPU series by host name: non-idle modes, every mode, and the selectors."""
    for label in host.NODE_LABELS:
        if not hosts:
            break
        every = host.NODE_CPU_SECONDS.select([Matcher.one_of(label, sorted(hosts))])
        if source.series(every, window):
            busy = Selector(every.metric, (*every.matchers, Matcher.not_equal("mode", "idle")))
            return (
                by_label(source.raw(busy, window), label),
                by_label(source.raw(every, window), label),
                [busy, every],
            )
    return {}, {}, []


def gather(
    source: Source,
    deployment: Deployment,
    window: Window,
    duty: Family,
    scale: float,
    tolerance_s: float | None,
) -> Evidence:
    """Read every family the boundary analysis needs and align it per replica.

    ``duty`` is the GPU family read as the computing share, times ``scale``
    (0.01 for GPU_UTIL's percent). The tolerance defaults, as in queueing,
    to the larger of the app's median scrape interval and the duty family's
    scrape interval. App and host series are read raw; the GPU families
    (``duty``, PCIe rx and tx) per replica by the server, two requests each.
    """
    m, gm = deployment.matchers, deployment.gpu_matchers
    pods = container_matchers(pod_matchers(m))
    app = {
        vllm.NUM_REQUESTS_WAITING: vllm.NUM_REQUESTS_WAITING.select(m),
        vllm.NUM_REQUESTS_RUNNING: vllm.NUM_REQUESTS_RUNNING.select(m),
    }
    gpus = {family: family.select(gm) for family in (duty, *PCIE)}
    on_host = {
        host.PROCESS_CPU_SECONDS: host.PROCESS_CPU_SECONDS.select(server_matchers(m)),
        host.CONTAINER_CPU_USAGE: host.CONTAINER_CPU_USAGE.select(pods),
        host.CONTAINER_CPU_CFS_THROTTLED_PERIODS: host.CONTAINER_CPU_CFS_THROTTLED_PERIODS.select(
            pods
        ),
        host.CONTAINER_CPU_CFS_PERIODS: host.CONTAINER_CPU_CFS_PERIODS.select(pods),
        host.CONTAINER_SPEC_CPU_QUOTA: host.CONTAINER_SPEC_CPU_QUOTA.select(pods),
        host.CONTAINER_SPEC_CPU_PERIOD: host.CONTAINER_SPEC_CPU_PERIOD.select(pods),
    }
    raw = {family: source.raw(selector, window) for family, selector in (app | on_host).items()}
    waiting = raw[vllm.NUM_REQUESTS_WAITING]
    # Label sets only: the GPU samples themselves are reduced per replica by the server.
    gpu_labels = source.series(gpus[duty], window)
    keys = replica_keys(deployment, waiting.labels, gpu_labels)
    reduced = {family: gpu_per_replica(source, sel, keys, window) for family, sel in gpus.items()}
    if tolerance_s is None:
        tolerance = max(interval_ms(waiting), float(reduced[duty].step_ms))
    else:
        tolerance = tolerance_s * 1000.0
    hosts = _hosts(gpu_labels, keys)
    node_busy, node_all, node_selectors = _node_points(
        source, window, set().union(*hosts.values()) if hosts else set()
    )
    grouped = {family: series_by_replica(samples, keys) for family, samples in raw.items()}
    app_waiting = sum_by_replica(waiting, keys)
    app_running = sum_by_replica(raw[vllm.NUM_REQUESTS_RUNNING], keys)
    tracks = {}
    for replica in sorted(app_waiting):
        times = np.array(sorted(app_waiting[replica]), dtype=np.int64)

        def of(family: Family, replica: str = replica) -> Points:
            return grouped[family].get(replica, [])

        def mean(family: Family, replica: str = replica, times: Ints = times) -> Floats:
            return reduced[family].at(replica, times, tolerance)

        def nodes(table: dict[str, Points], replica: str = replica) -> Points:
            return [p for name in sorted(hosts.get(replica, ())) for p in table.get(name, [])]

        running = app_running.get(replica, {})
        quota = nearest_total(of(host.CONTAINER_SPEC_CPU_QUOTA), times, tolerance)
        tracks[replica] = Track(
            times_ms=times,
            waiting=np.array([app_waiting[replica][t] for t in times.tolist()]),
            running=np.array([running.get(t, 0.0) for t in times.tolist()]),
            duty=mean(duty) * scale,
            pcie_rx=mean(dcgm.PROF_PCIE_RX_BYTES),
            pcie_tx=mean(dcgm.PROF_PCIE_TX_BYTES),
            process=counter_rates(of(host.PROCESS_CPU_SECONDS), times, tolerance),
            container=counter_rates(of(host.CONTAINER_CPU_USAGE), times, tolerance),
            throttled=counter_rates(of(host.CONTAINER_CPU_CFS_THROTTLED_PERIODS), times, tolerance),
            periods=counter_rates(of(host.CONTAINER_CPU_CFS_PERIODS), times, tolerance),
            limit=ratio(quota, nearest_mean(of(host.CONTAINER_SPEC_CPU_PERIOD), times, tolerance)),
            node_busy=counter_rates(nodes(node_busy), times, tolerance),
            node_all=counter_rates(nodes(node_all), times, tolerance),
        )
    missing = [
        *(f.name for f in app if not len(raw[f])),
        *(f.name for f, steps in reduced.items() if not steps.replicas),
        *(f.name for f in on_host if not len(raw[f])),
    ]
    if not node_selectors:
        missing.append(host.NODE_CPU_SECONDS.name)
    return Evidence(
        tracks=tracks,
        names=labels_of(waiting, keys),
        keys=keys,
        tolerance_ms=tolerance,
        selectors=(*app.values(), *gpus.values(), *on_host.values(), *node_selectors),
        queries=tuple(q for steps in reduced.values() for q in steps.queries),
        read_raw=(*app.values(), *on_host.values(), *node_selectors),
        missing=tuple(missing),
    )
