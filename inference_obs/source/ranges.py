"""Splitting a long range query into pieces the server accepts, and joining the answers.

Prometheus refuses a range query with more than 11,000 points per series
(``exceeded maximum resolution of 11,000 points per timeseries``);
VictoriaMetrics's default ``-search.maxPointsPerTimeseries`` is 30,000. A
longer query is cut into pieces on the original step grid (piece ``k`` starts
at ``start + k * limit * step``), so no evaluation time is duplicated or
shifted, and the pieces are joined per series (by label set).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from threading import Lock

import numpy as np

from inference_obs.errors import ConfigurationError
from inference_obs.samples import Labels, Matrix

__all__ = ["fetch_pieces", "max_points_for", "plan"]

#: Prometheus's hard limit per series and query (web/api/v1 queryRange).
PROMETHEUS_MAX_POINTS = 11_000
#: VictoriaMetrics's default -search.maxPointsPerTimeseries.
VICTORIAMETRICS_MAX_POINTS = 30_000
#: Parallel requests at most: enough to hide latency, few enough to be polite.
MAX_PARALLEL = 4


def max_points_for(kind: str) -> int:
    """Points per series one request may ask of engine ``kind``."""
    return VICTORIAMETRICS_MAX_POINTS if kind == "victoriametrics" else PROMETHEUS_MAX_POINTS


def plan(start: float, end: float, step: float, limit: int) -> list[tuple[float, float]]:
    """Step-aligned, non-overlapping ``(start, end)`` pieces of at most ``limit`` points.

    >>> plan(0.0, 100.0, 10.0, 4)
    [(0.0, 30.0), (40.0, 70.0), (80.0, 100.0)]
    """
    if not step > 0 or not math.isfinite(step):
        raise ConfigurationError(
            f"range query step {step!r} must be a positive, finite number of seconds"
        )
    if limit < 1:
        raise ConfigurationError(
            f"max points {limit!r} per series per request must be at least 1 (max_points=)"
        )
    points = math.floor((end - start) / step + 1e-9) + 1
    pieces = []
    for first in range(0, points, limit):
        last = min(first + limit, points) - 1
        pieces.append((start + first * step, min(start + last * step, end)))
    return pieces


def fetch_pieces(
    fetch: Callable[[float, float], Matrix], pieces: Sequence[tuple[float, float]], promql: str
) -> Matrix:
    """Fetch every piece (up to :data:`MAX_PARALLEL` at once) and join them per series."""
    if len(pieces) == 1:
        return fetch(*pieces[0])
    progress = _Progress(len(pieces)) if sys.stderr.isatty() else None
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(pieces))) as pool:
        futures = [pool.submit(fetch, *piece) for piece in pieces]
        if progress is not None:
            for future in futures:
                future.add_done_callback(lambda _: progress.step())
        parts = [future.result() for future in futures]
    if progress is not None:
        progress.close()
    return join(parts, promql)


def join(parts: Sequence[Matrix], promql: str) -> Matrix:
    """Concatenate matrices of consecutive time pieces per series (first-seen order)."""
    index: dict[Labels, list[tuple[int, int]]] = {}
    for p, part in enumerate(parts):
        for i, labels in enumerate(part.labels):
            index.setdefault(labels, []).append((p, i))
    t_chunks, v_chunks, sizes = [], [], []
    for members in index.values():
        size = 0
        for p, i in members:
            lo, hi = int(parts[p].offsets[i]), int(parts[p].offsets[i + 1])
            t_chunks.append(parts[p].t_ms[lo:hi])
            v_chunks.append(parts[p].values[lo:hi])
            size += hi - lo
        sizes.append(size)
    offsets = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).astype(np.int64)
    t_ms = np.concatenate(t_chunks) if t_chunks else np.zeros(0, np.int64)
    values = np.concatenate(v_chunks) if v_chunks else np.zeros(0, np.float64)
    notes = tuple(dict.fromkeys(note for part in parts for note in part.annotations))
    return Matrix(tuple(index), offsets, t_ms.astype(np.int64), values, promql, notes)


class _Progress:
    """A one-line ``[####....] 3/8 pieces`` bar on stderr (TTY only)."""

    WIDTH = 30

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self._lock = Lock()  # pieces finish on worker threads
        self._draw()

    def step(self) -> None:
        with self._lock:
            self.done += 1
            self._draw()

    def _draw(self) -> None:
        filled = self.WIDTH * self.done // self.total
        bar = "#" * filled + "." * (self.WIDTH - filled)
        # The return a write of its own: the command line passes it alone and
        # escapes any control character inside a text.
        sys.stderr.write("\r")
        sys.stderr.write(f"[{bar}] {self.done}/{self.total} pieces")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()
