"""When each scrape target (or GPU) sent samples: counts, first and last samples, gaps.

Collection health reads the raw samples of one gauge per target kind (an
app gauge for the vLLM targets, GPU utilisation for the DCGM ones) and
groups their series by a key: a scrape target (``instance``), or a GPU. A
key's scrape times are the distinct timestamps of its series (stale markers
and NaN left out), so a target with several engines counts each scrape once.

The scrape interval is measured, not declared: the median spacing of
consecutive samples of each series
(:func:`~inference_obs.reading.alignment.interval_ms`). A gap is a spacing
longer than ``gap_factor`` measured intervals; a key whose last sample lies
more than ``gap_factor`` intervals before the window's end stopped reporting.

The span a key covers (:meth:`Coverage.spans`) is the part of the window a
counter of that key is counted over: from its first to its last sample,
widened as Prometheus's ``increase()`` extrapolates (``extrapolatedRate``,
2.x and 3.x alike): to the window's edge when the outermost sample lies
within 1.1 average spacings of it, else by half an average spacing. A rate
over the window is then the counter's increase over the span its samples
cover, so a pod that starts or stops inside the window is not diluted by the
time it was absent; a key present the whole window covers all of it.
(VictoriaMetrics does not extrapolate: its increase of a key that starts or
stops inside the window covers up to half an interval less than the span.)

Keys scraped at different phases begin (and end) their spans up to one
scrape interval apart, a difference of phase, not of presence.
:meth:`Coverage.together` stretches each key scraped in the same round as the
first (last) scrape of any key to the union's edge, as ``increase()`` would
to a window's edge, so that a sum over keys covers their common span.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from inference_obs.reading.alignment import interval_ms
from inference_obs.samples import Ints, Labels, SampleSet, is_stale

__all__ = ["EXTRAPOLATION_THRESHOLD", "Coverage", "Gap", "Span", "coverage", "union"]

#: Prometheus extrapolatedRate (2.x and 3.x): a series whose first (last) sample lies within
#: this many average spacings of the range's start (end) is extrapolated to it; one further
#: away, by half an average spacing only.
EXTRAPOLATION_THRESHOLD = 1.1


@dataclass(frozen=True, slots=True)
class Gap:
    """No sample of ``key`` strictly between ``start_ms`` and ``end_ms`` (unix ms)."""

    key: str
    start_ms: int
    end_ms: int

    @property
    def seconds(self) -> float:
        """The gap's length, seconds: the spacing of the two samples around it."""
        return (self.end_ms - self.start_ms) / 1000


@dataclass(frozen=True, slots=True)
class Span:
    """The part of a window from ``start_ms`` to ``end_ms`` (unix ms) that samples cover."""

    start_ms: float
    end_ms: float

    @property
    def seconds(self) -> float:
        """The span's length, seconds."""
        return (self.end_ms - self.start_ms) / 1000


def union(spans: Iterable[Span]) -> tuple[Span, ...]:
    """The union of ``spans`` as disjoint spans in time order (overlapping ones merged).

    Examples
    --------
    >>> [(s.start_ms, s.end_ms) for s in union([Span(5, 9), Span(0, 6), Span(20, 30)])]
    [(0, 9), (20, 30)]
    """
    merged: list[Span] = []
    for one in sorted(spans, key=lambda s: (s.start_ms, s.end_ms)):
        if merged and one.start_ms <= merged[-1].end_ms:
            last = merged[-1]
            merged[-1] = Span(last.start_ms, max(last.end_ms, one.end_ms))
        else:
            merged.append(one)
    return tuple(merged)


@dataclass(frozen=True, slots=True)
class Coverage:
    """Scrape times of the series of one gauge, grouped by key.

    Attributes
    ----------
    interval_ms
        Median spacing of consecutive samples of each series, ms (0 when no
        series has two samples).
    samples
        Per key: its distinct scrape times in the window.
    first_ms, last_ms
        Per key: its first and last scrape time, unix ms.
    gaps
        Spacings longer than ``gap_factor`` intervals, longest first.
    """

    interval_ms: float
    samples: dict[str, int]
    first_ms: dict[str, int]
    last_ms: dict[str, int]
    gaps: tuple[Gap, ...]

    def stopped(self, end_ms: float, gap_factor: float) -> dict[str, int]:
        """Keys whose last sample is over ``gap_factor`` intervals before ``end_ms``: their
        last scrape time (unix ms). Empty when the interval is unknown."""
        if self.interval_ms <= 0:
            return {}
        late = end_ms - gap_factor * self.interval_ms
        return {k: t for k, t in sorted(self.last_ms.items()) if t < late}

    def spans(self, start_ms: float, end_ms: float) -> dict[str, Span]:
        """Per key: the part of the window ``start_ms``..``end_ms`` (unix ms) it covers.

        From the key's first to its last sample, each end widened as
        ``increase()`` extrapolates (see the module docstring): to the window's
        edge when that lies within :data:`EXTRAPOLATION_THRESHOLD` average
        spacings of the key's samples (``(last - first) / (samples - 1)``), else
        by half an average spacing. A key with one sample covers that instant
        only (``increase()`` needs two). Unlike ``increase()``, the start is not
        clamped where the counter would reach zero: the span says when the key
        was observed, not what its counter held.

        Examples
        --------
        >>> c = Coverage(60_000, {"a": 31, "b": 2}, {"a": 1_000, "b": 1_800_000},
        ...              {"a": 1_801_000, "b": 1_860_000}, ())
        >>> {k: (s.start_ms, s.end_ms) for k, s in c.spans(0, 3_600_000).items()}
        {'a': (0, 1831000.0), 'b': (1770000.0, 1890000.0)}
        """
        out: dict[str, Span] = {}
        for key, first in self.first_ms.items():
            last, n = self.last_ms[key], self.samples[key]
            if n < 2:
                out[key] = Span(first, last)
                continue
            spacing = (last - first) / (n - 1)
            reach = EXTRAPOLATION_THRESHOLD * spacing
            begin = start_ms if first - start_ms < reach else max(start_ms, first - spacing / 2)
            finish = end_ms if end_ms - last < reach else min(end_ms, last + spacing / 2)
            out[key] = Span(begin, finish)
        return out

    def together(self, start_ms: float, end_ms: float) -> dict[str, Span]:
        """Per key: its span (:meth:`spans`), stretched to the start (end) of all keys'
        spans when its first (last) sample lies within :data:`EXTRAPOLATION_THRESHOLD` of its
        average spacings of the first (last) sample of any key: scraped in the same round,
        it was there as long as the others. A key that started or stopped rounds later keeps
        its own span.

        Examples
        --------
        >>> c = Coverage(60_000, {"a": 31, "b": 31, "c": 2}, {"a": 1_000, "b": 50_000,
        ...              "c": 1_800_000}, {"a": 1_801_000, "b": 1_850_000, "c": 1_860_000}, ())
        >>> {k: (s.start_ms, s.end_ms) for k, s in c.together(-3_600_000, 3_600_000).items()}
        {'a': (-29000.0, 1890000.0), 'b': (-29000.0, 1890000.0), 'c': (1770000.0, 1890000.0)}
        """
        own = self.spans(start_ms, end_ms)
        if not own:
            return own
        first, last = min(self.first_ms.values()), max(self.last_ms.values())
        lo = min(s.start_ms for s in own.values())
        hi = max(s.end_ms for s in own.values())
        out: dict[str, Span] = {}
        for key, span in own.items():
            n = self.samples[key]
            spacing = (self.last_ms[key] - self.first_ms[key]) / (n - 1) if n > 1 else 0.0
            reach = EXTRAPOLATION_THRESHOLD * spacing
            begin = lo if self.first_ms[key] - first < reach else span.start_ms
            finish = hi if last - self.last_ms[key] < reach else span.end_ms
            out[key] = Span(begin, finish)
        return out


def coverage(samples: SampleSet, key: Callable[[Labels], str], gap_factor: float) -> Coverage:
    """The :class:`Coverage` of ``samples`` (raw, one window) with series grouped by ``key``.

    Parameters
    ----------
    samples
        Raw samples of one gauge over the window.
    key
        Names the group of a series from its labels (a target, a GPU).
    gap_factor
        A spacing longer than this many measured intervals is a gap (> 1).

    Examples
    --------
    >>> import numpy as np
    >>> from inference_obs.samples import Series
    >>> times = np.array([0.0, 15.0, 30.0, 75.0, 90.0])
    >>> one = Series("g", {"instance": "a"}, times, np.zeros(5))
    >>> c = coverage(SampleSet.from_series([one]), lambda labels: labels["instance"], 1.75)
    >>> c.interval_ms, c.samples, [(g.key, g.seconds) for g in c.gaps]
    (15000.0, {'a': 5}, [('a', 45.0)])
    """
    # Each group's distinct sample times, as arrays (a fleet's GPUs have a quarter of a
    # million; held as Python ints in sets they took 15 MiB).
    parts: dict[str, list[Ints]] = {}
    for i, labels in enumerate(samples.labels):
        lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
        values = samples.values[lo:hi]
        keep = ~is_stale(values) & ~np.isnan(values)
        parts.setdefault(key(labels), []).append(samples.t_ms[lo:hi][keep])
    times = {k: np.unique(np.concatenate(v)) for k, v in sorted(parts.items())}
    interval = interval_ms(samples)
    gaps: list[Gap] = []
    for name, ordered in times.items():
        if interval <= 0 or ordered.size < 2:
            continue
        for j in np.flatnonzero(np.diff(ordered) > gap_factor * interval).tolist():
            gaps.append(Gap(name, int(ordered[j]), int(ordered[j + 1])))
    present = {k: v for k, v in times.items() if v.size}
    return Coverage(
        interval_ms=interval,
        samples={k: int(v.size) for k, v in times.items()},
        first_ms={k: int(v[0]) for k, v in present.items()},
        last_ms={k: int(v[-1]) for k, v in present.items()},
        gaps=tuple(sorted(gaps, key=lambda g: (-g.seconds, g.key, g.start_ms))),
    )
