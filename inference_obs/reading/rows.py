"""The rows queueing and the boundary analysis classify: per replica, each app scrape or each tile.

vLLM and dcgm-exporter are scraped independently, so a replica's app and GPU
readings are matched by the labels both carry
(:func:`~inference_obs.reading.alignment.replica_keys`) and by time, in one of
two ways with one result (:class:`AppRows`, then :func:`align_gpu`):

- **per scrape** (``step`` None): ``num_requests_waiting`` and
  ``num_requests_running`` are read raw and summed over the replica's
  engines at each scrape time; a GPU family is averaged per replica by the
  server at each of its scrapes
  (:func:`~inference_obs.reading.alignment.gpu_per_replica`) and the reading
  whose sample time is nearest each app scrape is taken, within a tolerance
  (the rule is in :mod:`~inference_obs.reading.alignment`; the window plays
  no part in it);
- **per tile** (``step`` seconds, see :mod:`~inference_obs.reading.resolution`):
  the server gives, per replica and tile, the sum over its engines of each
  engine's largest sample in the tile (``sum by (replica) (max_over_time(x[step]))``)
  and the mean of the replica's GPU samples in the tile (sample-weighted:
  ``sum by (replica) (sum_over_time(g[step])) / sum by (replica) (count_over_time(g[step]))``).
  App and GPU readings of a row come from the same tile, so nothing is
  matched by distance, and what is read grows with replicas and tiles only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError
from inference_obs.metrics import vllm
from inference_obs.metrics.builders import summed
from inference_obs.query import (
    Binary,
    Expr,
    Selector,
    count_over_time,
    max_over_time,
    on,
    sum_over_time,
)
from inference_obs.reading.alignment import (
    gpu_per_replica,
    interval_ms,
    replica_keys,
    replica_of,
    sum_by_replica,
)
from inference_obs.reading.resolution import tile_ms, tile_window
from inference_obs.reading.schedule import together
from inference_obs.samples import Floats, Ints, Labels, Matrix, Window
from inference_obs.source.base import Source

__all__ = [
    "AlignedGpu",
    "AppRows",
    "align_gpu",
    "app_rows",
    "at_rows",
    "by_label",
    "names_of",
    "only",
    "tile_mean",
    "tolerance_ms",
]


@dataclass(frozen=True, slots=True)
class AppRows:
    """Per replica, its rows: app scrapes (``tile_ms`` 0) or tiles of ``tile_ms`` ms.

    Attributes
    ----------
    keys
        Label names identifying a replica on both app and GPU series.
    tile_ms
        0 when a row is one app scrape; else the width of a tile, ms.
    times
        Per replica (named by :func:`~inference_obs.reading.alignment.replica_of`):
        the scrape times, or the tiles' ends, unix ms, ascending.
    waiting, running
        Requests at each row, summed over the replica's engines: the scraped
        values, or each engine's largest sample in the tile. A row without a
        ``running`` sample reads 0.
    names
        Per replica, the ``keys`` labels that name it: add them as matchers to select it.
    interval_ms
        Median spacing of the raw app samples, ms (per scrape; 0 per tile).
    selectors
        The two gauges' selectors, waiting first.
    reads
        What was asked for them: the selectors (read raw), or the tile queries.
    found
        Whether ``num_requests_waiting`` had any series.
    """

    keys: tuple[str, ...]
    tile_ms: int
    times: dict[str, Ints]
    waiting: dict[str, Floats]
    running: dict[str, Floats]
    names: dict[str, Labels]
    interval_ms: float
    selectors: tuple[Selector, Selector]
    reads: tuple[Expr, Expr]
    found: bool

    @property
    def missing(self) -> tuple[str, ...]:
        """``(num_requests_waiting,)`` when it had no series, else ``()``."""
        return () if self.found else (vllm.NUM_REQUESTS_WAITING.name,)

    def starts(self, replica: str) -> Ints:
        """Where each row of ``replica`` begins, unix ms: the scrape, or the tile's start."""
        starts: Ints = self.times[replica] - self.tile_ms
        return starts


@dataclass(frozen=True, slots=True)
class AlignedGpu:
    """A GPU family's per-replica mean at each row of an :class:`AppRows`.

    Attributes
    ----------
    means
        Per replica of the rows, aligned with its ``times``: the mean of the
        replica's GPUs (the family's unit), NaN where none aligned.
    step_ms
        Per scrape: the family's scrape interval (0 without series). Per
        tile: the tile.
    tolerance_ms
        Per scrape: the largest distance from a scrape to the GPU reading
        aligned with it. Per tile: 0.
    query
        The expression asked, for the provenance (per scrape, the mean; the
        sample times are asked by ``times_query``).
    times_query
        Per scrape: the expression that gave each reading's sample time. Per
        tile: None.
    """

    means: dict[str, Floats]
    step_ms: int
    tolerance_ms: float
    query: Expr
    times_query: Expr | None = None

    @property
    def reads(self) -> tuple[Expr, ...]:
        """Every expression asked: the mean, then (per scrape) the sample times."""
        return (self.query,) if self.times_query is None else (self.query, self.times_query)


def names_of(labels: Sequence[Labels], keys: tuple[str, ...]) -> dict[str, Labels]:
    """Per replica, the ``keys`` labels that name it (from its first label set)."""
    out: dict[str, Labels] = {}
    for one in labels:
        out.setdefault(replica_of(one, keys), Labels({k: one[k] for k in keys if k in one}))
    return out


def by_label(matrix: Matrix, name: str | tuple[str, ...]) -> dict[str, tuple[Ints, Floats]]:
    """A range answer's series by name: the value of label ``name``, or the replica of keys."""
    out: dict[str, tuple[Ints, Floats]] = {}
    for i, labels in enumerate(matrix.labels):
        if isinstance(name, str):
            if name not in labels:
                continue
            key = labels[name]
        else:
            key = replica_of(labels, name)
        out[key] = matrix.points(i)
    return out


def at_rows(points: tuple[Ints, Floats] | None, times: Ints) -> Floats:
    """Values of ``points`` at exactly ``times`` (unix ms), NaN where it has none."""
    out = np.full(times.size, np.nan)
    if points is None or not points[0].size:
        return out
    t, v = points
    k = np.minimum(np.searchsorted(t, times), t.size - 1)
    hit = t[k] == times
    out[hit] = v[k[hit]]
    return out


def app_rows(
    source: Source,
    deployment: Deployment,
    window: Window,
    gpu_labels: Sequence[Labels],
    step: float | None,
) -> AppRows:
    """The deployment's rows: per app scrape (``step`` None) or per tile of ``step`` seconds.

    ``gpu_labels`` are the label sets of the GPU family the rows are read
    against, for the replica keys. See the module for what a row holds.
    """
    m = deployment.matchers
    selectors = (vllm.NUM_REQUESTS_WAITING.select(m), vllm.NUM_REQUESTS_RUNNING.select(m))
    if step is None:
        return _per_scrape(source, deployment, window, gpu_labels, selectors)
    return _per_tile(source, deployment, window, gpu_labels, selectors, step)


def _per_scrape(
    source: Source,
    deployment: Deployment,
    window: Window,
    gpu_labels: Sequence[Labels],
    selectors: tuple[Selector, Selector],
) -> AppRows:
    waiting_raw, running_raw = together([partial(source.raw, s, window) for s in selectors])
    keys = replica_keys(deployment, waiting_raw.labels, gpu_labels)
    waits, runs = sum_by_replica(waiting_raw, keys), sum_by_replica(running_raw, keys)
    times, waiting, running = {}, {}, {}
    for replica in sorted(waits):
        at = sorted(waits[replica])
        run = runs.get(replica, {})
        times[replica] = np.array(at, dtype=np.int64)
        waiting[replica] = np.array([waits[replica][t] for t in at])
        running[replica] = np.array([run.get(t, 0.0) for t in at])
    return AppRows(
        keys=keys,
        tile_ms=0,
        times=times,
        waiting=waiting,
        running=running,
        names=names_of(waiting_raw.labels, keys),
        interval_ms=interval_ms(waiting_raw),
        selectors=selectors,
        reads=selectors,
        found=len(waiting_raw) > 0,
    )


def _per_tile(
    source: Source,
    deployment: Deployment,
    window: Window,
    gpu_labels: Sequence[Labels],
    selectors: tuple[Selector, Selector],
    step: float,
) -> AppRows:
    width = tile_ms(window, step)
    labels = source.series(selectors[0], window)
    keys = replica_keys(deployment, labels, gpu_labels)
    w_expr, r_expr = (summed(max_over_time(s.over(step)), keys) for s in selectors)
    tiles = tile_window(window, step)
    waits, runs = (
        by_label(matrix, keys)
        for matrix in together([partial(source.range, e, tiles, step) for e in (w_expr, r_expr)])
    )
    times, waiting, running = {}, {}, {}
    for replica in sorted(waits):
        at, values = waits[replica]
        keep = ~np.isnan(values)  # every sample NaN: no reading, as a NaN scrape per scrape
        at, values = at[keep], values[keep]
        times[replica], waiting[replica] = at, values
        running[replica] = np.nan_to_num(at_rows(runs.get(replica), at), nan=0.0)
    return AppRows(
        keys=keys,
        tile_ms=width,
        times=times,
        waiting=waiting,
        running=running,
        names=names_of(labels, keys),
        interval_ms=0.0,
        selectors=selectors,
        reads=(w_expr, r_expr),
        found=bool(labels),
    )


def tolerance_ms(analysis: str, step: float | None, tolerance_s: float | None) -> float | None:
    """The ``tolerance_s`` setting of ``analysis`` in ms, for :func:`align_gpu` (None: its default).

    Raises
    ------
    ConfigurationError
        When ``tolerance_s`` is given with a tile ``step``: per tile, a row's app
        and GPU readings come from the same tile, so nothing is aligned by distance.
    """
    if tolerance_s is None:
        return None
    if step is not None:
        raise ConfigurationError(
            f"{analysis}.tolerance_s={tolerance_s:g} aligns app scrapes with GPU readings; with "
            f"step={step:g} a row is a tile and its app and GPU readings come from the same "
            "tile: give one or the other"
        )
    return tolerance_s * 1000.0


def tile_mean(selector: Selector, keys: tuple[str, ...], step: float) -> Expr:
    """Per replica and tile, the mean of the selected series' samples (sample-weighted)."""
    samples = selector.over(step)
    return summed(sum_over_time(samples), keys) / summed(count_over_time(samples), keys)


def only(expr: Expr, where: Expr | None, keys: Sequence[str]) -> Expr:
    """``expr and on (keys) where``: the rows of ``expr`` where ``where`` has a value."""
    return expr if where is None else Binary("and", expr, where, matching=on(*keys))


def _whole_seconds(interval_ms: float) -> float:
    """A measured scrape interval (ms) to whole seconds, at least 1 s; 0 stays 0.

    Scrape intervals are configured in whole seconds; a median spacing of
    jittered scrapes reads a few ms off, and by a different few ms in another
    window: rounded, the default tolerance is the same in every window.
    """
    return 0.0 if interval_ms <= 0 else 1000.0 * max(1, round(interval_ms / 1000))


def align_gpu(
    source: Source,
    rows: AppRows,
    selector: Selector,
    window: Window,
    *,
    tolerance_ms: float | None = None,
    where: Expr | None = None,
) -> AlignedGpu:
    """``selector``'s mean over each replica's GPUs at each row of ``rows``.

    Per scrape: :func:`~inference_obs.reading.alignment.gpu_per_replica`,
    the reading nearest each scrape within ``tolerance_ms`` (default the
    larger of the app's scrape interval and the family's, in whole seconds),
    read up to twice the app's scrape interval beyond the window. Per tile: the tile's
    mean (:func:`tile_mean`), and only at the tiles where ``where`` (an
    expression by the replica keys) has a value, when given: what is read
    shrinks to the rows that can use it. ``where`` and ``tolerance_ms``
    apply per tile and per scrape only.
    """
    if rows.tile_ms == 0:
        read = gpu_per_replica(source, selector, rows.keys, window, reach_ms=rows.interval_ms)
        if tolerance_ms is None:
            tolerance_ms = _whole_seconds(max(rows.interval_ms, float(read.interval_ms)))
        means = {r: read.at(r, at, tolerance_ms) for r, at in rows.times.items()}
        return AlignedGpu(means, read.interval_ms, tolerance_ms, *read.queries)
    step = rows.tile_ms / 1000
    expr = only(tile_mean(selector, rows.keys, step), where, rows.keys)
    tiled = by_label(source.range(expr, tile_window(window, step), step), rows.keys)
    means = {r: at_rows(tiled.get(r), at) for r, at in rows.times.items()}
    return AlignedGpu(means, rows.tile_ms, 0.0, expr)
