"""Host evidence at each row of a replica: its server process, its containers, its nodes.

Per scrape (rows are app scrapes), host series are read raw and each row
gets, summed over the replica's series, the rate (per second) of the
scrape-to-scrape segment that holds it: a drop between two samples is a
restart, and the value after it is the increase, as in Prometheus's
``rate()``; the CPU quota and period take each series' nearest sample. Per
tile, the server gives each tile's ``rate(x[step])`` (and the gauges'
``last_over_time``) summed per replica, only at the tiles that ``where``
keeps. Rows outside every series' samples are NaN: no evidence, never 0.

Nodes are found by the host names the replica's GPU series carry, in
node_exporter's node label (:data:`~inference_obs.metrics.host.NODE_LABELS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import numpy as np

from inference_obs.deployment import Deployment
from inference_obs.metrics import host, vllm
from inference_obs.metrics.builders import summed
from inference_obs.metrics.family import Family
from inference_obs.metrics.host_queries import container_matchers
from inference_obs.query import Expr, Matcher, Selector, last_over_time, rate
from inference_obs.reading.alignment import nearest, replica_of
from inference_obs.reading.context import Reading, Source
from inference_obs.reading.resolution import series_count, tile_window
from inference_obs.reading.rows import AppRows, at_rows, by_label, only
from inference_obs.samples import Floats, Ints, SampleSet, Window, is_stale

__all__ = [
    "HostEvidence",
    "Points",
    "counter_rates",
    "host_evidence",
    "nearest_mean",
    "nearest_total",
    "pod_matchers",
    "ratio",
    "server_matchers",
]

Points = list[tuple[Ints, Floats]]
"""Series of one replica: each one's sample times (ms) and values, stale and NaN dropped."""
Rows = dict[str, Floats]
"""Per replica, one value per row (NaN: no evidence)."""
Reduce = Literal["rate", "total", "mean"]
"""How a family is read at a row: a counter's rate, or a gauge summed or averaged."""


@dataclass(frozen=True, slots=True)
class HostEvidence:
    """Host readings at every replica's rows.

    Attributes
    ----------
    process, container, throttled, periods, limit, node_busy, node_all
        Per replica, one value per row: the fields of the same names of
        :class:`~inference_obs.analyses.boundaries.evidence.Track` (cores,
        CFS periods per second, the CPU limit in cores, node CPU-seconds per
        second).
    selectors
        Every host selector, for the provenance.
    read_raw
        Per scrape, the selectors read raw (per tile none).
    queries
        Per tile, the tile queries asked (per scrape none).
    missing
        Families (by name) without any series for the deployment.
    """

    process: Rows
    container: Rows
    throttled: Rows
    periods: Rows
    limit: Rows
    node_busy: Rows
    node_all: Rows
    selectors: tuple[Selector, ...]
    read_raw: tuple[Selector, ...]
    queries: tuple[Expr, ...]
    missing: tuple[str, ...]


def server_matchers(matchers: Sequence[Matcher]) -> tuple[Matcher, ...]:
    """The deployment's matchers that the server process's own series can carry.

    ``process_cpu_seconds_total`` has the scrape labels of the vLLM target but
    not vLLM's engine labels (``model_name``, ``engine``).
    """
    return tuple(m for m in matchers if m.label not in vllm.STANDARD_LABELS)


def pod_matchers(matchers: Sequence[Matcher]) -> tuple[Matcher, ...]:
    """The deployment's matchers on labels cAdvisor series carry (pod, namespace, ...)."""
    return tuple(m for m in matchers if m.label in host.CADVISOR_LABELS)


def ratio(top: Floats, bottom: Floats) -> Floats:
    """``top / bottom`` element-wise, NaN where ``bottom`` is not above 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out: Floats = np.where(bottom > 0, top / bottom, np.nan)
    return out


def _points(samples: SampleSet, i: int) -> tuple[Ints, Floats]:
    lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
    values = samples.values[lo:hi]
    keep = ~is_stale(values) & ~np.isnan(values)
    return samples.t_ms[lo:hi][keep], values[keep]


def _grouped(samples: SampleSet, name: str | tuple[str, ...]) -> dict[str, Points]:
    """Raw series by the value of label ``name`` (those without it dropped), or by replica."""
    out: dict[str, Points] = {}
    for i, labels in enumerate(samples.labels):
        if isinstance(name, str):
            if name in labels:
                out.setdefault(labels[name], []).append(_points(samples, i))
        else:
            out.setdefault(replica_of(labels, name), []).append(_points(samples, i))
    return out


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
        rate_ = (grown[k + 1] - grown[k]) / ((times[k + 1] - times[k]) / 1000.0)
        inside = (at >= times[0] - tolerance_ms) & (at <= times[-1] + tolerance_ms)
        total += np.where(inside, rate_, 0.0)
        seen |= inside
    out: Floats = np.where(seen, total, np.nan)
    return out


def _selectors(deployment: Deployment) -> dict[Family, Selector]:
    m = deployment.matchers
    pods = container_matchers(pod_matchers(m))
    own = {
        family: family.select(pods)
        for family in (
            host.CONTAINER_CPU_USAGE,
            host.CONTAINER_CPU_CFS_THROTTLED_PERIODS,
            host.CONTAINER_CPU_CFS_PERIODS,
            host.CONTAINER_SPEC_CPU_QUOTA,
            host.CONTAINER_SPEC_CPU_PERIOD,
        )
    }
    return {host.PROCESS_CPU_SECONDS: host.PROCESS_CPU_SECONDS.select(server_matchers(m)), **own}


@dataclass(frozen=True, slots=True)
class _Nodes:
    """node_exporter's CPU series of the replicas' hosts: the node label, non-idle and all modes."""

    label: str
    busy: Selector
    every: Selector


def _nodes(r: Reading, hosts: dict[str, set[str]]) -> _Nodes | None:
    names = sorted(set().union(*hosts.values())) if hosts else []
    candidates = [
        (label, host.NODE_CPU_SECONDS.select([Matcher.one_of(label, names)]))
        for label in (host.NODE_LABELS if names else ())
    ]
    # Every candidate label asked at once; the first (in order) with series is taken.
    counts = [r.soon(partial(series_count, r.source, every, r.window)) for _, every in candidates]
    for (label, every), count in zip(candidates, counts, strict=True):
        if count.result() > 0:
            busy = Selector(every.metric, (*every.matchers, Matcher.not_equal("mode", "idle")))
            return _Nodes(label, busy, every)
    return None


def ask_host_evidence(r: Reading, rows: AppRows, hosts: dict[str, set[str]]) -> None:
    """Start the questions :func:`host_evidence` will ask that need nothing but ``rows`` and
    ``hosts`` (which nodes have series; per scrape every raw read, per tile which families
    have series), so that they are in flight before it runs (see
    :meth:`~inference_obs.reading.context.Reading.soon`)."""
    source, window = r.source, r.window
    families = list(_selectors(r.deployment).values())
    if rows.tile_ms:
        for selector in families:
            r.soon(partial(series_count, source, selector, window))
    else:
        for selector in families:
            r.soon(partial(r.raw, selector))
    nodes = _nodes(r, hosts)
    if nodes is not None and not rows.tile_ms:
        for selector in (nodes.busy, nodes.every):
            r.soon(partial(r.raw, selector))


def _total(arrays: Sequence[Floats], size: int) -> Floats:
    """Element-wise sum, NaN only where every array is NaN (or there is none)."""
    if not arrays:
        return np.full(size, np.nan)
    stacked = np.vstack(arrays)
    out: Floats = np.where(np.isnan(stacked).all(axis=0), np.nan, np.nansum(stacked, axis=0))
    return out


def host_evidence(
    r: Reading,
    rows: AppRows,
    hosts: dict[str, set[str]],
    tolerance_ms: float,
    where: Expr | None = None,
) -> HostEvidence:
    """Host readings at each row of ``rows`` (see the module).

    ``hosts`` maps each replica to the host names of its GPUs. Per scrape,
    ``tolerance_ms`` bounds how far a sample may be from the row it is read
    at; per tile, ``where`` (by the replica keys) restricts what is asked to
    the tiles it has a value at.
    """
    families = _selectors(r.deployment)
    nodes = _nodes(r, hosts)
    read = (
        _Scrapes(r.source, r.window, rows, tolerance_ms)
        if rows.tile_ms == 0
        else _Tiles(r.source, r.window, rows, where)
    )
    quota = read.each(families[host.CONTAINER_SPEC_CPU_QUOTA], "total")
    period = read.each(families[host.CONTAINER_SPEC_CPU_PERIOD], "mean")
    rates = {
        field: read.each(families[family], "rate")
        for field, family in (
            ("process", host.PROCESS_CPU_SECONDS),
            ("container", host.CONTAINER_CPU_USAGE),
            ("throttled", host.CONTAINER_CPU_CFS_THROTTLED_PERIODS),
            ("periods", host.CONTAINER_CPU_CFS_PERIODS),
        )
    }
    empty = {r: np.full(at.size, np.nan) for r, at in rows.times.items()}
    busy = read.by_host(nodes.busy, nodes.label, hosts) if nodes else empty
    every = read.by_host(nodes.every, nodes.label, hosts) if nodes else empty
    missing = [f.name for f, s in families.items() if s not in read.found]
    if nodes is None:
        missing.append(host.NODE_CPU_SECONDS.name)
    return HostEvidence(
        **rates,
        limit={r: ratio(quota[r], period[r]) for r in rows.times},
        node_busy=busy,
        node_all=every,
        selectors=(*families.values(), *((nodes.busy, nodes.every) if nodes else ())),
        read_raw=tuple(read.read_raw),
        queries=tuple(read.queries),
        missing=tuple(missing),
    )


class _Scrapes:
    """Host readings at app scrapes, from raw samples."""

    def __init__(self, source: Source, window: Window, rows: AppRows, tolerance_ms: float):
        self._source, self._window, self._rows, self._tolerance = source, window, rows, tolerance_ms
        self.read_raw: list[Selector] = []
        self.queries: list[Expr] = []
        self.found: set[Selector] = set()

    def _raw(self, selector: Selector, name: str | tuple[str, ...]) -> dict[str, Points]:
        samples = self._source.raw(selector, self._window)
        self.read_raw.append(selector)
        if len(samples):
            self.found.add(selector)
        return _grouped(samples, name)

    def each(self, selector: Selector, reduce: Reduce) -> Rows:
        """Per replica and scrape: segment rate, or nearest sample summed or averaged."""
        how = {"rate": counter_rates, "total": nearest_total, "mean": nearest_mean}[reduce]
        grouped = self._raw(selector, self._rows.keys)
        return {
            r: how(grouped.get(r, []), at, self._tolerance) for r, at in self._rows.times.items()
        }

    def by_host(self, selector: Selector, label: str, hosts: dict[str, set[str]]) -> Rows:
        """Per replica and scrape, the segment rate summed over its hosts' series."""
        grouped = self._raw(selector, label)
        return {
            r: counter_rates(
                [p for name in sorted(hosts.get(r, ())) for p in grouped.get(name, [])],
                at,
                self._tolerance,
            )
            for r, at in self._rows.times.items()
        }


class _Tiles:
    """Host readings per tile, reduced by the server."""

    def __init__(self, source: Source, window: Window, rows: AppRows, where: Expr | None):
        self._source, self._rows, self._where = source, rows, where
        self._window = window
        self._step = rows.tile_ms / 1000
        self._tiles = tile_window(window, self._step)
        self.read_raw: list[Selector] = []
        self.queries: list[Expr] = []
        self.found: set[Selector] = set()

    def _ask(self, expr: Expr, name: str | tuple[str, ...]) -> dict[str, tuple[Ints, Floats]]:
        self.queries.append(expr)
        return by_label(self._source.range(expr, self._tiles, self._step), name)

    def each(self, selector: Selector, reduce: Reduce) -> Rows:
        """Per replica and tile: ``rate``, or ``last_over_time`` summed or averaged."""
        keys, ranged = self._rows.keys, selector.over(self._step)
        if reduce == "rate":
            expr: Expr = summed(rate(ranged), keys)
        elif reduce == "total":
            expr = summed(last_over_time(ranged), keys)
        else:
            expr = last_over_time(ranged).avg(by=keys) if keys else last_over_time(ranged).avg()
        if series_count(self._source, selector, self._window) == 0:  # nothing to ask
            return {r: np.full(at.size, np.nan) for r, at in self._rows.times.items()}
        self.found.add(selector)
        read = self._ask(only(expr, self._where, keys), keys)
        return {r: at_rows(read.get(r), at) for r, at in self._rows.times.items()}

    def by_host(self, selector: Selector, label: str, hosts: dict[str, set[str]]) -> Rows:
        """Per replica and tile, the rate summed over its hosts (node series carry no replica)."""
        read = self._ask(rate(selector.over(self._step)).sum(by=(label,)), label)
        return {
            r: _total(
                [at_rows(read[h], at) for h in sorted(hosts.get(r, ())) if h in read], at.size
            )
            for r, at in self._rows.times.items()
        }
